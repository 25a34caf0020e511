package gating

import (
	"strings"
	"testing"
)

// A member's base is its epic's (CONTRACT.md §11 epic-base-mismatch):
// refused at write, and reported as a defect where it exists.
func TestEpicBaseMismatch(t *testing.T) {
	tags := func(base string) []string {
		return []string{"backlog", "priority:P1", "phase:implementation", "homeRegion:local", "baseBranch:" + base}
	}
	w := world{
		"issue-9": item(9, tags("feat/epic/wal")),
		"issue-8": item(8, tags("feat/epic/other")),
	}
	writes := []struct {
		name   string
		write  Write
		reason string
		detail string
	}{
		{"member on its epic's branch", Write{Kind: Create, After: item(1, tags("feat/epic/wal"), Link{PartOf, "issue-9"}), Role: RolePM, Lookup: w.lookup, DefaultBranch: "main"}, "", ""},
		{"member on another epic's branch", Write{Kind: Create, After: item(1, tags("feat/epic/other"), Link{PartOf, "issue-9"}), Role: RolePM, Lookup: w.lookup, DefaultBranch: "main"}, CodeEpicBaseMismatch, "baseBranch:feat/epic/other differs from the epic's baseBranch:feat/epic/wal"},
		{"partOf added to an item on another branch", Write{Kind: Update, Before: item(1, tags("feat/x")), After: item(1, tags("feat/x"), Link{PartOf, "issue-9"}), Role: RolePM, Lookup: w.lookup, DefaultBranch: "main"}, CodeEpicBaseMismatch, "issue-9"},
		{"member retagged off its epic's branch", Write{Kind: Update, Before: item(1, tags("feat/epic/wal"), Link{PartOf, "issue-9"}), After: item(1, tags("feat/epic/wal2"), Link{PartOf, "issue-9"}), Role: RolePM, Lookup: w.lookup, DefaultBranch: "main"}, CodeEpicBaseMismatch, "feat/epic/wal2"},
		{"member of two epics, one mismatched", Write{Kind: Create, After: item(1, tags("feat/epic/wal"), Link{PartOf, "issue-9"}, Link{PartOf, "issue-8"}), Role: RolePM, Lookup: w.lookup, DefaultBranch: "main"}, CodeEpicBaseMismatch, "issue-8"},
		{"member on the default branch stays epic-child-on-main", Write{Kind: Create, After: item(1, tags("main"), Link{PartOf, "issue-9"}), Role: RolePM, Lookup: w.lookup, DefaultBranch: "main"}, "epic-child-on-main", ""},
		{"not a member", Write{Kind: Create, After: item(1, tags("feat/x")), Role: RolePM, Lookup: w.lookup, DefaultBranch: "main"}, "", ""},
	}
	for _, c := range writes {
		r := CheckWrite(c.write)
		switch {
		case c.reason == "" && r != nil:
			t.Errorf("%s: refused %v", c.name, r)
		case c.reason != "" && (r == nil || r.Reason != c.reason || !strings.Contains(r.Detail, c.detail)):
			t.Errorf("%s: got %v, want %s (%q)", c.name, r, c.reason, c.detail)
		}
	}

	epic := mk(1, set("baseBranch", "feat/epic/x"))
	ready := []struct {
		name  string
		items []Candidate
		item  int
		want  bool
	}{
		{"member on the epic's branch", []Candidate{epic, mk(2, member(1)), mk(3, member(1), integrates(1))}, 2, false},
		{"member on another branch", []Candidate{epic, mk(2, member(1), set("baseBranch", "feat/y")), mk(3, member(1), integrates(1))}, 2, true},
		{"complete member on another branch", []Candidate{epic, mk(2, member(1), set("baseBranch", "feat/y"), complete()), mk(3, member(1), integrates(1))}, 2, true},
		{"member on the default branch is epic-child-on-main only", []Candidate{epic, mk(2, member(1), set("baseBranch", "main")), mk(3, member(1), integrates(1))}, 2, false},
		{"epic not in the snapshot", []Candidate{mk(2, member(1), set("baseBranch", "feat/y"))}, 2, false},
	}
	for _, c := range ready {
		r := ComputeReady(snap(c.items...))
		ds := defectsOf(r, CodeEpicBaseMismatch, c.item)
		if got := len(ds) == 1; got != c.want || len(ds) > 1 {
			t.Errorf("%s: %d epic-base-mismatch defects, want %v: %+v", c.name, len(ds), c.want, r.Defects)
		}
	}
}
