package gating

import "testing"

func TestHumanAct(t *testing.T) {
	agents := []string{"worker-7", "Deploy-Bot"}
	cases := []struct {
		a    Actor
		want bool
		why  string
	}{
		{Actor{"alice", "User", "maintain", true}, true, ""},
		{Actor{"alice", "User", "triage", true}, true, ""},
		{Actor{"alice", "User", "admin", true}, true, ""},
		{Actor{"bob", "User", "read", true}, false, "below triage"},
		{Actor{"bob", "User", "none", true}, false, "below triage"},
		{Actor{"carol", "User", "", false}, false, "permission lookup failed"},
		{Actor{"renovate[bot]", "Bot", "write", true}, false, "an account of type Bot"},
		{Actor{"acme", "Organization", "admin", true}, false, "an account of type Organization"},
		{Actor{"ghost", "User", "admin", true}, false, "the ghost account"},
		{Actor{"deploy-bot", "User", "admin", true}, false, "a configured agent"},
	}
	for _, c := range cases {
		ok, why := HumanAct(c.a, agents)
		if ok != c.want || why != c.why {
			t.Errorf("%+v: got %v %q, want %v %q", c.a, ok, why, c.want, c.why)
		}
	}
}

func TestJudge(t *testing.T) {
	agents := []string{"worker-7"}
	user := func(login, role string, known bool) Actor { return Actor{login, "User", role, known} }
	cases := []struct {
		name   string
		id     Identity
		want   Standing
		why    string
		role   bool // NeedsRole
		shared bool // SharedIdentity
	}{
		{"a maintainer", Identity{Actor: user("alice", "maintain", true), RecordedKnown: true}, StandingHuman, "", true, false},
		{"a triager", Identity{Actor: user("alice", "triage", true), RecordedKnown: true}, StandingHuman, "", true, false},
		{"a reader", Identity{Actor: user("bob", "read", true), RecordedKnown: true}, StandingPerson, "below triage", true, false},
		{"the role lookup failed", Identity{Actor: user("carol", "", false), RecordedKnown: true}, StandingUnknown, "permission lookup failed", true, false},
		{"the recorded-agent lookup failed", Identity{Actor: user("dave", "admin", true)}, StandingUnknown, "who-is-who lookup failed", false, false},
		{"warden itself", Identity{Actor: Actor{"warden[bot]", "Bot", "", false}, Warden: true, RecordedKnown: true}, StandingWarden, "warden itself", false, false},
		{"warden, even unlooked-up", Identity{Actor: Actor{"warden[bot]", "Bot", "", false}, Warden: true}, StandingWarden, "warden itself", false, false},
		{"a Bot", Identity{Actor: Actor{"renovate[bot]", "Bot", "write", true}, RecordedKnown: true}, StandingAgent, "an account of type Bot", false, false},
		{"a Bot when the lookup failed", Identity{Actor: Actor{"renovate[bot]", "Bot", "", false}}, StandingUnknown, "who-is-who lookup failed", false, false},
		{"a configured agent, any case", Identity{Actor: user("Worker-7", "admin", true), RecordedKnown: true}, StandingAgent, "a configured agent", false, false},
		{"a recorded agent acting as a User", Identity{Actor: user("pm-agent", "admin", true), Recorded: true, RecordedKnown: true}, StandingAgent,
			"a login seen acting as both an agent and a human (shared-identity)", false, true},
		{"a recorded agent of type Bot", Identity{Actor: Actor{"x[bot]", "Bot", "", false}, Recorded: true, RecordedKnown: true}, StandingAgent,
			"a login recorded as an agent (it posted backlog-worker markers)", false, false},
		{"a configured agent also recorded, acting as a User", Identity{Actor: user("worker-7", "", false), Recorded: true, RecordedKnown: true}, StandingAgent,
			"a login seen acting as both an agent and a human (shared-identity)", false, true},
		{"an organization", Identity{Actor: Actor{"acme", "Organization", "admin", true}, RecordedKnown: true}, StandingPerson, "an account of type Organization", false, false},
		{"ghost", Identity{Actor: user("ghost", "admin", true), RecordedKnown: true}, StandingPerson, "the ghost account", false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, why := Judge(c.id, agents)
			if got != c.want || why != c.why {
				t.Errorf("Judge: %v %q, want %v %q", got, why, c.want, c.why)
			}
			if r := NeedsRole(c.id, agents); r != c.role {
				t.Errorf("NeedsRole: %v, want %v", r, c.role)
			}
			if s := SharedIdentity(c.id); s != c.shared {
				t.Errorf("SharedIdentity: %v, want %v", s, c.shared)
			}
		})
	}
}

func TestHasWrite(t *testing.T) {
	for role, want := range map[string]bool{"write": true, "maintain": true, "admin": true, "triage": false, "read": false, "none": false, "": false} {
		if HasWrite(role) != want {
			t.Errorf("HasWrite(%q) = %v", role, !want)
		}
	}
}
