package harness

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/wardenhq/warden/internal/service"
	"github.com/wardenhq/warden/webhooks"
)

// TestE2ECatchUpAsksOnce: a delivery is lost while warden is unreachable;
// warden starts (its start-up catch-up asks GitHub to redeliver it), and
// before GitHub has sent the redelivery two more catch-ups run at once (as
// the first reconcile pass's follows the start-up's by milliseconds), then
// another. GitHub is asked once: the delivery is redelivered once, and
// warden admits the item.
func TestE2ECatchUpAsksOnce(t *testing.T) {
	t.Parallel()
	x := newE2E(t)
	id, lost := x.loseAdmission(t)

	// GitHub accepts redeliveries from now on but sends them later.
	x.Sim.HoldDeliveries()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// A warden started again (on the same database, as after an upgrade).
	if err := x.restart(ctx); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var results []webhooks.CatchUpResult
	run := func() {
		res, err := x.Service.CatchUp(ctx)
		if err != nil {
			t.Errorf("catch-up: %v (%+v)", err, res)
		}
		mu.Lock()
		results = append(results, res)
		mu.Unlock()
	}
	wg.Go(run)
	wg.Go(run)
	wg.Wait()
	run()
	for i, res := range results {
		if res.Missing != 1 || res.Waiting != 1 || res.Redelivered != 0 {
			t.Errorf("catch-up %d after the start-up's: %+v, want the delivery awaited, not asked for again", i, res)
		}
	}

	x.Sim.ReleaseDeliveries(nil)
	x.MustSettle(t)
	redeliveries := 0
	for _, d := range x.Sim.Deliveries() {
		if d.GUID == lost && d.Redelivery {
			redeliveries++
		}
	}
	if redeliveries != 1 {
		t.Errorf("%s redelivered %d times over four catch-ups, want once", lost, redeliveries)
	}
	if res, err := x.Service.CatchUp(ctx); err != nil || res.Missing != 0 || res.Redelivered != 0 {
		t.Errorf("catch-up after the redelivery arrived %+v (%v), want nothing missing", res, err)
	}
	x.flush(t)
	if s := x.mustReady(t); !s.has(id) {
		t.Errorf("%s not admitted after the catch-up: excluded as %q", id, s.exclusion(id))
	}
}

// restart stops warden and starts another on the same database and
// settings, and waits for its start-up passes (discovery, the catch-up).
func (x *e2e) restart(ctx context.Context) error {
	x.cancel()
	select {
	case <-x.stopped:
	case <-time.After(30 * time.Second):
		return errors.New("restart: warden did not stop within 30s")
	}
	x.Service.Close()
	svc, err := service.Build(ctx, x.settings, service.NewLogger(x.opts.Log, x.settings.LogLevel), serviceOptions(x.opts))
	if err != nil {
		return fmt.Errorf("restart: %w", err)
	}
	x.Service = svc
	if err := x.serve(ctx, x.settings); err != nil {
		return fmt.Errorf("restart: %w", err)
	}
	x.Sim.SetWebhook(x.PublicURL+"/webhooks", Secret)
	select {
	case <-svc.Started():
		return nil
	case <-ctx.Done():
		return fmt.Errorf("restart: warden's start-up passes: %w", ctx.Err())
	}
}
