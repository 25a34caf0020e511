package ghsim

import (
	"context"
	"testing"
)

func TestCollaboratorPermission(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	gh, _ := f.app.Installation(f.inst.ID)
	for login, role := range map[string]string{"rd": "read", "tr": "triage", "wr": "write", "mt": "maintain", "ad": "admin"} {
		f.sim.AddUser(login, TypeUser)
		f.sim.SetRole(f.repo, login, role)
	}
	f.sim.AddUser("stranger", TypeUser)
	f.sim.AddUser("agent-7[bot]", TypeBot)
	f.sim.SetRole(f.repo, "agent-7[bot]", "write")
	for _, c := range []struct{ login, permission, role string }{
		{"acme", "admin", "admin"}, // the owner account
		{"ad", "admin", "admin"},
		{"mt", "write", "maintain"},
		{"wr", "write", "write"},
		{"tr", "read", "triage"},
		{"rd", "read", "read"},
		{"agent-7[bot]", "write", "write"},
		{"stranger", "read", "read"}, // anyone reads a public repository
	} {
		p, resp, err := gh.Repositories.GetPermissionLevel(ctx, "acme", "app", c.login)
		if err != nil || resp.StatusCode != 200 || p.GetPermission() != c.permission || p.GetRoleName() != c.role ||
			p.GetUser().GetLogin() != c.login {
			t.Fatalf("%s: %+v %v, want %s/%s", c.login, p, err, c.permission, c.role)
		}
	}
	_, obj, _, _ := call(t, gh, "GET", "repos/acme/app/collaborators/tr/permission", nil)
	if digS(obj, "user.role_name") != "triage" || dig(obj, "user.permissions.triage") != true || dig(obj, "user.permissions.push") != false {
		t.Fatalf("user of the answer: %v", dig(obj, "user"))
	}
	_, _, err := gh.Repositories.GetPermissionLevel(ctx, "acme", "app", "nobody-at-all")
	errResp(t, err, 404)

	// A private repository: a user without a role has none.
	f.sim.Locked(func() { f.repo.Private = true })
	p, _, err := gh.Repositories.GetPermissionLevel(ctx, "acme", "app", "stranger")
	if err != nil || p.GetPermission() != "none" || p.GetRoleName() != "none" {
		t.Fatalf("private, no role: %+v %v", p, err)
	}
	// Collaborator check: 204 or 404.
	if ok, _, err := gh.Repositories.IsCollaborator(ctx, "acme", "app", "TR"); !ok || err != nil {
		t.Fatalf("tr is a collaborator: %v %v", ok, err)
	}
	if ok, _, _ := gh.Repositories.IsCollaborator(ctx, "acme", "app", "stranger"); ok {
		t.Fatal("stranger is a collaborator")
	}
}
