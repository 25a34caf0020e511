package mirror

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/wardenhq/warden/app"
	"github.com/wardenhq/warden/internal/db"
	"github.com/wardenhq/warden/internal/ghsim"
	"github.com/wardenhq/warden/mirror/store"
)

// fakeLister is GitHub's listing of the App's installations as Discover
// reads it, set by each test; every call is logged ("installations",
// "repos 7", "installation 7").
type fakeLister struct {
	mu       sync.Mutex
	installs []app.ListedInstallation
	repos    map[int64][]app.ListedRepository
	// exists answers GetInstallation: true is 200, false (or missing) 404.
	exists map[int64]bool
	// failInstalls fails ListInstallations; failRepos an installation's
	// ListInstallationRepos; failGet its GetInstallation.
	failInstalls error
	failRepos    map[int64]error
	failGet      map[int64]error
	log          []string
}

var _ InstallationLister = (*fakeLister)(nil)

func newFakeLister() *fakeLister {
	return &fakeLister{repos: map[int64][]app.ListedRepository{}, exists: map[int64]bool{},
		failRepos: map[int64]error{}, failGet: map[int64]error{}}
}

func (f *fakeLister) ListInstallations(context.Context) ([]app.ListedInstallation, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.log = append(f.log, "installations")
	if f.failInstalls != nil {
		return nil, f.failInstalls
	}
	return slices.Clone(f.installs), nil
}

func (f *fakeLister) GetInstallation(_ context.Context, id int64) (app.ListedInstallation, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.log = append(f.log, fmt.Sprintf("installation %d", id))
	if err := f.failGet[id]; err != nil {
		return app.ListedInstallation{}, err
	}
	if !f.exists[id] {
		return app.ListedInstallation{}, fmt.Errorf("GET /app/installations/%d: %w", id, app.ErrInstallationNotFound)
	}
	return app.ListedInstallation{ID: id}, nil
}

func (f *fakeLister) ListInstallationRepos(_ context.Context, inst int64) ([]app.ListedRepository, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.log = append(f.log, fmt.Sprintf("repos %d", inst))
	if err := f.failRepos[inst]; err != nil {
		return nil, err
	}
	return slices.Clone(f.repos[inst]), nil
}

func (f *fakeLister) calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.log)
}

// discEnv is the simulator with installation acme (acme/app, no labels),
// warden's App client over it, a ledger on a fresh database that serves
// nothing, a mirror, and a fake lister that lists acme/app.
type discEnv struct {
	t      *testing.T
	ctx    context.Context
	sim    *ghsim.Sim
	app    *app.App
	inst   *ghsim.Installation
	ghRepo *ghsim.Repo
	l      *store.Ledger
	m      *Mirror
	list   *fakeLister
	logs   *syncBuffer
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func newDiscEnv(t *testing.T) *discEnv {
	t.Helper()
	e := &discEnv{t: t, ctx: context.Background(), logs: &syncBuffer{}}
	sim, err := ghsim.New(ghsim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv := sim.Start()
	t.Cleanup(func() { srv.Close(); sim.Close() })
	e.sim = sim
	if e.app, err = app.New(app.Config{AppID: sim.AppID(), PrivateKey: sim.PrivateKeyPEM(), BaseURL: srv.URL + "/",
		Retries: -1, MaxWait: -1, Logger: discardLog()}); err != nil {
		t.Fatal(err)
	}
	e.inst = sim.Install("acme", "installer")
	e.ghRepo = sim.AddRepo(e.inst, "acme/app", "main")
	d, err := db.Open(e.ctx, "sqlite:"+filepath.Join(t.TempDir(), "discover.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	e.l, err = openLedger(e.ctx, d, store.Config{Region: "local"})
	if err != nil {
		t.Fatal(err)
	}
	e.m = &Mirror{Ledger: e.l, GitHub: e.app, Region: "local",
		Log: slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	e.list = newFakeLister()
	e.list.installs = []app.ListedInstallation{{ID: e.inst.ID, Account: "acme"}}
	e.list.repos[e.inst.ID] = []app.ListedRepository{{ID: e.ghRepo.ID, FullName: "acme/app", DefaultBranch: "main"}}
	return e
}

// discover runs Discover over the fake lister.
func (e *discEnv) discover() (DiscoveryResult, error) {
	e.t.Helper()
	return e.m.Discover(e.ctx, e.list)
}

// put serves a repository in the ledger directly (as a delivery had).
func (e *discEnv) put(id int64, fullName string, inst int64) {
	e.t.Helper()
	if err := e.l.PutRepo(e.ctx, store.Repo{ID: id, FullName: fullName, Installation: inst, DefaultBranch: "main"}); err != nil {
		e.t.Fatal(err)
	}
}

// served is the ledger's served repositories, "id full_name installation".
func (e *discEnv) served() []string {
	e.t.Helper()
	rs, err := e.l.Repos(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, r := range rs {
		out = append(out, fmt.Sprintf("%d %s %d", r.ID, r.FullName, r.Installation))
	}
	return out
}

func (e *discEnv) wantServed(want ...string) {
	e.t.Helper()
	if got := e.served(); !slices.Equal(got, want) {
		e.t.Errorf("served %q, want %q", got, want)
	}
}

// labels are the repository's labels on GitHub.
func (e *discEnv) labels() []string {
	var out []string
	e.sim.Locked(func() {
		for _, l := range e.ghRepo.Labels {
			out = append(out, l.Name)
		}
	})
	slices.Sort(out)
	return out
}

func (e *discEnv) row(id int64, name string, inst int64) string {
	return fmt.Sprintf("%d %s %d", id, name, inst)
}

// TestDiscoverServesNewRepository: a repository GitHub lists and warden
// does not serve is served, through serve (read, recorded, its labels
// created); a second run over the same listing changes nothing and makes
// no GitHub request.
func TestDiscoverServesNewRepository(t *testing.T) {
	e := newDiscEnv(t)
	if got := e.labels(); len(got) != 0 {
		t.Fatalf("the repository has labels before discovery: %v", got)
	}
	res, err := e.discover()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Served, []string{"acme/app"}) || len(res.Unserved) != 0 || len(res.Skipped) != 0 ||
		res.Installations != 1 || res.Repositories != 1 {
		t.Errorf("result %+v, want acme/app served, 1 installation, 1 repository", res)
	}
	e.wantServed(e.row(e.ghRepo.ID, "acme/app", e.inst.ID))
	r, err := e.l.RepoByID(e.ctx, e.ghRepo.ID)
	if err != nil || r.DefaultBranch != "main" {
		t.Errorf("served as %+v (%v), want default branch main", r, err)
	}
	if got, want := e.labels(), []string{"backlog", "needs-specification", "stale"}; !slices.Equal(got, want) {
		t.Errorf("labels on GitHub %v, want %v", got, want)
	}
	if res.Calls.Reads == 0 || res.Calls.Writes != 4 { // the token, three labels
		t.Errorf("calls %+v, want the reads of serve and 4 writes (a token, 3 labels)", res.Calls)
	}
	if !strings.Contains(e.logs.String(), "serving repository") || !strings.Contains(e.logs.String(), "discovery done: 1 installation, 1 repository listed; serving acme/app") {
		t.Errorf("the log does not say what discovery did:\n%s", e.logs.String())
	}

	again, err := e.discover()
	if err != nil {
		t.Fatal(err)
	}
	if len(again.Served) != 0 || len(again.Unserved) != 0 || again.Calls != (app.CallCounts{}) {
		t.Errorf("second run %+v, want nothing served or unserved and no GitHub request", again)
	}
	if again.String() != "1 installation, 1 repository listed; nothing to change" {
		t.Errorf("second run: %q", again.String())
	}
	e.wantServed(e.row(e.ghRepo.ID, "acme/app", e.inst.ID))
}

// TestDiscoverUnservesRemovedRepository: a served repository its
// installation no longer lists is not served any more; the others stay.
func TestDiscoverUnservesRemovedRepository(t *testing.T) {
	e := newDiscEnv(t)
	e.put(e.ghRepo.ID, "acme/app", e.inst.ID)
	e.put(9001, "acme/gone", e.inst.ID)
	res, err := e.discover()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Unserved, []string{"acme/gone"}) || len(res.Served) != 0 {
		t.Errorf("result %+v, want acme/gone unserved, nothing served", res)
	}
	e.wantServed(e.row(e.ghRepo.ID, "acme/app", e.inst.ID))
	if _, err := e.l.RepoByID(e.ctx, 9001); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("acme/gone: %v, want not served", err)
	}
	if !strings.Contains(e.logs.String(), "no longer serving repository") {
		t.Errorf("the log does not say acme/gone is no longer served:\n%s", e.logs.String())
	}
}

// TestDiscoverUnservesSuspendedInstallation: a suspended installation's
// repositories are not served; its repositories are not even listed (its
// tokens are refused).
func TestDiscoverUnservesSuspendedInstallation(t *testing.T) {
	e := newDiscEnv(t)
	e.put(e.ghRepo.ID, "acme/app", e.inst.ID)
	e.put(9001, "acme/other", e.inst.ID)
	e.list.installs[0].Suspended = true
	res, err := e.discover()
	if err != nil {
		t.Fatal(err)
	}
	if slices.Sort(res.Unserved); !slices.Equal(res.Unserved, []string{"acme/app", "acme/other"}) {
		t.Errorf("unserved %v, want both of the suspended installation's repositories", res.Unserved)
	}
	e.wantServed()
	if slices.Contains(e.list.calls(), fmt.Sprintf("repos %d", e.inst.ID)) {
		t.Errorf("the suspended installation's repositories were listed: %v", e.list.calls())
	}
}

// TestDiscoverUnservesGoneInstallation: an installation the ledger names
// and the listing lacks is gone when GitHub answers 404 for it, and its
// repositories are not served; when GitHub answers 200 for it (the
// listing shifted while it was read), or fails, they stay.
func TestDiscoverUnservesGoneInstallation(t *testing.T) {
	t.Run("404", func(t *testing.T) {
		e := newDiscEnv(t)
		e.put(9001, "old/one", 555)
		res, err := e.discover()
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(res.Unserved, []string{"old/one"}) || !slices.Contains(e.list.calls(), "installation 555") {
			t.Errorf("result %+v, calls %v: want old/one unserved after GET /app/installations/555", res, e.list.calls())
		}
		e.wantServed(e.row(e.ghRepo.ID, "acme/app", e.inst.ID))
	})
	for name, arrange := range map[string]func(*fakeLister){
		"still there": func(f *fakeLister) { f.exists[555] = true },
		"not read":    func(f *fakeLister) { f.failGet[555] = errors.New("502 Bad Gateway") },
	} {
		t.Run(name, func(t *testing.T) {
			e := newDiscEnv(t)
			e.put(9001, "old/one", 555)
			arrange(e.list)
			res, err := e.discover()
			if err == nil {
				t.Error("no error for an installation that could not be settled")
			}
			if len(res.Unserved) != 0 || !slices.Equal(res.Skipped, []int64{555}) {
				t.Errorf("result %+v, want nothing unserved and installation 555 skipped", res)
			}
			// acme/app is served all the same: one installation's trouble
			// is not another's.
			e.wantServed(e.row(e.ghRepo.ID, "acme/app", e.inst.ID), e.row(9001, "old/one", 555))
		})
	}
}

// TestDiscoverFailedRepositoriesReadUnservesNothing: when an
// installation's repositories cannot be listed, its served repositories
// stay served (a failed read is not a removal); another installation is
// still brought in step.
func TestDiscoverFailedRepositoriesReadUnservesNothing(t *testing.T) {
	e := newDiscEnv(t)
	e.put(e.ghRepo.ID, "acme/app", e.inst.ID)
	e.put(9001, "acme/other", e.inst.ID)
	globex := e.sim.Install("globex", "bob")
	gRepo := e.sim.AddRepo(globex, "globex/tool", "main")
	e.list.installs = append(e.list.installs, app.ListedInstallation{ID: globex.ID, Account: "globex"})
	e.list.repos[globex.ID] = []app.ListedRepository{{ID: gRepo.ID, FullName: "globex/tool", DefaultBranch: "main"}}
	e.list.failRepos[e.inst.ID] = errors.New("GET /installation/repositories (page 2): 502 Bad Gateway")
	res, err := e.discover()
	if err == nil || !strings.Contains(err.Error(), "502 Bad Gateway") {
		t.Errorf("error %v, want the listing's failure", err)
	}
	if len(res.Unserved) != 0 || !slices.Equal(res.Skipped, []int64{e.inst.ID}) || !slices.Equal(res.Served, []string{"globex/tool"}) {
		t.Errorf("result %+v, want acme skipped, nothing unserved, globex/tool served", res)
	}
	e.wantServed(e.row(e.ghRepo.ID, "acme/app", e.inst.ID), e.row(gRepo.ID, "globex/tool", globex.ID), e.row(9001, "acme/other", e.inst.ID))
	if !strings.Contains(e.logs.String(), "left as they were") {
		t.Errorf("the log does not say the installation was left as it was:\n%s", e.logs.String())
	}
}

// TestDiscoverFailedInstallationsReadChangesNothing: when the App's
// installations cannot be listed, nothing is served or unserved and no
// installation's repositories are read.
func TestDiscoverFailedInstallationsReadChangesNothing(t *testing.T) {
	e := newDiscEnv(t)
	e.put(9001, "acme/gone", e.inst.ID)
	e.list.failInstalls = errors.New("GET /app/installations: 503 Service Unavailable")
	res, err := e.discover()
	if err == nil {
		t.Fatal("no error when the installations could not be listed")
	}
	if len(res.Served) != 0 || len(res.Unserved) != 0 {
		t.Errorf("result %+v, want no change", res)
	}
	if got := e.list.calls(); !slices.Equal(got, []string{"installations"}) {
		t.Errorf("calls %v, want the installations' listing alone", got)
	}
	e.wantServed(e.row(9001, "acme/gone", e.inst.ID))
	if got := e.labels(); len(got) != 0 {
		t.Errorf("labels created: %v", got)
	}
}

// TestDiscoverRenamedOrMovedServedAgain: a served repository listed under
// another name or another installation is served again as listed.
func TestDiscoverRenamedOrMovedServedAgain(t *testing.T) {
	e := newDiscEnv(t)
	e.put(e.ghRepo.ID, "acme/before-rename", 555)
	res, err := e.discover()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Served, []string{"acme/app"}) || len(res.Unserved) != 0 {
		t.Errorf("result %+v, want acme/app served again, nothing unserved", res)
	}
	e.wantServed(e.row(e.ghRepo.ID, "acme/app", e.inst.ID))
	if slices.Contains(e.list.calls(), "installation 555") {
		t.Errorf("installation 555 was looked up though its only repository is listed elsewhere: %v", e.list.calls())
	}
}

// TestDiscoverOverTheApp: Discover over *app.App against the simulator:
// the repository is served, and a second run over an unchanged GitHub
// costs one GET /app/installations (the App's JWT: never a 304 on GitHub)
// and a 304 for the installation's listing.
func TestDiscoverOverTheApp(t *testing.T) {
	e := newDiscEnv(t)
	res, err := e.m.Discover(e.ctx, e.app)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Served, []string{"acme/app"}) {
		t.Fatalf("result %+v, want acme/app served", res)
	}
	t.Logf("first run: %s; GitHub requests %+v; the App (JWT) %+v, the installation %+v",
		res, res.Calls, e.sim.Calls(app.AppInstallation), e.sim.Calls(e.inst.ID))
	if got, want := e.labels(), []string{"backlog", "needs-specification", "stale"}; !slices.Equal(got, want) {
		t.Errorf("labels on GitHub %v, want %v", got, want)
	}
	inst0, app0 := e.sim.Calls(e.inst.ID), e.sim.Calls(app.AppInstallation)
	again, err := e.m.Discover(e.ctx, e.app)
	if err != nil {
		t.Fatal(err)
	}
	if len(again.Served)+len(again.Unserved) != 0 {
		t.Errorf("second run %+v, want no change", again)
	}
	inst1, app1 := e.sim.Calls(e.inst.ID), e.sim.Calls(app.AppInstallation)
	t.Logf("second run: %s; GitHub requests %+v", again, again.Calls)
	if inst1.Reads != inst0.Reads || inst1.Writes != inst0.Writes || inst1.NotModified != inst0.NotModified+1 {
		t.Errorf("second run, installation's requests %+v -> %+v: want one 304 and nothing charged", inst0, inst1)
	}
	if app1.Reads != app0.Reads+1 || app1.Writes != app0.Writes {
		t.Errorf("second run, App's requests %+v -> %+v: want the one GET /app/installations", app0, app1)
	}
	if again.Calls != (app.CallCounts{Reads: 2, NotModified: 1}) {
		t.Errorf("second run counted %+v, want 2 reads, 1 of them a 304", again.Calls)
	}
}
