package gating

import (
	"strings"
	"testing"
)

// world is a snapshot of other items for Lookup.
type world map[ItemID]*Item

func (w world) lookup(id ItemID) (*Item, bool) {
	it, ok := w[id]
	return it, ok
}

func item(n int, tags []string, links ...Link) *Item {
	return &Item{ID: IDFor(n), Tags: tags, Links: links}
}

func TestCheckWrite(t *testing.T) {
	w := world{
		"issue-2": item(2, with()),
		"issue-3": item(3, with("state:parked", "ruling-owner:pm", "ruling-topic:x")),
		"issue-4": item(4, with("state:done")),
		"issue-5": item(5, with("state:complete")),
		"issue-6": item(6, with(), Link{BlockedBy, "issue-7"}),
		"issue-7": item(7, with()),
		"issue-9": item(9, []string{"backlog", "priority:P1", "phase:integration", "homeRegion:local", "baseBranch:epic/wal"}),
	}
	parked := with("state:parked", "ruling-owner:pm", "ruling-topic:poison")
	cases := []struct {
		name   string
		write  Write
		reason string // "" = accepted
		detail string // a substring of the detail
	}{
		{"create with every mandatory tag", Write{Kind: Create, After: item(1, with()), Role: RolePM}, "", ""},
		{"create missing phase", Write{Kind: Create, After: item(1, []string{"backlog", "priority:P1", "homeRegion:l", "baseBranch:main"}), Role: RolePM}, "missing-mandatory-tag", "phase:"},
		{"second priority", Write{Kind: Update, Before: item(1, with()), After: item(1, with("priority:P0")), Role: RolePM}, "duplicate-attribute-tag", "priority"},
		{"priority P7", Write{Kind: Create, After: item(1, []string{"backlog", "priority:P7", "phase:research", "homeRegion:l", "baseBranch:main"}), Role: RolePM}, "invalid-priority", "P7"},
		{"state:in-review refused at write", Write{Kind: Update, Before: item(1, with()), After: item(1, with("state:in-review")), Role: RolePM}, "unknown-state", "in-review"},
		{"tag with a space", Write{Kind: Update, Before: item(1, with()), After: item(1, with("two words")), Role: RolePM}, "invalid-tag", "space"},
		{"park without route", Write{Kind: Update, Before: item(1, with()), After: item(1, with("state:parked")), Role: RoleWarden}, "park-without-route", "ruling-owner"},
		{"park with route in the same write", Write{Kind: Update, Before: item(1, with()), After: item(1, parked), Role: RoleWarden}, "", ""},
		{"unpark by a worker", Write{Kind: Update, Before: item(1, parked), After: item(1, with()), Role: RoleWorker}, "HumanActRequired", "state:parked"},
		{"unpark by a pm", Write{Kind: Update, Before: item(1, parked), After: item(1, with()), Role: RolePM}, "HumanActRequired", ""},
		{"unpark by a human", Write{Kind: Update, Before: item(1, parked), After: item(1, with()), Role: RoleHuman}, "", ""},
		{"removing only the route", Write{Kind: Update, Before: item(1, parked), After: item(1, with("state:parked", "ruling-topic:poison")), Role: RolePM}, "HumanActRequired", "ruling-owner"},
		{"removing state:complete", Write{Kind: Update, Before: item(1, with("state:complete")), After: item(1, with()), Role: RoleWarden}, "HumanActRequired", "state:complete"},
		{"phase change by a worker", Write{Kind: Update, Before: item(1, with()), After: item(1, []string{"backlog", "priority:P1", "phase:research", "homeRegion:local", "baseBranch:main"}), Role: RoleWorker}, "HumanActRequired", "pm token"},
		{"phase change by a human", Write{Kind: Update, Before: item(1, with()), After: item(1, []string{"backlog", "priority:P1", "phase:research", "homeRegion:local", "baseBranch:main"}), Role: RoleHuman}, "HumanActRequired", "pm token"},
		{"phase change by a pm", Write{Kind: Update, Before: item(1, with()), After: item(1, []string{"backlog", "priority:P1", "phase:research", "homeRegion:local", "baseBranch:main"}), Role: RolePM}, "", ""},
		{"blockedBy removed by a worker", Write{Kind: Update, Before: item(1, with(), Link{BlockedBy, "issue-2"}), After: item(1, with()), Role: RoleWorker, Lookup: w.lookup}, "HumanActRequired", "edge-removed"},
		{"partOf removed by a pm", Write{Kind: Update, Before: item(1, with("baseBranch:x")[:4], Link{PartOf, "issue-9"}), After: item(1, with()), Role: RolePM, Lookup: w.lookup}, "", ""},
		{"informs removed by a worker", Write{Kind: Update, Before: item(1, with(), Link{Informs, "issue-2"}), After: item(1, with()), Role: RoleWorker, Lookup: w.lookup}, "", ""},
		{"blockedBy a live item", Write{Kind: Update, Before: item(1, with()), After: item(1, with(), Link{BlockedBy, "issue-2"}), Role: RolePM, Lookup: w.lookup}, "", ""},
		{"blockedBy a complete item", Write{Kind: Update, Before: item(1, with()), After: item(1, with(), Link{BlockedBy, "issue-5"}), Role: RolePM, Lookup: w.lookup}, "", ""},
		{"blockedBy a missing item", Write{Kind: Update, Before: item(1, with()), After: item(1, with(), Link{BlockedBy, "issue-99"}), Role: RolePM, Lookup: w.lookup}, "dangling-blocker", "issue-99 (no such item)"},
		{"blockedBy a parked item", Write{Kind: Update, Before: item(1, with()), After: item(1, with(), Link{BlockedBy, "issue-3"}), Role: RolePM, Lookup: w.lookup}, "stalled-by-parked", "issue-3 (parked)"},
		{"blockedBy an invalid item", Write{Kind: Update, Before: item(1, with()), After: item(1, with(), Link{BlockedBy, "issue-4"}), Role: RolePM, Lookup: w.lookup}, "invalid-blocker", "state:done"},
		{"mixed blockers name each rejected one", Write{Kind: Update, Before: item(1, with()), After: item(1, with(), Link{BlockedBy, "issue-2"}, Link{BlockedBy, "issue-3"}, Link{BlockedBy, "issue-99"}), Role: RolePM, Lookup: w.lookup}, "stalled-by-parked", "issue-1: rejected issue-3 (parked), issue-99 (no such item)"},
		{"blockedBy closing a cycle", Write{Kind: Update, Before: item(7, with()), After: item(7, with(), Link{BlockedBy, "issue-6"}), Role: RolePM, Lookup: w.lookup}, "cycle", "issue-7 → issue-6 → issue-7"},
		{"blockedBy itself", Write{Kind: Update, Before: item(1, with()), After: item(1, with(), Link{BlockedBy, "issue-1"}), Role: RolePM, Lookup: w.lookup}, "invalid-link", "itself"},
		{"link target not an id", Write{Kind: Update, Before: item(1, with()), After: item(1, with(), Link{Related, "#12"}), Role: RolePM, Lookup: w.lookup}, "invalid-link", "related"},
		{"unknown relation", Write{Kind: Update, Before: item(1, with()), After: item(1, with(), Link{"dependsOn", "issue-2"}), Role: RolePM, Lookup: w.lookup}, "invalid-link", "dependsOn"},
		{"anchor outside the repository", Write{Kind: Update, Before: item(1, with()), After: item(1, with(), Link{AnchoredTo, "../etc/passwd"}), Role: RolePM, Lookup: w.lookup}, "invalid-link", "repository-relative"},
		{"epic child on the default branch", Write{Kind: Create, After: item(1, with(), Link{PartOf, "issue-9"}), Role: RolePM, Lookup: w.lookup, DefaultBranch: "main"}, "epic-child-on-main", "baseBranch:main"},
		{"epic child on the epic branch", Write{Kind: Create, After: item(1, []string{"backlog", "priority:P1", "phase:implementation", "homeRegion:local", "baseBranch:epic/wal"}, Link{PartOf, "issue-9"}), Role: RolePM, Lookup: w.lookup, DefaultBranch: "main"}, "", ""},
		{"partOf a missing epic", Write{Kind: Create, After: item(1, []string{"backlog", "priority:P1", "phase:implementation", "homeRegion:local", "baseBranch:epic/wal"}, Link{PartOf, "issue-77"}), Role: RolePM, Lookup: w.lookup, DefaultBranch: "main"}, "dangling-link", "issue-77"},
		{"completion without proof", Write{Kind: Update, Before: item(1, with("pr:3")), After: item(1, with("pr:3", "state:complete")), Role: RoleWorker, Lookup: w.lookup}, "completion-unproven", "pr:<n>"},
		{"completion with an open PR", Write{Kind: Update, Before: item(1, with("pr:3")), After: item(1, with("pr:3", "state:complete")), Role: RoleWorker, Lookup: w.lookup, CompletionReason: "complete-with-open-pr", CompletionDetail: "pr:3 is open"}, "complete-with-open-pr", "pr:3 is open"},
		{"completion proven", Write{Kind: Update, Before: item(1, with("pr:3")), After: item(1, with("pr:3", "state:complete")), Role: RoleWorker, Lookup: w.lookup, CompletionProven: true}, "", ""},
		{"forget with dependents", Write{Kind: Delete, Before: item(7, with()), Dependents: []ItemID{"issue-6", "issue-12"}}, "has-dependents", "issue-12, issue-6"},
		{"forget a free item", Write{Kind: Delete, Before: item(2, with())}, "", ""},
		{"phase change by warden", Write{Kind: Update, Before: item(1, with()), After: item(1, []string{"backlog", "priority:P1", "phase:research", "homeRegion:local", "baseBranch:main"}), Role: RoleWarden}, "", ""},
		{"park with a route left on the item", Write{Kind: Update, Before: item(1, with("ruling-owner:pm", "ruling-topic:x")), After: item(1, with("ruling-owner:pm", "ruling-topic:x", "state:parked")), Role: RoleWarden}, "", ""},
		{"claims link with a control character", Write{Kind: Update, Before: item(1, with()), After: item(1, with(), Link{Claims, "run\x00one"}), Role: RolePM}, "invalid-link", "printable"},
	}
	for _, c := range cases {
		if c.write.Lookup == nil {
			c.write.Lookup = w.lookup
		}
		r := CheckWrite(c.write)
		switch {
		case c.reason == "" && r != nil:
			t.Errorf("%s: refused %v", c.name, r)
		case c.reason != "" && r == nil:
			t.Errorf("%s: accepted, want %s", c.name, c.reason)
		case r != nil && (r.Reason != c.reason || !strings.Contains(r.Detail, c.detail)):
			t.Errorf("%s: got %s %q, want %s containing %q", c.name, r.Reason, r.Detail, c.reason, c.detail)
		}
	}
}
