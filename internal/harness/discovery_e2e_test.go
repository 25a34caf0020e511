package harness

import (
	"context"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wardenhq/warden/internal/clock"
	"github.com/wardenhq/warden/internal/config"
	"github.com/wardenhq/warden/internal/ghsim"
	"github.com/wardenhq/warden/internal/service"
)

// End-to-end tests of discovery (issue 17): warden lists the App's
// installations and their repositories at start and every reconcile
// interval, and serves what it finds, without any installation delivery.

// newUndelivered installs the App on acme/app before any warden exists and
// throws the installation's deliveries away unsent: they never reach
// warden and are not in the delivery log, so no catch-up can find them
// either. Then it starts warden on an empty database, with the reconcile
// loop running every interval (0: no loop; the test runs the passes), and
// waits for its start-up passes.
func newUndelivered(t *testing.T, interval time.Duration) *e2e {
	t.Helper()
	clk := &clock.Offset{}
	sim, err := ghsim.New(ghsim.Options{Now: clk.Now, TokenTTL: 24 * 365 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	srv := sim.Start()
	sim.HoldDeliveries()
	inst := sim.Install("acme", "installer")
	repo := sim.AddRepo(inst, "acme/app", "main")
	if n := sim.Pending(); n != 2 {
		t.Fatalf("%d deliveries held, want installation.created and installation_repositories.added", n)
	}
	discardHeld(sim)

	dir := t.TempDir()
	s := &config.Settings{
		Listen: "127.0.0.1:0", AdminListen: "127.0.0.1:0",
		Database: "sqlite:" + filepath.Join(dir, "warden.db"),
		AppID:    sim.AppID(), PrivateKey: sim.PrivateKeyPEM(), WebhookSecrets: [][]byte{[]byte(Secret)},
		GitHubAPIURL: srv.URL + "/", Region: "local", LogLevel: "debug",
		LeaseDefault: 30 * time.Second, LeaseMax: 30 * time.Minute, Quarantine: e2eQuarantine, ReconcileInterval: 10 * time.Minute,
		MCPRepos: map[string]string{},
		APITokens: []config.APIToken{
			{Name: "pm", Token: PMToken, Role: "pm"},
			{Name: "worker-7", Token: WorkerToken, Role: "worker"},
			{Name: "alice", Token: HumanToken, Role: "human"},
		},
	}
	o := Options{Now: clk.Now, Log: io.Discard}
	so := serviceOptions(o)
	if interval > 0 {
		s.ReconcileInterval, so.NoReconcileLoop = interval, false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	svc, err := service.Build(ctx, s, service.NewLogger(o.Log, s.LogLevel), so)
	if err != nil {
		srv.Close()
		sim.Close()
		t.Fatal(err)
	}
	e := &Env{Sim: sim, GitHub: srv, Service: svc, Inst: inst, Repo: repo, dir: dir, settings: s, opts: o}
	runCtx, stop := context.WithCancel(context.Background())
	e.cancel, e.stopped = stop, make(chan error, 1)
	t.Cleanup(func() { e.Close() })
	ready := make(chan [2]net.Addr, 1)
	go func() {
		e.stopped <- svc.Serve(runCtx, s.Listen, s.AdminListen, func(p, a net.Addr) {
			// Before the start-up passes begin: the labels discovery
			// creates are announced to this warden.
			sim.SetWebhook("http://"+p.String()+"/webhooks", Secret)
			ready <- [2]net.Addr{p, a}
		})
	}()
	select {
	case a := <-ready:
		e.PublicURL, e.AdminURL = "http://"+a[0].String(), "http://"+a[1].String()
	case err := <-e.stopped:
		t.Fatalf("warden did not start: %v", err)
	}
	select {
	case <-svc.Started():
	case <-ctx.Done():
		t.Fatal("warden's start-up passes did not end within 30 s")
	}
	return &e2e{Env: e, clk: clk}
}

// discardHeld throws the held deliveries away unsent (not logged, so not
// redeliverable) and sends the later ones again.
func discardHeld(sim *ghsim.Sim) { sim.ReleaseDeliveries(func(int) []int { return nil }) }

// served reports whether warden's agent API answers for the repository
// (GET /ready with the worker's token), or says it does not serve it
// (404 RepoNotServed); anything else fails the test.
func (x *e2e) served(t *testing.T) bool {
	t.Helper()
	var body map[string]any
	code, err := x.API(context.Background(), WorkerToken, http.MethodGet, "/ready", nil, &body)
	switch {
	case err != nil:
		t.Fatalf("GET /ready: %v", err)
	case code == http.StatusOK:
		return true
	case code == http.StatusNotFound && body["reason"] == "RepoNotServed":
		return false
	}
	t.Fatalf("GET /ready: %d %v", code, body)
	return false
}

// repoLabels are the repository's labels on GitHub.
func (x *e2e) repoLabels(r *ghsim.Repo) []string {
	var out []string
	x.Sim.Locked(func() {
		for _, l := range r.Labels {
			out = append(out, l.Name)
		}
	})
	slices.Sort(out)
	return out
}

// TestE2EDiscoverServesUndelivered: warden never receives the
// installation's deliveries, yet after its start the agent API answers for
// the repository and its labels exist on GitHub; the status page shows the
// discovery pass. Then the repository is removed from the installation and
// that delivery dropped: the next discovery stops serving it.
func TestE2EDiscoverServesUndelivered(t *testing.T) {
	t.Parallel()
	x := newUndelivered(t, 0)
	if !x.served(t) {
		t.Fatal("after start, warden does not serve acme/app: the installation was not discovered")
	}
	if got, want := x.repoLabels(x.Repo), []string{lblItem, lblAdmission, lblParked}; !slices.Equal(got, sorted(want)) {
		t.Errorf("labels on GitHub %v, want %v", got, sorted(want))
	}
	x.MustSettle(t) // the label deliveries, handled
	// The agent API works for it: an item can be made and is ready.
	id := x.create(t, HumanToken, "Found by discovery", []string{"priority:P1"})
	x.MustSettle(t)
	if s := x.mustReady(t); !s.has(id) {
		t.Errorf("%s is not ready in the discovered repository: excluded as %q", id, s.exclusion(id))
	}
	resp, err := http.Get(x.AdminURL + "/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(page), "<td>discovery</td>") {
		t.Errorf("the status page does not list the discovery pass:\n%s", page)
	}

	x.Sim.DropDeliveries(true)
	x.Sim.RemoveFromInstallation(x.Inst, x.Repo)
	x.MustSettle(t) // attempted, and failed
	x.Sim.DropDeliveries(false)
	if !x.served(t) {
		t.Fatal("the removal's delivery reached warden: it was to be dropped")
	}
	res, err := x.Service.Discover(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Unserved, []string{"acme/app"}) || len(res.Served) != 0 {
		t.Errorf("discovery %+v, want acme/app no longer served", res)
	}
	if x.served(t) {
		t.Error("acme/app is still served after discovery found it removed from the installation")
	}
}

func sorted(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}

// TestE2EDiscoverEveryInterval: with the reconcile loop running, discovery
// runs every interval as a shared pass: a repository removed from the
// installation, and one added to it, their deliveries never sent, are
// followed within an interval or two.
func TestE2EDiscoverEveryInterval(t *testing.T) {
	t.Parallel()
	const every = 300 * time.Millisecond
	x := newUndelivered(t, every)
	if !x.served(t) {
		t.Fatal("after start, warden does not serve acme/app")
	}
	x.MustSettle(t)
	first, err := x.Service.Runs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(first) == 0 || first[0].Name != "discovery" || first[0].FinishedAt.IsZero() || first[0].LastError != "" {
		t.Fatalf("runs %+v, want discovery first, finished, without error", first)
	}

	x.Sim.HoldDeliveries()
	x.Sim.RemoveFromInstallation(x.Inst, x.Repo)
	lib := x.Sim.AddRepo(x.Inst, "acme/lib", "main")
	discardHeld(x.Sim)
	deadline := time.Now().Add(10 * time.Second)
	for x.served(t) {
		if time.Now().After(deadline) {
			t.Fatal("acme/app is still served 10 s after its removal (the interval is 300 ms)")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Served, and its labels created (serve records the repository
	// first, then creates them).
	wantLabels := sorted([]string{lblItem, lblAdmission, lblParked})
	for {
		_, err := x.Service.Ledger.RepoByID(context.Background(), lib.ID)
		if err == nil && slices.Equal(x.repoLabels(lib), wantLabels) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("acme/lib 10 s after it was added (the interval is 300 ms): served %v, labels %v (want %v)",
				err == nil, x.repoLabels(lib), wantLabels)
		}
		time.Sleep(20 * time.Millisecond)
	}
	runs, err := x.Service.Runs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !runs[0].StartedAt.After(first[0].FinishedAt) {
		t.Errorf("the discovery pass's record did not move on: %+v, then %+v", first[0], runs[0])
	}
}

// TestE2EDiscoverUnchangedCostsOnly304s: a discovery that serves a new
// installation's repository, then one over an unchanged GitHub: the second
// writes nothing and every request made with an installation's token is a
// free 304; what remains is the App's GET /app/installations, which GitHub
// never answers 304 (its ETags depend on the Authorization header, and the
// App's JWT is signed anew for each request).
func TestE2EDiscoverUnchangedCostsOnly304s(t *testing.T) {
	t.Parallel()
	x := newUndelivered(t, 0)
	x.MustSettle(t)
	x.Sim.HoldDeliveries()
	globex := x.Sim.Install("globex", "bob")
	tool := x.Sim.AddRepo(globex, "globex/tool", "main")
	discardHeld(x.Sim)

	var mu sync.Mutex
	var exchanges []string
	x.Sim.Observe(func(ex ghsim.Exchange) {
		mu.Lock()
		// (Status is the route's answer: a 304 shows as its 200; the
		// counts below tell them apart.)
		exchanges = append(exchanges, ex.Method+" "+ex.Pattern)
		mu.Unlock()
	}, nil)
	run := func(label string) (r [3]ghsim.Calls, res string) {
		t.Helper()
		mu.Lock()
		exchanges = nil
		mu.Unlock()
		before := [3]ghsim.Calls{x.Sim.Calls(0), x.Sim.Calls(x.Inst.ID), x.Sim.Calls(globex.ID)}
		out, err := x.Service.Discover(context.Background())
		if err != nil {
			t.Fatalf("%s: %v", label, err)
		}
		after := [3]ghsim.Calls{x.Sim.Calls(0), x.Sim.Calls(x.Inst.ID), x.Sim.Calls(globex.ID)}
		for i := range r {
			r[i] = ghsim.Calls{Reads: after[i].Reads - before[i].Reads, Writes: after[i].Writes - before[i].Writes,
				NotModified: after[i].NotModified - before[i].NotModified}
		}
		mu.Lock()
		t.Logf("%s: %s; counted by warden %+v; the App (JWT) %+v, acme %+v, globex %+v; requests:\n  %s",
			label, out, out.Calls, r[0], r[1], r[2], strings.Join(exchanges, "\n  "))
		mu.Unlock()
		return r, out.String()
	}
	first, out := run("first run")
	if !strings.Contains(out, "serving globex/tool") {
		t.Fatalf("first run: %s, want globex/tool served", out)
	}
	if first[2].Writes < 3 {
		t.Errorf("first run: globex's writes %+v, want its 3 labels created", first[2])
	}
	if got := x.repoLabels(tool); len(got) != 3 {
		t.Errorf("globex/tool's labels %v, want 3", got)
	}
	second, out := run("second run")
	if !strings.Contains(out, "nothing to change") {
		t.Errorf("second run: %s, want nothing to change", out)
	}
	for i, who := range []string{"", "acme", "globex"} {
		if i == 0 {
			continue
		}
		if c := second[i]; c.Reads != 0 || c.Writes != 0 || c.NotModified != 1 {
			t.Errorf("second run, %s's token: %+v, want one 304 (its listing) and nothing charged", who, c)
		}
	}
	if c := second[0]; c.Reads != 1 || c.Writes != 0 || c.NotModified != 0 {
		t.Errorf("second run, the App's JWT: %+v, want the one GET /app/installations", c)
	}
}
