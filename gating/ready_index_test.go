package gating

import (
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// readTag reads a tag as SplitTag splits it, for every prefix the ready set
// reads, on the vocabulary, its near misses and random strings of its
// pieces.
func TestReadTagMatchesSplitTag(t *testing.T) {
	kinds := map[string]tagKind{"priority": tagPriority, "phase": tagPhase, "state": tagState, "homeRegion": tagHomeRegion,
		"baseBranch": tagBaseBranch, "resource": tagResource, "threshold": tagThreshold, "ruling-owner": tagRulingOwner, "ruling-topic": tagRulingTopic}
	pieces := []string{"backlog", "priority", "phase", "state", "homeRegion", "baseBranch", "resource", "threshold", "ruling-owner",
		"ruling-topic", ":", "::", "P1", "x", "", "b", "p", "s", "r", "t", "h", "Backlog", "state ", "é"}
	rng := rand.New(rand.NewPCG(3, 4))
	tags := []string{"", ":", "backlog", "backlog:", "backlog:x", "Backlog", "priority", "priority:", "priority:P1", "prio:P1", "state:complete",
		"state::", "ruling-owner", "ruling-owner:", "ruling-ownerx:y", "baseBranch:a:b", "homeRegion:", "threshold:3", "resource:box"}
	for range 100000 {
		var b strings.Builder
		for range 1 + rng.IntN(4) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		tags = append(tags, b.String())
	}
	for _, tag := range tags {
		k, v := readTag(tag)
		p, sv, ok := SplitTag(tag)
		wantK, wantV := tagOther, ""
		switch {
		case !ok && tag == "backlog":
			wantK = tagBacklog
		case ok && kinds[p] != tagOther:
			wantK, wantV = kinds[p], sv
		}
		if k != wantK || v != wantV {
			t.Fatalf("readTag(%q) = %d %q; SplitTag says %q %q %v (kind %d)", tag, k, v, p, sv, ok, wantK)
		}
	}
}

// The id table finds exactly what a map by id finds, the first id of a
// repeated one winning, whether the numbers are compact, grow past the
// table, turn sparse, or are not numbers at all.
func TestIDTableMatchesMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for round := range 300 {
		n := 1 + rng.IntN(200)
		spread := []int{n, 4 * n, 20 * n, 2_000_000_000}[round%4]
		tab := newIDTable(n, nil)
		want := map[ItemID]int32{}
		var ids []ItemID
		for i := range n {
			id := IDFor(1 + rng.IntN(spread))
			switch rng.IntN(20) {
			case 0:
				id = ItemID([]string{"x", "", "issue-0", "issue-01", "issue-99999999999", "issue-1a"}[rng.IntN(6)])
			case 1:
				if len(ids) > 0 {
					id = ids[rng.IntN(len(ids))]
				}
			}
			ids = append(ids, id)
			_, dup := want[id]
			if added := tab.add(id, id.Number(), int32(i)); added == dup {
				t.Fatalf("round %d: add(%q) = %v, but the map has it: %v", round, id, added, dup)
			}
			if !dup {
				want[id] = int32(i)
			}
		}
		for _, id := range append(ids, "issue-1", IDFor(spread+1), "issue-4294967296", "nope") {
			got, ok := tab.get(id)
			w, wok := want[id]
			if ok != wok || ok && got != w {
				t.Fatalf("round %d: get(%q) = %d %v, want %d %v", round, id, got, ok, w, wok)
			}
		}
	}
}

// A result never shares memory with the buffers the next computation
// reuses: results computed first are unchanged by computations after them,
// and a released index keeps nothing of its snapshot.
func TestReusedBuffersDoNotAlias(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	type kept struct {
		r, rc   Result
		rep, rp Report
	}
	var all []kept
	for range 40 {
		s := wildSnapshot(rng, 30+rng.IntN(200))
		r := ComputeReady(s)
		rep := BuildReport(s, r)
		all = append(all, kept{r, cloneResult(r), rep, cloneReport(rep)})
	}
	for k, c := range all {
		if d := firstDiff("Result", reflect.ValueOf(c.r), reflect.ValueOf(c.rc)); d != "" {
			t.Fatalf("result %d changed after later computations: %s", k, d)
		}
		if d := firstDiff("Report", reflect.ValueOf(c.rep), reflect.ValueOf(c.rp)); d != "" {
			t.Fatalf("report %d changed after later computations: %s", k, d)
		}
	}
	s := wildSnapshot(rng, 50)
	x := indexSnapshot(&s, forReady)
	es := x.es[:cap(x.es)]
	x.release()
	for k := range es {
		if es[k] != (entry{}) {
			t.Fatalf("a released index keeps entry %d: %+v", k, es[k])
		}
	}
}

// dup copies a slice, keeping a nil one nil and an empty one empty.
func dup[T any](s []T) []T {
	if s == nil {
		return nil
	}
	return append(make([]T, 0, len(s)), s...)
}

func cloneResult(r Result) Result {
	c := r
	c.Ready = dup(r.Ready)
	for k := range c.Ready {
		c.Ready[k].Overlaps = dup(r.Ready[k].Overlaps)
	}
	c.Excluded, c.Defects, c.Alarms = dup(r.Excluded), dup(r.Defects), dup(r.Alarms)
	return c
}

func cloneReport(r Report) Report {
	c := r
	c.Ready, c.Defects = dup(r.Ready), dup(r.Defects)
	for k := range c.Ready {
		c.Ready[k].Overlaps = dup(r.Ready[k].Overlaps)
	}
	c.Blocked = dup(r.Blocked)
	for k := range c.Blocked {
		c.Blocked[k].WaitingOn = dup(r.Blocked[k].WaitingOn)
	}
	c.InFlight, c.Stalled, c.Parked = dup(r.InFlight), dup(r.Stalled), dup(r.Parked)
	c.AwaitingAdmission, c.Lapsed, c.CleanReclaims = dup(r.AwaitingAdmission), dup(r.Lapsed), dup(r.CleanReclaims)
	return c
}

// An index built on released buffers starts clean, whatever the last one
// did with them (grew its id table, or turned it into a map for sparse
// numbers): every id of the new snapshot is found where a map finds it, and
// no id of an old one is.
func TestReleasedIndexStartsClean(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for round := range 200 {
		s := wildSnapshot(rng, 1+rng.IntN(300))
		if round%3 == 0 { // compact numbers, then one that turns the table into a map
			s = snap()
			for n := range 1 + rng.IntN(100) {
				s.Items = append(s.Items, mk(1+round+n))
			}
			s.Items = append(s.Items, mk(1_000_000_000+round))
		}
		x := indexSnapshot(&s, []indexUse{forReady, forReport}[round%2])
		want := map[ItemID]int32{}
		for i := range x.es {
			want[x.es[i].id] = int32(i)
		}
		for k := range s.Items {
			if it := s.Items[k].Item; it != nil {
				if got, ok := x.ids.get(it.ID); !ok || got != want[it.ID] {
					t.Fatalf("round %d: %s found at %d %v, want %d", round, it.ID, got, ok, want[it.ID])
				}
			}
		}
		for n := range 2000 {
			if _, ok := want[IDFor(n)]; !ok {
				if got, ok := x.ids.get(IDFor(n)); ok {
					t.Fatalf("round %d: %s is not in the snapshot, but found at %d", round, IDFor(n), got)
				}
			}
		}
		x.release()
	}
}
