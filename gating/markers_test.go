package gating

import (
	"strings"
	"testing"
	"time"
)

const mkrExample = "<!-- backlog-worker: claim item=issue-2101 owner=backlog-worker/7f3a region=local fence=41 at=2026-09-06T00:12:44Z -->"

func TestParseMarker(t *testing.T) {
	at := time.Date(2026, 9, 6, 0, 12, 44, 0, time.UTC)
	claim := Marker{Kind: KindClaim, Item: "issue-2101", Owner: "backlog-worker/7f3a", Region: "local", Fence: 41, At: at}
	cases := []struct {
		name   string
		body   string
		expect ItemID
		status MarkerStatus
		want   *Marker // for valid markers: every field but Line
		reason string  // for malformed: a substring of Reason
	}{
		// The contract's two examples, byte for byte.
		{"contract claim", mkrExample + "\nClaimed `issue-2101`.", "issue-2101", MarkerValid, &claim, ""},
		{"contract outcome", "<!-- backlog-worker: outcome item=issue-2101 owner=backlog-worker/7f3a fence=41 result=complete -->\nMerged.", "issue-2101", MarkerValid,
			&Marker{Kind: KindOutcome, Item: "issue-2101", Owner: "backlog-worker/7f3a", Fence: 41, Result: "complete"}, ""},
		{"claim alone, no newline", mkrExample, "issue-2101", MarkerValid, &claim, ""},
		{"CRLF first line", mkrExample + "\r\nprose\r\n", "issue-2101", MarkerValid, &claim, ""},
		{"fields in another order", "<!-- backlog-worker: claim at=2026-09-06T00:12:44Z fence=41 region=local owner=backlog-worker/7f3a item=issue-2101 -->", "issue-2101", MarkerValid, &claim, ""},
		{"fractional seconds", strings.Replace(mkrExample, "44Z", "44.250Z", 1), "issue-2101", MarkerValid,
			&Marker{Kind: KindClaim, Item: "issue-2101", Owner: "backlog-worker/7f3a", Region: "local", Fence: 41, At: at.Add(250 * time.Millisecond)}, ""},
		{"takeover form", strings.Replace(mkrExample, " -->", " prior-owner=backlog-worker/11aa prior-fence=40 -->", 1), "issue-2101", MarkerValid,
			&Marker{Kind: KindClaim, Item: "issue-2101", Owner: "backlog-worker/7f3a", Region: "local", Fence: 41, At: at, PriorOwner: "backlog-worker/11aa", PriorFence: 40}, ""},
		{"no expectation accepts any item", mkrExample, "", MarkerValid, &claim, ""},
		{"park", "<!-- backlog-warden: park item=issue-5 attempts=3 ruling-owner=pm ruling-topic=poison-threshold -->\nq", "issue-5", MarkerValid,
			&Marker{Kind: KindPark, Item: "issue-5", Attempts: 3, RulingOwner: "pm", RulingTopic: "poison-threshold"}, ""},
		{"park with zero attempts", "<!-- backlog-warden: park item=issue-5 attempts=0 ruling-owner=alice ruling-topic=manual-park -->", "issue-5", MarkerValid,
			&Marker{Kind: KindPark, Item: "issue-5", RulingOwner: "alice", RulingTopic: "manual-park"}, ""},
		{"report", "<!-- backlog-warden: report item=issue-5 -->\n- list", "issue-5", MarkerValid, &Marker{Kind: KindReport, Item: "issue-5"}, ""},

		// Not markers: the prefix must open the body, byte for byte.
		{"prose quoting a marker", "As agreed:\n" + mkrExample, "issue-2101", MarkerNone, nil, ""},
		{"leading space", " " + mkrExample, "issue-2101", MarkerNone, nil, ""},
		{"leading newline", "\n" + mkrExample, "issue-2101", MarkerNone, nil, ""},
		{"block quote", "> " + mkrExample, "issue-2101", MarkerNone, nil, ""},
		{"BOM", "\uFEFF" + mkrExample, "issue-2101", MarkerNone, nil, ""},
		{"no space after claim", "<!-- backlog-worker: claim-item=issue-2101 -->", "issue-2101", MarkerNone, nil, ""},
		{"claim at end of body", "<!-- backlog-worker: claim", "issue-2101", MarkerNone, nil, ""},
		{"other verb", "<!-- backlog-worker: release item=issue-2101 -->", "issue-2101", MarkerNone, nil, ""},
		{"upper case", strings.ToUpper(mkrExample), "issue-2101", MarkerNone, nil, ""},
		{"empty", "", "issue-2101", MarkerNone, nil, ""},
		{"plain comment", "LGTM", "issue-2101", MarkerNone, nil, ""},

		// Malformed: a marker prefix, then a broken grammar.
		{"names another item", mkrExample, "issue-7", MarkerMalformed, nil, "another item"},
		{"item not an id", strings.Replace(mkrExample, "issue-2101", "issue-02101", 1), "", MarkerMalformed, nil, "not an item id"},
		{"missing at", strings.Replace(mkrExample, " at=2026-09-06T00:12:44Z", "", 1), "issue-2101", MarkerMalformed, nil, "missing key at"},
		{"missing region", strings.Replace(mkrExample, " region=local", "", 1), "issue-2101", MarkerMalformed, nil, "missing key region"},
		{"unknown key", strings.Replace(mkrExample, " -->", " color=blue -->", 1), "issue-2101", MarkerMalformed, nil, "unknown key"},
		{"outcome with at", "<!-- backlog-worker: outcome item=issue-1 owner=w fence=1 result=released at=2026-09-06T00:12:44Z -->", "issue-1", MarkerMalformed, nil, "unknown key"},
		{"duplicate key", strings.Replace(mkrExample, " -->", " fence=42 -->", 1), "issue-2101", MarkerMalformed, nil, "appears twice"},
		{"two spaces", strings.Replace(mkrExample, " owner", "  owner", 1), "issue-2101", MarkerMalformed, nil, "exactly one space"},
		{"field without =", strings.Replace(mkrExample, " region=local", " local", 1), "issue-2101", MarkerMalformed, nil, "not key=value"},
		{"empty value", strings.Replace(mkrExample, "region=local", "region=", 1), "issue-2101", MarkerMalformed, nil, "empty value"},
		{"fence zero", strings.Replace(mkrExample, "fence=41", "fence=0", 1), "issue-2101", MarkerMalformed, nil, "positive integer"},
		{"fence leading zero", strings.Replace(mkrExample, "fence=41", "fence=041", 1), "issue-2101", MarkerMalformed, nil, "leading zeros"},
		{"fence negative", strings.Replace(mkrExample, "fence=41", "fence=-41", 1), "issue-2101", MarkerMalformed, nil, "positive integer"},
		{"fence overflows", strings.Replace(mkrExample, "fence=41", "fence=9223372036854775808", 1), "issue-2101", MarkerMalformed, nil, "positive integer"},
		{"fence plus", strings.Replace(mkrExample, "fence=41", "fence=+41", 1), "issue-2101", MarkerMalformed, nil, "positive integer"},
		{"at with offset", strings.Replace(mkrExample, "44Z", "44+02:00", 1), "issue-2101", MarkerMalformed, nil, "UTC ISO 8601"},
		{"at without seconds", strings.Replace(mkrExample, "00:12:44Z", "00:12Z", 1), "issue-2101", MarkerMalformed, nil, "UTC ISO 8601"},
		{"at month 13", strings.Replace(mkrExample, "2026-09-06", "2026-13-06", 1), "issue-2101", MarkerMalformed, nil, "UTC ISO 8601"},
		{"at lower-case z", strings.Replace(mkrExample, "44Z", "44z", 1), "issue-2101", MarkerMalformed, nil, "UTC ISO 8601"},
		{"at ten fraction digits", strings.Replace(mkrExample, "44Z", "44.1234567890Z", 1), "issue-2101", MarkerMalformed, nil, "UTC ISO 8601"},
		{"at empty fraction", strings.Replace(mkrExample, "44Z", "44.Z", 1), "issue-2101", MarkerMalformed, nil, "UTC ISO 8601"},
		{"bad result", "<!-- backlog-worker: outcome item=issue-1 owner=w fence=1 result=done -->", "issue-1", MarkerMalformed, nil, "complete, released or parked"},
		{"takeover half", strings.Replace(mkrExample, " -->", " prior-owner=w/1 -->", 1), "issue-2101", MarkerMalformed, nil, "both prior-owner and prior-fence"},
		{"prior fence zero", strings.Replace(mkrExample, " -->", " prior-owner=w/1 prior-fence=0 -->", 1), "issue-2101", MarkerMalformed, nil, "positive integer"},
		{"no closing", strings.TrimSuffix(mkrExample, " -->"), "issue-2101", MarkerMalformed, nil, "does not end"},
		{"closing on the next line", strings.TrimSuffix(mkrExample, " -->") + "\n-->", "issue-2101", MarkerMalformed, nil, "does not end"},
		{"trailing space", mkrExample + " ", "issue-2101", MarkerMalformed, nil, "does not end"},
		{"closing without space", strings.Replace(mkrExample, "44Z -->", "44Z-->", 1), "issue-2101", MarkerMalformed, nil, "does not end"},
		{"no fields", "<!-- backlog-worker: claim -->", "issue-2101", MarkerMalformed, nil, "no fields"},
		{"prefix only", "<!-- backlog-worker: claim \nx", "issue-2101", MarkerMalformed, nil, "no fields"},
		{"tab in a value", strings.Replace(mkrExample, "region=local", "region=lo\tcal", 1), "issue-2101", MarkerMalformed, nil, "printable ASCII"},
		{"non-ASCII owner", strings.Replace(mkrExample, "7f3a", "7f3é", 1), "issue-2101", MarkerMalformed, nil, "printable ASCII"},
		{"invalid UTF-8", strings.Replace(mkrExample, "7f3a", "7f3\xff", 1), "issue-2101", MarkerMalformed, nil, "printable ASCII"},
		{"NUL", strings.Replace(mkrExample, "7f3a", "7f3\x00", 1), "issue-2101", MarkerMalformed, nil, "printable ASCII"},
		{"lone CR inside", strings.Replace(mkrExample, " owner", "\r owner", 1), "issue-2101", MarkerMalformed, nil, "printable ASCII"},
		{"value ends the comment", strings.Replace(mkrExample, "region=local", "region=a-->b", 1), "issue-2101", MarkerMalformed, nil, "end the HTML comment"},
		{"too long", strings.Replace(mkrExample, "region=local", "region="+strings.Repeat("r", MaxMarkerLine), 1), "issue-2101", MarkerMalformed, nil, "longer than"},
		{"park attempts leading zero", "<!-- backlog-warden: park item=issue-5 attempts=03 ruling-owner=pm ruling-topic=t -->", "issue-5", MarkerMalformed, nil, "non-negative integer"},
		{"report with extra key", "<!-- backlog-warden: report item=issue-5 fence=1 -->", "issue-5", MarkerMalformed, nil, "unknown key"},
	}
	for _, c := range cases {
		m, st := ParseMarker(c.body, c.expect)
		if st != c.status {
			t.Errorf("%s: status %s (%s), want %s", c.name, st, m.Reason, c.status)
			continue
		}
		switch st {
		case MarkerValid:
			got := m
			got.Line = ""
			if !mkrEqual(got, *c.want) || m.Reason != "" {
				t.Errorf("%s: got %+v, want %+v", c.name, got, *c.want)
			}
			if first, _, _ := strings.Cut(c.body, "\n"); m.Line != strings.TrimSuffix(first, "\r") {
				t.Errorf("%s: line %q", c.name, m.Line)
			}
		case MarkerMalformed:
			if !strings.Contains(m.Reason, c.reason) {
				t.Errorf("%s: reason %q, want it to mention %q", c.name, m.Reason, c.reason)
			}
			if m.Kind == "" || m.Line == "" {
				t.Errorf("%s: a malformed marker keeps its kind and line: %+v", c.name, m)
			}
		case MarkerNone:
			if m != (Marker{}) {
				t.Errorf("%s: not a marker, yet %+v", c.name, m)
			}
		}
	}
}

// mkrEqual compares markers, times by instant.
func mkrEqual(a, b Marker) bool {
	if !a.At.Equal(b.At) {
		return false
	}
	a.At, b.At = time.Time{}, time.Time{}
	return a == b
}

func TestClaimMarker(t *testing.T) {
	at := time.Date(2026, 9, 6, 2, 12, 44, 0, time.FixedZone("CEST", 2*3600))
	cases := []struct {
		name  string
		got   string
		want  string
		prior *PriorClaim
	}{
		{"the contract's example", ClaimMarker("issue-2101", "backlog-worker/7f3a", "local", 41, at, nil), mkrExample, nil},
		{"takeover", ClaimMarker("issue-2101", "backlog-worker/7f3a", "local", 41, at, &PriorClaim{"backlog-worker/11aa", 40}),
			"<!-- backlog-worker: claim item=issue-2101 owner=backlog-worker/7f3a region=local fence=41 at=2026-09-06T00:12:44Z prior-owner=backlog-worker/11aa prior-fence=40 -->", nil},
		{"fractional seconds kept", ClaimMarker("issue-1", "w/1", "eu", 1, at.Add(1500*time.Millisecond), nil),
			"<!-- backlog-worker: claim item=issue-1 owner=w/1 region=eu fence=1 at=2026-09-06T00:12:45.5Z -->", nil},
		{"hostile owner escaped", ClaimMarker("issue-1", "w 1\n-->x", "", 1, at, nil),
			"<!-- backlog-worker: claim item=issue-1 owner=w%201%0A--%3Ex region=- fence=1 at=2026-09-06T00:12:44Z -->", nil},
	}
	for _, c := range cases {
		if c.got != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.name, c.got, c.want)
		}
		if _, st := ParseMarker(c.got+"\nClaimed.", ""); st != MarkerValid {
			t.Errorf("%s: warden's own marker does not parse", c.name)
		}
	}
}

func TestMarkerValue(t *testing.T) {
	for in, want := range map[string]string{
		"backlog-worker/7f3a": "backlog-worker/7f3a",
		"":                    "-",
		"a b":                 "a%20b",
		"é":                   "%C3%A9",
		"a-->b":               "a--%3Eb",
		"a--!>b":              "a--!%3Eb",
		"a->b":                "a->b",
		"x\x00":               "x%00",
	} {
		if got := MarkerValue(in); got != want {
			t.Errorf("MarkerValue(%q) = %q, want %q", in, got, want)
		}
		if mkrValueProblem(MarkerValue(in)) != "" {
			t.Errorf("MarkerValue(%q) is no marker value", in)
		}
	}
}

func TestParkComment(t *testing.T) {
	t0 := time.Date(2026, 9, 6, 0, 12, 44, 0, time.UTC)
	history := []AttemptLine{
		{Owner: "backlog-worker/7f3a", Fence: 41, At: t0, Outcome: "no outcome: custody passed to backlog-worker/11aa"},
		{Owner: "backlog-worker/11aa", Fence: 42, At: t0.Add(time.Hour), Outcome: "released"},
		{Owner: "@mallory`x", Fence: 43, At: t0.Add(2 * time.Hour), Outcome: "parked"},
		{Outcome: "unknown: claimed before the grant log, with no claim marker"},
	}
	got := ParkComment("issue-5", 3, "pm", "poison-threshold", "Is the WAL batch size a config value or a constant?\nSee #12.", history)
	first, rest, _ := strings.Cut(got, "\n")
	if want := "<!-- backlog-warden: park item=issue-5 attempts=3 ruling-owner=pm ruling-topic=poison-threshold -->"; first != want {
		t.Fatalf("first line\n got %s\nwant %s", first, want)
	}
	m, st := ParseMarker(got, "issue-5")
	if st != MarkerValid || m.Kind != KindPark || m.Attempts != 3 || m.RulingOwner != "pm" || m.RulingTopic != "poison-threshold" {
		t.Errorf("park marker reads back as %s %+v", st, m)
	}
	for _, want := range []string{
		"> Is the WAL batch size a config value or a constant?\n> See #12.\n",
		"1. `backlog-worker/7f3a`, fence 41, claimed 2026-09-06T00:12:44Z: no outcome: custody passed to backlog-worker/11aa\n",
		"2. `backlog-worker/11aa`, fence 42, claimed 2026-09-06T01:12:44Z: released\n",
		"3. ``@mallory`x``, fence 43, claimed 2026-09-06T02:12:44Z: parked\n",
		"4. an unknown holder: unknown: claimed before the grant log, with no claim marker\n",
		"The question `pm` must answer",
		UnparkHint,
	} {
		if !strings.Contains(rest, want) {
			t.Errorf("park comment lacks %q:\n%s", want, got)
		}
	}
	empty := ParkComment("issue-5", 1, "alice", "manual-park", "  ", nil)
	if !strings.Contains(empty, "No question was recorded") || !strings.Contains(empty, "No attempt is on record") || !strings.Contains(empty, "after 1 attempt.") {
		t.Errorf("park comment without question or history:\n%s", empty)
	}
	// A hostile route still yields one well-formed first line.
	hostile := ParkComment("issue-5", -2, "a b", "x\n<!-- backlog-worker: claim ", "q", nil)
	if m, st := ParseMarker(hostile, "issue-5"); st != MarkerValid || m.RulingOwner != "a%20b" || m.Attempts != 0 {
		t.Errorf("hostile route: %s %+v\n%s", st, m, hostile)
	}
}

// FuzzParseMarker: ParseMarker never panics, says the same thing twice, and
// an accepted claim (or park) marker survives a round trip through the
// writer warden uses.
func FuzzParseMarker(f *testing.F) {
	for _, s := range []string{
		mkrExample,
		mkrExample + "\r\nClaimed.",
		strings.Replace(mkrExample, " -->", " prior-owner=w/1 prior-fence=40 -->", 1),
		strings.Replace(mkrExample, "44Z", "44.000000001Z", 1),
		"<!-- backlog-worker: outcome item=issue-2101 owner=backlog-worker/7f3a fence=41 result=complete -->",
		"<!-- backlog-warden: park item=issue-5 attempts=3 ruling-owner=pm ruling-topic=poison-threshold -->",
		"<!-- backlog-warden: report item=issue-5 -->",
		"<!-- backlog-worker: claim -->",
		"<!-- backlog-worker: claim item=issue-1 item=issue-1 -->",
		"quoted: " + mkrExample,
		"",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		m, st := ParseMarker(body, "")
		m2, st2 := ParseMarker(body, "")
		if st != st2 || !mkrEqual(m, m2) {
			t.Fatalf("not deterministic")
		}
		switch st {
		case MarkerNone:
			for _, p := range []string{ClaimPrefix, OutcomePrefix, ParkPrefix, ReportPrefix} {
				if strings.HasPrefix(body, p) {
					t.Fatalf("body starts with %q yet is no marker", p)
				}
			}
			return
		case MarkerMalformed:
			if m.Reason == "" {
				t.Fatalf("malformed without a reason")
			}
			return
		}
		if m.Reason != "" || len(m.Line) > MaxMarkerLine || !strings.HasSuffix(m.Line, " -->") {
			t.Fatalf("valid marker %+v", m)
		}
		for i := 0; i < len(m.Line); i++ {
			if c := m.Line[i]; c < 0x20 || c > 0x7e {
				t.Fatalf("valid marker line holds byte %#x", c)
			}
		}
		// Expecting the item it names accepts it; expecting another refuses it.
		if _, st := ParseMarker(body, m.Item); st != MarkerValid {
			t.Fatalf("refused under its own item")
		}
		if _, st := ParseMarker(body, m.Item+"0"); st != MarkerMalformed {
			t.Fatalf("accepted under another item")
		}
		switch m.Kind {
		case KindClaim:
			var prior *PriorClaim
			if m.Takeover() {
				prior = &PriorClaim{m.PriorOwner, m.PriorFence}
			}
			line := ClaimMarker(string(m.Item), m.Owner, m.Region, m.Fence, m.At, prior)
			back, st := ParseMarker(line, m.Item)
			back.Line, m.Line = "", ""
			if st != MarkerValid || !mkrEqual(back, m) {
				t.Fatalf("round trip\n in %q\nout %q\n %+v\n %+v", body, line, m, back)
			}
		case KindPark:
			out := ParkComment(m.Item, m.Attempts, m.RulingOwner, m.RulingTopic, "why?", nil)
			back, st := ParseMarker(out, m.Item)
			back.Line, m.Line = "", ""
			if st != MarkerValid || !mkrEqual(back, m) {
				t.Fatalf("park round trip\n in %q\n %+v\n %+v", body, m, back)
			}
		}
	})
}
