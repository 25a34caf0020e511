package gating

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

// benchSnapshot builds a realistic repository: n items with the mandatory
// tags, exactly edges blockedBy edges forming a DAG (every edge points at an
// older item), 1 epic in 50 with 20 members and an integration item blockedBy
// them, the older half mostly complete, a few parked, claims in every state,
// scarce resources, anchors over an 80-package tree and a little admission
// and poison.
func benchSnapshot(n, edges int) Snapshot {
	rng := rand.New(rand.NewPCG(1, 2))
	chance := func(p float64) bool { return rng.Float64() < p }
	s := Snapshot{Now: rnow, Region: "local", DefaultBranch: "main", Quarantine: time.Hour, PoisonThreshold: 3}
	s.Items = make([]Candidate, 0, n)
	total := 0
	links := make([][]Link, n+1)
	has := make([]map[int]bool, n+1)
	addEdge := func(from, to int) bool {
		if has[from] == nil {
			has[from] = map[int]bool{}
		}
		if has[from][to] {
			return false
		}
		has[from][to] = true
		links[from] = append(links[from], Link{BlockedBy, string(IDFor(to))})
		total++
		return true
	}
	epicOf := func(i int) int { return (i/50 + 1) * 50 }
	for i := 1; i <= n; i++ {
		switch m := i % 50; {
		case m == 0: // an epic: blockedBy its integration item (belt and braces)
			addEdge(i, i-29)
		case m == 21 && epicOf(i) <= n: // the integration item: blockedBy every member
			for k := i - 20; k < i; k++ {
				if k%50 != 0 {
					addEdge(i, k)
				}
			}
		}
	}
	for total < edges {
		i := 2 + rng.IntN(n-1)
		lo := max(1, i-300)
		addEdge(i, lo+rng.IntN(i-lo))
	}
	for i := 1; i <= n; i++ {
		prio := []string{"P0", "P1", "P1", "P2", "P2", "P2", "P3"}[rng.IntN(7)]
		c := Candidate{Item: &Item{
			ID:        IDFor(i),
			Title:     fmt.Sprintf("item %d", i),
			CreatedAt: rt0.Add(time.Duration(i) * time.Minute),
			Tags:      []string{"backlog", "priority:" + prio, "phase:implementation", "homeRegion:local"},
			Links:     links[i],
		}, AdmissionRecorded: true}
		it := c.Item
		m := i % 50
		if e := epicOf(i); m >= 1 && m <= 21 && e <= n {
			it.Tags = append(it.Tags, fmt.Sprintf("baseBranch:feat/epic/e%d", e))
			it.Links = append(it.Links, Link{PartOf, string(IDFor(e))})
			if m == 21 {
				it.Links = append(it.Links, Link{Integrates, string(IDFor(e))})
			}
		} else {
			it.Tags = append(it.Tags, "baseBranch:main")
		}
		if m == 0 && chance(0.3) {
			it.Tags = append(it.Tags, "threshold:5")
		}
		old := i < n*45/100
		switch {
		case old && chance(0.9) || !old && chance(0.05):
			it.Tags = append(it.Tags, "state:complete", fmt.Sprintf("pr:%d", i))
		case chance(0.015):
			it.Tags = append(it.Tags, "state:parked", "ruling-owner:pm", "ruling-topic:poison-threshold")
			c.Attempts = 3
		default:
			owner := fmt.Sprintf("backlog-worker/%x", rng.IntN(64))
			cv := ClaimView{Fence: int64(1 + rng.IntN(5)), Owner: owner, Region: "local", Branch: "feat/" + owner,
				GrantedAt: rnow.Add(-2 * time.Hour)}
			cv.Released = cv.Fence - 1
			switch k := rng.Float64(); {
			case k < 0.04: // held
				cv.LeaseExpiresAt, cv.LastEvidence = rnow.Add(20*time.Minute), rnow.Add(-5*time.Minute)
			case k < 0.05: // lapsed
				cv.LeaseExpiresAt, cv.LastEvidence = rnow.Add(-10*time.Minute), rnow.Add(-15*time.Minute)
			case k < 0.06: // abandoned
				cv.LeaseExpiresAt, cv.LastEvidence = rnow.Add(-90*time.Minute), rnow.Add(-100*time.Minute)
			case k < 0.16: // released
				cv.LeaseExpiresAt, cv.Released = rnow.Add(-time.Hour), cv.Fence
			default:
				cv = ClaimView{}
			}
			c.Claim = cv
			if cv.Fence > 0 {
				c.Attempts = rng.IntN(3)
			}
			if chance(0.01) {
				c.Attempts = 3
			}
		}
		if chance(0.05) {
			it.Tags = append(it.Tags, fmt.Sprintf("resource:env-%d", rng.IntN(20)))
		}
		for range 1 + rng.IntN(3) {
			p, sub := rng.IntN(80), rng.IntN(10)
			if chance(0.1) {
				it.Links = append(it.Links, Link{AnchoredTo, fmt.Sprintf("pkg%02d/sub%d/", p, sub)})
			} else {
				it.Links = append(it.Links, Link{AnchoredTo, fmt.Sprintf("pkg%02d/sub%d/f%d.go", p, sub, rng.IntN(20))})
			}
		}
		switch {
		case chance(0.04):
			c.AdmissionLabel = true
		case chance(0.005):
			c.AdmissionRecorded = false
		}
		c.CollisionHold = chance(0.001)
		s.Items = append(s.Items, c)
	}
	return s
}

// The benchmark's snapshot is what it claims to be.
func TestBenchSnapshotShape(t *testing.T) {
	s := benchSnapshot(10000, 20000)
	edges := 0
	for _, c := range s.Items {
		for _, l := range c.Item.Links {
			if l.Rel == BlockedBy {
				edges++
				if ItemID(l.Target).Number() >= c.Item.ID.Number() {
					t.Fatalf("%s blockedBy %s: not a DAG", c.Item.ID, l.Target)
				}
			}
		}
		if len(CheckTags(c.Item.Tags, true)) > 0 {
			t.Fatalf("%s: %v", c.Item.ID, CheckTags(c.Item.Tags, true))
		}
	}
	r := ComputeReady(s)
	rep := BuildReport(s, r)
	counts := map[string]int{}
	for _, e := range r.Excluded {
		counts[e.Reason]++
	}
	if len(s.Items) != 10000 || edges != 20000 || len(defectsOf(r, "cycle", 0)) != 0 || len(r.Ready) == 0 ||
		counts[ExGrouping] == 0 || counts[ExHeld] == 0 || counts[ExResourceBusy] == 0 || counts[ExBlocked] == 0 {
		t.Fatalf("items %d, edges %d, ready %d, excluded %v", len(s.Items), edges, len(r.Ready), counts)
	}
	t.Logf("ready %d, excluded %v, defects %d, summary %+v", len(r.Ready), counts, len(r.Defects), rep.Summary)
}

// heapOfOneRun reports the heap while one run of f is live: with the
// collector off, HeapAlloc after f is the snapshot plus everything f
// allocated, an upper bound on the peak with the collector on.
func heapOfOneRun(b *testing.B, f func()) {
	b.Helper()
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	old := debug.SetGCPercent(-1)
	f()
	runtime.ReadMemStats(&m1)
	debug.SetGCPercent(old)
	b.ReportMetric(float64(m1.HeapAlloc)/1e6, "peak-heap-MB")
	b.ReportMetric(float64(m1.HeapAlloc-m0.HeapAlloc)/1e6, "run-heap-MB")
}

func BenchmarkComputeReady10kItems20kEdges(b *testing.B) { benchComputeReady(b, 10000, 20000) }

// The size bench/ready.go holds to its aim (< 50 ms for both).
func BenchmarkComputeReady50kItems100kEdges(b *testing.B) { benchComputeReady(b, 50000, 100000) }

func benchComputeReady(b *testing.B, items, edges int) {
	s := benchSnapshot(items, edges)
	var r Result
	var rep Report
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		r = ComputeReady(s)
		rep = BuildReport(s, r)
	}
	b.StopTimer()
	heapOfOneRun(b, func() { r = ComputeReady(s); rep = BuildReport(s, r) })
	b.ReportMetric(float64(len(r.Ready)), "ready")
	b.ReportMetric(float64(len(r.Defects)), "defects")
	_ = rep
}

// Claimable on the partial snapshot the store reads for one item, against
// the same 10k repository: a plain candidate and an integration item (whose
// grouping must be read).
func BenchmarkClaimableOneItem(b *testing.B) {
	s := benchSnapshot(10000, 20000)
	r := ComputeReady(s)
	integ := ItemID("")
	for _, c := range s.Items {
		if len(c.Item.Targets(Integrates)) > 0 && c.Item.ID.Number() > 6000 {
			integ = c.Item.ID
			break
		}
	}
	for _, tc := range []struct {
		name string
		id   ItemID
	}{{"ready-item", r.Ready[len(r.Ready)/2].Item}, {"integration-item", integ}} {
		p := partialFor(s, tc.id)
		ok, e := Claimable(p, tc.id, "backlog-worker/1")
		want := verdictsOf(r)[tc.id]
		if ok != want.ok || e != want.ex {
			b.Fatalf("%s: Claimable %v %+v, ComputeReady %+v", tc.id, ok, e, want)
		}
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				Claimable(p, tc.id, "backlog-worker/1")
			}
			b.ReportMetric(float64(len(p.Items)), "snapshot-items")
		})
	}
}
