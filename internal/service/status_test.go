package service

import (
	"strings"
	"testing"
	"time"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/webhooks"
)

// statusSection returns the page's text from the heading that starts with head up
// to the next h2 or h3, so a check can tell which section shows a row.
func statusSection(t *testing.T, page, repo, head string) string {
	t.Helper()
	i := strings.Index(page, "<h2>"+repo+"</h2>")
	if i < 0 {
		t.Fatalf("no heading for %s in:\n%s", repo, page)
	}
	rest := page[i:]
	j := strings.Index(rest, "<h3>"+head)
	if j < 0 {
		t.Fatalf("%s has no %q section in:\n%s", repo, head, rest)
	}
	rest = rest[j+4:]
	end := len(rest)
	for _, tag := range []string{"<h3>", "<h2>"} {
		if e := strings.Index(rest, tag); e >= 0 && e < end {
			end = e
		}
	}
	return rest[:end]
}

func fakeStatus() statusData {
	lease := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	return statusData{
		Pending: 2, Dead: 1, Bot: "warden[bot]",
		DeadLetters: []webhooks.Record{{ID: "d-1", Event: "issues", Action: "opened", Repo: "acme/rockets", Number: 9, Attempts: 5, LastError: "boom <b>"}},
		Repos: []repoStatus{{
			Name: "acme/rockets", HTMLBase: "https://github.example",
			Titles: map[gating.ItemID]string{"issue-1": "<script>alert(1)</script>", "issue-2": "Shard the table", "issue-3": "Use the batched WAL"},
			Report: gating.Report{
				InFlight:          []gating.InFlightEntry{{Item: "issue-1", Owner: "worker-7/a", Branch: "feat/x", LeaseExpiresAtUtc: lease, State: gating.StateHeld}},
				Ready:             []gating.ReadyEntry{{Item: "issue-2", Priority: "P1"}, {Item: "issue-6", Priority: "P3"}},
				Blocked:           []gating.BlockedEntry{{Item: "issue-3", WaitingOn: []gating.ItemID{"issue-1"}}},
				Stalled:           []gating.StalledEntry{{Item: "issue-7", Blocker: "issue-4", RulingOwner: "pm", RulingTopic: "queue-choice"}},
				Parked:            []gating.ParkedEntry{{Item: "issue-4", Attempts: 3, RulingOwner: "pm", RulingTopic: "queue-choice", Unpark: gating.UnparkHint}},
				AwaitingAdmission: []gating.AdmissionEntry{{Item: "issue-5", Detail: "needs a human's admission"}},
				Lapsed:            []gating.LapsedEntry{{Item: "issue-8", Owner: "worker-7/z", Since: lease, QuarantineEndsAtUtc: lease.Add(time.Hour)}},
				Defects:           []gating.Defect{{Code: "dangling-edge", Item: "issue-3", Detail: "edge to <nowhere>"}, {Code: "settings-invalid", Detail: "bad yaml"}},
			},
			DeadLetters: []webhooks.Record{{ID: "d-1", Event: "issues", Action: "opened", Repo: "acme/rockets", Number: 9, Attempts: 5}},
		}, {
			Name: "acme/broken", Err: "the backlog could not be read: disk <on> fire",
		}, {
			Name: "acme/quiet", HTMLBase: "https://github.example",
		}},
	}
}

// TestStatusPageSections: every section of the report shows its items,
// linked to their issues, in the right section; ready keeps claim order;
// an item-less defect is the repository's; a repository that could not be
// read shows its error and the others still render.
func TestStatusPageSections(t *testing.T) {
	var b strings.Builder
	if err := renderStatus(&b, fakeStatus()); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	const base = "https://github.example/acme/rockets/issues/"
	for _, c := range []struct {
		head string
		want []string
	}{
		{"In flight (1)", []string{`href="` + base + `1"`, "worker-7/a", "feat/x", "2030-01-02 03:04:05Z"}},
		{"Ready now (2)", []string{`href="` + base + `2"`, "Shard the table", "P1", `href="` + base + `6"`, "P3"}},
		{"Blocked (1)", []string{`href="` + base + `3"`, `href="` + base + `1"`}},
		{"Stalled (1)", []string{`href="` + base + `7"`, `href="` + base + `4"`, "pm: queue-choice"}},
		{"Parked (1)", []string{`href="` + base + `4"`, "<td>3</td>", "removes the parked label"}},
		{"Awaiting admission (1)", []string{`href="` + base + `5"`, "needs a human&#39;s admission"}},
		{"Lapsed (1)", []string{`href="` + base + `8"`, "worker-7/z", "2030-01-02 04:04:05Z"}},
		{"Defects (2)", []string{"dangling-edge", `href="` + base + `3"`, "edge to &lt;nowhere&gt;", "settings-invalid", "<td>repository</td>", "bad yaml"}},
		{"Dead letters (1)", []string{"d-1", "issues.opened"}},
	} {
		sec := statusSection(t, page, "acme/rockets", c.head)
		for _, w := range c.want {
			if !strings.Contains(sec, w) {
				t.Errorf("section %q lacks %q:\n%s", c.head, w, sec)
			}
		}
	}
	ready := statusSection(t, page, "acme/rockets", "Ready now")
	if i, j := strings.Index(ready, base+"2"), strings.Index(ready, base+"6"); i < 0 || j < 0 || i > j {
		t.Errorf("ready now not in claim order:\n%s", ready)
	}
	if strings.Contains(statusSection(t, page, "acme/rockets", "Ready now"), base+"5") {
		t.Errorf("an item awaiting admission shows as ready")
	}
	broken := page[strings.Index(page, "<h2>acme/broken</h2>"):]
	broken = broken[:strings.Index(broken, "</section>")]
	if !strings.Contains(broken, "disk &lt;on&gt; fire") || strings.Contains(broken, "In flight") {
		t.Errorf("the unreadable repository does not show just its error:\n%s", broken)
	}
	if !strings.Contains(page, "<h2>acme/quiet</h2>") || !strings.Contains(statusSection(t, page, "acme/quiet", "Ready now (0)"), "None.") {
		t.Errorf("the repository after the unreadable one did not render")
	}
	if !strings.Contains(page, "<strong>2</strong> waiting") || !strings.Contains(page, "warden[bot]") {
		t.Errorf("inbox summary missing")
	}
}

// TestStatusPageEscapes: hostile titles, details and errors show as text,
// never as markup.
func TestStatusPageEscapes(t *testing.T) {
	d := fakeStatus()
	d.Repos[0].Report.Parked[0].RulingTopic = `"><img src=x onerror=alert(1)>`
	var b strings.Builder
	if err := renderStatus(&b, d); err != nil {
		t.Fatal(err)
	}
	page := b.String()
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
// each last and when, and a pass with no finish says so.
func TestStatusPageShowsSharedPasses(t *testing.T) {
	d := fakeStatus()
	d.Replica = "pod-b/7/abc123"
	start := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	d.Runs = []RunRecord{
		{Name: "reconcile", Holder: "pod-a/1/ffffff", StartedAt: start},
		{Name: "catchup", Holder: "pod-b/7/abc123", StartedAt: start, FinishedAt: start.Add(time.Second), LastError: "list deliveries: <503>"},
	}
	var b strings.Builder
	if err := renderStatus(&b, d); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, want := range []string{"This replica: <code>pod-b/7/abc123</code>", "<td>reconcile</td><td><code>pod-a/1/ffffff</code></td><td>2030-01-02 03:04:05Z</td><td>running, or its replica stopped</td>",
		"<td>catchup</td>", "2030-01-02 03:04:06Z", "list deliveries: &lt;503&gt;"} {
		if !strings.Contains(page, want) {
			t.Errorf("the status page lacks %q", want)
		}
	}
	d.Runs = nil
	b.Reset()
	renderStatus(&b, d)
	if !strings.Contains(b.String(), "No pass has run yet.") {
		t.Error("no runs: the page does not say so")
	}
}

// TestStatusPageShowsAdoption: a repository whose census found labelled
// issues it has not adopted yet says how many; one with none says nothing.
func TestStatusPageShowsAdoption(t *testing.T) {
	d := fakeStatus()
	d.Repos[0].Unadopted = 1234
	var b strings.Builder
	if err := renderStatus(&b, d); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	rockets := page[strings.Index(page, "<h2>acme/rockets</h2>"):]
	rockets = rockets[:strings.Index(rockets, "</section>")]
	if !strings.Contains(rockets, "Adopting: 1234 issues that carry the item label are not items yet") {
		t.Errorf("the adoption's progress is not shown:\n%s", rockets)
	}
	if strings.Count(page, "Adopting:") != 1 {
		t.Errorf("the adoption's progress shows for a repository with none to adopt")
	}
}
