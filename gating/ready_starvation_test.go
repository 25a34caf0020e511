package gating

import "testing"

// The starvation alarm (ready-empty-pending) fires whenever pending work has
// no path to ready: nothing ready, and no in-flight item is a (transitive)
// blocker of a pending item — even while something unrelated is in flight.
func TestReadyStarvationAlarm(t *testing.T) {
	epic := mk(1, set("baseBranch", "feat/epic/x"))
	cases := []struct {
		name  string
		items []Candidate
		alarm bool
	}{
		{"nothing in flight, a stall", []Candidate{mk(2, parked()), mk(3, blockedBy(2))}, true},
		{"unrelated item in flight, a stall", []Candidate{mk(2, parked()), mk(3, blockedBy(2)), mk(4, held("w/4"))}, true},
		{"unrelated lapsed item, a cycle", []Candidate{mk(2, blockedBy(3)), mk(3, blockedBy(2)), mk(4, lapsed("w/4"))}, true},
		{"unrelated item in flight, awaiting admission", []Candidate{mk(2, labelled()), mk(4, held("w/4"))}, true},
		{"in-flight direct blocker", []Candidate{mk(2, held("w/2")), mk(3, blockedBy(2))}, false},
		{"in-flight transitive blocker", []Candidate{mk(2, held("w/2")), mk(3, blockedBy(2)), mk(4, blockedBy(3))}, false},
		{"lapsed transitive blocker", []Candidate{mk(2, lapsed("w/2")), mk(3, blockedBy(2)), mk(4, blockedBy(3))}, false},
		{"only in-flight items pending", []Candidate{mk(2, held("w/2")), mk(3, complete())}, false},
		{"integration item waits on an in-flight member", []Candidate{epic, mk(2, member(1), complete(), held("w/2")), mk(5, member(1), integrates(1))}, false},
		{"member waits on the in-flight integration item", []Candidate{epic, mk(2, member(1)), mk(5, integrates(1), held("w/5"))}, false},
		{"resource held by an in-flight item", []Candidate{mk(2, tg("resource:box"), held("w/2")), mk(3, tg("resource:box"))}, false},
		{"resource named, but the item awaits admission", []Candidate{mk(2, tg("resource:box"), held("w/2")), mk(3, tg("resource:box"), labelled())}, true},
		{"work ready", []Candidate{mk(2), mk(3, parked()), mk(4, blockedBy(3))}, false},
		{"nothing pending", []Candidate{mk(2, complete()), mk(3, parked())}, false},
	}
	for _, c := range cases {
		r := ComputeReady(snap(c.items...))
		got := len(defectsOf(r, "ready-empty-pending", 0)) > 0
		alarmed := false
		for _, a := range r.Alarms {
			if len(a) >= len("ready-empty-pending: ") && a[:len("ready-empty-pending: ")] == "ready-empty-pending: " {
				alarmed = true
			}
		}
		if got != c.alarm || alarmed != c.alarm {
			t.Errorf("%s: defect %v alarm %v, want %v (ready %v, alarms %q)", c.name, got, alarmed, c.alarm, readyIDs(r), r.Alarms)
		}
	}
}
