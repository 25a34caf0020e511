// Package service assembles warden's running parts from its settings: the
// database, the webhook inbox and dispatcher, the GitHub App client, the
// event router, and the public and operators' HTTP routes. cmd/warden, the
// demo and the end-to-end harness all run warden through it, so what the
// tests exercise is what operators run.
package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/wardenhq/warden/app"
	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/internal/agentapi"
	"github.com/wardenhq/warden/internal/config"
	"github.com/wardenhq/warden/internal/db"
	"github.com/wardenhq/warden/internal/mcpapi"
	"github.com/wardenhq/warden/mirror"
	"github.com/wardenhq/warden/mirror/store"
	"github.com/wardenhq/warden/webhooks"
)

// Service is warden's running parts. Build makes one; Serve runs it; Close
// releases it.
type Service struct {
	Settings   *config.Settings
	Log        *slog.Logger
	DB         *db.DB
	Inbox      *webhooks.Inbox
	App        *app.App
	Router     *webhooks.Router
	Dispatcher *webhooks.Dispatcher
	Metrics    *webhooks.Metrics
	Registry   *prometheus.Registry
	Store      *store.Store
	Ledger     *store.Ledger
	Acts       *store.Acts
	Mirror     *mirror.Mirror
	// Public serves /webhooks, /healthz, /readyz (and later /api/v1, /mcp);
	// Admin serves the status page, /metrics and /debug/pprof/.
	Public http.Handler
	Admin  http.Handler

	sweepEvery  time.Duration
	noReconcile bool
	replica     string // this process's name in the shared runs (coordinate.go)
	now         func() time.Time
	// started is closed once Serve's start-up passes (discovery, the
	// catch-up) have run (Started).
	started     chan struct{}
	startedOnce sync.Once

	// reconciled exports each repository's last complete reconcile
	// (status_metrics.go); the reconcile loop notes its passes in it.
	reconciled *reconcileDone
}

// Options adjust a build for the demo and tests.
type Options struct {
	// Transport carries GitHub calls; nil = the default transport.
	Transport http.RoundTripper
	// GitHubTimeout bounds one attempt of a GitHub request (0: the access
	// layer's default, 30s).
	GitHubTimeout time.Duration
	// Dispatch tunes the dispatcher (workers, retries, backoff).
	Dispatch webhooks.DispatchOptions
	// DeliveryCalls, if set, receives the GitHub requests each handling of
	// a delivery made (the bench's calls-per-delivery figure); the
	// warden_github_calls_per_delivery histogram counts them always.
	DeliveryCalls CallsObserver
	// NoReconcileLoop leaves the periodic reconcile to the caller (tests
	// and the demo run passes when they say).
	NoReconcileLoop bool
	// SweepInterval is how often the timer pass runs (parking poison items
	// whose claims ended, report edits that came due); 0 = 15 s.
	SweepInterval time.Duration
	// Now is warden's clock for the ledger and the mirror (leases,
	// epochs, coalescing, command rate limits); nil = time.Now. Tests move it.
	Now func() time.Time
	// GitHubRetryBase, GitHubMaxWait tune the access layer (0 = defaults).
	GitHubRetryBase time.Duration
	GitHubMaxWait   time.Duration
}

// Build opens the database, migrates it and assembles the service. A bad
// database or App key is a *config.Error (exit status 2).
func Build(ctx context.Context, s *config.Settings, log *slog.Logger, o Options) (*Service, error) {
	d, err := db.Open(ctx, s.Database)
	if err != nil {
		return nil, &config.Error{Msg: fmt.Sprintf("WARDEN_DATABASE: %v", err)}
	}
	svc := &Service{Settings: s, Log: log, DB: d, Registry: prometheus.NewRegistry(), sweepEvery: o.SweepInterval, noReconcile: o.NoReconcileLoop, now: o.Now,
		started: make(chan struct{})}
	if svc.sweepEvery <= 0 {
		svc.sweepEvery = 15 * time.Second
	}
	svc.replica = replicaName()
	svc.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if err := d.Migrate(ctx, "coordination", coordinationMigrations); err != nil {
		d.Close()
		return nil, fmt.Errorf("open the replicas' run records: %w", err)
	}
	if svc.Inbox, err = webhooks.OpenInbox(ctx, d); err != nil {
		d.Close()
		return nil, fmt.Errorf("open the inbox: %w", err)
	}
	svc.App, err = app.New(app.Config{
		AppID: s.AppID, PrivateKey: s.PrivateKey, BaseURL: s.GitHubAPIURL,
		Transport: o.Transport, Logger: log, Registerer: svc.Registry,
		RetryBase: o.GitHubRetryBase, MaxWait: o.GitHubMaxWait, RequestTimeout: o.GitHubTimeout, Now: o.Now,
	})
	if err != nil {
		svc.Close()
		return nil, &config.Error{Msg: fmt.Sprintf("GitHub App: %v", err)}
	}
	svc.Metrics = webhooks.NewMetrics(svc.Registry)
	// The store with each repository's settings in effect and its
	// findings, assembled as every command assembles it (records.go).
	rec, err := OpenRecords(ctx, d, s, svc.App, o.Now, log)
	if err != nil {
		svc.Close()
		return nil, err
	}
	st, settingsStore, repoSettings := rec.Store, rec.Settings, rec.Settings.Get
	svc.Store, svc.Ledger, svc.Acts = st, st.Ledger, st.Acts
	svc.reconciled = newReconcileDone(svc.Ledger.LastCompleteReconciles) // status_metrics.go
	svc.Registry.MustRegister(svc.reconciled)
	perms := mirror.NewPermissions()
	if o.Now != nil {
		perms.Now = o.Now
	}
	svc.Mirror = &mirror.Mirror{Ledger: svc.Ledger, Acts: svc.Acts, GitHub: svc.App, Perms: perms,
		Region: s.Region, Agents: s.Agents, Settings: repoSettings, Log: log.With("component", "mirror"), Now: o.Now,
		Bot: func() string {
			id, err := svc.App.Identity(ctx)
			if err != nil {
				return ""
			}
			return id.BotLogin
		}}
	svc.Mirror.Dispatch = mirror.NewDispatchMetrics(svc.Registry)
	reports, err := mirror.OpenReports(st, svc.App, log)
	if err != nil {
		svc.Close()
		return nil, fmt.Errorf("open the report comments: %w", err)
	}
	reports.Now, reports.Settings, reports.Trail = o.Now, repoSettings, st.Ledger
	reports.StatusHint = "warden's status page (the operators' listener, GET /)"
	svc.Mirror.Reports, svc.Mirror.SettingsStore = reports, settingsStore
	dashboards, err := mirror.OpenDashboards(st, svc.App, log)
	if err != nil {
		svc.Close()
		return nil, fmt.Errorf("open the dashboards: %w", err)
	}
	dashboards.Now, dashboards.Settings = o.Now, repoSettings
	dashboards.Bot = svc.Mirror.Bot
	reports.Bot = svc.Mirror.Bot
	svc.Mirror.Dashboards = dashboards
	svc.Mirror.HTMLBase, svc.Mirror.StatusHint = htmlBase(s.GitHubAPIURL), reports.StatusHint
	svc.Router = NewRouter(svc.Mirror, svc.observeCalls(o.DeliveryCalls))
	opts := o.Dispatch
	if opts.Now == nil {
		opts.Now = o.Now
	}
	opts.Identity = func(ctx context.Context) (string, error) {
		id, err := svc.App.Identity(ctx)
		return id.BotLogin, err
	}
	svc.Dispatcher = webhooks.NewDispatcher(svc.Inbox, webhooks.HandlerFunc(svc.Router.Dispatch), svc.Metrics, log, opts)
	svc.Inbox.OnCommit(svc.Dispatcher.Wake)
	ingress := webhooks.NewIngress(svc.Inbox, svc.Metrics, log, webhooks.IngressOptions{
		Secrets: s.WebhookSecrets, Handles: svc.Router.Handles,
	})
	defaults := gating.DefaultSettings()
	api := agentapi.New(svc.Ledger, agentapi.AppGitHub(svc.App), s.APITokens, agentapi.Options{
		ItemLabel: defaults.ItemLabel, AdmissionLabel: defaults.AdmissionLabel,
		DefaultPriority: defaults.DefaultPriority, DefaultPhase: defaults.DefaultPhase, Region: s.Region,
		Admissions: svc.Acts, RepoKeys: s.MCPRepos, Settings: repoSettings, Writes: svc.Mirror, Locks: d,
	}, log)
	mcp := mcpapi.New(mcpapi.Options{API: api, Tokens: s.APITokens, RepoKeys: s.MCPRepos, Repos: svc.Ledger.Repos, Log: log})
	svc.Public = svc.publicRoutes(ingress, api, mcp)
	svc.Admin = svc.adminRoutes()
	return svc, nil
}

func (svc *Service) publicRoutes(ingress, api, mcp http.Handler) http.Handler {
	r := chi.NewRouter()
	r.Use(middleware.Recoverer)
	r.Method(http.MethodPost, "/webhooks", ingress)
	r.Mount("/api/v1", api)
	r.Handle("/mcp", mcp)
	r.Get("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "ok")
	})
	r.Get("/readyz", svc.readyz)
	return r
}

func (svc *Service) adminRoutes() http.Handler {
	r := chi.NewRouter()
	r.Use(middleware.Recoverer)
	r.Method(http.MethodGet, "/metrics", promhttp.HandlerFor(svc.Registry, promhttp.HandlerOpts{Registry: svc.Registry}))
	r.Get("/", svc.statusPage)
	// Go's profiler (net/http/pprof) for the next performance question:
	// on the operators' listener only, never the public one.
	r.Mount("/debug", middleware.Profiler())
	return r
}

// Close releases the inbox and the database. Stop Serve first.
func (svc *Service) Close() {
	if svc.Inbox != nil {
		svc.Inbox.Close()
	}
	svc.DB.Close()
}

// Serve listens on both listeners, runs the dispatcher, and on ctx's end
// shuts down gracefully: stop accepting, let acknowledgements in progress
// commit, let handlers finish (or leave their deliveries queued), return.
// ready, if not nil, receives the bound addresses.
func (svc *Service) Serve(ctx context.Context, publicAddr, adminAddr string, ready func(public, admin net.Addr)) error {
	pl, err := net.Listen("tcp", publicAddr)
	if err != nil {
		return &config.Error{Msg: fmt.Sprintf("WARDEN_LISTEN: %v", err)}
	}
	al, err := net.Listen("tcp", adminAddr)
	if err != nil {
		pl.Close()
		return &config.Error{Msg: fmt.Sprintf("WARDEN_ADMIN_LISTEN: %v", err)}
	}
	errLog := slog.NewLogLogger(svc.Log.Handler(), slog.LevelWarn)
	// Headers must arrive within webhooks.HeaderTimeout; POST /webhooks
	// sets its own body deadline per request, ReadTimeout covers the rest.
	public := &http.Server{Handler: svc.Public, ReadHeaderTimeout: webhooks.HeaderTimeout, ReadTimeout: 60 * time.Second,
		WriteTimeout: 60 * time.Second, IdleTimeout: 120 * time.Second, ErrorLog: errLog}
	// The admin listener's writes may take as long as a CPU profile asks
	// for (/debug/pprof/profile?seconds=60).
	admin := &http.Server{Handler: svc.Admin, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: 2 * time.Minute, ErrorLog: errLog}
	svc.Log.Info("warden serving", "public", pl.Addr().String(), "admin", al.Addr().String(),
		"database", svc.DB.Source, "github", svc.Settings.GitHubAPIURL, "events", svc.Router.Events())
	if ready != nil {
		ready(pl.Addr(), al.Addr())
	}
	errc := make(chan error, 2)
	go func() { errc <- ignoreClosed(public.Serve(pl)) }()
	go func() { errc <- ignoreClosed(admin.Serve(al)) }()
	dctx, stopDispatch := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := svc.Dispatcher.Run(dctx); err != nil && !errors.Is(err, context.Canceled) {
			svc.Log.Error("dispatcher stopped", "err", err)
		}
	}()
	wg.Add(2)
	go func() {
		defer wg.Done()
		svc.sweep(dctx)
	}()
	go func() {
		defer wg.Done()
		svc.reconcileLoop(dctx)
	}()
	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-errc:
	}
	svc.Log.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	public.Shutdown(sctx) // stop accepting; acknowledgements in progress finish
	admin.Shutdown(sctx)
	stopDispatch()
	wg.Wait()
	svc.Log.Info("stopped")
	return serveErr
}

// observeCalls records each delivery's GitHub requests in the
// calls-per-delivery histogram, then passes them to also (if set).
func (svc *Service) observeCalls(also CallsObserver) CallsObserver {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "warden_github_calls_per_delivery",
		Help:    "GitHub requests made while handling one delivery, by event and kind (read, write).",
		Buckets: []float64{0, 1, 2, 3, 5, 8, 13, 21, 50},
	}, []string{"event", "kind"})
	svc.Registry.MustRegister(h)
	return func(d *webhooks.Delivery, c app.CallCounts) {
		h.WithLabelValues(d.Event, "read").Observe(float64(c.Reads))
		h.WithLabelValues(d.Event, "write").Observe(float64(c.Writes))
		if also != nil {
			also(d, c)
		}
	}
}

// CatchUp asks GitHub to redeliver the handled webhooks warden never stored
// (CONTRACT.md §3, catch-up): see webhooks.CatchUp.
func (svc *Service) CatchUp(ctx context.Context) (webhooks.CatchUpResult, error) {
	return webhooks.CatchUp(ctx, svc.App.AppClient(), svc.Inbox, svc.Router.Handles, webhooks.CatchUpOptions{
		Now: svc.now, Log: svc.Log.With("component", "catchup")})
}

// Discover brings the repositories warden serves in step with the App's
// installations on GitHub: it serves those it did not know (creating their
// labels), and stops serving those removed from an installation and those
// of installations suspended or gone (see mirror.Discover). Serve runs it at
// start and every WARDEN_RECONCILE_INTERVAL, as a shared pass.
func (svc *Service) Discover(ctx context.Context) (mirror.DiscoveryResult, error) {
	return svc.Mirror.Discover(ctx, svc.App)
}

// Started is closed once Serve's start-up passes have run (discovery, then
// the redelivery catch-up), whether they succeeded or not, or Serve ended
// first: from then on warden serves what it found on GitHub.
func (svc *Service) Started() <-chan struct{} { return svc.started }

func (svc *Service) markStarted() { svc.startedOnce.Do(func() { close(svc.started) }) }

func ignoreClosed(err error) error {
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// NewLogger returns warden's JSON logger at level (debug, info, warn,
// error). Durations are written as seconds (a float: "wait":0.269), not
// slog's default nanoseconds.
func NewLogger(w interface{ Write([]byte) (int, error) }, level string) *slog.Logger {
	var l slog.Level
	_ = l.UnmarshalText([]byte(level))
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: l, ReplaceAttr: durationSeconds}))
}

// durationSeconds is NewLogger's ReplaceAttr: a time.Duration value
// becomes float seconds.
func durationSeconds(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		return slog.Float64(a.Key, a.Value.Duration().Seconds())
	}
	return a
}

// Migrate creates or upgrades every component's schema in d: the inbox, the
// ledger and the records the mirror keeps. serve does the same at start.
func Migrate(ctx context.Context, d *db.DB, s *config.Settings) error {
	if err := d.Migrate(ctx, "coordination", coordinationMigrations); err != nil {
		return fmt.Errorf("migrate the replicas' run records: %w", err)
	}
	ib, err := webhooks.OpenInbox(ctx, d)
	if err != nil {
		return fmt.Errorf("migrate the inbox: %w", err)
	}
	ib.Close()
	if err := store.Migrate(ctx, d); err != nil {
		return err
	}
	return nil
}

// htmlBase is GitHub's web address for an API base URL: github.com for
// api.github.com, the host itself for GitHub Enterprise Server (/api/v3)
// and for anything else (the simulator serves both on one host).
func htmlBase(api string) string {
	u, err := url.Parse(api)
	if err != nil {
		return "https://github.com"
	}
	if u.Host == "api.github.com" {
		return "https://github.com"
	}
	return u.Scheme + "://" + u.Host
}
