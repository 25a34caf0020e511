package gating

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

const (
	dashStatus = "https://warden.example/status"
	dashBase   = "https://github.com/"
)

var dashT0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// dashFullReport has a row in every section.
func dashFullReport() (Report, []Defect) {
	rep := Report{
		InFlight: []InFlightEntry{
			{Item: "issue-7", Owner: "worker-1/a", Branch: "feat/seven", State: StateHeld, LeaseExpiresAtUtc: dashT0},
			{Item: "issue-3", Owner: "worker-2/b", State: StateLapsed, LeaseExpiresAtUtc: dashT0, Maintenance: true},
		},
		Ready: []ReadyEntry{
			{Item: "issue-12", Priority: "P0"},
			{Item: "issue-4", Priority: "P2", Overlaps: []ItemID{"issue-7"}},
		},
		Blocked: []BlockedEntry{
			{Item: "issue-9", WaitingOn: []ItemID{"issue-7", "issue-8"}},
		},
		Stalled: []StalledEntry{
			{Item: "issue-10", Blocker: "issue-5", RulingOwner: "pm", RulingTopic: "poison-threshold"},
			{Item: "issue-10", Blocker: "issue-6"},
		},
		Parked: []ParkedEntry{
			{Item: "issue-5", Attempts: 3, RulingOwner: "pm", RulingTopic: "poison-threshold", Unpark: UnparkHint},
		},
		AwaitingAdmission: []AdmissionEntry{{Item: "issue-11", Detail: "the admission label is on"}},
		Lapsed: []LapsedEntry{
			{Item: "issue-3", Owner: "worker-2/b", Since: dashT0, QuarantineEndsAtUtc: dashT0.Add(time.Hour)},
		},
		Defects: []Defect{
			{Code: "cycle", Detail: "issue-1 -> issue-2 -> issue-1"},
			{Code: "unknown-state", Item: "issue-2", Detail: "state:done is not a recognised state"},
		},
		CleanReclaims: []CleanReclaim{{Item: "issue-3", Owner: "worker-2/b", PriorFence: 4, Fence: 5, AtUtc: dashT0}},
		Summary:       ReportSummary{Items: 13, Ready: 2, InFlight: 2, Blocked: 1, Stalled: 1, Parked: 1, AwaitingAdmission: 1, Complete: 1},
	}
	return rep, []Defect{{Code: "settings-invalid", Detail: "line 3: poison_threshold is not a number"}}
}

func dashLink(n int) string {
	return fmt.Sprintf("[`issue-%d`](https://github.com/acme/app/issues/%d)", n, n)
}

// dashSectionBody returns the lines of the section with the given title
// (without its heading), failing when it is missing.
func dashSectionBody(t *testing.T, body, title string) (heading string, lines []string) {
	t.Helper()
	for _, chunk := range strings.Split(body, "\n## ")[1:] {
		h, rest, _ := strings.Cut(chunk, "\n")
		if strings.HasPrefix(h, title+" (") {
			return h, strings.Split(strings.TrimSpace(rest), "\n")
		}
	}
	t.Fatalf("no section %q in\n%s", title, body)
	return "", nil
}

func TestDashboardSections(t *testing.T) {
	rep, extra := dashFullReport()
	body := RenderDashboard("acme/app", dashBase, rep, extra, dashStatus)
	first, _, _ := strings.Cut(body, "\n")
	if want := "<!-- backlog-warden: dashboard -->"; first != want {
		t.Fatalf("first line %q, want %q", first, want)
	}
	for _, c := range []struct {
		title string
		count int
		rows  []string
	}{
		{"Repository findings", 2, []string{
			"- **`cycle`**: `issue-1 -> issue-2 -> issue-1`",
			"  Resolves: " + ResolveHint("cycle"),
			"- **`settings-invalid`**: `line 3: poison_threshold is not a number`",
			"  Resolves: " + ResolveHint("settings-invalid"),
		}},
		{"In flight", 2, []string{
			"- " + dashLink(3) + " held by `worker-2/b`, lease lapsed (quarantined: see Lapsed) (maintenance claim)",
			"- " + dashLink(7) + " held by `worker-1/a` on branch `feat/seven`, lease live",
		}},
		{"Ready now", 2, []string{
			"1. " + dashLink(12) + " `P0`",
			"2. " + dashLink(4) + " `P2`, overlaps in-flight " + dashLink(7),
		}},
		{"Blocked", 1, []string{"- " + dashLink(9) + " waits on " + dashLink(7) + ", " + dashLink(8)}},
		{"Stalled", 1, []string{"- " + dashLink(10) + " is stalled by parked " + dashLink(5) +
			" (ruling owner `pm`, topic `poison-threshold`); " + dashLink(6) + " (no ruling route: `park-without-route`)"}},
		{"Parked", 1, []string{"- " + dashLink(5) + " after 3 attempts, ruling owner `pm`, topic `poison-threshold`"}},
		{"Awaiting admission", 1, []string{"- " + dashLink(11) + ": `the admission label is on`"}},
		{"Lapsed", 1, []string{"- " + dashLink(3) + " held by `worker-2/b`, lease expired `2030-01-02T03:04:05Z`; quarantined until `2030-01-02T04:04:05Z`"}},
		{"Clean re-claims", 1, []string{"- " + dashLink(3) + " re-claimed by `worker-2/b` (fence 4 to 5) `2030-01-02T03:04:05Z`"}},
		{"Item findings", 1, []string{"- " + dashLink(2) + " `unknown-state`: `state:done is not a recognised state`"}},
	} {
		h, lines := dashSectionBody(t, body, c.title)
		if want := fmt.Sprintf("%s (%d)", c.title, c.count); h != want {
			t.Errorf("heading %q, want %q", h, want)
		}
		// lines[0] is the section's intro, lines[1] the blank line after it.
		if len(lines) < 2 || lines[1] != "" {
			t.Fatalf("%s: no intro paragraph: %q", c.title, lines)
		}
		if got := lines[2:]; !slices.Equal(got, c.rows) {
			t.Errorf("%s rows:\n%s\nwant\n%s", c.title, strings.Join(got, "\n"), strings.Join(c.rows, "\n"))
		}
	}
	if want := "**13 items**: 2 ready now, 2 in flight, 1 blocked, 1 stalled, 1 parked, 1 awaiting admission, 1 lapsed, 1 complete. Findings: 2 about the repository, 1 about items."; !strings.Contains(body, want+"\n") {
		t.Errorf("no summary line %q in\n%s", want, body)
	}
	// Section order: repository findings first, item findings last.
	var order []string
	for _, l := range strings.Split(body, "\n") {
		if h, ok := strings.CutPrefix(l, "## "); ok {
			order = append(order, h[:strings.Index(h, " (")])
		}
	}
	if want := []string{"Repository findings", "In flight", "Ready now", "Blocked", "Stalled", "Parked",
		"Awaiting admission", "Lapsed", "Clean re-claims", "Item findings"}; !slices.Equal(order, want) {
		t.Errorf("section order %q, want %q", order, want)
	}
	// No item is ever written as #N (a cross-reference on every edit).
	if m := regexp.MustCompile(`#[0-9]`).FindString(body); m != "" {
		t.Errorf("body holds an issue reference %q", m)
	}
}

func TestDashboardEmptyAndOmittedSections(t *testing.T) {
	body := RenderDashboard("acme/app", dashBase, Report{}, nil, dashStatus)
	if !strings.HasPrefix(body, DashboardMarker+"\n") || !strings.Contains(body, "The backlog is empty") {
		t.Errorf("empty dashboard:\n%s", body)
	}
	if strings.Contains(body, "\n## ") {
		t.Errorf("empty dashboard has sections:\n%s", body)
	}
	rep := Report{Ready: []ReadyEntry{{Item: "issue-1", Priority: "P1"}}, Summary: ReportSummary{Items: 1, Ready: 1}}
	body = RenderDashboard("acme/app", dashBase, rep, nil, dashStatus)
	if strings.Count(body, "\n## ") != 1 || !strings.Contains(body, "\n## Ready now (1)\n") {
		t.Errorf("want only the ready section:\n%s", body)
	}
	if !strings.Contains(body, "**1 item**: 1 ready now") {
		t.Errorf("summary:\n%s", body)
	}
}

func TestDashboardLinks(t *testing.T) {
	rep := Report{Ready: []ReadyEntry{{Item: "issue-42"}, {Item: "issue-007"}}, Summary: ReportSummary{Items: 2}}
	for _, c := range []struct{ repo, base, want string }{
		{"acme/app", "https://github.com/", "[`issue-42`](https://github.com/acme/app/issues/42)"},
		{"acme/app", "https://github.com", "[`issue-42`](https://github.com/acme/app/issues/42)"},
		{"acme/app", "https://ghe.example.com/web/", "[`issue-42`](https://ghe.example.com/web/acme/app/issues/42)"},
		{"acme/app", "", "[`issue-42`](../issues/42)"},
		{"acme/app", "javascript:alert(1)", "[`issue-42`](../issues/42)"},
		{"acme/app", "https://x.example/a)b(", "[`issue-42`](../issues/42)"},
		{"not-a-repo", "https://github.com/", "[`issue-42`](../issues/42)"},
		{"acme/a b", "https://github.com/", "[`issue-42`](../issues/42)"},
		{"acme/a&#35;b", "https://github.com/", "[`issue-42`](../issues/42)"},
		{"my-org/my.repo_2", "https://github.com/", "[`issue-42`](https://github.com/my-org/my.repo_2/issues/42)"},
	} {
		body := RenderDashboard(c.repo, c.base, rep, nil, dashStatus)
		if !strings.Contains(body, "1. "+c.want+"\n") {
			t.Errorf("RenderDashboard(%q, %q): no %q in\n%s", c.repo, c.base, c.want, body)
		}
		// A malformed id is named, defused, and not linked.
		if !strings.Contains(body, "2. `issue-007`\n") {
			t.Errorf("malformed id: want it unlinked in\n%s", body)
		}
	}
}

var (
	dashLiveMention = regexp.MustCompile(`@[^\x{200b}]`)
	dashLiveHash    = regexp.MustCompile(`#[^\x{200b}#]`)
	dashLiveAngle   = regexp.MustCompile(`<[^\x{200b}]`)
	dashLiveAmp     = regexp.MustCompile(`&[^\x{200b}]`)
	dashLiveGH      = regexp.MustCompile(`(?i)gh-[0-9]`)
	dashOurLink     = regexp.MustCompile(`\]\((https://github\.com/[^ ()]*/|\.\./)issues/[0-9]+\)`)
)

// dashSpans returns the content of every code span on a line, as a
// CommonMark renderer reads it.
func dashSpans(line string) []string {
	var out []string
	for i := 0; i < len(line); {
		if line[i] != '`' {
			i++
			continue
		}
		n := i
		for n < len(line) && line[n] == '`' {
			n++
		}
		fence := n - i
		end := -1
		for j := n; j < len(line); {
			if line[j] != '`' {
				j++
				continue
			}
			k := j
			for k < len(line) && line[k] == '`' {
				k++
			}
			if k-j == fence {
				end = j
				break
			}
			j = k
		}
		if end < 0 {
			return out
		}
		c := line[n:end]
		if len(c) >= 2 && c[0] == ' ' && c[len(c)-1] == ' ' && strings.Trim(c, " ") != "" {
			c = c[1 : len(c)-1]
		}
		out = append(out, c)
		i = end + fence
	}
	return out
}

func TestDashboardDefusing(t *testing.T) {
	hostile := []string{
		"@alice and @org/team, mail bob@example.com",
		"fixes #12, GH-12, acme/app#12, https://github.com/acme/app/issues/12",
		"a ``` fence `x` and ```` four `",
		"x --> <!-- y --> z",
		"<img src=x onerror=alert(1)> &#64;alice",
		"line one\nline two\r\n## heading\n- list\n<!-- backlog-warden: dashboard -->",
		"[click](https://evil.example) ![i](x) [r][1] www.evil.example",
		"a\u2028b\u202ed\x00e bad \xff",
	}
	for i, h := range hostile {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			rep := Report{
				InFlight:          []InFlightEntry{{Item: "issue-1", Owner: h, Branch: h, State: StateHeld}},
				Stalled:           []StalledEntry{{Item: "issue-2", Blocker: "issue-3", RulingOwner: h, RulingTopic: h}},
				Parked:            []ParkedEntry{{Item: "issue-3", RulingOwner: h, RulingTopic: h, Unpark: h}},
				AwaitingAdmission: []AdmissionEntry{{Item: "issue-4", Detail: h}},
				Lapsed:            []LapsedEntry{{Item: "issue-5", Owner: h}},
				CleanReclaims:     []CleanReclaim{{Item: "issue-5", Owner: h}},
				Defects:           []Defect{{Code: h, Detail: h}, {Code: "forged-marker", Item: "issue-6", Detail: h}, {Code: "x", Item: ItemID(h)}},
			}
			body := RenderDashboard("acme/app"+h, dashBase, rep, []Defect{{Code: "shared-identity", Detail: h}}, dashStatus)
			first, rest, _ := strings.Cut(body, "\n")
			if first != DashboardMarker {
				t.Fatalf("first line %q", first)
			}
			scrub := strings.ReplaceAll(rest, dashStatus, "")
			scrub = dashOurLink.ReplaceAllString(scrub, "]")
			for _, l := range strings.Split(scrub, "\n") {
				if strings.HasPrefix(strings.TrimLeft(l, " "), "<!--") {
					t.Errorf("a later line starts an HTML comment: %q", l)
				}
				if strings.HasPrefix(l, "#") && !strings.HasPrefix(l, "## ") {
					t.Errorf("a hostile heading: %q", l)
				}
			}
			for _, c := range []struct {
				re   *regexp.Regexp
				what string
			}{{dashLiveMention, "@"}, {dashLiveHash, "#"}, {dashLiveAngle, "<"}, {dashLiveAmp, "&"}, {dashLiveGH, "GH-n"}} {
				// "## " headings are warden's own.
				s := strings.ReplaceAll(scrub, "\n## ", "\n")
				if m := c.re.FindString(s); m != "" {
					t.Errorf("live %s in the body: %q", c.what, m)
				}
			}
			for _, s := range []string{"-->", "://", "](", "][", "www.", "\r"} {
				if strings.Contains(scrub, s) {
					t.Errorf("body holds %q", s)
				}
			}
			// Every quoted value reads back as the defused value (one line,
			// in its own code span).
			want := Defuse(reportCut(h, maxDashboardValue))
			for _, l := range strings.Split(rest, "\n") {
				if strings.HasPrefix(l, "- [`issue-1`]") {
					spans := dashSpans(l)
					if len(spans) < 3 || spans[1] != want || spans[2] != want {
						t.Errorf("in-flight row %q: spans %q, want owner and branch %q", l, spans, want)
					}
				}
			}
			if !utf8.ValidString(body) {
				t.Error("body is not valid UTF-8")
			}
		})
	}
}

func TestDashboardDeterministic(t *testing.T) {
	rep, extra := dashFullReport()
	a := RenderDashboard("acme/app", dashBase, rep, extra, dashStatus)
	if b := RenderDashboard("acme/app", dashBase, rep, extra, dashStatus); a != b {
		t.Fatal("two renders of the same report differ")
	}
	// The same state gathered in another order renders the same bytes.
	r2, x2 := dashFullReport()
	slices.Reverse(r2.InFlight)
	slices.Reverse(r2.Stalled)
	slices.Reverse(r2.Defects)
	r2.Defects = append(r2.Defects, r2.Defects[0]) // a duplicate
	x2 = append(x2, Defect{Code: "settings-invalid", Detail: "line 3: poison_threshold is not a number"})
	if b := RenderDashboard("acme/app", dashBase, r2, x2, dashStatus); a != b {
		t.Errorf("reordered input renders differently:\n%s\n---\n%s", a, b)
	}
	// The input is left as it was.
	if r2.InFlight[0].Item != "issue-3" {
		t.Error("RenderDashboard reordered its input")
	}
	// Lease renewals (a new expiry, no other change) do not change the body.
	r3, x3 := dashFullReport()
	r3.InFlight[0].LeaseExpiresAtUtc = dashT0.Add(time.Minute)
	if b := RenderDashboard("acme/app", dashBase, r3, x3, dashStatus); a != b {
		t.Error("a renewed lease changed the body")
	}
	// A change of state does.
	r4, x4 := dashFullReport()
	r4.Ready = r4.Ready[:1]
	if b := RenderDashboard("acme/app", dashBase, r4, x4, dashStatus); a == b {
		t.Error("a smaller ready set rendered the same body")
	}
}

func TestDashboardCut(t *testing.T) {
	rep := Report{Summary: ReportSummary{Items: 5000}}
	for i := 1; i <= 30; i++ {
		rep.Ready = append(rep.Ready, ReadyEntry{Item: IDFor(i), Priority: "P1"})
	}
	long := strings.Repeat("é", 400) // 800 bytes, cut at maxDashboardItemDetail runes
	for i := 100; i < 2100; i++ {
		rep.Defects = append(rep.Defects, Defect{Code: "forged-marker", Item: IDFor(i), Detail: long})
	}
	for i := 3000; i < 3800; i++ {
		rep.AwaitingAdmission = append(rep.AwaitingAdmission, AdmissionEntry{Item: IDFor(i), Detail: long})
	}
	body := RenderDashboard("acme/app", dashBase, rep, nil, dashStatus)
	if len(body) > MaxDashboardBytes || !utf8.ValidString(body) {
		t.Fatalf("body has %d bytes (valid UTF-8: %v), limit %d", len(body), utf8.ValidString(body), MaxDashboardBytes)
	}
	if len(body) < MaxDashboardBytes-2000 {
		t.Errorf("body has %d bytes: cut far more than needed", len(body))
	}
	if !strings.HasPrefix(body, DashboardMarker+"\n") {
		t.Error("the cut lost the marker line")
	}
	// The small section is whole; both large ones are cut, their headings
	// still counting every row, each with a note pointing to the status page.
	_, ready := dashSectionBody(t, body, "Ready now")
	if len(ready) != 2+30 || !strings.HasPrefix(ready[len(ready)-1], "30. ") {
		t.Errorf("ready section cut: %d lines", len(ready))
	}
	for _, c := range []struct {
		title string
		all   int
	}{{"Item findings", 2000}, {"Awaiting admission", 800}} {
		h, lines := dashSectionBody(t, body, c.title)
		if h != fmt.Sprintf("%s (%d)", c.title, c.all) {
			t.Errorf("heading %q after the cut", h)
		}
		rows := 0
		for _, l := range lines {
			if strings.HasPrefix(l, "- ") {
				rows++
			}
		}
		if rows == 0 || rows >= c.all {
			t.Errorf("%s: %d of %d rows kept", c.title, rows, c.all)
		}
		note := fmt.Sprintf("_%d more rows left out: this dashboard is cut at 65536 bytes. Every row is listed on %s._", c.all-rows, dashStatus)
		if lines[len(lines)-1] != note {
			t.Errorf("%s: last line %q, want %q", c.title, lines[len(lines)-1], note)
		}
	}
	// The cut keeps the first rows (ordered by item).
	if !strings.Contains(body, "- "+dashLink(100)+" `forged-marker`") || strings.Contains(body, dashLink(2099)) {
		t.Error("the cut did not drop rows from the end")
	}
	// Deterministic under the cut too.
	if RenderDashboard("acme/app", dashBase, rep, nil, dashStatus) != body {
		t.Error("two cut renders differ")
	}
	// Without a status hint the note points to the status page generically.
	if b := RenderDashboard("acme/app", dashBase, rep, nil, ""); !strings.Contains(b, "Every row is listed on warden's status page._") {
		t.Error("no generic pointer without a hint")
	}
	// A body that fits is not cut.
	small := Report{Defects: rep.Defects[:20]}
	if b := RenderDashboard("acme/app", dashBase, small, nil, dashStatus); strings.Contains(b, "left out") {
		t.Error("a small dashboard was cut")
	}
}
