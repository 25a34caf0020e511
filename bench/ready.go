package main

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"time"

	"github.com/wardenhq/warden/gating"
)

// benchReady measures the ready set and the full report over a repository
// of n items with edges blockedBy edges (a DAG: every edge points to a lower
// number), some groupings, claims, resources and anchors.
func benchReady(n, edges, runs int) []Figure {
	s := readySnapshot(n, edges)
	var best time.Duration
	var peak uint64
	for i := 0; i < runs; i++ {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		start := time.Now()
		r := gating.ComputeReady(s)
		_ = gating.BuildReport(s, r)
		el := time.Since(start)
		runtime.ReadMemStats(&after)
		if best == 0 || el < best {
			best = el
		}
		if a := after.TotalAlloc - before.TotalAlloc; a > peak {
			peak = a
		}
	}
	work := fmt.Sprintf("%d items, %d blockedBy edges, best of %d", n, edges, runs)
	return []Figure{
		{"ready set", "ready set + report", best.Seconds() * 1000, "ms", work, "aim < 50 ms"},
		{"ready set", "allocated per computation", float64(peak) / (1 << 20), "MB", work, "aim < 100 MB"},
	}
}

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
