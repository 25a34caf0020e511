package gating

import "testing"

func TestRoleRules(t *testing.T) {
	for _, c := range []struct {
		owner, token string
		want         bool
	}{{"w1/run-1", "w1", true}, {"w1", "w1", false}, {"w10/run", "w1", false}, {"w2/run", "w1", false}, {"/run", "", false}} {
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
