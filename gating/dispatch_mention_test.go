package gating

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestMentions(t *testing.T) {
	cases := []struct {
		name, body string
		want       []string
	}{
		{"one", "@Copilot please fix this", []string{"Copilot"}},
		{"in a sentence", "Could @copilot take it?", []string{"copilot"}},
		{"bot suffix", "cc @copilot-swe-agent[bot].", []string{"copilot-swe-agent[bot]"}},
		{"twice, once listed", "@Copilot and @COPILOT", []string{"Copilot"}},
		{"two logins", "@alice, @bob-2: look", []string{"alice", "bob-2"}},
		{"in parentheses", "(@Copilot)", []string{"Copilot"}},
		{"an e-mail address", "write to me@Copilot.com", nil},
		{"an underscore before", "x_@Copilot", nil},
		{"a path", "see docs/@Copilot", nil},
		{"longer login", "@Copilotx", []string{"Copilotx"}},
		{"underscore after", "@Copilot_x", nil},
		{"inline code", "run `@Copilot` by hand", nil},
		{"double backtick code", "run ``a ` @Copilot`` later", nil},
		{"unclosed backtick", "a ` @Copilot", []string{"Copilot"}},
		{"fenced code", "```\n@Copilot\n```\n", nil},
		{"after a fence", "```\nx\n```\n@Copilot", []string{"Copilot"}},
		{"indented code", "text\n\n    @Copilot", nil},
		{"a quote", "> @Copilot said\n", nil},
		{"an HTML comment", "<!-- @Copilot -->", nil},
		{"after an HTML comment", "<!-- x --> @Copilot", []string{"Copilot"}},
		{"an at sign alone", "@ Copilot", nil},
		{"a double at", "@@Copilot", nil},
		{"a hyphen start", "@-Copilot", nil},
		{"non-ASCII after", "@Copilotç", nil},
	}
	for _, c := range cases {
		if got := Mentions(c.body); !slices.Equal(got, c.want) {
			t.Errorf("%s: Mentions(%q) = %q, want %q", c.name, c.body, got, c.want)
		}
	}
}

func TestDispatchMentionDetail(t *testing.T) {
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	d := DispatchMentionDetail("Copilot", "alice", 7, ExAwaitingAdmission, "", at)
	for _, want := range []string{`"alice" mentioned "Copilot" on issue #7`, "2026-12-01T10:00:00Z", "(" + ExAwaitingAdmission + ")", "check run fails", ResolveHint(ExAwaitingAdmission)} {
		if !strings.Contains(d, want) {
			t.Errorf("detail %q lacks %q", d, want)
		}
	}
	if strings.Contains(d, "removed") {
		t.Errorf("detail %q speaks of a removal; a mention has no assignee", d)
	}
}
