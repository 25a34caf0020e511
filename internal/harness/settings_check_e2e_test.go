package harness

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/wardenhq/warden/internal/ghsim"
	"github.com/wardenhq/warden/mirror"
)

// settingsRun is the App's backlog/settings check run on a commit, with its
// annotations.
type settingsRun struct {
	ID                       int64
	Conclusion, Title, Summa string
	Annotations              []ghsim.CheckAnnotation
}

// settingsRuns are the App's backlog/settings runs on sha.
func (x *e2e) settingsRuns(sha string) []settingsRun {
	var out []settingsRun
	x.Sim.Locked(func() {
		for _, r := range x.Repo.CheckRuns {
			if r.App == nil && r.Name == mirror.SettingsCheckRunName && r.HeadSHA == sha {
				out = append(out, settingsRun{ID: r.ID, Conclusion: r.Conclusion, Title: r.Title, Summa: r.Summary,
					Annotations: slices.Clone(r.Annotations)})
			}
		}
	})
	return out
}

// badSettings is the example: a misspelt key at line 4 and a value
// that is no boolean at line 5.
const badSettings = "# backlog settings\nlabels:\n  item: backlog\npoision_threshold: 2\nrequire_item: yes please\n"

// TestE2ESettingsCheckRun: a human pushes a bad .github/backlog.yml; the
// pushed commit gets one backlog/settings run, failing, with an annotation
// at each problem's line (the misspelt key's suggestion in it), for one
// check-run write; the findings reach GET /ready, the status page and the
// dashboard with their lines; a redelivery writes nothing; a fixed push
// gets success; a push of the file to another branch is checked without
// taking effect.
func TestE2ESettingsCheckRun(t *testing.T) {
	t.Parallel()
	x := newE2E(t)
	hana := x.Person("hana", "maintain")
	x.MustSettle(t)

	var mu sync.Mutex
	var writes []string
	x.Sim.Observe(func(ex ghsim.Exchange) {
		if ex.Method != http.MethodGet && ex.Method != http.MethodHead && strings.Contains(ex.Pattern, "/check-runs") {
			mu.Lock()
			writes = append(writes, ex.Method+" "+ex.Pattern)
			mu.Unlock()
		}
	}, nil)
	checkWrites := func() []string {
		mu.Lock()
		defer mu.Unlock()
		w := writes
		writes = nil
		return w
	}

	bad, err := hana.Push(x.Repo, "main", "", map[string]string{mirror.SettingsPath: badSettings}, "backlog settings")
	if err != nil {
		t.Fatal(err)
	}
	x.MustSettle(t)
	runs := x.settingsRuns(bad)
	if len(runs) != 1 {
		t.Fatalf("%d backlog/settings runs on the bad push's head, want 1", len(runs))
	}
	r := runs[0]
	if r.Conclusion != "failure" || r.Title != "2 problems in .github/backlog.yml" ||
		!strings.Contains(r.Summa, "Each setting that fails below keeps its last good value") {
		t.Errorf("run: %s %q\n%s", r.Conclusion, r.Title, r.Summa)
	}
	want := []struct {
		line int
		text string
	}{
		{4, "poision_threshold: unknown key, ignored; did you mean poison_threshold?"},
		{5, `require_item: "yes please" must be true or false; it keeps its last good value false`},
	}
	if len(r.Annotations) != len(want) {
		t.Fatalf("annotations %+v, want %d", r.Annotations, len(want))
	}
	for i, a := range r.Annotations {
		if a.Path != mirror.SettingsPath || a.StartLine != want[i].line || a.EndLine != want[i].line || a.Level != "failure" || a.Message != want[i].text {
			t.Errorf("annotation %d: %s:%d-%d %s %q, want %s:%d failure %q", i, a.Path, a.StartLine, a.EndLine, a.Level, a.Message,
				mirror.SettingsPath, want[i].line, want[i].text)
		}
	}
	if w := checkWrites(); !slices.Equal(w, []string{"POST /repos/{owner}/{repo}/check-runs"}) {
		t.Errorf("check-run writes for the push: %v, want one create", w)
	}

	// The findings, with their lines, where people look.
	s := x.mustReady(t)
	var details []string
	for _, d := range s.withCode(mirror.SettingsInvalid) {
		details = append(details, d.Detail)
	}
	for _, w := range []string{"line 4: " + want[0].text, "line 5: " + want[1].text} {
		if !slices.Contains(details, w) {
			t.Errorf("GET /ready's %s findings %q lack %q", mirror.SettingsInvalid, details, w)
		}
	}
	resp, err := http.Get(x.AdminURL + "/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(page), "line 4: poision_threshold") {
		t.Errorf("the status page does not show the problem at line 4:\n%s", page)
	}
	x.passFlush(t)
	ds := x.dashboards()
	if len(ds) != 1 {
		t.Fatalf("%d dashboard issues with the default settings, want one (dashboard: true is the default)", len(ds))
	}
	if body := plain(ds[0].Body); !strings.Contains(body, mirror.SettingsInvalid) || !strings.Contains(body, "line 4: poision_threshold") {
		t.Errorf("the dashboard does not list the problem at line 4:\n%s", body)
	}
	checkWrites()

	// A redelivery of the push writes nothing.
	var pushID int64
	for _, d := range x.Sim.Deliveries() {
		if d.Event == "push" && strings.Contains(string(d.Payload), bad) {
			pushID = d.ID
		}
	}
	if pushID == 0 {
		t.Fatal("no push delivery logged")
	}
	if err := x.Redeliver(t.Context(), pushID); err != nil {
		t.Fatal(err)
	}
	x.MustSettle(t)
	if w := checkWrites(); len(w) != 0 || len(x.settingsRuns(bad)) != 1 {
		t.Errorf("a redelivery wrote %v; %d runs on the head, want 1", w, len(x.settingsRuns(bad)))
	}

	// The fix gets success, on its own commit.
	fixed, err := hana.Push(x.Repo, "main", "", map[string]string{mirror.SettingsPath: "labels:\n  item: backlog\npoison_threshold: 2\nrequire_item: true\n"}, "fix settings")
	if err != nil {
		t.Fatal(err)
	}
	x.MustSettle(t)
	if runs := x.settingsRuns(fixed); len(runs) != 1 || runs[0].Conclusion != "success" || len(runs[0].Annotations) != 0 ||
		runs[0].Title != "Settings applied" || !strings.Contains(runs[0].Summa, "poison_threshold 3 → 2") {
		t.Errorf("runs on the fixed head: %+v, want one success with no annotations", runs)
	}
	if ds := x.mustReady(t).withCode(mirror.SettingsInvalid); len(ds) != 0 {
		t.Errorf("%s still reported after the fix: %+v", mirror.SettingsInvalid, ds)
	}

	// Another branch: checked, nothing takes effect.
	branch, err := hana.Push(x.Repo, "tweak", "main", map[string]string{mirror.SettingsPath: "poison_threshold: 0\n"}, "try a threshold")
	if err != nil {
		t.Fatal(err)
	}
	x.MustSettle(t)
	if runs := x.settingsRuns(branch); len(runs) != 1 || runs[0].Conclusion != "failure" || len(runs[0].Annotations) != 1 ||
		runs[0].Annotations[0].StartLine != 1 || !strings.Contains(runs[0].Summa, "Checked only: nothing takes effect from branch `tweak`") {
		t.Errorf("runs on the branch's head: %+v, want one failure annotated at line 1", runs)
	}
	if ds := x.mustReady(t).withCode(mirror.SettingsInvalid); len(ds) != 0 {
		t.Errorf("a push to another branch reported %s: %+v", mirror.SettingsInvalid, ds)
	}

	// Deleting the file: the defaults apply.
	gone, err := hana.Push(x.Repo, "main", "", map[string]string{mirror.SettingsPath: ""}, "no settings")
	if err != nil {
		t.Fatal(err)
	}
	x.MustSettle(t)
	if runs := x.settingsRuns(gone); len(runs) != 1 || runs[0].Conclusion != "success" || runs[0].Title != "No settings file: the defaults apply" {
		t.Errorf("runs on the deleting head: %+v", runs)
	}
	t.Logf("check-run writes after the fix: %v", checkWrites())
}

// TestE2ESettingsCheckRunAgentAndRetry: an agent's push of a changed file
// gets a failing run naming each refused change at its line; a push whose
// run could not be created (GitHub failed the create) gets it on the
// delivery's retry, judged once and written once.
func TestE2ESettingsCheckRunAgentAndRetry(t *testing.T) {
	t.Parallel()
	x := newE2E(t)
	bot := x.Sim.As("builder[bot]")
	x.Sim.SetRole(x.Repo, "builder[bot]", "write")
	hana := x.Person("hana", "maintain")
	x.MustSettle(t)

	head, err := bot.Push(x.Repo, "main", "", map[string]string{mirror.SettingsPath: "# tuned\n\ndry_run: true\n"}, "tune")
	if err != nil {
		t.Fatal(err)
	}
	x.MustSettle(t)
	runs := x.settingsRuns(head)
	if len(runs) != 1 || runs[0].Conclusion != "failure" || runs[0].Title != "Settings change refused: 1 problem" ||
		len(runs[0].Annotations) != 1 || runs[0].Annotations[0].StartLine != 3 ||
		!strings.HasPrefix(runs[0].Annotations[0].Message, "dry_run: a push not made by a human would change it from false to true") {
		t.Fatalf("runs on the agent's head: %+v", runs)
	}
	if ds := x.mustReady(t).withCode(mirror.SettingsChangedByAgent); len(ds) != 1 || !strings.HasPrefix(ds[0].Detail, "line 3: dry_run: ") {
		t.Errorf("GET /ready's %s findings %+v, want one at line 3", mirror.SettingsChangedByAgent, ds)
	}

	// (A request the fault answers is not observed: the create that
	// failed shows as the second read of the file, by the retry.)
	var mu sync.Mutex
	var calls []string
	x.Sim.Observe(func(ex ghsim.Exchange) {
		if strings.Contains(ex.Pattern, "/check-runs") || strings.Contains(ex.Path, "/contents/.github") {
			mu.Lock()
			calls = append(calls, fmt.Sprintf("%s %s %d", ex.Method, ex.Pattern, ex.Status))
			mu.Unlock()
		}
	}, nil)
	x.Sim.FailNext(1, http.StatusBadGateway, http.MethodPost, "/repos/"+x.Repo.FullName+"/check-runs")
	fixed, err := hana.Push(x.Repo, "main", "", map[string]string{mirror.SettingsPath: "dry_run: false\nposion_threshold: 2\n"}, "settings")
	if err != nil {
		t.Fatal(err)
	}
	x.MustSettle(t)
	runs = x.settingsRuns(fixed)
	if len(runs) != 1 || runs[0].Conclusion != "failure" || len(runs[0].Annotations) != 1 || runs[0].Annotations[0].StartLine != 2 ||
		!strings.Contains(runs[0].Annotations[0].Message, "did you mean poison_threshold?") {
		t.Fatalf("runs on the head whose first create failed: %+v, want one, annotated at line 2", runs)
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{
		"GET /repos/{owner}/{repo}/contents/* 200",               // the push judged; the create fails
		"GET /repos/{owner}/{repo}/contents/* 200",               // the retry: judged already, the run rebuilt from the file
		"GET /repos/{owner}/{repo}/commits/{ref}/check-runs 200", // the create under way may have made it: looked for
		"POST /repos/{owner}/{repo}/check-runs 201",
	}
	if !slices.Equal(calls, want) {
		t.Errorf("calls for the push whose create failed:\n  %s\nwant\n  %s", strings.Join(calls, "\n  "), strings.Join(want, "\n  "))
	}
}

// TestE2ESettingsCheckRunSameCommitTwice: a commit checked on a branch and
// then brought to the default branch as it is (no new commit) keeps its one
// run, edited to say the settings were applied, its annotations not sent a
// second time.
func TestE2ESettingsCheckRunSameCommitTwice(t *testing.T) {
	t.Parallel()
	x := newE2E(t)
	hana := x.Person("hana", "maintain")
	x.MustSettle(t)
	head, err := hana.Push(x.Repo, "tune", "main", map[string]string{mirror.SettingsPath: "poison_threshold: 2\ndashbord: false\n"}, "tune")
	if err != nil {
		t.Fatal(err)
	}
	x.MustSettle(t)
	runs := x.settingsRuns(head)
	if len(runs) != 1 || runs[0].Title != "1 problem in .github/backlog.yml" || !strings.Contains(runs[0].Summa, "Checked only") {
		t.Fatalf("runs on the branch's head: %+v", runs)
	}
	if err := hana.ForcePush(x.Repo, "main", head); err != nil {
		t.Fatal(err)
	}
	x.MustSettle(t)
	runs = x.settingsRuns(head)
	if len(runs) != 1 || runs[0].Conclusion != "failure" || !strings.Contains(runs[0].Summa, "The settings take effect: poison_threshold 3 → 2") ||
		len(runs[0].Annotations) != 1 || !strings.Contains(runs[0].Annotations[0].Message, "did you mean dashboard?") {
		t.Errorf("runs on the commit once on main: %+v, want the one run, edited, its one annotation kept", runs)
	}
	if got := x.mustReady(t).withCode(mirror.SettingsInvalid); len(got) != 1 || !strings.HasPrefix(got[0].Detail, "line 2: dashbord:") {
		t.Errorf("GET /ready's %s: %+v, want the problem at line 2", mirror.SettingsInvalid, got)
	}
}
