// Package harness runs warden end to end against the GitHub simulator: the
// real service (HTTP handlers, SQLite inbox, dispatcher, App client) in this
// process, the simulator delivering signed webhooks to it, and helpers to act
// on GitHub as a person or an agent and to wait until everything settled.
// The end-to-end tests and `warden demo` both use it.
package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-github/v66/github"
	"github.com/wardenhq/warden/internal/config"
	"github.com/wardenhq/warden/internal/ghsim"
	"github.com/wardenhq/warden/internal/service"
	"github.com/wardenhq/warden/mirror"
	"github.com/wardenhq/warden/webhooks"
)

// Secret is the webhook secret the simulator signs with.
const Secret = "harness-webhook-secret"

// API tokens the harness configures (WARDEN_API_TOKENS), by role: a project
// manager "pm", a worker "worker-7" (its owners begin "worker-7/"), and a
// maintainer's own token "alice" (role human).
const (
	PMToken     = "harness-pm-token-0000000001"
	WorkerToken = "harness-worker-token-000002"
	HumanToken  = "harness-human-token-0000003"
)

// Options shape an environment. Zero values take the defaults.
type Options struct {
	// Dir holds the database; a temporary directory when empty (removed by Close).
	Dir string
	// Owner and Repo name the installed repository; default acme/app.
	Owner, Repo string
	// Log receives warden's JSON log; discarded when nil.
	Log io.Writer
	// Settings adjusts warden's settings before it starts.
	Settings func(*config.Settings)
	// Now is the clock of warden and the simulator (nil: time.Now). A test that must cross a
	// minute (coalesced report edits, command rate limits) passes a clock.Offset's
	// Now and moves it.
	Now func() time.Time
	// DeliveryCalls, if set, receives the GitHub requests each handling of a
	// delivery made (service.Options.DeliveryCalls; the bench uses it).
	DeliveryCalls service.CallsObserver
	// Production runs the dispatcher and the GitHub access layer with
	// warden serve's own retries, backoff and waits instead of the tests'
	// fast ones (the bench's fault section measures them).
	Production bool
}

// Env is a running warden wired to a running simulator.
type Env struct {
	Sim       *ghsim.Sim
	GitHub    *ghsim.Server
	Service   *service.Service
	PublicURL string
	AdminURL  string
	Inst      *ghsim.Installation
	Repo      *ghsim.Repo

	dir    string
	ownDir bool
	// settings and opts are what Start built warden with (StartOver
	// builds another warden the same way).
	settings *config.Settings
	opts     Options
	cancel   context.CancelFunc
	stopped  chan error
}

// Start builds the simulator and warden, installs the App on one
// repository, and waits until the installation's deliveries are processed.
func Start(ctx context.Context, o Options) (*Env, error) {
	if o.Owner == "" {
		o.Owner, o.Repo = "acme", "app"
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	e := &Env{dir: o.Dir}
	if e.dir == "" {
		d, err := os.MkdirTemp("", "warden-harness-")
		if err != nil {
			return nil, err
		}
		e.dir, e.ownDir = d, true
	}
	// Installation tokens outlive any clock a test moves (ghinstallation
	// refreshes them on real time).
	sim, err := ghsim.New(ghsim.Options{Now: o.Now, TokenTTL: 24 * 365 * time.Hour})
	if err != nil {
		e.cleanupDir()
		return nil, err
	}
	e.Sim, e.GitHub = sim, sim.Start()
	s := &config.Settings{
		Listen: "127.0.0.1:0", AdminListen: "127.0.0.1:0",
		Database: "sqlite:" + filepath.Join(e.dir, "warden.db"),
		AppID:    sim.AppID(), PrivateKey: sim.PrivateKeyPEM(), WebhookSecrets: [][]byte{[]byte(Secret)},
		GitHubAPIURL: e.GitHub.URL + "/", Region: "local", LogLevel: "debug",
		LeaseDefault: 30 * time.Second, LeaseMax: 30 * time.Minute, Quarantine: time.Hour, ReconcileInterval: 10 * time.Minute,
		MCPRepos: map[string]string{},
		APITokens: []config.APIToken{
			{Name: "pm", Token: PMToken, Role: "pm"},
			{Name: "worker-7", Token: WorkerToken, Role: "worker"},
			{Name: "alice", Token: HumanToken, Role: "human"},
		},
	}
	if o.Settings != nil {
		o.Settings(s)
	}
	e.settings, e.opts = s, o
	svc, err := service.Build(ctx, s, service.NewLogger(o.Log, s.LogLevel), serviceOptions(o))
	if err != nil {
		e.GitHub.Close()
		sim.Close()
		e.cleanupDir()
		return nil, err
	}
	e.Service = svc
	if err := e.serve(ctx, s); err != nil {
		e.Close()
		return nil, err
	}
	sim.SetWebhook(e.PublicURL+"/webhooks", Secret)
	e.Inst = sim.Install(o.Owner, "installer")
	e.Repo = sim.AddRepo(e.Inst, o.Owner+"/"+o.Repo, "main")
	sctx, scancel := context.WithTimeout(ctx, 20*time.Second)
	defer scancel()
	if err := e.Settle(sctx); err != nil {
		e.Close()
		return nil, err
	}
	return e, nil
}

// Settle waits until the simulator has sent every queued delivery and warden
// has processed every delivery it stored, repeating while warden's own
// writes cause new deliveries.
func (e *Env) Settle(ctx context.Context) error { return e.SettleQuiet(ctx, 2, 15*time.Millisecond) }

// SettleQuiet is Settle with its quiet period spelled out: looks
// consecutive looks, gap apart, that find nothing queued or pending. (The
// simulator posts synchronously and the inbox stores a delivery before
// answering, so a replay may look more often than Settle does.)
func (e *Env) SettleQuiet(ctx context.Context, looks int, gap time.Duration) error {
	quiet := 0
	for quiet < looks {
		if err := e.Sim.Flush(ctx); err != nil {
			return err
		}
		pending, _, err := e.Service.Inbox.Counts(ctx)
		if err != nil {
			return err
		}
		if pending == 0 && e.Sim.Pending() == 0 {
			quiet++
		} else {
			quiet = 0
		}
		select {
		case <-ctx.Done():
			recs, _ := e.Service.Inbox.List(context.Background(), false, 20)
			var waiting []string
			for _, r := range recs {
				if r.State == webhooks.StatePending {
					waiting = append(waiting, fmt.Sprintf("%s %s (tries %d, %s)", r.Event, r.ID, r.Attempts, r.LastError))
				}
			}
			return fmt.Errorf("warden did not settle: %d deliveries pending: %s", pending, strings.Join(waiting, "; "))
		case <-time.After(gap):
		}
	}
	return nil
}

// Person returns an actor for a human with role on the repository (read,
// triage, write, maintain, admin, or "" for none).
func (e *Env) Person(login, role string) *ghsim.Actor {
	a := e.Sim.As(login)
	e.Sim.SetRole(e.Repo, login, role)
	return a
}

// Close stops warden and the simulator and removes a temporary directory.
func (e *Env) Close() error {
	var err error
	if e.cancel != nil {
		e.cancel()
		select {
		case err = <-e.stopped:
		case <-time.After(30 * time.Second):
			err = errors.New("warden did not stop within 30s")
		}
	}
	if e.Service != nil {
		e.Service.Close()
	}
	if e.GitHub != nil {
		e.GitHub.Close()
	}
	if e.Sim != nil {
		e.Sim.Close()
	}
	e.cleanupDir()
	return err
}

func (e *Env) cleanupDir() {
	if e.ownDir {
		os.RemoveAll(e.dir)
	}
}

// TB is the part of testing.TB the test helpers need (this package does not
// import testing, so the demo binary does not link it).
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
	Cleanup(func())
	TempDir() string
}

// New starts an environment for a test and closes it when the test ends.
func New(t TB, o Options) *Env {
	t.Helper()
	if o.Dir == "" {
		o.Dir = t.TempDir()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	e, err := Start(ctx, o)
	if err != nil {
		t.Fatalf("harness: %v", err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// MustSettle is Settle for tests, with a 20 s limit.
func (e *Env) MustSettle(t TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := e.Settle(ctx); err != nil {
		t.Fatalf("%v", err)
	}
}

// Redeliver asks GitHub (the simulator) to redeliver a logged delivery, as
// an operator or warden's catch-up would. GitHub answers 202, which
// go-github reports as an *AcceptedError: that is success.
func (e *Env) Redeliver(ctx context.Context, deliveryID int64) error {
	_, _, err := e.Service.App.AppClient().Apps.RedeliverHookDelivery(ctx, deliveryID)
	var accepted *github.AcceptedError
	if errors.As(err, &accepted) {
		return nil
	}
	return err
}

// Sweep runs warden's timer pass once, as its ticker would (parking poison
// items whose claims ended, report edits that came due), then settles.
func (e *Env) Sweep(ctx context.Context) error {
	if _, err := e.Service.Mirror.Sweep(ctx); err != nil {
		return err
	}
	return e.Settle(ctx)
}

// MustSweep is Sweep for tests, with a 20 s limit.
func (e *Env) MustSweep(t TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := e.Sweep(ctx); err != nil {
		t.Fatalf("sweep: %v", err)
	}
}

// Reconcile runs one reconcile pass over every served repository, as the
// service's loop would, then settles.
func (e *Env) Reconcile(ctx context.Context, o mirror.ReconcileOptions) ([]mirror.PassResult, error) {
	res, err := e.Service.Mirror.ReconcileAll(ctx, o)
	if err != nil {
		return res, err
	}
	return res, e.Settle(ctx)
}
