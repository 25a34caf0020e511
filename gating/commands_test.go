package gating

import (
	"strings"
	"testing"
	"time"
)

func TestParseCommand(t *testing.T) {
	cases := []struct {
		name    string
		body    string
		ok      bool   // a command line was found
		verb    string // Command.Verb
		refusal string // a substring of Command.Refusal; "" means well-formed
		line    int    // Command.Line (0: not checked)
	}{
		// Well-formed.
		{"status", "/backlog status", true, "status", "", 1},
		{"recheck", "/backlog recheck", true, "recheck", "", 1},
		{"admit", "/backlog admit", true, "admit", "", 1},
		{"unpark", "/backlog unpark", true, "unpark", "", 1},
		{"resolve", "/backlog resolve", true, "resolve", "", 1},
		{"after prose", "Looks good to me.\n\n/backlog admit\n\nThanks!", true, "admit", "", 3},
		{"right after a prose line", "Looks good.\n/backlog admit", true, "admit", "", 2},
		{"CRLF", "Looks good.\r\n/backlog admit\r\nThanks\r\n", true, "admit", "", 2},
		{"final newline", "/backlog status\n", true, "status", "", 1},
		{"in a list item is not at the line start", "- /backlog admit", false, "", "", 0},

		// No command line at all.
		{"empty", "", false, "", "", 0},
		{"prose mention", "please /backlog admit", false, "", "", 0},
		{"prose mention mid-line", "I ran `/backlog admit` yesterday", false, "", "", 0},
		{"in a code span at the line start", "`/backlog admit`", false, "", "", 0},
		{"backslash", `\/backlog admit`, false, "", "", 0},
		{"another word", "/backlogs admit", false, "", "", 0},
		{"glued", "/backlog-admit", false, "", "", 0},
		{"fullwidth slash", "／backlog admit", false, "", "", 0},
		{"Cyrillic a in the word", "/bаcklog admit", false, "", "", 0},
		{"zero-width space before", "\u200b/backlog admit", false, "", "", 0},
		{"fenced backticks", "```\n/backlog admit\n```", false, "", "", 0},
		{"fenced tildes", "~~~\n/backlog admit\n~~~", false, "", "", 0},
		{"fence with info string", "```sh\n/backlog admit\n```", false, "", "", 0},
		{"tilde fence with info string", "~~~ text {.x}\n/backlog admit\n~~~", false, "", "", 0},
		{"fence indented three", "   ```\n/backlog admit\n   ```", false, "", "", 0},
		{"unclosed fence runs to the end", "```\n/backlog admit", false, "", "", 0},
		{"short closing fence does not close", "````\n```\n/backlog admit\n````", false, "", "", 0},
		{"other fence char does not close", "~~~\n```\n/backlog admit\n~~~", false, "", "", 0},
		{"closing fence with text does not close", "```\n``` x\n/backlog admit\n```", false, "", "", 0},
		{"fence interrupts prose", "see:\n```\n/backlog admit\n```", false, "", "", 0},
		{"indented code after a blank line", "Example:\n\n    /backlog admit\n", false, "", "", 0},
		{"indented code by a tab", "\t/backlog admit", false, "", "", 0},
		{"indented four after prose", "prose\n    /backlog admit", false, "", "", 0},
		{"block quote", "> /backlog admit", false, "", "", 0},
		{"block quote indented", "  > /backlog admit", false, "", "", 0},
		{"block quote no space", ">/backlog admit", false, "", "", 0},
		{"nested quote", "> > /backlog admit", false, "", "", 0},
		{"lazy quote continuation", "> as you said\n/backlog admit", false, "", "", 0},
		{"HTML comment", "<!--\n/backlog admit\n-->", false, "", "", 0},
		{"inline HTML comment left open", "note <!-- hidden\n/backlog admit\n-->", false, "", "", 0},
		{"pre block", "<pre>\n/backlog admit\n</pre>", false, "", "", 0},
		{"issue template comment", "<!-- Write /backlog park ruling-owner=pm ruling-topic=x to park -->\nnothing here", false, "", "", 0},
		{"only a code fence line", "```", false, "", "", 0},

		// Outside those blocks again.
		{"after a closed fence", "```\n/backlog park\n```\n/backlog admit", true, "admit", "", 4},
		{"after a closed tilde fence", "~~~~\n~~~\n~~~~\n/backlog admit", true, "admit", "", 4},
		{"after a quote and a blank line", "> quoted\n\n/backlog admit", true, "admit", "", 3},
		{"after indented code", "\n    code\n/backlog admit", true, "admit", "", 3},
		{"after a closed HTML comment", "<!--\nhidden\n-->\n/backlog admit", true, "admit", "", 4},
		{"after a one-line HTML comment", "<!-- note -->\n/backlog admit", true, "admit", "", 2},
		{"after a closed pre", "<pre>\nx\n</pre>\n/backlog admit", true, "admit", "", 4},
		{"backtick info with a backtick is no fence", "``` a`b\n/backlog admit", true, "admit", "", 2},
		{"the fence's own language tag", "~~~ ```\n/backlog park\n~~~\n/backlog admit", true, "admit", "", 4},

		// The first command line counts.
		{"two commands", "/backlog admit\n/backlog unpark", true, "admit", "", 1},
		{"refused first, good second", "/backlog Admit\n/backlog admit", true, "Admit", "lowercase", 1},
		{"quoted first, real second", "> /backlog unpark\n\n/backlog admit", true, "admit", "", 3},

		// Refused: a command line that is not exactly a command.
		{"no verb", "/backlog", true, "", "no verb", 1},
		{"no verb, trailing space", "/backlog ", true, "", "no verb", 1},
		{"unknown verb", "/backlog approve", true, "approve", "unknown verb", 1},
		{"uppercase verb", "/backlog ADMIT", true, "ADMIT", "lowercase", 1},
		{"capitalised word", "/Backlog admit", true, "admit", "lowercase", 1},
		{"uppercase word", "/BACKLOG admit", true, "admit", "lowercase", 1},
		{"trailing spaces", "/backlog admit  ", true, "admit", "whitespace", 1},
		{"trailing tab", "/backlog admit\t", true, "admit", "whitespace", 1},
		{"trailing spaces before CRLF", "/backlog admit \r\nok", true, "admit", "whitespace", 1},
		{"indented one space", " /backlog admit", true, "admit", "indented", 1},
		{"indented three spaces", "   /backlog admit", true, "admit", "indented", 1},
		{"two spaces", "/backlog  admit", true, "admit", "single spaces", 1},
		{"tab separator", "/backlog\tadmit", true, "admit", "plain spaces", 1},
		{"no-break space separator", "/backlog\u00a0admit", true, "admit", "plain spaces", 1},
		{"arguments to admit", "/backlog admit now", true, "admit", "takes no arguments", 1},
		{"arguments to status", "/backlog status please", true, "status", "takes no arguments", 1},
		{"Cyrillic a in the verb", "/backlog аdmit", true, "аdmit", "unknown verb", 1},
		{"zero-width space in the verb", "/backlog ad\u200bmit", true, "ad\u200bmit", "unknown verb", 1},
		{"verb glued to punctuation", "/backlog admit.", true, "admit.", "unknown verb", 1},
	}
	for _, c := range cases {
		got, ok := ParseCommand(c.body)
		if ok != c.ok {
			t.Errorf("%s: found %v, want %v (%+v)", c.name, ok, c.ok, got)
			continue
		}
		if !ok {
			if got != (Command{}) {
				t.Errorf("%s: no command line but %+v", c.name, got)
			}
			continue
		}
		if got.Verb != c.verb {
			t.Errorf("%s: verb %q, want %q", c.name, got.Verb, c.verb)
		}
		if c.refusal == "" && got.Refused() {
			t.Errorf("%s: refused %q", c.name, got.Refusal)
		}
		if c.refusal != "" && !strings.Contains(got.Refusal, c.refusal) {
			t.Errorf("%s: refusal %q, want it to say %q", c.name, got.Refusal, c.refusal)
		}
		if c.line != 0 && got.Line != c.line {
			t.Errorf("%s: line %d, want %d", c.name, got.Line, c.line)
		}
		if got.Verb != VerbPark && (got.RulingOwner != "" || got.RulingTopic != "" || got.Question != "") {
			t.Errorf("%s: park fields on %+v", c.name, got)
		}
		if got.PR != 0 {
			t.Errorf("%s: a pull request on %+v", c.name, got)
		}
	}
}

// TestParseCommandUndelivered: /backlog undelivered takes exactly one pull
// request, #<pr>; anything else is refused with a reason.
func TestParseCommandUndelivered(t *testing.T) {
	cases := []struct {
		name    string
		body    string
		refusal string // substring; "" means well-formed
		pr      int
	}{
		{"a pull request", "/backlog undelivered #12", "", 12},
		{"with a reason after it", "That PR only touched the docs.\n/backlog undelivered #7\nIt did not deliver this.", "", 7},
		{"CRLF", "/backlog undelivered #7\r\nok", "", 7},
		{"nine digits", "/backlog undelivered #123456789", "", 123456789},
		{"no argument", "/backlog undelivered", "names the pull request", 0},
		{"a bare number", "/backlog undelivered 12", "write the pull request as #12, with the hash sign", 0},
		{"a word", "/backlog undelivered last", `"last" is not a pull request`, 0},
		{"a URL", "/backlog undelivered https://github.com/acme/app/pull/12", "is not a pull request", 0},
		{"another repository's", "/backlog undelivered acme/app#12", "is not a pull request", 0},
		{"a hash alone", "/backlog undelivered #", "number is missing", 0},
		{"a sign", "/backlog undelivered #+12", "digits 0-9 only", 0},
		{"a negative", "/backlog undelivered #-12", "digits 0-9 only", 0},
		{"letters after", "/backlog undelivered #12a", "digits 0-9 only", 0},
		{"punctuation after", "/backlog undelivered #12.", "digits 0-9 only", 0},
		{"non-ASCII digits", "/backlog undelivered #١٢", "digits 0-9 only", 0},
		{"fullwidth hash", "/backlog undelivered ＃12", "is not a pull request", 0},
		{"zero", "/backlog undelivered #0", "numbered 0 or written with a leading zero", 0},
		{"a leading zero", "/backlog undelivered #012", "leading zero", 0},
		{"ten digits", "/backlog undelivered #1234567890", "at most 9 digits", 0},
		{"two pull requests", "/backlog undelivered #12 #13", "takes one pull request", 0},
		{"two spaces", "/backlog undelivered  #12", "single spaces", 0},
		{"trailing space", "/backlog undelivered #12 ", "whitespace", 0},
		{"uppercase verb", "/backlog Undelivered #12", "lowercase", 0},
	}
	for _, c := range cases {
		got, ok := ParseCommand(c.body)
		if !ok {
			t.Errorf("%s: no command line", c.name)
			continue
		}
		if c.refusal == "" {
			if got.Refused() || got.Verb != VerbUndelivered {
				t.Errorf("%s: %+v, want undelivered", c.name, got)
			}
		} else if !strings.Contains(got.Refusal, c.refusal) {
			t.Errorf("%s: refusal %q, want it to say %q", c.name, got.Refusal, c.refusal)
		}
		if got.PR != c.pr {
			t.Errorf("%s: pull request %d, want %d", c.name, got.PR, c.pr)
		}
		if got.RulingOwner != "" || got.RulingTopic != "" || got.Question != "" {
			t.Errorf("%s: park fields on %+v", c.name, got)
		}
	}
}

func TestParseCommandPark(t *testing.T) {
	cases := []struct {
		name                   string
		body                   string
		refusal                string // substring; "" means well-formed
		owner, topic, question string
	}{
		{"both fields", "/backlog park ruling-owner=pm ruling-topic=api-shape\nShould the API return 404 or 410?",
			"", "pm", "api-shape", "Should the API return 404 or 410?"},
		{"either order", "/backlog park ruling-topic=api-shape ruling-owner=alice\nWhich one?",
			"", "alice", "api-shape", "Which one?"},
		{"question before and after, trimmed", "Context first.\n\n/backlog park ruling-owner=pm ruling-topic=t\n\n  Then the question?  \n",
			"", "pm", "t", "Context first.\n\n\n  Then the question?"},
		{"CRLF question", "/backlog park ruling-owner=pm ruling-topic=t\r\nline one\r\nline two\r\n",
			"", "pm", "t", "line one\nline two"},
		{"question keeps code and quotes", "/backlog park ruling-owner=pm ruling-topic=t\n> they said\n```\n/backlog admit\n```",
			"", "pm", "t", "> they said\n```\n/backlog admit\n```"},
		{"no question", "/backlog park ruling-owner=pm ruling-topic=t", "", "pm", "t", ""},
		{"owner with a bot suffix and a topic with a slash", "/backlog park ruling-owner=octo[bot] ruling-topic=api/v2:shape",
			"", "octo[bot]", "api/v2:shape", ""},
		{"no fields", "/backlog park\nWhy?", "missing ruling-owner and ruling-topic", "", "", ""},
		{"missing topic", "/backlog park ruling-owner=pm\nWhy?", "missing ruling-topic", "", "", ""},
		{"missing owner", "/backlog park ruling-topic=x\nWhy?", "missing ruling-owner", "", "", ""},
		{"duplicate owner", "/backlog park ruling-owner=pm ruling-owner=bob ruling-topic=x", "ruling-owner is given twice", "", "", ""},
		{"duplicate topic, same value", "/backlog park ruling-topic=x ruling-owner=pm ruling-topic=x", "ruling-topic is given twice", "", "", ""},
		{"empty owner", "/backlog park ruling-owner= ruling-topic=x", "ruling-owner is empty", "", "", ""},
		{"empty topic", "/backlog park ruling-owner=pm ruling-topic=", "ruling-topic is empty", "", "", ""},
		{"unknown field", "/backlog park ruling-owner=pm ruling-topic=x priority=P0", `"priority" is not one of them`, "", "", ""},
		{"word without =", "/backlog park ruling-owner=pm ruling-topic=x now", `"now" is not a field`, "", "", ""},
		{"space in a value", "/backlog park ruling-owner=pm ruling-topic=two words", `"words" is not a field`, "", "", ""},
		{"= in a value", "/backlog park ruling-owner=pm ruling-topic=a=b", "may hold only", "", "", ""},
		{"comment closer in a value", "/backlog park ruling-owner=pm ruling-topic=x-->", "may hold only", "", "", ""},
		{"a mention in a value", "/backlog park ruling-owner=@alice ruling-topic=x", "may hold only", "", "", ""},
		{"non-ASCII value", "/backlog park ruling-owner=pm ruling-topic=café", "may hold only", "", "", ""},
		{"value too long", "/backlog park ruling-owner=pm ruling-topic=" + strings.Repeat("x", 101), "longer than 100", "", "", ""},
		{"uppercase field name", "/backlog park Ruling-Owner=pm ruling-topic=x", "not one of them", "", "", ""},
		{"colon instead of =", "/backlog park ruling-owner:pm ruling-topic:x", "is not a field", "", "", ""},
		{"two spaces between fields", "/backlog park ruling-owner=pm  ruling-topic=x", "single spaces", "", "", ""},
		{"trailing space", "/backlog park ruling-owner=pm ruling-topic=x ", "whitespace", "", "", ""},
	}
	for _, c := range cases {
		got, ok := ParseCommand(c.body)
		if !ok || got.Verb != VerbPark {
			t.Errorf("%s: %+v %v, want a park", c.name, got, ok)
			continue
		}
		if c.refusal == "" {
			if got.Refused() {
				t.Errorf("%s: refused %q", c.name, got.Refusal)
			}
		} else if !strings.Contains(got.Refusal, c.refusal) {
			t.Errorf("%s: refusal %q, want it to say %q", c.name, got.Refusal, c.refusal)
		}
		if got.RulingOwner != c.owner || got.RulingTopic != c.topic || got.Question != c.question {
			t.Errorf("%s: owner %q topic %q question %q; want %q %q %q", c.name, got.RulingOwner, got.RulingTopic, got.Question, c.owner, c.topic, c.question)
		}
	}
}

func TestParseCommandRefusalsAreShort(t *testing.T) {
	long := strings.Repeat("ä", 100)
	for _, body := range []string{"/backlog " + long, "/backlog admit " + long, "/backlog park ruling-owner=pm ruling-topic=x " + long} {
		c, ok := ParseCommand(body)
		if !ok || !c.Refused() {
			t.Fatalf("%q: %+v %v", body, c, ok)
		}
		if len(c.Refusal) > 300 || len(c.Verb) > 45 {
			t.Errorf("refusal of %d bytes, verb of %d: %q", len(c.Refusal), len(c.Verb), c.Refusal)
		}
		if !strings.Contains(c.Refusal, "…") {
			t.Errorf("the long word is not cut: %q", c.Refusal)
		}
	}
}

func TestCommandRule(t *testing.T) {
	cases := []struct {
		verb               string
		needsHuman, triage bool
	}{
		{VerbStatus, false, false},
		{VerbRecheck, false, true},
		{VerbAdmit, true, true},
		{VerbUnpark, true, true},
		{VerbPark, true, true},
		{VerbResolve, true, true},
		{VerbUndelivered, true, true},
		{VerbDispatch, true, true},
		{"approve", true, true}, // unknown: fail closed
		{"", true, true},
		{"Status", true, true},
	}
	for _, c := range cases {
		h, tr := CommandRule(c.verb)
		if h != c.needsHuman || tr != c.triage {
			t.Errorf("%q: human %v triage %v, want %v %v", c.verb, h, tr, c.needsHuman, c.triage)
		}
	}
	for _, v := range CommandVerbs {
		c, ok := ParseCommand("/backlog " + v)
		switch v {
		case VerbPark:
			continue
		case VerbUndelivered:
			c, ok = ParseCommand("/backlog " + v + " #12")
		case VerbDispatch:
			c, ok = ParseCommand("/backlog " + v + " @Copilot")
		}
		if !ok || c.Refused() || c.Verb != v {
			t.Errorf("%s: %+v %v", v, c, ok)
		}
	}
}

func TestRateLimited(t *testing.T) {
	now := time.Date(2026, 9, 6, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		name string
		last time.Time
		want bool
	}{
		{"never", time.Time{}, false},
		{"just now", now, true},
		{"59s ago", now.Add(-59 * time.Second), true},
		{"a minute ago", now.Add(-time.Minute), false},
		{"an hour ago", now.Add(-time.Hour), false},
		{"in the future (skew)", now.Add(30 * time.Second), true},
	}
	for _, c := range cases {
		if got := RateLimited(c.last, now); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
