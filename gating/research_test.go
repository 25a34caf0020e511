package gating

import (
	"strings"
	"testing"
)

// Research is a leaf (CONTRACT.md §11 research-nested): a research grouping
// may not inform another research grouping; refused at write.
func TestResearchNested(t *testing.T) {
	tags := func(phase string) []string {
		return []string{"backlog", "priority:P1", "phase:" + phase, "homeRegion:local", "baseBranch:feat/epic/r"}
	}
	w := world{
		"issue-10": item(10, tags("research")),                                  // a research grouping's epic
		"issue-11": item(11, tags("integration"), Link{Integrates, "issue-10"}), // its design-integration item
		"issue-20": item(20, tags("implementation")),                            // an implementation grouping's epic
		"issue-21": item(21, tags("implementation"), Link{PartOf, "issue-20"}),
		"issue-30": item(30, tags("research")),                           // another research grouping's epic
		"issue-31": item(31, tags("research"), Link{PartOf, "issue-30"}), // a member of it
		"issue-40": item(40, tags("implementation")),
		"issue-41": item(41, tags("research"), Link{PartOf, "issue-40"}), // a research item in an implementation grouping
	}
	add := func(before *Item, links ...Link) Write {
		after := *before
		after.Links = append(append([]Link{}, before.Links...), links...)
		return Write{Kind: Update, Before: before, After: &after, Role: RolePM, Lookup: w.lookup, DefaultBranch: "main"}
	}
	cases := []struct {
		name   string
		write  Write
		reason string
		detail string
	}{
		{"design integration informs an implementation grouping", add(w["issue-11"], Link{Informs, "issue-20"}), "", ""},
		{"research epic informs an implementation grouping", add(w["issue-10"], Link{Informs, "issue-20"}), "", ""},
		{"design integration informs a research grouping", add(w["issue-11"], Link{Informs, "issue-30"}), CodeResearchNested, "issue-30"},
		{"research epic informs a research grouping", add(w["issue-10"], Link{Informs, "issue-30"}), CodeResearchNested, "issue-10 is phase:research"},
		{"research epic informs a member of a research grouping", add(w["issue-10"], Link{Informs, "issue-31"}), CodeResearchNested, "issue-31"},
		{"research epic informs a research item", add(w["issue-10"], Link{Informs, "issue-41"}), CodeResearchNested, "issue-41"},
		{"implementation epic informs a research grouping", add(w["issue-20"], Link{Informs, "issue-30"}), "", ""},
		{"created informing a research grouping", Write{Kind: Create, After: item(12, tags("research"), Link{Informs, "issue-30"}), Role: RolePM, Lookup: w.lookup, DefaultBranch: "main"}, CodeResearchNested, "issue-30"},
		{"an existing edge is not re-judged", Write{Kind: Update, Before: item(13, tags("research"), Link{Informs, "issue-30"}), After: item(13, tags("research"), Link{Informs, "issue-30"}), Role: RolePM, Lookup: w.lookup, DefaultBranch: "main"}, "", ""},
	}
	for _, c := range cases {
		r := CheckWrite(c.write)
		switch {
		case c.reason == "" && r != nil:
			t.Errorf("%s: refused %v", c.name, r)
		case c.reason != "" && (r == nil || r.Reason != c.reason || !strings.Contains(r.Detail, c.detail)):
			t.Errorf("%s: got %v, want %s (%q)", c.name, r, c.reason, c.detail)
		}
	}
}
