package gating

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
)

const testStatus = "https://warden.example/status"

// contractCodes is every defect code of CONTRACT.md §6 "Defect codes".
var contractCodes = []string{
	// Tags and edges.
	"missing-mandatory-tag", "duplicate-attribute-tag", "unknown-state",
	"phase-carries-state", "invalid-priority", "park-without-route", "park-without-question",
	"dangling-blocker", "stalled-by-parked", "invalid-blocker", "cycle", "edge-removed",
	"issue-gone",
	// Admission and parking.
	"admission-unrecorded", "agent-removed-admission",
	"agent-removed-park", "park-label-without-tag", "item-label-removed", "poisoned",
	// Trail.
	"claimed-unmarked", "unbacked-marker", "malformed-marker", "duplicate-claim-marker",
	"unannounced-takeover", "takeover-mismatch", "takeover-collision", "marker-edited",
	"marker-deleted", "outcome-without-tag", "forged-marker", "undeclared-agent",
	"shared-identity",
	// Completion and branches.
	"complete-with-open-pr", "completion-unproven",
	"merged-not-complete", "resumable-green-pr", "epic-child-on-main", "pr-wrong-base",
	"pr-not-from-base", "research-with-pr", "integration-missing", "integration-duplicate",
	"integration-incomplete", "issue-closed-item-live", "complete-issue-open", "pr-without-item",
	"branch-name-nit",
	// Repository.
	"ready-empty-pending", "settings-invalid", "settings-changed-by-agent",
	"stale-anchor",
}

// gatingCodes are the codes gating itself reports beyond the contract's list
// (tag problems, trail constants, exclusion reasons).
var gatingCodes = []string{
	"invalid-phase", "empty-tag-value", "dangling-link",
	CodeClaimedUnmarked, CodeUnbackedMarker, CodeMalformedMarker, CodeDuplicateClaimMarker,
	CodeUnannouncedTakeover, CodeTakeoverMismatch, CodeTakeoverCollision, CodePriorBranchRewritten, CodeMarkerEdited,
	CodeMarkerDeleted, CodeOutcomeWithoutTag, CodeForgedMarker, CodeUndeclaredAgent,
	ExAwaitingAdmission, ExParked, ExPoisoned, ExGrouping, ExBlocked, ExStalled, ExInvalid,
	ExUnknownState, ExCollisionHold, ExResourceBusy, ExLapsed, ExComplete, ExHeld,
	ExForeignRegion, ExMalformed, ExMissing, ExMergedNotComplete, CodeUnroutedRegion,
}

// codeSpan is a one-backtick code span, where GitHub links nothing.
var codeSpan = regexp.MustCompile("`[^`]*`")

func TestReportResolveHint(t *testing.T) {
	for _, c := range append(append([]string{}, contractCodes...), gatingCodes...) {
		h := ResolveHint(c)
		if h == "" || h == genericHint {
			t.Errorf("ResolveHint(%q) = %q: want a line of its own", c, h)
		}
		// A # inside a code span is inert (a command's syntax may be shown
		// there); outside one it could make a reference.
		if strings.ContainsAny(codeSpan.ReplaceAllString(h, "``"), "@#\n") || strings.Contains(h, "@") {
			t.Errorf("ResolveHint(%q) = %q holds @, a newline, or # outside a code span", c, h)
		}
	}
	// The finished-looking item's hint names the ruling that clears it.
	if h := ResolveHint(ExMergedNotComplete); !strings.Contains(h, "`/backlog undelivered #<pr>`") {
		t.Errorf("merged-not-complete hint %q does not name /backlog undelivered", h)
	}
	if got := ResolveHint("no-such-code"); got != genericHint {
		t.Errorf("unknown code: %q, want the generic line", got)
	}
	if len(contractCodes) != 51 {
		t.Errorf("contract list has %d codes; CONTRACT.md §6 lists 51", len(contractCodes))
	}
}

// parseSpan reads one CommonMark code span at the start of s and returns its
// content and the rest of s; ok is false when s does not start with a
// complete span.
func parseSpan(s string) (content, rest string, ok bool) {
	n := 0
	for n < len(s) && s[n] == '`' {
		n++
	}
	if n == 0 {
		return "", s, false
	}
	for i := n; i < len(s); {
		if s[i] != '`' {
			i++
			continue
		}
		j := i
		for j < len(s) && s[j] == '`' {
			j++
		}
		if j-i == n {
			c := s[n:i]
			if len(c) >= 2 && c[0] == ' ' && c[len(c)-1] == ' ' && strings.Trim(c, " ") != "" {
				c = c[1 : len(c)-1]
			}
			return c, s[j:], true
		}
		i = j
	}
	return "", s, false
}

var findingLine = regexp.MustCompile(`^- \*\*(.*)$`)

// renderedDetails parses every finding line of a comment: its code and
// detail as a CommonMark renderer would read the code spans.
func renderedDetails(t *testing.T, body string) (codes, details []string) {
	t.Helper()
	for _, l := range strings.Split(body, "\n") {
		m := findingLine.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		code, rest, ok := parseSpan(m[1])
		if !ok || !strings.HasPrefix(rest, "**") {
			t.Fatalf("finding line %q: the code is no complete code span", l)
		}
		rest = rest[2:]
		detail := ""
		if rest != "" {
			r, ok := strings.CutPrefix(rest, ": ")
			if !ok {
				t.Fatalf("finding line %q: unexpected %q after the code", l, rest)
			}
			var tail string
			detail, tail, ok = parseSpan(r)
			if !ok || tail != "" {
				t.Fatalf("finding line %q: the detail is no complete code span (rest %q)", l, tail)
			}
		}
		codes, details = append(codes, code), append(details, detail)
	}
	return codes, details
}

var (
	liveMention = regexp.MustCompile(`@[^\x{200b}]`)
	liveHash    = regexp.MustCompile(`#[^\x{200b}]`)
	liveAngle   = regexp.MustCompile(`<[^\x{200b}]`)
	liveAmp     = regexp.MustCompile(`&[^\x{200b}]`)
	liveGH      = regexp.MustCompile(`(?i)gh-[0-9]`)
)

// assertInert checks that nothing after the marker line can mention,
// reference, link or open HTML.
func assertInert(t *testing.T, body string) {
	t.Helper()
	first, rest, _ := strings.Cut(body, "\n")
	rest = strings.ReplaceAll(rest, testStatus, "") // the operator's status URL is no hostile value
	if !strings.HasPrefix(first, ReportCommentStart) || !strings.HasSuffix(first, " -->") {
		t.Errorf("first line %q is no report marker", first)
	}
	for _, l := range strings.Split(rest, "\n") {
		if strings.HasPrefix(strings.TrimLeft(l, " "), "<!--") {
			t.Errorf("a later line starts an HTML comment: %q", l)
		}
	}
	for _, c := range []struct {
		re   *regexp.Regexp
		what string
	}{{liveMention, "@"}, {liveHash, "#"}, {liveAngle, "<"}, {liveAmp, "&"}, {liveGH, "GH-n"}} {
		if m := c.re.FindString(rest); m != "" {
			t.Errorf("live %s in the body: %q", c.what, m)
		}
	}
	for _, s := range []string{"-->", "://", "](", "][", "www.", "\r"} {
		if strings.Contains(rest, s) {
			t.Errorf("body holds %q", s)
		}
	}
}

func TestReportCommentMarkerLine(t *testing.T) {
	for _, tc := range []struct {
		item     ItemID
		findings []ReportFinding
		want     string
	}{
		{"issue-12", nil, "<!-- backlog-warden: report item=issue-12 -->"},
		{"issue-1", []ReportFinding{{"cycle", "a\nb"}}, "<!-- backlog-warden: report item=issue-1 -->"},
		{"issue-4000", []ReportFinding{{"forged-marker", "<!-- backlog-warden: report item=issue-9 -->"}}, "<!-- backlog-warden: report item=issue-4000 -->"},
	} {
		body := RenderReportComment(tc.item, tc.findings, nil, testStatus)
		first, _, _ := strings.Cut(body, "\n")
		if first != tc.want {
			t.Errorf("first line %q, want %q", first, tc.want)
		}
		m, st := ParseMarker(body, tc.item)
		if st != MarkerValid || m.Kind != KindReport || m.Item != tc.item {
			t.Errorf("ParseMarker: %v %+v", st, m)
		}
	}
}

func TestReportCommentOrderDedupeEmpty(t *testing.T) {
	for _, tc := range []struct {
		name        string
		in          []ReportFinding
		wantCodes   []string
		wantDetails []string
		wantHeader  string
	}{
		{"empty", nil, nil, nil, "No open findings"},
		{"one", []ReportFinding{{"cycle", "x"}}, []string{"cycle"}, []string{"x"}, "**1 open finding.**"},
		{"order and dedupe",
			[]ReportFinding{{"unbacked-marker", "b"}, {"cycle", "z"}, {"unbacked-marker", "a"}, {"cycle", "z"}, {"admission-unrecorded", ""}},
			[]string{"admission-unrecorded", "cycle", "unbacked-marker", "unbacked-marker"},
			[]string{"", "z", "a", "b"}, "**4 open findings.**"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := RenderReportComment("issue-3", tc.in, nil, testStatus)
			codes, details := renderedDetails(t, body)
			if fmt.Sprint(codes) != fmt.Sprint(tc.wantCodes) || fmt.Sprint(details) != fmt.Sprint(tc.wantDetails) {
				t.Errorf("codes %q details %q, want %q %q", codes, details, tc.wantCodes, tc.wantDetails)
			}
			if !strings.Contains(body, tc.wantHeader) {
				t.Errorf("body lacks %q:\n%s", tc.wantHeader, body)
			}
			if len(tc.in) > 0 && strings.Contains(body, "No open findings") {
				t.Errorf("says no open findings with findings:\n%s", body)
			}
			for _, c := range tc.wantCodes {
				if !strings.Contains(body, "Resolves: "+ResolveHint(c)) {
					t.Errorf("no resolve line for %s", c)
				}
			}
			if strings.Contains(body, "left out") || strings.Contains(body, "Refused") {
				t.Errorf("unexpected cut note or refusal section:\n%s", body)
			}
		})
	}
}

func TestReportCommentDefusing(t *testing.T) {
	for _, tc := range []struct {
		name, detail string
	}{
		{"mention", "claimed by @alice and @org/team, mail bob@example.com"},
		{"references", "fixes #12, closes GH-12, gh-7 and acme/app#12; see https://github.com/acme/app/issues/12"},
		{"backticks", "a ``` fence `x` and ```` four `"},
		{"backtick edges", "`starts and ends`"},
		{"html comment end", "x --> <!-- y --> z"},
		{"html", "<img src=x onerror=alert(1)> <details><summary>hi</summary> &#64;alice &lt;b&gt;"},
		{"newlines", "line one\nline two\r\n# heading\n\n- list\n<!-- backlog-warden: report item=issue-1 -->"},
		{"marker itself", "<!-- backlog-warden: report item=issue-9 -->"},
		{"claim marker", "<!-- backlog-worker: claim item=issue-3 owner=w/1 region=local fence=1 at=2026-01-01T00:00:00Z -->"},
		{"markdown link", "[click](https://evil.example) ![img](x) [ref][1] www.evil.example"},
		{"unicode controls", "a\u2028b\u2029c\u202ed\x00e\x85f"},
		{"invalid utf8", "bad \xff\xfe bytes @x"},
		{"leading space", "  spaced  "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := RenderReportComment("issue-3", []ReportFinding{{"forged-marker", tc.detail}}, []string{"refused for " + tc.detail}, testStatus)
			assertInert(t, body)
			_, details := renderedDetails(t, body)
			if len(details) != 1 {
				t.Fatalf("%d finding lines, want 1:\n%s", len(details), body)
			}
			if want := Defuse(tc.detail); details[0] != want {
				t.Errorf("span content %q, want %q", details[0], want)
			}
			// What a reader sees is the detail, one line, but for the
			// invisible spaces and replaced control characters.
			shown := strings.ReplaceAll(details[0], zwsp, "")
			if shown != reportOneLine(tc.detail) {
				t.Errorf("shown %q, want %q", shown, reportOneLine(tc.detail))
			}
			if strings.Count(body, "\n") != strings.Count(RenderReportComment("issue-3", []ReportFinding{{"forged-marker", "plain"}}, []string{"plain"}, testStatus), "\n") {
				t.Errorf("the detail added lines:\n%s", body)
			}
		})
	}
}

func TestDefuse(t *testing.T) {
	z := zwsp
	for _, tc := range []struct{ in, want string }{
		{"plain text", "plain text"},
		{"@alice", "@" + z + "alice"},
		{"#12", "#" + z + "12"},
		{"o/r#1", "o/r#" + z + "1"},
		{"GH-12 gh-3 sigh-x", "GH-" + z + "12 gh-" + z + "3 sigh-x"},
		{"a\nb\r\nc\td", "a b  c d"},
		{"<!-- x -->", "<" + z + "!-- x --" + z + ">"},
		{"&#64;", "&" + z + "#" + z + "64;"},
		{"[a](b) [c][d] [e]", "[a]" + z + "(b) [c]" + z + "[d] [e]"},
		{"https://x.io www.y.io", "https:" + z + "//x.io www" + z + ".y.io"},
		{"`code`", "`code`"},
		{"\xff", "\uFFFD"},
	} {
		if got := Defuse(tc.in); got != tc.want {
			t.Errorf("Defuse(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestReportSpan(t *testing.T) {
	for _, s := range []string{"x", "`", "``", "a`b", "a``b```c", "`lead", "trail`", " sp ", "   ", "a ` b"} {
		got := reportSpan(s)
		c, rest, ok := parseSpan(got)
		if !ok || rest != "" || c != s {
			t.Errorf("reportSpan(%q) = %q reads back as %q (rest %q, ok %v)", s, got, c, rest, ok)
		}
	}
}

// sized returns findings whose comment is exactly target runes: n-1 fillers
// and a last finding (code "zz-last") whose detail is tuned.
func sized(t *testing.T, n, target int) []ReportFinding {
	t.Helper()
	fs := make([]ReportFinding, 0, n)
	for i := range n - 1 {
		fs = append(fs, ReportFinding{fmt.Sprintf("c%03d", i), strings.Repeat("x", 3900)})
	}
	fs = append(fs, ReportFinding{"zz-last", "y"})
	got := utf8.RuneCountInString(RenderReportComment("issue-5", fs, []string{"refused once"}, testStatus))
	fs[n-1].Detail = strings.Repeat("y", 1+target-got)
	if l := len(fs[n-1].Detail); l < 1 || l > MaxReportDetail {
		t.Fatalf("cannot tune the last detail to %d runes", l)
	}
	if got := utf8.RuneCountInString(RenderReportComment("issue-5", fs, []string{"refused once"}, testStatus)); got != target {
		t.Fatalf("tuned comment has %d runes, want %d", got, target)
	}
	return fs
}

func TestReportCommentCut(t *testing.T) {
	const n = 15
	atLimit := sized(t, n, MaxReportChars)
	overLimit := append([]ReportFinding(nil), atLimit...)
	overLimit[n-1].Detail += "y"
	for _, tc := range []struct {
		name      string
		findings  []ReportFinding
		wantShown int
		wantLeft  int
		ellipsis  bool
	}{
		{"just under", sized(t, n, MaxReportChars-1), n, 0, false},
		{"at the limit", atLimit, n, 0, false},
		{"just over", overLimit, n - 1, 1, false},
		{"far over", func() []ReportFinding {
			var fs []ReportFinding
			for i := range 40 {
				fs = append(fs, ReportFinding{fmt.Sprintf("c%03d", i), strings.Repeat("x", 3900)})
			}
			return fs
		}(), 14, 26, false},
		{"bytes bind before runes", func() []ReportFinding {
			var fs []ReportFinding
			for i := range 12 {
				fs = append(fs, ReportFinding{fmt.Sprintf("c%03d", i), strings.Repeat("€", 3900)})
			}
			return fs
		}(), 5, 7, false},
		{"huge single detail", []ReportFinding{{"forged-marker", strings.Repeat("@alice #1 `x` ", 100000)}}, 1, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := RenderReportComment("issue-5", tc.findings, []string{"refused once"}, testStatus)
			if r := utf8.RuneCountInString(body); r > MaxReportChars {
				t.Errorf("%d runes, over %d", r, MaxReportChars)
			}
			if len(body) > MaxReportBytes {
				t.Errorf("%d bytes, over %d", len(body), MaxReportBytes)
			}
			assertInert(t, body)
			codes, details := renderedDetails(t, body) // fails on a span cut in half
			if len(codes) != tc.wantShown {
				t.Errorf("%d findings shown, want %d", len(codes), tc.wantShown)
			}
			if !strings.Contains(body, "**Refused commands**") {
				t.Errorf("the refusal section was dropped")
			}
			lines := strings.Split(strings.TrimRight(body, "\n"), "\n")
			last := lines[len(lines)-1]
			if tc.wantLeft > 0 {
				s := "s were"
				if tc.wantLeft == 1 {
					s = " was"
				}
				want := fmt.Sprintf("_%d more finding%s left out", tc.wantLeft, s)
				if !strings.HasPrefix(last, want) || !strings.Contains(last, testStatus) {
					t.Errorf("last line %q, want %q ... %s", last, want, testStatus)
				}
				// The kept findings are the first ones in order.
				for i, c := range codes {
					if c != fmt.Sprintf("c%03d", i) {
						t.Errorf("finding %d is %s", i, c)
						break
					}
				}
			} else if strings.Contains(body, "left out") {
				t.Errorf("cut note on an uncut comment: %q", last)
			}
			if tc.ellipsis {
				if !strings.HasSuffix(details[0], "…") || utf8.RuneCountInString(strings.ReplaceAll(details[0], zwsp, "")) != MaxReportDetail {
					t.Errorf("huge detail not cut to %d runes with an ellipsis (%d runes)", MaxReportDetail, utf8.RuneCountInString(details[0]))
				}
			}
		})
	}
}

func TestReportCommentCutNoteWithoutHint(t *testing.T) {
	var fs []ReportFinding
	for i := range 20 {
		fs = append(fs, ReportFinding{fmt.Sprintf("c%03d", i), strings.Repeat("x", 3900)})
	}
	body := RenderReportComment("issue-5", fs, nil, "")
	if !strings.Contains(body, "listed on warden's status page._") {
		t.Errorf("no generic pointer:\n%s", body[len(body)-300:])
	}
}

func TestReportCommentRefusals(t *testing.T) {
	for _, tc := range []struct {
		name     string
		refusals []string
		want     []string // rendered lines, in order
	}{
		{"none", nil, nil},
		{"one", []string{"/backlog admit refused: only a human with triage or more admits"},
			[]string{`- /backlog admit refused: only a human with triage or more admits`}},
		{"hostile", []string{"@bob's `/backlog park` refused #3 <b>x</b>\n[l](u)"},
			[]string{"- @" + zwsp + "bob's \\`/backlog park\\` refused \\#" + zwsp + "3 \\<" + zwsp + "b\\>x\\<" + zwsp + "/b\\> \\[l\\]" + zwsp + "\\(u\\)"}},
		{"newest kept", func() []string {
			var rs []string
			for i := range 12 {
				rs = append(rs, fmt.Sprintf("r%d", i))
			}
			return rs
		}(), []string{"- r2", "- r3", "- r4", "- r5", "- r6", "- r7", "- r8", "- r9", "- r10", "- r11"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := RenderReportComment("issue-8", nil, tc.refusals, testStatus)
			assertInert(t, body)
			if !strings.Contains(body, "No open findings") {
				t.Errorf("no findings line:\n%s", body)
			}
			_, sec, found := strings.Cut(body, "**Refused commands** (newest last):\n\n")
			if found != (len(tc.want) > 0) {
				t.Fatalf("refusal section present %v, want %v:\n%s", found, len(tc.want) > 0, body)
			}
			if !found {
				return
			}
			got := strings.Split(strings.TrimRight(sec, "\n"), "\n")
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("refusal lines\n%q\nwant\n%q", got, tc.want)
			}
		})
	}
}
