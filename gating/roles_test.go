package gating

import "testing"

func TestRoleRules(t *testing.T) {
	for _, c := range []struct {
		owner, token string
		want         bool
	}{{"w1/run-1", "w1", true}, {"w1", "w1", false}, {"w10/run", "w1", false}, {"w2/run", "w1", false}, {"/run", "", false},
		{"w1/", "w1", false}, {"w1/ ", "w1", false}, {"w1//x", "w1", false}, {"w1/x/", "w1", false}, {"w1/-x", "w1", false}, {"w1/a/b", "w1", true}} {
		if got := OwnedBy(c.owner, c.token); got != c.want {
			t.Errorf("OwnedBy(%q, %q) = %v", c.owner, c.token, got)
		}
	}
	for r, want := range map[Role]bool{RolePM: true, RoleHuman: true, RoleWarden: true, RoleWorker: false, "": false} {
		if Authors(r) != want {
			t.Errorf("Authors(%q) = %v", r, !want)
		}
	}
}

func TestRunNames(t *testing.T) {
	for _, c := range []struct {
		owner, token string
		role         Role
		run          string
		has, valid   bool
	}{
		{"w1/run-1", "w1", RoleWorker, "run-1", true, true},
		{"w1/", "w1", RoleWorker, "", true, false},
		{"w1/\t", "w1", RoleWorker, "\t", true, false},
		{"w2/x", "w1", RoleWorker, "", false, true},
		{"pm", "pm", RolePM, "", false, true},
		{"pm/", "pm", RolePM, "", true, false},
		{"alice/cli", "alice", RoleHuman, "cli", true, true},
	} {
		run, has := OwnerRunName(c.owner, c.role, c.token)
		if run != c.run || has != c.has {
			t.Errorf("OwnerRunName(%q, %s, %q) = %q, %v; want %q, %v", c.owner, c.role, c.token, run, has, c.run, c.has)
		}
		if has && (RunNameProblem(run) == "") != c.valid {
			t.Errorf("RunNameProblem(%q) = %q, want valid %v", run, RunNameProblem(run), c.valid)
		}
	}
}

func TestEdgeEditsArePMs(t *testing.T) {
	edge := []Link{{Rel: BlockedBy, Target: "issue-2"}}
	note := []Link{{Rel: AnchoredTo, Target: "a.go"}, {Rel: Related, Target: "issue-2"}, {Rel: Claims, Target: "run-1"}}
	for _, r := range []Role{RolePM, RoleHuman, RoleWarden} {
		if ref := CheckEdgeEdits(r, "issue-1", edge, edge); ref != nil {
			t.Errorf("%s may edit edges; refused: %v", r, ref)
		}
	}
	if ref := CheckEdgeEdits(RoleWorker, "issue-1", note, note); ref != nil {
		t.Errorf("a worker's anchoredTo, related and claims links are no edges; refused: %v", ref)
	}
	for _, rel := range EdgeRels {
		l := []Link{{Rel: rel, Target: "issue-2"}}
		for _, ref := range []*Refusal{CheckEdgeEdits(RoleWorker, "issue-1", l, nil), CheckEdgeEdits(RoleWorker, "issue-1", nil, l)} {
			if ref == nil || ref.Reason != "HumanActRequired" {
				t.Errorf("a worker's %s edit: %v, want HumanActRequired", rel, ref)
			}
		}
	}
}
