package gating

import (
	"strings"
	"testing"
)

func TestParseCommandDispatch(t *testing.T) {
	cases := []struct {
		name, body, refusal, agent string
	}{
		{"the coding agent", "/backlog dispatch @Copilot", "", "Copilot"},
		{"an app account", "/backlog dispatch @copilot-swe-agent[bot]", "", "copilot-swe-agent[bot]"},
		{"a hyphenated login", "/backlog dispatch @my-agent-2", "", "my-agent-2"},
		{"a CRLF line", "/backlog dispatch @Copilot\r\nplease", "", "Copilot"},
		{"39 characters", "/backlog dispatch @" + strings.Repeat("a", 39), "", strings.Repeat("a", 39)},
		{"no agent", "/backlog dispatch", "names the agent", ""},
		{"no at sign", "/backlog dispatch Copilot", "with the at sign", ""},
		{"an at sign alone", "/backlog dispatch @", "missing after the at sign", ""},
		{"two agents", "/backlog dispatch @Copilot @other", "takes one agent", ""},
		{"40 characters", "/backlog dispatch @" + strings.Repeat("a", 40), "at most 39", ""},
		{"a leading hyphen", "/backlog dispatch @-agent", "hyphen", ""},
		{"a trailing hyphen", "/backlog dispatch @agent-", "hyphen", ""},
		{"a double hyphen", "/backlog dispatch @a--b", "hyphen", ""},
		{"an underscore", "/backlog dispatch @my_agent", "only ASCII letters", ""},
		{"a Cyrillic letter", "/backlog dispatch @Сopilot", "only ASCII letters", ""},
		{"a bot suffix alone", "/backlog dispatch @[bot]", "missing", ""},
		{"a bracket", "/backlog dispatch @agent[x]", "only ASCII letters", ""},
		{"two spaces", "/backlog dispatch  @Copilot", "single spaces", ""},
		{"trailing space", "/backlog dispatch @Copilot ", "whitespace", ""},
		{"uppercase verb", "/backlog Dispatch @Copilot", "lowercase", ""},
	}
	for _, c := range cases {
		got, ok := ParseCommand(c.body)
		if !ok {
			t.Errorf("%s: no command line", c.name)
			continue
		}
		if c.refusal == "" {
			if got.Refused() || got.Verb != VerbDispatch {
				t.Errorf("%s: %+v, want dispatch", c.name, got)
			}
		} else if !strings.Contains(got.Refusal, c.refusal) {
			t.Errorf("%s: refusal %q, want it to say %q", c.name, got.Refusal, c.refusal)
		}
		if got.Agent != c.agent {
			t.Errorf("%s: agent %q, want %q", c.name, got.Agent, c.agent)
		}
	}
	// The argument belongs to dispatch only.
	if c, _ := ParseCommand("/backlog admit @Copilot"); !c.Refused() || c.Agent != "" {
		t.Errorf("admit with an agent: %+v, want refused", c)
	}
}
