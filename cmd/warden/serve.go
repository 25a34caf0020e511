package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/wardenhq/warden/app"
	"github.com/wardenhq/warden/internal/db"
	"github.com/wardenhq/warden/webhooks"
)

func newLogger(e env, level string) *slog.Logger {
	var l slog.Level
	_ = l.UnmarshalText([]byte(level))
	return slog.New(slog.NewJSONHandler(e.stderr, &slog.HandlerOptions{Level: l}))
}

// service is warden's running parts, built by build and stopped by Close.
type service struct {
	settings   *Settings
	log        *slog.Logger
	db         *db.DB
	inbox      *webhooks.Inbox
	app        *app.App
	router     *webhooks.Router
	dispatcher *webhooks.Dispatcher
	metrics    *webhooks.Metrics
	registry   *prometheus.Registry
	public     http.Handler
	admin      http.Handler
}

// buildOptions lets the demo and tests adjust the service's parts.
type buildOptions struct {
	transport http.RoundTripper // for the GitHub client; nil = default
	dispatch  webhooks.DispatchOptions
}

func build(ctx context.Context, s *Settings, log *slog.Logger, bo buildOptions) (*service, error) {
	d, err := db.Open(ctx, s.Database)
	if err != nil {
		return nil, &settingError{fmt.Sprintf("WARDEN_DATABASE: %v", err)}
	}
	svc := &service{settings: s, log: log, db: d, registry: prometheus.NewRegistry()}
	svc.registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if svc.inbox, err = webhooks.OpenInbox(ctx, d); err != nil {
		d.Close()
		return nil, fmt.Errorf("open the inbox: %w", err)
	}
	svc.app, err = app.New(app.Config{
		AppID: s.AppID, PrivateKey: s.PrivateKey, BaseURL: s.GitHubAPIURL,
		Transport: bo.transport, Logger: log, Registerer: svc.registry,
	})
	if err != nil {
		svc.Close()
		return nil, &settingError{fmt.Sprintf("GitHub App: %v", err)}
	}
	svc.metrics = webhooks.NewMetrics(svc.registry)
	svc.router = newRouter()
	opts := bo.dispatch
	opts.Identity = func(ctx context.Context) (string, error) {
		id, err := svc.app.Identity(ctx)
		return id.BotLogin, err
	}
	svc.dispatcher = webhooks.NewDispatcher(svc.inbox, webhooks.HandlerFunc(svc.router.Dispatch), svc.metrics, log, opts)
	svc.inbox.OnCommit(svc.dispatcher.Wake)
	ingress := webhooks.NewIngress(svc.inbox, svc.metrics, log, webhooks.IngressOptions{
		Secrets: s.WebhookSecrets, Handles: svc.router.Handles,
	})
	svc.public = svc.publicRoutes(ingress)
	svc.admin = svc.adminRoutes()
	return svc, nil
}

func (svc *service) publicRoutes(ingress http.Handler) http.Handler {
	r := chi.NewRouter()
	r.Use(middleware.Recoverer)
	r.Method(http.MethodPost, "/webhooks", ingress)
	r.Get("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "ok")
	})
	r.Get("/readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if err := svc.db.Ping(ctx); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, "database: not answering")
			return
		}
		if err := svc.dispatcher.Healthy(); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, err.Error())
			return
		}
		fmt.Fprintln(w, "ready")
	})
	return r
}

func (svc *service) adminRoutes() http.Handler {
	r := chi.NewRouter()
	r.Use(middleware.Recoverer)
	r.Method(http.MethodGet, "/metrics", promhttp.HandlerFor(svc.registry, promhttp.HandlerOpts{Registry: svc.registry}))
	r.Get("/", svc.statusPage)
	return r
}

// Close releases the database. Stop the dispatcher and servers first.
func (svc *service) Close() {
	if svc.inbox != nil {
		svc.inbox.Close()
	}
	svc.db.Close()
}

func runServe(ctx context.Context, e env, args []string) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	load := settingsFlags(fs, e.getenv)
	if err := fs.Parse(args); err != nil {
		return exitSetting
	}
	s, err := load("app", "secret")
	if err != nil {
		return fail(e, "serve", err)
	}
	log := newLogger(e, s.LogLevel)
	svc, err := build(ctx, s, log, buildOptions{})
	if err != nil {
		return fail(e, "serve", err)
	}
	defer svc.Close()
	if err := svc.serve(ctx, s.Listen, s.AdminListen, nil); err != nil {
		return fail(e, "serve", err)
	}
	return exitOK
}

// serve listens on both listeners, runs the dispatcher, and on ctx's end
// shuts down gracefully: stop accepting, let acknowledgements in progress
// commit, let handlers finish (or leave their deliveries queued), exit.
// ready, if not nil, receives the bound addresses.
func (svc *service) serve(ctx context.Context, publicAddr, adminAddr string, ready func(public, admin net.Addr)) error {
	pl, err := net.Listen("tcp", publicAddr)
	if err != nil {
		return &settingError{fmt.Sprintf("WARDEN_LISTEN: %v", err)}
	}
	al, err := net.Listen("tcp", adminAddr)
	if err != nil {
		pl.Close()
		return &settingError{fmt.Sprintf("WARDEN_ADMIN_LISTEN: %v", err)}
	}
	public := &http.Server{Handler: svc.public, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 60 * time.Second,
		WriteTimeout: 60 * time.Second, IdleTimeout: 120 * time.Second, ErrorLog: slog.NewLogLogger(svc.log.Handler(), slog.LevelWarn)}
	admin := &http.Server{Handler: svc.admin, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: 30 * time.Second, ErrorLog: slog.NewLogLogger(svc.log.Handler(), slog.LevelWarn)}
	svc.log.Info("warden serving", "public", pl.Addr().String(), "admin", al.Addr().String(),
		"database", svc.db.Source, "github", svc.settings.GitHubAPIURL, "events", svc.router.Events())
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
		if err := svc.dispatcher.Run(dctx); err != nil && !errors.Is(err, context.Canceled) {
			svc.log.Error("dispatcher stopped", "err", err)
		}
	}()
	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-errc:
	}
	svc.log.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	public.Shutdown(sctx) // stop accepting; acknowledgements in progress finish
	admin.Shutdown(sctx)
	stopDispatch()
	wg.Wait()
	svc.log.Info("stopped")
	return serveErr
}

func ignoreClosed(err error) error {
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// openDatabase parses a database-only command's flags and opens the
// database; a non-negative code means the command must exit with it.
func openDatabase(ctx context.Context, e env, cmd string, args []string, extra func(fs *flag.FlagSet)) (*Settings, *db.DB, *flag.FlagSet, int) {
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	load := settingsFlags(fs, e.getenv)
	if extra != nil {
		extra(fs)
	}
	if err := fs.Parse(args); err != nil {
		return nil, nil, nil, exitSetting
	}
	s, err := load()
	if err != nil {
		return nil, nil, nil, fail(e, cmd, err)
	}
	d, err := db.Open(ctx, s.Database)
	if err != nil {
		return nil, nil, nil, fail(e, cmd, &settingError{fmt.Sprintf("WARDEN_DATABASE: %v", err)})
	}
	return s, d, fs, -1
}
