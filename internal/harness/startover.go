package harness

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/wardenhq/warden/internal/config"
	"github.com/wardenhq/warden/internal/service"
	"github.com/wardenhq/warden/webhooks"
)

// StartOver stops warden and starts another one in its place on a new,
// empty database (named name in the environment's directory), against the
// same simulator: what a restore without a backup, a new database or a
// replacement host looks like. GitHub keeps everything it holds; the new
// warden has received no delivery, and the simulator delivers to it from
// now on. It converges by its own passes (discovery, the catch-up, the
// reconcile), which the caller runs.
func (e *Env) StartOver(ctx context.Context, name string) error {
	if e.settings == nil {
		return errors.New("start over: the environment was not started by Start")
	}
	if e.cancel != nil {
		e.cancel()
		select {
		case <-e.stopped:
		case <-time.After(30 * time.Second):
			return errors.New("start over: warden did not stop within 30s")
		}
	}
	if e.Service != nil {
		e.Service.Close()
	}
	s := *e.settings
	path := filepath.Join(e.dir, name)
	if _, err := os.Stat(path); err == nil {
		return fmt.Errorf("start over: %s exists; a new database is wanted", path)
	}
	s.Database = "sqlite:" + path
	svc, err := service.Build(ctx, &s, service.NewLogger(e.opts.Log, s.LogLevel), serviceOptions(e.opts))
	if err != nil {
		return fmt.Errorf("start over: %w", err)
	}
	e.settings, e.Service = &s, svc
	if err := e.serve(ctx, &s); err != nil {
		return fmt.Errorf("start over: %w", err)
	}
	e.Sim.SetWebhook(e.PublicURL+"/webhooks", Secret)
	select {
	case <-svc.Started(): // its start-up passes (discovery, the catch-up) have run
	case <-ctx.Done():
		return fmt.Errorf("start over: warden's start-up passes: %w", ctx.Err())
	}
	return nil
}

// serviceOptions are the service's options for a test warden: a quick
// dispatcher, quick GitHub retries, and the timer pass and the reconcile
// run when a test says (Sweep, Reconcile), not on a ticker.
func serviceOptions(o Options) service.Options {
	so := service.Options{
		Dispatch:        webhooks.DispatchOptions{Workers: 4, BackoffBase: 20 * time.Millisecond, BackoffMax: 200 * time.Millisecond, MaxAttempts: 4, Poll: 10 * time.Millisecond, Grace: 5 * time.Second},
		GitHubRetryBase: 5 * time.Millisecond, GitHubMaxWait: 2 * time.Second, Now: o.Now,
		SweepInterval: time.Hour, NoReconcileLoop: true,
		DeliveryCalls: o.DeliveryCalls,
	}
	if o.Production {
		// warden serve's own retry, backoff and wait settings; the poll
		// stays short so that a measure is of them, not of the poll.
		so.Dispatch = webhooks.DispatchOptions{Poll: 20 * time.Millisecond}
		so.GitHubRetryBase, so.GitHubMaxWait = 0, 0
	}
	return so
}

// serve runs e.Service on s's listeners until Close or StartOver stops it,
// and returns once both listen.
func (e *Env) serve(ctx context.Context, s *config.Settings) error {
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	e.cancel, e.stopped = cancel, make(chan error, 1)
	ready := make(chan [2]net.Addr, 1)
	svc := e.Service
	go func() {
		e.stopped <- svc.Serve(runCtx, s.Listen, s.AdminListen, func(p, a net.Addr) { ready <- [2]net.Addr{p, a} })
	}()
	select {
	case a := <-ready:
		e.PublicURL, e.AdminURL = "http://"+a[0].String(), "http://"+a[1].String()
		return nil
	case err := <-e.stopped:
		return fmt.Errorf("warden did not start: %w", err)
	}
}
