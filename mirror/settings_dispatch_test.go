package mirror

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wardenhq/warden/gating"
)

// TestAgentLeaseSetting: agent_lease is a duration from 1m to 24h; anything
// else is one settings-invalid problem naming the key, and the last good
// value stays.
func TestAgentLeaseSetting(t *testing.T) {
	last := gating.DefaultSettings()
	last.AgentLease = 45 * time.Minute
	cases := []struct {
		file    string
		want    time.Duration
		problem string
	}{
		{"agent_lease: 2h\n", 2 * time.Hour, ""},
		{"agent_lease: 90m\n", 90 * time.Minute, ""},
		{"agent_lease: 1m\n", time.Minute, ""},
		{"agent_lease: 24h\n", 24 * time.Hour, ""},
		{"agent_lease: ~\n", gating.DefaultAgentLease, ""},
		{"agent_lease: 59s\n", 45 * time.Minute, "is 59s; it must be a duration from 1m to 24h"},
		{"agent_lease: 25h\n", 45 * time.Minute, "is 25h; it must be a duration from 1m"},
		{"agent_lease: 0s\n", 45 * time.Minute, "from 1m to 24h"},
		{"agent_lease: -1h\n", 45 * time.Minute, "from 1m to 24h"},
		{"agent_lease: 90\n", 45 * time.Minute, "bare number"},
		{"agent_lease: two hours\n", 45 * time.Minute, "not a duration"},
		{"agent_lease: true\n", 45 * time.Minute, "must be a duration"},
		{"agent_lease: [2h]\n", 45 * time.Minute, "must be a duration"},
	}
	for _, c := range cases {
		got, probs := ParseSettingsFile([]byte(c.file), last)
		if got.AgentLease != c.want {
			t.Errorf("%q: agent_lease %s, want %s (%+v)", c.file, got.AgentLease, c.want, probs)
		}
		switch {
		case c.problem == "" && len(probs) != 0:
			t.Errorf("%q: problems %+v, want none", c.file, probs)
		case c.problem != "" && (len(probs) != 1 || probs[0].Key != "agent_lease" || !strings.Contains(probs[0].String(), c.problem)):
			t.Errorf("%q: problems %+v, want one on agent_lease saying %q", c.file, probs, c.problem)
		}
	}
	if _, probs := ParseSettingsFile([]byte("agent_lease: 90\n"), last); len(probs) != 1 || !strings.Contains(probs[0].String(), "90m") {
		t.Errorf("a bare number suggests minutes: %+v", probs)
	}
}

// TestAgentAssigneesSetting: agent_assignees is validated as agents: is.
func TestAgentAssigneesSetting(t *testing.T) {
	got, probs := ParseSettingsFile([]byte("agent_assignees: [helper-bot, Helper-Bot, \"acme-agent[bot]\"]\n"), gating.DefaultSettings())
	if len(probs) != 0 || !slices.Equal(got.AgentAssignees, []string{"helper-bot", "acme-agent[bot]"}) {
		t.Fatalf("got %v, %+v", got.AgentAssignees, probs)
	}
	last := gating.DefaultSettings()
	last.AgentAssignees = []string{"kept"}
	got, probs = ParseSettingsFile([]byte("agent_assignees: [ok, not a login]\n"), last)
	if len(probs) != 1 || probs[0].Key != "agent_assignees" || !strings.Contains(probs[0].String(), "entry 2") || !slices.Equal(got.AgentAssignees, []string{"kept"}) {
		t.Fatalf("got %v, %+v", got.AgentAssignees, probs)
	}
	if _, probs := ParseSettingsFile([]byte("agent_assignees: copilot\n"), last); len(probs) != 1 || !strings.Contains(probs[0].String(), "list of logins") {
		t.Fatalf("a scalar: %+v", probs)
	}
}

// TestDispatchSettingsChanges: both keys take part in the settings diff (so
// an agent's push that changes them is held like any other change).
func TestDispatchSettingsChanges(t *testing.T) {
	a := gating.DefaultSettings()
	b := a
	b.AgentAssignees = []string{"Helper"}
	b.AgentLease = 90 * time.Minute
	var keys []string
	for _, c := range settingsDiff(a, b) {
		keys = append(keys, c.field)
	}
	if !slices.Equal(keys, []string{"agent_assignees", "agent_lease"}) {
		t.Fatalf("diff keys %v", keys)
	}
	c := a
	c.AgentAssignees = []string{"helper"}
	b.AgentLease = a.AgentLease
	if d := settingsDiff(b, c); len(d) != 0 {
		t.Fatalf("logins differing only in case are the same set: %+v", d)
	}
	if got := fmtDuration(90 * time.Minute); got != "1h30m" {
		t.Errorf("fmtDuration(90m) = %q", got)
	}
	if got := fmtDuration(time.Minute); got != "1m" {
		t.Errorf("fmtDuration(1m) = %q", got)
	}
}
