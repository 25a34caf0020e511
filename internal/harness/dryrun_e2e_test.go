package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/internal/clock"
	"github.com/wardenhq/warden/internal/config"
	"github.com/wardenhq/warden/internal/ghsim"
	"github.com/wardenhq/warden/mirror"
	"github.com/wardenhq/warden/mirror/store"
)

// End-to-end test of CONTRACT.md §2's `dry_run: true` ("observe and report
// only; write nothing to GitHub, labels included"): one workload that
// reaches every GitHub write warden makes, run on a repository whose
// `.github/backlog.yml` says dry_run false (the control), dry_run true
// from before the App was installed on it, and dry_run true pushed by a
// maintainer. In the control the simulator counts warden's writes on
// every path; with dry_run true it counts none, while warden still
// observes: the ledger, the ready set, the findings, the status page, and
// a log line for each write it held back.

// dryRunRepo is the repository added to the harness's installation with
// its settings file already on main.
const dryRunRepo = "acme/dry"

// dryRunSettings is the workload's settings file: dry_run as given, a
// threshold of two attempts, warden's own claim markers on (one more write
// path), the dashboard and the check run on (the defaults).
func dryRunSettings(dry bool) string {
	return fmt.Sprintf("dry_run: %t\npoison_threshold: 2\npost_markers: true\ndashboard: true\ncheck_run: true\n", dry)
}

// syncBuffer is warden's log, written by several goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// lines is the log's JSON records.
func (b *syncBuffer) lines() []map[string]any {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	for _, l := range strings.Split(b.buf.String(), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(l), &rec) == nil {
			out = append(out, rec)
		}
	}
	return out
}

// dryRunRun is what one run of the workload left behind.
type dryRunRun struct {
	writes []ghsim.Exchange // every non-GET request warden made on the repository once the file landed
	repo   string           // the repository's full name
	held   int              // log lines at info for writes dry_run held back
	x      *e2e             // the run's view of the repository
	ids    dryRunItems

	mu   *sync.Mutex
	logs *syncBuffer
}

// byRoute counts writes by method and route pattern.
func (r dryRunRun) byRoute() map[string]int {
	out := map[string]int{}
	for _, w := range r.writes {
		out[w.Method+" "+w.Pattern]++
	}
	return out
}

func (r dryRunRun) describe() string {
	routes := r.byRoute()
	keys := make([]string, 0, len(routes))
	for k := range routes {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "\n  %3d %s", routes[k], k)
	}
	return b.String()
}

// dryRunItems are the workload's issues.
type dryRunItems struct {
	gatedByWarden, gatedOpen, agentRemoved, itemLabel, poison, manual, commands, epic int
	pr                                                                                int
	head                                                                              string
}

// startDryRun starts warden and the simulator with the workload's
// settings file (dryRunSettings(dry)) on a repository, and records every
// write request warden makes on that repository once the file landed.
//
// By default the repository is dryRunRepo, added to the installation with
// the file pushed by a maintainer while the simulator's deliveries are
// held (a file on the repository before the App was installed there: only
// installation_repositories.added is sent), so every write warden ever
// makes on it is recorded, the labels it creates at install included.
// pushed: the repository is the harness's own, served with the defaults,
// and a maintainer pushes the file; writes are recorded from when that
// push was handled.
func startDryRun(t *testing.T, dry, pushed bool) *dryRunRun {
	t.Helper()
	logs := &syncBuffer{}
	clk := &clock.Offset{}
	env := New(t, Options{Now: clk.Now, Log: logs, Settings: func(s *config.Settings) { s.Quarantine = e2eQuarantine }})
	run := &dryRunRun{mu: &sync.Mutex{}, logs: logs, repo: dryRunRepo}
	if pushed {
		run.repo = env.Repo.FullName
	}
	mu, recording := run.mu, !pushed
	prefix := "/repos/" + strings.ToLower(run.repo)
	env.Sim.Observe(func(x ghsim.Exchange) {
		p := strings.ToLower(x.Path)
		if x.Method == http.MethodGet || x.Method == http.MethodHead || (p != prefix && !strings.HasPrefix(p, prefix+"/")) {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if recording {
			run.writes = append(run.writes, x)
		}
	}, nil)
	env.MustSettle(t)

	repo := env.Repo
	if !pushed {
		env.Sim.HoldDeliveries()
		repo = env.Sim.AddRepo(env.Inst, dryRunRepo, "main")
	}
	for login, role := range map[string]string{"maria": "maintain", "dev": "write", "builder[bot]": "write",
		"worker-7[bot]": "write", "pm-agent[bot]": "write"} {
		env.Sim.SetRole(repo, login, role)
	}
	_, err := env.Sim.As("maria").Push(repo, "main", "", map[string]string{mirror.SettingsPath: dryRunSettings(dry)}, "backlog settings")
	if !pushed {
		env.Sim.ReleaseDeliveries(func(n int) []int { return []int{0} }) // installation_repositories.added only
	}
	if err != nil {
		t.Fatal(err)
	}
	env.MustSettle(t)
	mu.Lock()
	recording = true
	mu.Unlock()
	run.x = &e2e{Env: &Env{Sim: env.Sim, GitHub: env.GitHub, Service: env.Service, PublicURL: env.PublicURL,
		AdminURL: env.AdminURL, Inst: env.Inst, Repo: repo}, clk: clk}
	if got := env.Service.Mirror.Settings(context.Background(), mustServed(t, env, repo.FullName)).DryRun; got != dry {
		t.Fatalf("%s: dry_run %t in effect after the settings file landed, want %t", repo.FullName, got, dry)
	}
	return run
}

// mustServed is the ledger's record of a served repository.
func mustServed(t *testing.T, env *Env, fullName string) store.Repo {
	t.Helper()
	r, err := env.Service.Ledger.Repo(context.Background(), fullName)
	if err != nil {
		t.Fatalf("%s is not served: %v", fullName, err)
	}
	return r
}

// snapshot copies what the run recorded so far, and counts warden's log
// lines at info about writes dry_run held back on dryRunRepo.
func (r *dryRunRun) snapshot() dryRunRun {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := *r
	out.writes = append([]ghsim.Exchange(nil), r.writes...)
	out.held = 0
	for _, rec := range r.logs.lines() {
		if rec["level"] == "INFO" && strings.HasPrefix(fmt.Sprint(rec["msg"]), "dry run") && rec["repo"] == r.repo {
			out.held++
		}
	}
	return out
}

// open opens an issue on the run's repository as login, with labels.
func (x *e2e) open(t *testing.T, login, title string, labels ...string) int {
	t.Helper()
	iss, err := x.Sim.As(login).OpenIssue(x.Repo, title, "spec of "+title, labels...)
	if err != nil {
		t.Fatalf("%s opens %q: %v", login, title, err)
	}
	x.MustSettle(t)
	return iss.Number
}

// unlabel removes a label as login and settles.
func (x *e2e) unlabel(t *testing.T, login string, n int, label string) {
	t.Helper()
	if _, err := x.Sim.As(login).RemoveLabel(x.Repo, n, label); err != nil {
		t.Fatalf("%s removes %s from #%d: %v", login, label, n, err)
	}
	x.MustSettle(t)
}

// driveDryRun is the workload: every GitHub write warden makes, reached
// through what humans and agents do on GitHub and through the agent API.
func driveDryRun(t *testing.T, x *e2e) dryRunItems {
	t.Helper()
	var ids dryRunItems
	maria, bot := x.Sim.As("maria"), "builder[bot]"

	// An agent's item without the admission label: warden adds it.
	ids.gatedByWarden = x.open(t, bot, "Proposed by an agent", lblItem)
	// An agent's item with it, admitted by a human removing the label.
	ids.gatedOpen = x.open(t, bot, "Proposed and gated", lblItem, lblAdmission)
	x.unlabel(t, "maria", ids.gatedOpen, lblAdmission)
	// An agent removes the admission label (reverted, reported), and the
	// item label of another item (reverted, reported).
	ids.agentRemoved = x.open(t, bot, "Agent lifts its own gate", lblItem, lblAdmission)
	x.unlabel(t, bot, ids.agentRemoved, lblAdmission)
	ids.itemLabel = x.open(t, "maria", "Agent drops the item", lblItem)
	x.unlabel(t, bot, ids.itemLabel, lblItem)

	// Two custody changes with markers on the trail (warden posts its own,
	// post_markers): poison at the threshold, parked by warden.
	ids.poison = x.open(t, "maria", "Rotate the keys", lblItem)
	x.cycle(t, WorkerToken, "worker-7/a", x.Sim.As("worker-7[bot]"), idOf(ids.poison))
	x.cycle(t, PMToken, "pm/b", x.Sim.As("pm-agent[bot]"), idOf(ids.poison))
	x.MustSweep(t)

	// A human parks by label (no question yet); an agent takes the label
	// off (reverted, reported).
	ids.manual = x.open(t, "maria", "Parked by hand", lblItem)
	if _, err := maria.AddLabels(x.Repo, ids.manual, lblParked); err != nil {
		t.Fatal(err)
	}
	x.MustSettle(t)
	x.unlabel(t, bot, ids.manual, lblParked)

	// A pull request that links an item: its check run, created; then
	// /backlog commands on the item (one a minute per person and item):
	// park with a question (the run is edited to failure), status, unpark,
	// a refused resolve; a bot's admit (ignored) and a human's admit on
	// the item warden gated; a recheck on the pull request; the merge
	// (merged-not-complete).
	ids.commands = x.open(t, "maria", "Commanded", lblItem)
	p := x.branchPR(t, "feat/store", "", "main", fmt.Sprintf("Closes #%d", ids.commands))
	ids.pr, ids.head = p.N, p.HeadSHA
	for _, body := range []string{"/backlog park ruling-owner=pm ruling-topic=design\nWhich store?", "/backlog status",
		"/backlog unpark", "/backlog resolve"} {
		x.say(t, maria, ids.commands, body)
		x.MustSettle(t)
		x.clk.Advance(61 * time.Second)
	}
	x.say(t, x.Sim.As(bot), ids.gatedByWarden, "/backlog admit")
	x.say(t, maria, ids.gatedByWarden, "/backlog admit")
	x.say(t, maria, p.N, "/backlog recheck")
	x.MustSettle(t)
	x.merge(t, p.N)

	// An epic and a member made through the API (the member is mirrored as
	// a native sub-issue), and a sub-issue a human makes on GitHub.
	x.branch(t, "epic/store", "")
	ids.epic = x.open(t, "maria", "Epic: the store", lblItem)
	if code, out := x.patchItem(t, PMToken, idOf(ids.epic), map[string]any{"addTags": []string{"baseBranch:epic/store"},
		"removeTags": []string{"baseBranch:main"}}); code != http.StatusOK {
		t.Fatalf("PATCH the epic's baseBranch: %d %v", code, out)
	}
	var made map[string]any
	code, err := x.API(context.Background(), PMToken, http.MethodPost, "/items", map[string]any{
		"title": "Member of the epic", "specification": "spec", "tags": []string{"priority:P2"},
		"links": []map[string]string{{"rel": "partOf", "target": idOf(ids.epic)}}}, &made)
	if err != nil {
		t.Fatal(err)
	}
	x.MustSettle(t)
	if code == http.StatusCreated || code == http.StatusOK {
		if _, err := maria.AddSubIssue(x.Repo, ids.epic, ids.manual); err != nil {
			t.Fatal(err)
		}
	} else if made["reason"] != "DryRun" {
		t.Errorf("POST /items answered %d %v, want created, or refused as DryRun", code, made)
	}
	x.MustSettle(t)

	// The reconcile pass (the dashboard, the backstops) and the timer pass
	// across the report comments' coalescing window.
	x.pass(t, mirror.ReconcileOptions{})
	x.flush(t)
	x.pass(t, mirror.ReconcileOptions{})
	x.flush(t)
	return ids
}

// TestE2EDryRunWritesNothing: the workload with dry_run false writes on
// every path (the control: the instrument sees writes), and with dry_run
// true, in the file when the App was installed or pushed by a maintainer
// later, writes nothing at all to the repository, labels included, while
// the findings are still computed and each held-back write is logged.
func TestE2EDryRunWritesNothing(t *testing.T) {
	t.Parallel()
	var control, atInstall, pushed dryRunRun
	t.Run("workloads", func(t *testing.T) {
		t.Run("dry_run false", func(t *testing.T) {
			t.Parallel()
			r := startDryRun(t, false, false)
			r.ids = driveDryRun(t, r.x)
			control = r.snapshot()
			checkControl(t, control)
		})
		t.Run("dry_run true at install", func(t *testing.T) {
			t.Parallel()
			r := startDryRun(t, true, false)
			r.ids = driveDryRun(t, r.x)
			atInstall = r.snapshot()
			checkDryRun(t, atInstall)
		})
		t.Run("dry_run true pushed", func(t *testing.T) {
			t.Parallel()
			r := startDryRun(t, true, true)
			r.ids = driveDryRun(t, r.x)
			pushed = r.snapshot()
			checkDryRun(t, pushed)
		})
	})
	t.Logf("writes: dry_run false %d, dry_run true %d (in the file at install) and %d (pushed); held-back writes logged: %d, %d, %d",
		len(control.writes), len(atInstall.writes), len(pushed.writes), control.held, atInstall.held, pushed.held)
	t.Logf("dry_run false:%s", control.describe())
}

// dryRunRoutes are the write paths the control must show: labels created
// at install, added and removed; comments posted (markers, the park
// comment, the report) and edited (the report); reactions; the check run
// created; the dashboard issue; the API's issue and its sub-issue.
var dryRunRoutes = []string{
	"POST /repos/{owner}/{repo}/labels",
	"POST /repos/{owner}/{repo}/issues/{issue_number}/labels",
	"DELETE /repos/{owner}/{repo}/issues/{issue_number}/labels/{name}",
	"POST /repos/{owner}/{repo}/issues/{issue_number}/comments",
	"PATCH /repos/{owner}/{repo}/issues/comments/{comment_id}",
	"POST /repos/{owner}/{repo}/issues/comments/{comment_id}/reactions",
	"POST /repos/{owner}/{repo}/check-runs",
	"PATCH /repos/{owner}/{repo}/check-runs/{check_run_id}",
	"POST /repos/{owner}/{repo}/issues",
	"POST /repos/{owner}/{repo}/issues/{issue_number}/sub_issues",
}

// checkControl: with dry_run false the workload reaches every write path,
// and what it wrote is on GitHub (the instrument sees writes, and the
// workload is the one the dry run is held to).
func checkControl(t *testing.T, r dryRunRun) {
	t.Helper()
	x := r.x
	routes := r.byRoute()
	for _, want := range dryRunRoutes {
		if routes[want] == 0 {
			t.Errorf("the control (dry_run false) made no %s: the workload does not reach that write path; writes:%s", want, r.describe())
		}
	}
	if r.held != 0 {
		t.Errorf("the control (dry_run false) logged %d writes held back by dry run, want none", r.held)
	}
	if !x.labels(r.ids.agentRemoved)[lblAdmission] {
		t.Errorf("control: #%d lacks the admission label an agent removed (warden re-adds it)", r.ids.agentRemoved)
	}
	if !x.labels(r.ids.poison)[lblParked] || len(x.parkComments(r.ids.poison)) != 1 {
		t.Errorf("control: #%d (poison) labels %v, %d park comments; want parked with one park comment",
			r.ids.poison, x.labels(r.ids.poison), len(x.parkComments(r.ids.poison)))
	}
	if len(x.checkRuns(r.ids.head)) != 1 || len(x.dashboards()) != 1 || len(x.reportComments(r.ids.agentRemoved)) != 1 {
		t.Errorf("control: %d check runs on the pull request's head, %d dashboards, %d report comments on #%d; want one each",
			len(x.checkRuns(r.ids.head)), len(x.dashboards()), len(x.reportComments(r.ids.agentRemoved)), r.ids.agentRemoved)
	}
}

// checkDryRun: with dry_run true nothing is written to the repository, no
// delivery failed or was retried (no error loop), and warden still
// observes: the ready set and the findings, the status page, a log line
// at info for the writes it held back.
func checkDryRun(t *testing.T, r dryRunRun) {
	t.Helper()
	x := r.x
	if len(r.writes) != 0 {
		t.Errorf("dry_run true: warden made %d writes on %s, want none:%s", len(r.writes), r.repo, r.describe())
	}
	recs, err := x.Service.Inbox.List(context.Background(), false, 1000)
	if err != nil {
		t.Fatal(err)
	}
	for _, rec := range recs {
		if rec.State != "done" || rec.Attempts > 1 || rec.LastError != "" {
			t.Errorf("dry_run true: delivery %s %s.%s: state %s after %d attempts (%s)", rec.ID, rec.Event, rec.Action, rec.State, rec.Attempts, rec.LastError)
		}
	}
	if r.held == 0 {
		t.Errorf("dry_run true: warden logged no write it held back (want a line at info for each)")
	}
	if len(x.checkRuns(r.ids.head)) != 0 || len(x.dashboards()) != 0 || len(x.parkComments(r.ids.poison)) != 0 {
		t.Errorf("dry_run true: %d check runs, %d dashboards, %d park comments", len(x.checkRuns(r.ids.head)), len(x.dashboards()), len(x.parkComments(r.ids.poison)))
	}
	for _, n := range []int{r.ids.gatedByWarden, r.ids.agentRemoved} {
		if x.labels(n)[lblAdmission] {
			t.Errorf("dry_run true: #%d carries the admission label: warden added it", n)
		}
	}
	s := x.mustReady(t)
	agentRemoved, poison, gated := idOf(r.ids.agentRemoved), idOf(r.ids.poison), idOf(r.ids.gatedOpen)
	if s.codes(agentRemoved)[mirror.CodeAgentRemovedAdmission] == 0 {
		t.Errorf("dry_run true: GET /ready does not report %s for %s: %+v", mirror.CodeAgentRemovedAdmission, agentRemoved, s.Defects)
	}
	if s.has(agentRemoved) {
		t.Errorf("dry_run true: %s is ready: an agent's removal of the admission label admitted it", agentRemoved)
	}
	if s.exclusion(poison) != gating.ExPoisoned {
		t.Errorf("dry_run true: %s excluded as %q, want %s (at the threshold, not parked: the park is a write)", poison, s.exclusion(poison), gating.ExPoisoned)
	}
	if !s.has(gated) {
		t.Errorf("dry_run true: %s, admitted by a human's label removal, is not ready (excluded as %q)", gated, s.exclusion(gated))
	}
	if it := x.mustItem(t, idOf(r.ids.manual)); !it.has("state:parked") {
		t.Errorf("dry_run true: %s, parked by a human's label, lacks state:parked in the ledger: %v", it.ID, it.Tags)
	}
	resp, err := http.Get(x.AdminURL + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var page bytes.Buffer
	page.ReadFrom(resp.Body)
	if !strings.Contains(page.String(), r.repo) || !strings.Contains(page.String(), mirror.CodeAgentRemovedAdmission) {
		t.Errorf("dry_run true: the status page (%d) does not show %s's %s", resp.StatusCode, r.repo, mirror.CodeAgentRemovedAdmission)
	}
}
