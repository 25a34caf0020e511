package gating

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestOwnerPrincipal(t *testing.T) {
	for owner, want := range map[string]string{"w1/run-1": "w1", "w1/a/b": "w1", "pm": "pm", "pm/repair": "pm", "warden/maintenance": "warden"} {
		if got := OwnerPrincipal(owner); got != want {
			t.Errorf("OwnerPrincipal(%q) = %q, want %q", owner, got, want)
		}
	}
}

func TestOwnerCap(t *testing.T) {
	maint := func(c *Candidate) { c.Claim.Purpose = "maintenance" }
	s := snap(
		mk(1, held("w1/run-1")),
		mk(2, held("w1/run-2")),          // another run of the same agent
		mk(3, lapsed("w1/run-3")),        // lapsed: holds nothing
		mk(4, released("w1/run-4")),      // released
		mk(5, abandoned("w1/run-5")),     // abandoned
		mk(6, held("w1/repair"), maint),  // maintenance: not counted
		mk(7, held("w10/run-1")),         // another agent whose name begins the same
		mk(8, held("w2/run-1")),          // another agent
		mk(9),                            // never claimed
		mk(10, held("w1"), blockedBy(9)), // the bare principal
	)
	cases := []struct {
		max         int
		owner       string
		wantHeld    []ItemID
		wantReached bool
	}{
		{0, "w1/run-9", nil, false},
		{-1, "w1/run-9", nil, false},
		{4, "w1/run-9", []ItemID{"issue-1", "issue-2", "issue-10"}, false},
		{3, "w1/run-9", []ItemID{"issue-1", "issue-2", "issue-10"}, true},
		{3, "w1", []ItemID{"issue-1", "issue-2", "issue-10"}, true},
		{1, "w2/x", []ItemID{"issue-8"}, true},
		{1, "w3/x", nil, false},
	}
	for _, c := range cases {
		held, reached := OwnerCap(s, c.owner, c.max)
		if !slices.Equal(held, c.wantHeld) || reached != c.wantReached {
			t.Errorf("OwnerCap(%s, %d) = %v, %v; want %v, %v", c.owner, c.max, held, reached, c.wantHeld, c.wantReached)
		}
	}
	// A lease that runs out makes room.
	s.Now = s.Now.Add(11 * time.Minute)
	if held, reached := OwnerCap(s, "w1/run-9", 1); reached || len(held) != 0 {
		t.Errorf("after the leases: %v %v", held, reached)
	}
}

func TestClaimCandidates(t *testing.T) {
	e := func(n int, prio string, overlaps ...ItemID) ReadyEntry {
		return ReadyEntry{Item: IDFor(n), Priority: prio, Overlaps: overlaps}
	}
	ready := []ReadyEntry{e(1, "P0"), e(2, "P1"), e(3, "P1"), e(4, "P1"), e(5, "P2"), e(6, "P2"), e(7, "P0", "issue-99")}
	if got := ClaimCandidates(ready, nil); !slices.Equal(got, []ItemID{"issue-1", "issue-2", "issue-3", "issue-4", "issue-5", "issue-6", "issue-7"}) {
		t.Fatalf("no jitter: %v", got)
	}
	if got := ClaimCandidates(nil, rand.Shuffle); len(got) != 0 {
		t.Fatalf("empty ready set: %v", got)
	}
	// With jitter: the window is the first five; only equals move, and
	// each of the three P1 items comes first among them some of the time.
	firsts := map[ItemID]int{}
	r := rand.New(rand.NewPCG(1, 2))
	for range 300 {
		got := ClaimCandidates(ready, r.Shuffle)
		if len(got) != len(ready) || got[0] != "issue-1" || got[4] != "issue-5" || got[5] != "issue-6" || got[6] != "issue-7" {
			t.Fatalf("jitter moved an item across a priority or a window: %v", got)
		}
		mid := slices.Clone(got[1:4])
		slices.Sort(mid)
		if !slices.Equal(mid, []ItemID{"issue-2", "issue-3", "issue-4"}) {
			t.Fatalf("jitter lost an item: %v", got)
		}
		firsts[got[1]]++
	}
	for _, id := range []ItemID{"issue-2", "issue-3", "issue-4"} {
		if firsts[id] < 50 {
			t.Errorf("%s first among its equals %d times of 300: %v", id, firsts[id], firsts)
		}
	}
	// Windows: a run of equals longer than the window is jittered within
	// each window, never across (only the top five compete for the first
	// try); at most ClaimTries are tried.
	var long []ReadyEntry
	for n := 1; n <= 40; n++ {
		long = append(long, e(n, "P2"))
	}
	for range 100 {
		got := ClaimCandidates(long, r.Shuffle)
		if len(got) != ClaimTries {
			t.Fatalf("%d candidates, want %d", len(got), ClaimTries)
		}
		for i, id := range got {
			if w := (id.Number() - 1) / ClaimWindow; w != i/ClaimWindow {
				t.Fatalf("%s at %d: moved out of its window: %v", id, i, got)
			}
		}
	}
	// Disjoint before overlapping, whatever the priority (step 7): the
	// ready order puts an overlapping P0 after a disjoint P2, and jitter
	// keeps it there.
	ready = []ReadyEntry{e(1, "P2"), e(2, "P2"), e(3, "P2", "issue-9"), e(4, "P2", "issue-9")}
	for range 100 {
		got := ClaimCandidates(ready, r.Shuffle)
		if a, b := slices.Index(got, "issue-3"), slices.Index(got, "issue-4"); a < 2 || b < 2 {
			t.Fatalf("an overlapping candidate before a disjoint one: %v", got)
		}
	}
}

func TestClaimCandidatesFromReadySet(t *testing.T) {
	// The ready set's own order, resources and radii decide: a candidate
	// whose resource: collides with an in-flight item is not one at all; an
	// overlapping one comes after the disjoint ones.
	s := snap(
		mk(1, held("w/1"), anchored("src/a.go"), tg("resource:gpu")),
		mk(2, anchored("src/a.go")),
		mk(3, tg("resource:gpu")),
		mk(4),
		mk(5),
	)
	r := ComputeReady(s)
	got := ClaimCandidates(r.Ready, rand.Shuffle)
	if slices.Contains(got, "issue-3") || len(got) != 3 || got[2] != "issue-2" {
		t.Fatalf("candidates %v from ready %+v", got, r.Ready)
	}
	if c := ExclusionCounts(r.Excluded); c[ExResourceBusy] != 1 || c[ExHeld] != 1 {
		t.Fatalf("exclusion counts %v (excluded %+v)", c, r.Excluded)
	}
}

func TestNoteLeaseDefaults(t *testing.T) {
	s := reportSnapshot()
	rep := BuildReport(s, ComputeReady(s))
	rep.NoteLeaseDefaults([]LeaseDefault{
		{Item: "issue-2", Fence: 5, Via: "renew", At: rnow.Add(-20 * time.Minute)},
		{Item: "issue-1", Fence: 5, Via: "claim", At: rnow.Add(-time.Minute)},
		{Item: "issue-7", Fence: 5, Via: "claim", At: rnow}, // not in flight: ignored
	})
	var marked []ItemID
	for _, f := range rep.InFlight {
		if f.LeaseDefaulted {
			marked = append(marked, f.Item)
		}
	}
	if !slices.Equal(marked, []ItemID{"issue-1", "issue-2"}) {
		t.Fatalf("marked %v", marked)
	}
	if len(rep.Lines) != 2 || rep.Lines[0].Item != "issue-1" || rep.Lines[1].Item != "issue-2" {
		t.Fatalf("lines %+v", rep.Lines)
	}
	for _, l := range rep.Lines {
		if l.Code != CodeLeaseDefaulted || !strings.Contains(l.Detail, "without leaseSeconds") || !strings.Contains(l.Detail, "fence 5") {
			t.Errorf("line %+v", l)
		}
	}
	if !strings.Contains(rep.Lines[1].Detail, "last renewed") || !strings.Contains(rep.Lines[0].Detail, "was granted") {
		t.Errorf("lines say how: %+v", rep.Lines)
	}
}
