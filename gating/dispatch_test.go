package gating

import (
	"strings"
	"testing"
	"time"
)

func TestDispatchedAgent(t *testing.T) {
	deployment := []string{"robo-1"}
	repo := []string{"Helper-Bot", "acme-agent[bot]"}
	cases := []struct {
		login, typ string
		want       bool
	}{
		{"Copilot", "User", true},
		{"copilot", "", true},
		{"COPILOT-SWE-AGENT", "User", true},
		{"copilot-swe-agent[bot]", "Bot", true},
		{"Robo-1", "User", true},           // WARDEN_AGENTS, case-insensitively
		{"helper-bot", "User", true},       // agent_assignees
		{"ACME-AGENT[BOT]", "User", true},  // agent_assignees, a bot login
		{"renovate[bot]", "Bot", true},     // any Bot assignee
		{"someone", "bot", true},           // user type, case-insensitively
		{"alice", "User", false},           // a person
		{"copilot-swe", "User", false},     // not one of GitHub's logins
		{"robo-10", "User", false},         // whole logins only
		{"", "Bot", false},                 // nobody
		{"helper-bot[bot]", "User", false}, // another account than the one named
	}
	for _, c := range cases {
		if got := DispatchedAgent(c.login, c.typ, deployment, repo); got != c.want {
			t.Errorf("DispatchedAgent(%q, %q) = %v, want %v", c.login, c.typ, got, c.want)
		}
	}
}

func TestDispatchOwner(t *testing.T) {
	cases := []struct {
		login string
		n     int
		want  string
	}{
		{"Copilot", 7, "copilot/issue-7"},
		{"copilot-swe-agent[bot]", 7, "copilot/issue-7"},
		{"Robo-1", 12, "robo-1/issue-12"},
		{"acme-agent[bot]", 3, "acme-agent/issue-3"},
		{"odd.name", 3, "odd-name/issue-3"},
		{"-x", 3, "agent--x/issue-3"},
	}
	for _, c := range cases {
		got := DispatchOwner(c.login, c.n)
		if got != c.want {
			t.Errorf("DispatchOwner(%q, %d) = %q, want %q", c.login, c.n, got, c.want)
		}
		// The ledger's owner rules: a worker named DispatchAgentName owns it.
		name := DispatchAgentName(c.login)
		if strings.Contains(name, "/") || !OwnedBy(got, name) {
			t.Errorf("owner %q is not owned by the worker %q", got, name)
		}
		if !IsDispatchOwner(got, c.login, c.n) || IsDispatchOwner(got, c.login, c.n+1) {
			t.Errorf("IsDispatchOwner(%q, %q) disagrees with DispatchOwner", got, c.login)
		}
	}
}

func TestDispatchRefusalReason(t *testing.T) {
	cases := []struct{ reason, exclusion, want string }{
		{"not-ready", ExAwaitingAdmission, ExAwaitingAdmission},
		{"not-ready", ExHeld, ExHeld},
		{"ForeignRegion", "", ExForeignRegion},
		{"missing", "", "missing"},
		{"contended", "", ExHeld},
		{"timeout", "", "timeout"},
		{"", "", "not-claimable"},
	}
	for _, c := range cases {
		if got := DispatchRefusalReason(c.reason, c.exclusion); got != c.want {
			t.Errorf("DispatchRefusalReason(%q, %q) = %q, want %q", c.reason, c.exclusion, got, c.want)
		}
	}
}

func TestDispatchRefusedDetail(t *testing.T) {
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	got := DispatchRefusedDetail("Copilot", 7, ExAwaitingAdmission, "", at, false)
	for _, want := range []string{`"Copilot"`, "#7", "2026-12-01T10:00:00Z", "(awaiting-admission)", "warden removed the assignee", ResolveHint(ExAwaitingAdmission)} {
		if !strings.Contains(got, want) {
			t.Errorf("detail %q lacks %q", got, want)
		}
	}
	if strings.Contains(got, "\n") {
		t.Errorf("detail %q is more than one line", got)
	}
	dry := DispatchRefusedDetail("Copilot", 7, ExHeld, "held by w/1", at, true)
	if !strings.Contains(dry, "would be removed") || !strings.Contains(dry, "held: held by w/1") {
		t.Errorf("dry-run detail %q", dry)
	}
	if ResolveHint(CodeAgentDispatchRefused) == genericHint {
		t.Error("agent-dispatch-refused has no hint of its own")
	}
}

func TestDispatchOutcomeMarkerParses(t *testing.T) {
	for _, result := range []string{"released", "complete"} {
		body := DispatchOutcomeMarker("issue-7", "copilot/issue-7", 3, result)
		m, st := ParseMarker(body, "issue-7")
		if st != MarkerValid || m.Kind != KindOutcome || m.Owner != "copilot/issue-7" || m.Fence != 3 || m.Result != result {
			t.Fatalf("ParseMarker(%q) = %+v, %v", body, m, st)
		}
	}
}
