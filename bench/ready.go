package main

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"time"

	"github.com/wardenhq/warden/gating"
)

// readySize is one repository the ready set is measured over.
type readySize struct {
	items, edges int
	aim          string
}

var readySizes = []readySize{{10000, 20000, ""}, {50000, 100000, "aim < 50 ms"}}

// benchReady measures the ready set and the full report (gating.ComputeReady
// then gating.BuildReport) over repositories of 10,000 and 50,000 items with
// two blockedBy edges an item (readySnapshot). The machine may be shared and
// noisy, so each size reports the best of its runs with the spread, and the
// best against a floor timed in the same runs, interleaved with them: one
// pass indexing every item by its issue number, then one resolving every
// blockedBy target against that index (readyFloor): every item and every
// edge touched once, as any reading of the snapshot must. A collection runs
// before each floor and run (outside the timing), as one would now and
// then between two computations in a server; what the collector has to
// reclaim is the allocation figure (the largest of the runs).
func benchReady(runs int) []Figure {
	var figs []Figure
	for _, sz := range readySizes {
		figs = append(figs, benchReadySize(sz, max(3, 3*runs))...)
	}
	return figs
}

func benchReadySize(sz readySize, runs int) []Figure {
	s := readySnapshot(sz.items, sz.edges)
	var times, floors, ratios, allocs []float64
	for range runs {
		runtime.GC()
		start := time.Now()
		readyFloor(s)
		fl := time.Since(start)

		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		start = time.Now()
		r := gating.ComputeReady(s)
		_ = gating.BuildReport(s, r)
		el := time.Since(start)
		runtime.ReadMemStats(&after)
		allocs = append(allocs, float64(after.TotalAlloc-before.TotalAlloc)/(1<<20))

		times = append(times, ms(el))
		floors = append(floors, ms(fl))
		ratios = append(ratios, float64(el)/float64(fl))
	}
	best, worst := slices.Min(times), slices.Max(times)
	floor := slices.Min(floors)
	work := fmt.Sprintf("%d items, %d blockedBy edges, best of %d (spread %.1f–%.1f ms)", sz.items, sz.edges, runs, best, worst)
	name := fmt.Sprintf("ready set + report, %dk items", sz.items/1000)
	return []Figure{
		{"ready set", name, best, "ms", work, sz.aim},
		{"ready set", name + " / floor", best / floor, "×", fmt.Sprintf(
			"best %.2f ms over the floor's best %.2f ms, timed between the same runs (run by run %.1f–%.1f×); floor: index every item by number, resolve every blockedBy target",
			best, floor, slices.Min(ratios), slices.Max(ratios)), ""},
		{"ready set", fmt.Sprintf("allocated per computation, %dk items", sz.items/1000), slices.Max(allocs), "MB", fmt.Sprintf(
			"the most of %d runs (the least %.1f MB: a computation reuses the last one's buffers when they are at hand)", runs, slices.Min(allocs)), "aim < 100 MB"},
	}
}

func ms(d time.Duration) float64 { return d.Seconds() * 1000 }

// readyFloor is the floor the ready set is judged against: every item's id
// read into a table by issue number, then every blockedBy target resolved
// against it. It returns how many targets resolved.
func readyFloor(s gating.Snapshot) int {
	byNum := make([]int32, len(s.Items)+1)
	for k := range s.Items {
		if n := s.Items[k].Item.ID.Number(); n > 0 && n < len(byNum) {
			byNum[n] = int32(k + 1)
		}
	}
	found := 0
	for k := range s.Items {
		for _, l := range s.Items[k].Item.Links {
			if l.Rel != gating.BlockedBy {
				continue
			}
			if n := gating.ItemID(l.Target).Number(); n > 0 && n < len(byNum) && byNum[n] != 0 {
				found++
			}
		}
	}
	return found
}

// readySnapshot is a repository of n items with edges blockedBy edges (a DAG:
// every edge points to a lower number), some claims, resources and anchors.
func readySnapshot(n, edges int) gating.Snapshot {
	rng := rand.New(rand.NewPCG(1, 2))
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	items := make([]gating.Candidate, n)
	for i := range items {
		num := i + 1
		tags := []string{"backlog", fmt.Sprintf("priority:P%d", rng.IntN(4)), "phase:implementation", "homeRegion:local", "baseBranch:main"}
		if rng.IntN(10) == 0 {
			tags = append(tags, "state:complete")
		}
		if rng.IntN(50) == 0 {
			tags = append(tags, fmt.Sprintf("resource:box-%d", rng.IntN(5)))
		}
		it := &gating.Item{ID: gating.IDFor(num), CreatedAt: now.Add(-time.Duration(num) * time.Minute), Tags: tags}
		if rng.IntN(20) == 0 {
			it.Links = append(it.Links, gating.Link{Rel: gating.AnchoredTo, Target: fmt.Sprintf("pkg/m%d/", rng.IntN(40))})
		}
		c := gating.Candidate{Item: it, AdmissionRecorded: true}
		if rng.IntN(25) == 0 {
			c.Claim = gating.ClaimView{Fence: 1, Owner: "w/1", Region: "local", GrantedAt: now.Add(-time.Minute),
				LeaseExpiresAt: now.Add(time.Minute), LastEvidence: now.Add(-time.Minute)}
		}
		items[i] = c
	}
	for e := 0; e < edges; e++ {
		from := 1 + rng.IntN(n-1)
		to := rng.IntN(from) // a lower number: no cycles
		items[from].Item.Links = append(items[from].Item.Links, gating.Link{Rel: gating.BlockedBy, Target: string(gating.IDFor(to + 1))})
	}
	return gating.Snapshot{Items: items, Now: now, Region: "local", DefaultBranch: "main", Quarantine: time.Hour, PoisonThreshold: 3}
}
