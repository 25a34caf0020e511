package mirror

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wardenhq/warden/app"
	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/internal/clock"
	"github.com/wardenhq/warden/internal/db"
	"github.com/wardenhq/warden/internal/ghsim"
	"github.com/wardenhq/warden/mirror/store"
)

// dashSlowRT delays every issue listing and creation, so that concurrent
// writers overlap on GitHub; hook, when set, runs before each request is
// sent.
type dashSlowRT struct {
	base  http.RoundTripper
	delay atomic.Int64 // nanoseconds
	hook  atomic.Pointer[func(*http.Request)]
}

func (s *dashSlowRT) RoundTrip(req *http.Request) (*http.Response, error) {
	if h := s.hook.Load(); h != nil {
		(*h)(req)
	}
	if d := time.Duration(s.delay.Load()); d > 0 && strings.HasSuffix(req.URL.Path, "/issues") {
		time.Sleep(d)
	}
	return s.base.RoundTrip(req)
}

type dashEnv struct {
	t      *testing.T
	ctx    context.Context
	sim    *ghsim.Sim
	ghRepo *ghsim.Repo
	repo   store.Repo
	rt     *countingRT
	slow   *dashSlowRT
	a      *app.App
	dbPath string
	d      *db.DB
	dash   *Dashboards
	clock  *clock.Manual
	on     atomic.Bool
	dry    atomic.Bool
	human  *ghsim.Actor
}

func newDashEnv(t *testing.T) *dashEnv {
	t.Helper()
	ctx := context.Background()
	sim, err := ghsim.New(ghsim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv := sim.Start()
	t.Cleanup(func() { srv.Close(); sim.Close() })
	inst := sim.Install("acme", "installer")
	ghRepo := sim.AddRepo(inst, "acme/app", "main")
	rt := &countingRT{base: http.DefaultTransport}
	slow := &dashSlowRT{base: rt}
	a, err := app.New(app.Config{AppID: sim.AppID(), PrivateKey: sim.PrivateKeyPEM(), BaseURL: srv.URL + "/",
		Transport: slow, Retries: -1, MaxWait: -1})
	if err != nil {
		t.Fatal(err)
	}
	e := &dashEnv{t: t, ctx: ctx, sim: sim, ghRepo: ghRepo, rt: rt, slow: slow, a: a,
		dbPath: filepath.Join(t.TempDir(), "dash.db"),
		clock:  clock.New(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)),
		repo:   store.Repo{ID: ghRepo.ID, FullName: "acme/app", Installation: inst.ID, DefaultBranch: "main"}}
	e.on.Store(true)
	e.human = sim.As("alice")
	sim.SetRole(ghRepo, "alice", "admin")
	e.reopen()
	return e
}

// reopen opens the database anew and a new Dashboards over it: a restart.
func (e *dashEnv) reopen() {
	e.t.Helper()
	if e.d != nil {
		e.d.Close()
	}
	d, err := db.Open(e.ctx, "sqlite:"+e.dbPath)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { d.Close() })
	e.d = d
	e.dash = e.newDashboards(d)
}

// freshDB switches to a new, empty database (warden's record lost; GitHub
// unchanged).
func (e *dashEnv) freshDB() {
	e.t.Helper()
	e.dbPath = filepath.Join(e.t.TempDir(), "dash2.db")
	e.reopen()
}

func (e *dashEnv) newDashboards(d *db.DB) *Dashboards {
	e.t.Helper()
	ds, err := OpenDashboards(testStore(e.t, d), e.a, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		e.t.Fatal(err)
	}
	ds.Now = e.clock.Now
	ds.Bot = e.sim.BotLogin
	ds.Settings = func(context.Context, store.Repo) gating.Settings {
		s := gating.DefaultSettings()
		s.Dashboard, s.DryRun = e.on.Load(), e.dry.Load()
		return s
	}
	return ds
}

func dashBody(ready ...int) string {
	rep := gating.Report{Summary: gating.ReportSummary{Items: len(ready)}}
	for _, n := range ready {
		rep.Ready = append(rep.Ready, gating.ReadyEntry{Item: gating.IDFor(n), Priority: "P2"})
	}
	return gating.RenderDashboard("acme/app", "https://github.com/", rep, nil, reportStatus)
}

func (e *dashEnv) sync(body, want string) {
	e.t.Helper()
	e.syncDry(body, false, want)
}

func (e *dashEnv) syncDry(body string, dry bool, want string) {
	e.t.Helper()
	out, err := e.dash.Sync(e.ctx, e.repo, body, dry)
	if err != nil {
		e.t.Fatalf("Sync: %v", err)
	}
	if out != want {
		e.t.Fatalf("Sync: %q, want %q", out, want)
	}
}

// expectCalls checks the GitHub calls made since the last check; a
// listing answered 304 (revalidated from warden's cache) counts as 200.
func (e *dashEnv) expectCalls(want ...string) {
	e.t.Helper()
	got := e.rt.take()
	for i, c := range got {
		if rest, ok := strings.CutSuffix(c, " 304"); ok && strings.HasPrefix(c, "GET ") {
			got[i] = rest + " 200"
		}
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		e.t.Fatalf("GitHub calls\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

type dashIssue struct {
	number             int
	title, body, state string
	author             string
	deleted, dashboard bool
}

// issues returns every issue of the repository, by number.
func (e *dashEnv) issues() []dashIssue {
	var out []dashIssue
	e.sim.Locked(func() {
		for n, i := range e.ghRepo.Issues {
			d := dashIssue{number: n, title: i.Title, body: i.Body, state: i.State, deleted: i.Deleted,
				dashboard: strings.HasPrefix(i.Body, gating.DashboardMarker)}
			if i.User != nil {
				d.author = i.User.Login
			}
			out = append(out, d)
		}
	})
	slices.SortFunc(out, func(a, b dashIssue) int { return a.number - b.number })
	return out
}

// openDashboards returns the open, undeleted dashboard issues warden's bot
// opened.
func (e *dashEnv) openDashboards() []dashIssue {
	var out []dashIssue
	for _, i := range e.issues() {
		if i.dashboard && !i.deleted && i.state == "open" && i.author == e.sim.BotLogin() {
			out = append(out, i)
		}
	}
	return out
}

// only returns the one open dashboard issue, checking its title, author and
// body.
func (e *dashEnv) only(body string) int {
	e.t.Helper()
	ds := e.openDashboards()
	if len(ds) != 1 {
		e.t.Fatalf("%d open dashboard issues, want 1: %+v", len(ds), ds)
	}
	i := ds[0]
	if i.title != "Backlog dashboard" {
		e.t.Errorf("title %q, want exactly %q", i.title, "Backlog dashboard")
	}
	if i.author != e.sim.BotLogin() {
		e.t.Errorf("opened by %s, want warden's bot %s", i.author, e.sim.BotLogin())
	}
	if first, _, _ := strings.Cut(i.body, "\n"); first != "<!-- backlog-warden: dashboard -->" {
		e.t.Errorf("first line %q", first)
	}
	if i.body != body {
		e.t.Errorf("body on GitHub:\n%s\nwant\n%s", i.body, body)
	}
	if n, err := e.dash.Number(e.ctx, e.repo.ID); err != nil || n != i.number {
		e.t.Errorf("recorded issue %d (%v), want %d", n, err, i.number)
	}
	return i.number
}

// rows is how many dashboard rows warden keeps (the tests write only the
// one of e.repo).
func (e *dashEnv) rows() int {
	e.t.Helper()
	_, found, err := e.dash.rows.Get(e.ctx, e.repo.ID)
	if err != nil {
		e.t.Fatal(err)
	}
	if found {
		return 1
	}
	return 0
}

func TestDashboardCreatesOneIssue(t *testing.T) {
	e := newDashEnv(t)
	b1 := dashBody(1, 2)
	e.sync(b1, "dashboard created #1")
	e.expectCalls("GET /repos/acme/app/issues 200", "POST /repos/acme/app/issues 201")
	if n := e.only(b1); n != 1 {
		t.Fatalf("dashboard is #%d", n)
	}
	// The same body again: nothing to do, no GitHub call at all.
	for range 3 {
		e.sync(b1, DashboardUnchanged)
	}
	e.expectCalls()
	// A changed body: exactly one edit, in place.
	b2 := dashBody(1, 2, 3)
	e.sync(b2, DashboardUpdated)
	e.expectCalls("PATCH /repos/acme/app/issues/1 200")
	e.only(b2)
	e.sync(b2, DashboardUnchanged)
	e.expectCalls()
	if len(e.issues()) != 1 {
		t.Errorf("%d issues, want 1", len(e.issues()))
	}
}

func TestDashboardDeletedIsRecreated(t *testing.T) {
	e := newDashEnv(t)
	e.human.OpenIssue(e.ghRepo, "unrelated", "text")
	b1 := dashBody(1)
	e.sync(b1, "dashboard created #2")
	e.rt.take()
	if err := e.human.DeleteIssue(e.ghRepo, 2); err != nil {
		t.Fatal(err)
	}
	b2 := dashBody(1, 4)
	e.sync(b2, "dashboard recreated #3 (the previous one was deleted)")
	e.expectCalls("PATCH /repos/acme/app/issues/2 410", "POST /repos/acme/app/issues 201")
	if n := e.only(b2); n != 3 {
		t.Errorf("dashboard is #%d, want #3", n)
	}
	e.sync(b2, DashboardUnchanged)
	e.expectCalls()
}

// A dashboard closed by a human is reopened by warden's next edit (closing
// is no way to turn it off: the setting is); until its content changes it
// stays as it is, and no call is spent on finding out.
func TestDashboardClosedIsReopenedAtNextChange(t *testing.T) {
	e := newDashEnv(t)
	b1 := dashBody(1)
	e.sync(b1, "dashboard created #1")
	e.rt.take()
	if _, err := e.human.CloseIssue(e.ghRepo, 1, "not_planned"); err != nil {
		t.Fatal(err)
	}
	e.sync(b1, DashboardUnchanged)
	e.expectCalls()
	if ds := e.openDashboards(); len(ds) != 0 {
		t.Fatalf("reopened without a change: %+v", ds)
	}
	b2 := dashBody(1, 2)
	e.sync(b2, DashboardUpdated)
	e.expectCalls("PATCH /repos/acme/app/issues/1 200")
	if n := e.only(b2); n != 1 {
		t.Errorf("dashboard is #%d, want #1 reopened", n)
	}
	// Invalidate (a handler saw the dashboard closed, edited or renamed by
	// hand) makes the next Sync write the same content again.
	if _, err := e.human.CloseIssue(e.ghRepo, 1, "completed"); err != nil {
		t.Fatal(err)
	}
	title := "my notes"
	if _, err := e.human.EditIssue(e.ghRepo, 1, &title, nil); err != nil {
		t.Fatal(err)
	}
	if err := e.dash.Invalidate(e.ctx, e.repo.ID); err != nil {
		t.Fatal(err)
	}
	e.sync(b2, DashboardUpdated)
	e.expectCalls("PATCH /repos/acme/app/issues/1 200")
	e.only(b2)
	if len(e.issues()) != 1 {
		t.Errorf("%d issues, want 1", len(e.issues()))
	}
}

func TestDashboardDryRunAndOff(t *testing.T) {
	e := newDashEnv(t)
	b1 := dashBody(1)
	e.syncDry(b1, true, DashboardDryRun)
	e.dry.Store(true)
	e.syncDry(b1, false, DashboardDryRun)
	e.expectCalls()
	if n := e.rows(); n != 0 {
		t.Errorf("dry run wrote %d rows", n)
	}
	e.dry.Store(false)
	e.on.Store(false)
	e.sync(b1, DashboardOff)
	e.expectCalls()
	if len(e.issues()) != 0 || e.rows() != 0 {
		t.Fatal("dashboard off wrote something")
	}
	// On: created; a dry run with a changed body writes nothing; off again
	// leaves the issue as it is.
	e.on.Store(true)
	e.sync(b1, "dashboard created #1")
	e.rt.take()
	e.syncDry(dashBody(1, 2), true, DashboardDryRun)
	e.expectCalls()
	e.only(b1)
	e.on.Store(false)
	e.sync(dashBody(1, 2, 3), DashboardOff)
	e.expectCalls()
	e.only(b1)
}

func TestDashboardConcurrentSyncsCreateOneIssue(t *testing.T) {
	for _, same := range []bool{true, false} {
		t.Run(fmt.Sprintf("same body %v", same), func(t *testing.T) {
			e := newDashEnv(t)
			e.slow.delay.Store(int64(50 * time.Millisecond))
			const n = 6
			bodies := make([]string, n)
			for i := range bodies {
				bodies[i] = dashBody(1)
				if !same {
					bodies[i] = dashBody(1, 100+i)
				}
			}
			outs := make([]string, n)
			errs := make([]error, n)
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					outs[i], errs[i] = e.dash.Sync(e.ctx, e.repo, bodies[i], false)
				}()
			}
			close(start)
			wg.Wait()
			created := 0
			for i := range n {
				if errs[i] != nil {
					t.Fatalf("Sync %d: %v", i, errs[i])
				}
				if strings.HasPrefix(outs[i], "dashboard created") {
					created++
				}
			}
			if created != 1 {
				t.Errorf("outcomes %q: want one creation", outs)
			}
			posts := 0
			for _, c := range e.rt.take() {
				if strings.HasPrefix(c, "POST ") {
					posts++
				}
			}
			if posts != 1 {
				t.Errorf("%d issue creations on GitHub, want 1", posts)
			}
			if len(e.issues()) != 1 {
				t.Fatalf("%d issues on GitHub, want 1: %+v", len(e.issues()), e.issues())
			}
			// What GitHub shows is what warden recorded: the next Sync of
			// that body makes no call.
			got := e.openDashboards()[0].body
			if !slices.Contains(bodies, got) {
				t.Fatalf("GitHub holds a body no Sync wrote:\n%s", got)
			}
			e.slow.delay.Store(0)
			e.sync(got, DashboardUnchanged)
			e.expectCalls()
		})
	}
}

func TestDashboardRestartUsesStoredIssue(t *testing.T) {
	e := newDashEnv(t)
	b1 := dashBody(1)
	e.sync(b1, "dashboard created #1")
	e.rt.take()
	e.reopen()
	e.sync(b1, DashboardUnchanged)
	e.expectCalls()
	b2 := dashBody(2)
	e.sync(b2, DashboardUpdated)
	e.expectCalls("PATCH /repos/acme/app/issues/1 200") // no listing
	e.only(b2)
}

// With warden's record lost, the dashboard is found among the bot's open
// issues (every page), never opened a second time; a human's issue quoting
// the marker is not taken for it.
func TestDashboardFoundWithoutRecord(t *testing.T) {
	e := newDashEnv(t)
	bot := e.sim.As(e.sim.BotLogin())
	for i := range 120 { // the dashboard is on the listing's second page
		if _, err := bot.OpenIssue(e.ghRepo, fmt.Sprint("item ", i), "spec"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.human.OpenIssue(e.ghRepo, "Backlog dashboard", gating.DashboardMarker+"\nforged"); err != nil {
		t.Fatal(err)
	}
	b1 := dashBody(1)
	e.sync(b1, "dashboard created #122")
	e.rt.take()

	e.freshDB()
	e.sync(b1, "dashboard found #122")
	e.expectCalls("GET /repos/acme/app/issues 200", "GET /repos/acme/app/issues 200")
	e.sync(b1, DashboardUnchanged)
	e.expectCalls()

	e.freshDB()
	b2 := dashBody(2)
	e.sync(b2, "dashboard found #122 and updated")
	e.expectCalls("GET /repos/acme/app/issues 200", "GET /repos/acme/app/issues 200", "PATCH /repos/acme/app/issues/122 200")
	e.only(b2)
	is := e.issues()
	if len(is) != 122 {
		t.Errorf("%d issues, want 122", len(is))
	}
	if f := is[120]; f.author != "alice" || f.body != gating.DashboardMarker+"\nforged" || f.state != "open" {
		t.Errorf("the human's issue was touched: %+v", f)
	}
}

// Two dashboards (a past bug, two databases): the oldest is kept, the other
// closed.
func TestDashboardDuplicateIsClosed(t *testing.T) {
	e := newDashEnv(t)
	bot := e.sim.As(e.sim.BotLogin())
	for range 2 {
		if _, err := bot.OpenIssue(e.ghRepo, DashboardTitle, dashBody(9)); err != nil {
			t.Fatal(err)
		}
	}
	b1 := dashBody(1)
	e.sync(b1, "dashboard found #1 and updated")
	e.expectCalls("GET /repos/acme/app/issues 200", "PATCH /repos/acme/app/issues/2 200", "PATCH /repos/acme/app/issues/1 200")
	e.only(b1)
	if is := e.issues(); is[1].state != "closed" {
		t.Errorf("duplicate #2 is %s", is[1].state)
	}
}

func TestDashboardRefusesBadInput(t *testing.T) {
	e := newDashEnv(t)
	if _, err := e.dash.Sync(e.ctx, e.repo, "no marker", false); err == nil {
		t.Error("a body without the marker was accepted")
	}
	if _, err := e.dash.Sync(e.ctx, e.repo, gating.DashboardMarker+strings.Repeat("x", gating.MaxDashboardBytes), false); err == nil {
		t.Error("a body over the limit was accepted")
	}
	if _, err := e.dash.Sync(e.ctx, store.Repo{ID: 1, FullName: "nope"}, dashBody(), false); err == nil {
		t.Error("an incomplete repository was accepted")
	}
	e.expectCalls()
}

// A writer that died holding the lease is taken over once the lease lapses.
func TestDashboardLapsedLeaseIsTakenOver(t *testing.T) {
	e := newDashEnv(t)
	b1 := dashBody(1)
	e.sync(b1, "dashboard created #1")
	e.rt.take()
	// A writer that took the lease and died.
	if err := e.dash.rows.UpdateExisting(e.ctx, e.repo.ID, e.dash.nowMs, func(w *store.DashboardRow, _ int64) error {
		w.LeaseOwner, w.LeaseUntil = "dead", e.clock.Now().Add(time.Minute).UnixMilli()
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(dashboardLease)
	b2 := dashBody(2)
	e.sync(b2, DashboardUpdated)
	e.expectCalls("PATCH /repos/acme/app/issues/1 200")
	e.only(b2)
}

// A writer whose lease lapsed while it created the dashboard (a stalled
// replica) finds another writer's dashboard recorded when it comes back: it
// closes its own issue, and the other one stays the only dashboard.
func TestDashboardLostLeaseLeavesOneDashboard(t *testing.T) {
	e := newDashEnv(t)
	var fired atomic.Bool
	var other string
	var otherErr error
	hook := func(req *http.Request) {
		// The issue creation (not the installation token's POST).
		if req.Method != http.MethodPost || !strings.HasSuffix(req.URL.Path, "/issues") || !fired.CompareAndSwap(false, true) {
			return
		}
		// The first writer is stalled before its create reaches GitHub; its
		// lease lapses and a second writer does the whole job.
		e.clock.Advance(dashboardLease + time.Second)
		other, otherErr = e.dash.Sync(e.ctx, e.repo, dashBody(2), false)
	}
	e.slow.hook.Store(&hook)
	out, err := e.dash.Sync(e.ctx, e.repo, dashBody(1), false)
	if err != nil || otherErr != nil {
		t.Fatalf("Sync: %v, %v", err, otherErr)
	}
	if other != "dashboard created #1" || out != DashboardBusy {
		t.Errorf("outcomes %q (stalled writer) and %q (second writer)", out, other)
	}
	e.slow.hook.Store(nil)
	if n := e.only(dashBody(2)); n != 1 {
		t.Errorf("dashboard is #%d, want #1", n)
	}
	if is := e.issues(); len(is) != 2 || is[1].state != "closed" {
		t.Errorf("the stalled writer's issue is not closed: %+v", is)
	}
	e.rt.take()
	e.sync(dashBody(2), DashboardUnchanged)
	e.expectCalls()
}

// A writer whose lease lapsed before it edited the dashboard another writer
// wrote meanwhile cannot know whose body GitHub kept: the next Sync writes
// again. Deleted on GitHub meanwhile, both recreate it, and only one new
// issue stays open.
func TestDashboardStalledWriterAfterTakeover(t *testing.T) {
	e := newDashEnv(t)
	e.sync(dashBody(1), "dashboard created #1")
	e.rt.take()

	// A stalled writer: it took the lease, then nothing for longer than
	// the lease.
	stalled := func(body string) *dashPlan {
		t.Helper()
		_, plan, busy, err := e.dash.decide(e.ctx, e.repo, body, hashBody(body))
		if err != nil || busy || plan == nil {
			t.Fatalf("decide: %v, busy %v, plan %v", err, busy, plan)
		}
		e.clock.Advance(dashboardLease + time.Second)
		return plan
	}
	p := stalled(dashBody(2))
	e.sync(dashBody(3), DashboardUpdated)
	if out, err := e.dash.write(e.ctx, p); err != nil || out != DashboardUpdated {
		t.Fatalf("stalled write: %q, %v", out, err)
	}
	e.rt.take()
	// GitHub holds 2 here, but had the two edits crossed it would hold 3:
	// warden trusts neither and writes again, whichever body comes next.
	e.sync(dashBody(2), DashboardUpdated)
	e.expectCalls("PATCH /repos/acme/app/issues/1 200")
	e.only(dashBody(2))
	e.sync(dashBody(2), DashboardUnchanged)
	e.expectCalls()

	if err := e.human.DeleteIssue(e.ghRepo, 1); err != nil {
		t.Fatal(err)
	}
	p = stalled(dashBody(4))
	e.sync(dashBody(5), "dashboard recreated #2 (the previous one was deleted)")
	if out, err := e.dash.write(e.ctx, p); err != nil || out != DashboardBusy {
		t.Fatalf("stalled write: %q, %v", out, err)
	}
	e.only(dashBody(5))
	if is := e.issues(); len(is) != 3 || is[2].state != "closed" {
		t.Errorf("the stalled writer's issue is not closed: %+v", is)
	}
}
