package store

import (
	"errors"
	"strings"
	"testing"

	"github.com/wardenhq/warden/gating"
)

// TestClaimNestedBranch: a claim's branch nested under (or over) the item's
// baseBranch: or its epic's branch is refused nested-epic-branch, and the
// refusal writes nothing.
func TestClaimNestedBranch(t *testing.T) {
	e := newEnv(t, openSQLiteLedger)
	e.create(1, tags())                                                                            // baseBranch:feat/epic
	e.create(10, tags("baseBranch:x/epic/e"))                                                      // the epic
	e.create(11, tags("baseBranch:x/epic/e"), gating.Link{Rel: gating.PartOf, Target: "issue-10"}) // its member
	cases := []struct {
		name   string
		n      int
		branch string
		actor  Actor
		purp   string
		subs   []string // nil: granted
	}{
		{"nested under the item's baseBranch", 1, "feat/epic/item", worker, "", []string{"feat/epic/item is nested under issue-1's baseBranch: feat/epic", "refs/heads/X/anything cannot coexist"}},
		{"over the item's baseBranch", 1, "feat", worker, "", []string{"has nested under it"}},
		{"nested under the epic branch", 11, "x/epic/e/item", worker, "", []string{"x/epic/e/item is nested under", "x/epic/e"}},
		{"a maintenance claim too", 11, "x/epic/e/fix", pm, "maintenance", []string{"x/epic/e/fix"}},
		{"beside the epic branch (the convention)", 11, "x/epic/e-item", worker, "", nil},
		{"no branch", 1, "", worker, "", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			id := gating.IDFor(tc.n)
			before, _ := e.l.Grants(e.ctx, e.repo, id)
			owner := "w1/run"
			if tc.actor.Role != gating.RoleWorker {
				owner = "pm/fix"
			}
			r, err := e.l.Claim(e.ctx, e.repo, id, ClaimRequest{Owner: owner, LeaseSeconds: f64(60), Branch: tc.branch, Purpose: tc.purp}, tc.actor)
			if tc.subs == nil {
				if err != nil || !r.Granted {
					t.Fatalf("claim %+v %v, want granted", r, err)
				}
				e.release(tc.n, *r.FencingToken)
				return
			}
			var ref *gating.Refusal
			if !errors.As(err, &ref) || ref.Reason != gating.CodeNestedEpicBranch {
				t.Fatalf("claim %+v %v, want a %s refusal", r, err, gating.CodeNestedEpicBranch)
			}
			for _, s := range tc.subs {
				if !strings.Contains(ref.Detail, s) {
					t.Errorf("detail %q lacks %q", ref.Detail, s)
				}
			}
			if after, _ := e.l.Grants(e.ctx, e.repo, id); len(after) != len(before) {
				t.Errorf("the refusal wrote a grant: %d grants before, %d after", len(before), len(after))
			}
		})
	}
}
