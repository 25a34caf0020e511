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
