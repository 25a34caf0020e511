package service

import (
	"strings"
	"testing"
	"time"

	"github.com/wardenhq/warden/app"
	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/mirror"
	"github.com/wardenhq/warden/webhooks"
)

// statusSection returns the page's text from the heading that starts with head up
// to the next h2 or h3, so a check can tell which section shows a row.
func statusSection(t *testing.T, page, repo, head string) string {
	t.Helper()
	rest := repoPart(t, page, repo)
	j := strings.Index(rest, "<h3>"+head)
	if j < 0 {
		t.Fatalf("%s has no %q section in:\n%s", repo, head, rest)
	}
	rest = rest[j+4:]
	end := len(rest)
	for _, tag := range []string{"<h3>", "<h2>", "<details"} {
		if e := strings.Index(rest, tag); e >= 0 && e < end {
			end = e
		}
	}
	return rest[:end]
}

// repoPart is a repository's section of the page.
func repoPart(t *testing.T, page, repo string) string {
	t.Helper()
	i := strings.Index(page, "<h2>"+repo+"</h2>")
	if i < 0 {
		t.Fatalf("no heading for %s in:\n%s", repo, page)
	}
	rest := page[i:]
	return rest[:strings.Index(rest, "</section>")]
}

var statusNow = time.Date(2030, 1, 2, 3, 0, 0, 0, time.UTC)

func fakeStatus() statusData {
	lease := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	rockets := repoStatus{
		Name: "acme/rockets", HTMLBase: "https://github.example",
		Titles: map[gating.ItemID]string{"issue-1": "<script>alert(1)</script>", "issue-2": "Shard the table", "issue-3": "Use the batched WAL", "issue-9": "Ship the launcher"},
		Report: gating.Report{
			InFlight: []gating.InFlightEntry{{Item: "issue-1", Owner: "worker-7/a", Branch: "feat/x", LeaseExpiresAtUtc: lease, State: gating.StateHeld},
				{Item: "issue-9", Owner: "worker-7/b", Branch: "feat/launch", LeaseExpiresAtUtc: lease, State: gating.StateHeld}},
			Ready:             []gating.ReadyEntry{{Item: "issue-2", Priority: "P1"}, {Item: "issue-6", Priority: "P3"}},
			Blocked:           []gating.BlockedEntry{{Item: "issue-3", WaitingOn: []gating.ItemID{"issue-1"}}},
			Stalled:           []gating.StalledEntry{{Item: "issue-7", Blocker: "issue-4", RulingOwner: "pm", RulingTopic: "queue-choice"}},
			Parked:            []gating.ParkedEntry{{Item: "issue-4", Attempts: 3, RulingOwner: "pm", RulingTopic: "queue-choice", Unpark: gating.UnparkHint}},
			AwaitingAdmission: []gating.AdmissionEntry{{Item: "issue-5", Detail: "needs a human's admission"}},
			Lapsed:            []gating.LapsedEntry{{Item: "issue-8", Owner: "worker-7/z", Since: lease, QuarantineEndsAtUtc: lease.Add(time.Hour)}},
			Defects:           []gating.Defect{{Code: "dangling-edge", Item: "issue-3", Detail: "edge to <nowhere>"}, {Code: "settings-invalid", Detail: "bad yaml"}},
			Summary:           gating.ReportSummary{Items: 9, Ready: 2, InFlight: 2, Blocked: 1, Stalled: 1, Parked: 1, AwaitingAdmission: 1, Complete: 1},
		},
		Attempts:     map[gating.ItemID]int{"issue-1": 2, "issue-2": 1, "issue-4": 3, "issue-8": 4},
		PullRequests: map[gating.ItemID][]int{"issue-1": {41, 42}, "issue-9": {77}},
		DeadLetters:  []webhooks.Record{{ID: "d-1", Event: "issues", Action: "opened", Repo: "acme/rockets", Number: 9, Attempts: 5}},
		Settings: []mirror.SettingInEffect{{Key: "labels.item", Value: `"backlog"`, Origin: mirror.OriginDefault},
			{Key: "poison_threshold", Value: "5", Origin: mirror.OriginFile},
			{Key: "require_item", Value: "false", Origin: mirror.OriginLastGood, Why: "settings-invalid"}},
		SettingsLoaded: true,
	}
	rockets.splitClaims(map[gating.ItemID]bool{"issue-9": true})
	return statusData{
		GeneratedAt: statusNow, Refresh: true, RefreshSeconds: 30,
		Pending: 2, Dead: 1, Bot: "warden[bot]",
		Recent: []webhooks.Record{
			{ID: "d-2", Event: "issue_comment", Action: "created", Repo: "acme/rockets", Number: 3, State: "done", Outcome: "commented", ReceivedAt: statusNow.Add(-90 * time.Second)},
			{ID: "d-1", Event: "issues", Action: "opened", Repo: "acme/rockets", Number: 9, State: "dead", LastError: "boom <b>", ReceivedAt: statusNow.Add(-3 * time.Hour)},
		},
		DeadLetters: []webhooks.Record{{ID: "d-1", Event: "issues", Action: "opened", Repo: "acme/rockets", Number: 9, Attempts: 5, LastError: "boom <b>"}},
		Budgets: budgetRows([]app.InstallationBudget{
			{Installation: app.AppInstallation, Resource: "core", Budget: app.Budget{Limit: 5000, Remaining: 4990, Reset: statusNow.Add(50 * time.Minute), Known: true}},
			{Installation: 31, Resource: "core", Budget: app.Budget{Limit: 5000, Remaining: 312, Reset: statusNow.Add(12 * time.Minute), Known: true}},
		}, func(inst int64) string { return map[int64]string{31: "acme/rockets"}[inst] }),
		Repos: []repoStatus{rockets, {
			Name: "acme/broken", Err: "the backlog could not be read: disk <on> fire",
		}, {
			Name: "acme/quiet", HTMLBase: "https://github.example",
			Settings: []mirror.SettingInEffect{{Key: "labels.item", Value: `"backlog"`, Origin: mirror.OriginDefault}},
		}},
	}
}

func render(t *testing.T, d statusData) string {
	t.Helper()
	var b strings.Builder
	if err := renderStatus(&b, d); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestStatusPageSections: every section of the report shows its items,
// linked to their issues, with their attempts and pull requests, in the
// right section; ready keeps claim order; an item-less defect is the
// repository's; a repository that could not be read shows its error and the
// others still render.
func TestStatusPageSections(t *testing.T) {
	page := render(t, fakeStatus())
	const base = "https://github.example/acme/rockets/issues/"
	const pulls = "https://github.example/acme/rockets/pull/"
	for _, c := range []struct {
		head    string
		want    []string
		without []string
	}{
		{"In flight (1)", []string{`href="` + base + `1"`, "worker-7/a", "feat/x", "2030-01-02 03:04:05Z", "<td>2</td>", `href="` + pulls + `41">#41</a>, <a class="pr" href="` + pulls + `42">#42</a>`}, []string{base + "9"}},
		{"Complete, claim not released (1)", []string{`href="` + base + `9"`, "worker-7/b", `href="` + pulls + `77"`}, []string{base + "1\""}},
		{"Ready now (2)", []string{`href="` + base + `2"`, "Shard the table", "P1", `href="` + base + `6"`, "P3"}, nil},
		{"Blocked (1)", []string{`href="` + base + `3"`, `href="` + base + `1"`}, nil},
		{"Stalled (1)", []string{`href="` + base + `7"`, `href="` + base + `4"`, "pm: queue-choice"}, nil},
		{"Parked (1)", []string{`href="` + base + `4"`, "<td>3</td>", "removes the parked label"}, nil},
		{"Awaiting admission (1)", []string{`href="` + base + `5"`, "needs a human&#39;s admission"}, nil},
		{"Lapsed (1)", []string{`href="` + base + `8"`, "worker-7/z", "2030-01-02 04:04:05Z", "<td>4</td>"}, nil},
		{"Defects (2)", []string{"dangling-edge", `href="` + base + `3"`, "edge to &lt;nowhere&gt;", "settings-invalid", "<td>repository</td>", "bad yaml"}, nil},
		{"Dead letters (1)", []string{`href="#dead-d-1"`, "issues.opened"}, nil},
	} {
		sec := statusSection(t, page, "acme/rockets", c.head)
		for _, w := range c.want {
			if !strings.Contains(sec, w) {
				t.Errorf("section %q lacks %q:\n%s", c.head, w, sec)
			}
		}
		for _, w := range c.without {
			if strings.Contains(sec, w) {
				t.Errorf("section %q shows %q:\n%s", c.head, w, sec)
			}
		}
	}
	rockets := repoPart(t, page, "acme/rockets")
	if !strings.Contains(rockets, "<span>1 in flight</span>") {
		t.Errorf("the summary counts the complete item's claim as in flight:\n%s", rockets)
	}
	ready := statusSection(t, page, "acme/rockets", "Ready now")
	if i, j := strings.Index(ready, base+"2"), strings.Index(ready, base+"6"); i < 0 || j < 0 || i > j {
		t.Errorf("ready now not in claim order:\n%s", ready)
	}
	if strings.Contains(ready, base+"5") {
		t.Errorf("an item awaiting admission shows as ready")
	}
	broken := repoPart(t, page, "acme/broken")
	if !strings.Contains(broken, "disk &lt;on&gt; fire") || strings.Contains(broken, "In flight") {
		t.Errorf("the unreadable repository does not show just its error:\n%s", broken)
	}
	if !strings.Contains(page, "<strong>2</strong> waiting") || !strings.Contains(page, "warden[bot]") {
		t.Errorf("inbox summary missing")
	}
}

// TestStatusPageOmitsEmptySections: a repository with nothing in it renders
// one line, not a "None." per section; a page with nothing at all says so
// once; a section with rows is never left out.
func TestStatusPageOmitsEmptySections(t *testing.T) {
	page := render(t, fakeStatus())
	quiet := repoPart(t, page, "acme/quiet")
	if strings.Contains(quiet, "<h3>") || strings.Count(quiet, "Nothing to show") != 1 {
		t.Errorf("the empty repository does not render one line:\n%s", quiet)
	}
	if strings.Contains(page, "None.") {
		t.Errorf("the page still says None. for an empty section")
	}
	if strings.Count(repoPart(t, page, "acme/rockets"), "<h3>") != 10 {
		t.Errorf("acme/rockets should show its ten non-empty sections:\n%s", repoPart(t, page, "acme/rockets"))
	}
	empty := render(t, statusData{GeneratedAt: statusNow, Refresh: true, RefreshSeconds: 30})
	if strings.Count(empty, "<h2") != 0 || strings.Count(empty, "Nothing to show") != 1 {
		t.Errorf("a page with nothing should say so once, with no section:\n%s", empty)
	}
	if strings.Contains(page, `id="nothing"`) {
		t.Errorf("a page with content says it has nothing to show")
	}
}

// TestStatusPageDeliveriesBudgetSettings: the newest deliveries with their
// outcome and age, dead letters linked to their row; the rate-limit budget
// per installation with a low one marked; each repository's settings in
// effect with where each value came from.
func TestStatusPageDeliveriesBudgetSettings(t *testing.T) {
	page := render(t, fakeStatus())
	deliveries := page[strings.Index(page, `<h2 id="deliveries">`):]
	deliveries = deliveries[:strings.Index(deliveries, "</table>")]
	for _, w := range []string{"<code>d-2</code>", "issue_comment.created", "acme/rockets#3", "done: commented", "1m ago",
		`<a class="err" href="#dead-d-1">dead letter</a>`, "boom &lt;b&gt;", "3h ago"} {
		if !strings.Contains(deliveries, w) {
			t.Errorf("recent deliveries lack %q:\n%s", w, deliveries)
		}
	}
	if !strings.Contains(page, `<tr id="dead-d-1">`) {
		t.Errorf("the dead letter a delivery links to has no anchor")
	}
	budget := page[strings.Index(page, `<h3 id="budget">`):]
	budget = budget[:strings.Index(budget, "</table>")]
	for _, w := range []string{"the App (JWT)", "<td>4990</td><td>5000</td>", "in 50m",
		`31 <span class="title">acme/rockets</span>`, `<td class="low">312</td><td>5000</td>`, "2030-01-02 03:12:00Z (in 12m)"} {
		if !strings.Contains(budget, w) {
			t.Errorf("the budget table lacks %q:\n%s", w, budget)
		}
	}
	if strings.Count(budget, `class="low"`) != 1 {
		t.Errorf("only installation 31's budget is low:\n%s", budget)
	}
	settings := repoPart(t, page, "acme/rockets")
	settings = settings[strings.Index(settings, "<details"):]
	for _, w := range []string{"Settings in effect (1 from the file, 1 kept from the last good file)",
		"<td><code>poison_threshold</code></td><td><code>5</code></td><td>file</td>",
		"<td><code>labels.item</code></td><td><code>&#34;backlog&#34;</code></td><td>default</td>",
		`<td class="err">last good (settings-invalid)</td>`} {
		if !strings.Contains(settings, w) {
			t.Errorf("the settings lack %q:\n%s", w, settings)
		}
	}
	if !strings.Contains(repoPart(t, page, "acme/quiet"), "the settings file has not been read yet") {
		t.Errorf("a repository whose file was never read does not say its settings are the defaults")
	}
}

// TestStatusPageGeneratedAndRefresh: the page says when it was made and
// refreshes itself every 30 s unless asked not to.
func TestStatusPageGeneratedAndRefresh(t *testing.T) {
	d := fakeStatus()
	page := render(t, d)
	for _, w := range []string{`<meta http-equiv="refresh" content="30">`, `<time datetime="2030-01-02T03:00:00Z">2030-01-02 03:00:00Z</time>`, `href="?refresh=0"`} {
		if !strings.Contains(page, w) {
			t.Errorf("the page lacks %q", w)
		}
	}
	d.Refresh = false
	page = render(t, d)
	if strings.Contains(page, "http-equiv") || !strings.Contains(page, "Auto-refresh is off") {
		t.Errorf("?refresh=0 still refreshes, or does not say it is off")
	}
}

// TestStatusPageEscapes: hostile titles, details and errors show as text,
// never as markup.
func TestStatusPageEscapes(t *testing.T) {
	d := fakeStatus()
	d.Repos[0].Report.Parked[0].RulingTopic = `"><img src=x onerror=alert(1)>`
	d.Recent[0].ID = `"><script>x</script>`
	page := render(t, d)
	for _, bad := range []string{"<script>", "<img", "<b>", "<nowhere>", "<on>"} {
		if strings.Contains(page, bad) {
			t.Errorf("page contains unescaped %q", bad)
		}
	}
	for _, good := range []string{"&lt;script&gt;alert(1)&lt;/script&gt;", "&lt;img src=x onerror=alert(1)&gt;", "boom &lt;b&gt;"} {
		if !strings.Contains(page, good) {
			t.Errorf("page lacks the escaped text %q", good)
		}
	}
}

// TestStatusRepoDeadLetters: a repository's dead letters are those naming it.
func TestStatusRepoDeadLetters(t *testing.T) {
	got := repoDeadLetters([]webhooks.Record{{ID: "a", Repo: "acme/x"}, {ID: "b", Repo: "acme/y"}, {ID: "c", Repo: "Acme/X"}}, "acme/x")
	if len(got) != 2 || got[0].ID != "a" || got[1].ID != "c" {
		t.Errorf("repoDeadLetters = %+v", got)
	}
}

// TestStatusPageShowsSharedPasses: the replicas' shared passes show who ran
// each last and when, and a pass with no finish says so; with no run the
// section is left out.
func TestStatusPageShowsSharedPasses(t *testing.T) {
	d := fakeStatus()
	d.Replica = "pod-b/7/abc123"
	start := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	d.Runs = []RunRecord{
		{Name: "reconcile", Holder: "pod-a/1/ffffff", StartedAt: start},
		{Name: "catchup", Holder: "pod-b/7/abc123", StartedAt: start, FinishedAt: start.Add(time.Second), LastError: "list deliveries: <503>"},
	}
	page := render(t, d)
	for _, want := range []string{"This replica: <code>pod-b/7/abc123</code>", "<td>reconcile</td><td><code>pod-a/1/ffffff</code></td><td>2030-01-02 03:04:05Z</td><td>running, or its replica stopped</td>",
		"<td>catchup</td>", "2030-01-02 03:04:06Z", "list deliveries: &lt;503&gt;"} {
		if !strings.Contains(page, want) {
			t.Errorf("the status page lacks %q", want)
		}
	}
	d.Runs = nil
	if strings.Contains(render(t, d), `id="passes"`) {
		t.Error("no runs: the shared passes section is still shown")
	}
}

// TestStatusPageShowsAdoption: a repository whose census found labelled
// issues it has not adopted yet says how many; one with none says nothing.
func TestStatusPageShowsAdoption(t *testing.T) {
	d := fakeStatus()
	d.Repos[0].Unadopted = 1234
	page := render(t, d)
	if !strings.Contains(repoPart(t, page, "acme/rockets"), "Adopting: 1234 issues that carry the item label are not items yet") {
		t.Errorf("the adoption's progress is not shown")
	}
	if strings.Count(page, "Adopting:") != 1 {
		t.Errorf("the adoption's progress shows for a repository with none to adopt")
	}
}

// TestStatusHelpers: the page's small readings.
func TestStatusHelpers(t *testing.T) {
	if got := prNumbers([]string{"pr:12", "priority:P1", "pr:x", "pr:0", "pr:7"}); len(got) != 2 || got[0] != 12 || got[1] != 7 {
		t.Errorf("prNumbers = %v, want [12 7]", got)
	}
	for _, c := range []struct {
		tags []string
		want bool
	}{{[]string{"state:complete"}, true}, {[]string{"state:complete", "state:parked"}, false}, {[]string{"state:parked"}, false}, {nil, false}} {
		if got := onlyState(c.tags, "complete"); got != c.want {
			t.Errorf("onlyState(%v) = %v", c.tags, got)
		}
	}
	for d, want := range map[time.Duration]string{-time.Second: "0s", 45 * time.Second: "45s", 12 * time.Minute: "12m", 3 * time.Hour: "3h", 72 * time.Hour: "3d"} {
		if got := span(d); got != want {
			t.Errorf("span(%s) = %q, want %q", d, got, want)
		}
	}
	rs := repoStatus{Report: gating.Report{
		InFlight: []gating.InFlightEntry{{Item: "issue-1"}, {Item: "issue-2"}},
		Lapsed:   []gating.LapsedEntry{{Item: "issue-2"}, {Item: "issue-3"}},
	}}
	rs.splitClaims(map[gating.ItemID]bool{"issue-2": true})
	if len(rs.InFlight) != 1 || rs.InFlight[0].Item != "issue-1" || len(rs.CompleteHeld) != 1 || rs.CompleteHeld[0].Item != "issue-2" ||
		len(rs.Lapsed) != 1 || rs.Lapsed[0].Item != "issue-3" {
		t.Errorf("splitClaims: in flight %v, complete %v, lapsed %v", rs.InFlight, rs.CompleteHeld, rs.Lapsed)
	}
}
