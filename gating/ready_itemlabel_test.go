package gating

import "testing"

// unlabeledItem: the item's issue no longer carries the item label.
func unlabeledItem() opt { return func(c *Candidate) { c.ItemLabelRemoved = true } }

// An item whose issue lost the item label is not offered (and not
// claimable), after the terminal states, a live claim and a merged pull
// request, and before every rule that only delays a fresh claim.
func TestReadyItemLabelRemoved(t *testing.T) {
	cases := []struct {
		name   string
		items  []Candidate
		reason string // "" = ready
	}{
		{"the label is gone", []Candidate{mk(1, unlabeledItem())}, ExItemLabelRemoved},
		{"the label is on", []Candidate{mk(1)}, ""},
		{"complete stays complete", []Candidate{mk(1, unlabeledItem(), complete())}, ExComplete},
		{"parked stays parked", []Candidate{mk(1, unlabeledItem(), parked())}, ExParked},
		{"held: its holder is still at it", []Candidate{mk(1, unlabeledItem(), held("w/1"))}, ExHeld},
		{"a merged pull request comes first", []Candidate{mk(1, unlabeledItem(), mnc(7))}, ExMergedNotComplete},
		{"before a live blocker", []Candidate{mk(1, unlabeledItem(), blockedBy(2)), mk(2)}, ExItemLabelRemoved},
		{"before admission", []Candidate{mk(1, unlabeledItem(), labelled())}, ExItemLabelRemoved},
		{"before poison", []Candidate{mk(1, unlabeledItem(), attempts(3))}, ExItemLabelRemoved},
	}
	for _, c := range cases {
		s := snap(c.items...)
		r := ComputeReady(s)
		checkPartition(t, s, r)
		if c.reason == "" {
			if !isReady(r, 1) {
				t.Errorf("%s: not ready: %+v", c.name, r.Excluded)
			}
			continue
		}
		wantExcluded(t, c.name, r, 1, c.reason)
		if c.reason == ExItemLabelRemoved {
			if ok, e := Claimable(s, "issue-1", "w/9"); ok || e.Reason != ExItemLabelRemoved {
				t.Errorf("%s: claimable %v %+v, want refused %s", c.name, ok, e, ExItemLabelRemoved)
			}
		}
	}
}
