package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/wardenhq/warden/internal/db"
	"github.com/wardenhq/warden/webhooks"
)

// benchPostgresDispatch measures draining the inbox on PostgreSQL with one
// and with three replicas: n deliveries about `keys` issues are stored, then
// the replicas' dispatchers (8 workers each, every delivery claimed with its
// row lock and its issue's advisory lock) run a handler that stands for a
// GitHub call (a fixed wait). The figure is deliveries handled per second,
// and the check is that each was handled exactly once.
func benchPostgresDispatch(ctx context.Context, base string, n, keys int, call time.Duration) ([]Figure, error) {
	var figs []Figure
	var rate1 float64
	for _, replicas := range []int{1, 3} {
		dsn, drop, err := pgSchema(ctx, base)
		if err != nil {
			return nil, err
		}
		rate, err := drainOnce(ctx, dsn, replicas, n, keys, call)
		if derr := drop(); err == nil {
			err = derr
		}
		if err != nil {
			return nil, fmt.Errorf("%d replicas: %w", replicas, err)
		}
		ceiling := "—"
		if replicas == 1 {
			rate1 = rate
		} else {
			ceiling = fmt.Sprintf("%.2f× 1 replica", rate/rate1)
		}
		figs = append(figs, Figure{"dispatch (PostgreSQL)", fmt.Sprintf("deliveries handled, %d replica%s", replicas, map[bool]string{true: "s"}[replicas > 1]),
			rate, "/s", fmt.Sprintf("%d deliveries about %d issues, handler waits %s (a GitHub call), 8 workers per replica; each handled once (checked)", n, keys, call), ceiling})
	}
	return figs, nil
}

// drainOnce stores n deliveries, drains them with the given number of
// replicas and returns deliveries handled per second.
func drainOnce(ctx context.Context, dsn string, replicas, n, keys int, call time.Duration) (float64, error) {
	type rep struct {
		d  *db.DB
		ib *webhooks.Inbox
	}
	var rs []rep
	defer func() {
		for _, r := range rs {
			r.ib.Close()
			r.d.Close()
		}
	}()
	for range replicas {
		d, err := db.Open(ctx, dsn)
		if err != nil {
			return 0, err
		}
		ib, err := webhooks.OpenInbox(ctx, d)
		if err != nil {
			d.Close()
			return 0, err
		}
		rs = append(rs, rep{d, ib})
	}
	for i := range n {
		body := fmt.Appendf(nil, `{"action":"edited","installation":{"id":1},"repository":{"id":1,"full_name":"o/r"},`+
			`"issue":{"number":%d},"sender":{"login":"alice","type":"User"}}`, i%keys+1)
		if _, err := rs[0].ib.Accept(ctx, webhooks.Incoming{ID: fmt.Sprintf("dispatch-%d", i), Event: "issues",
			Payload: body, ReceivedAt: time.Now()}); err != nil {
			return 0, err
		}
	}
	var mu sync.Mutex
	handled := map[string]int{}
	h := webhooks.HandlerFunc(func(ctx context.Context, d *webhooks.Delivery) (webhooks.Result, error) {
		time.Sleep(call)
		mu.Lock()
		handled[d.ID]++
		mu.Unlock()
		return webhooks.Result{Outcome: "ok"}, nil
	})
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	rctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	start := time.Now()
	for _, r := range rs {
		disp := webhooks.NewDispatcher(r.ib, h, nil, log, webhooks.DispatchOptions{Workers: 8,
			Identity: func(context.Context) (string, error) { return "warden[bot]", nil }})
		wg.Add(1)
		go func() { defer wg.Done(); disp.Run(rctx) }()
	}
	deadline := time.Now().Add(5 * time.Minute)
	for {
		pending, dead, err := rs[0].ib.Counts(ctx)
		if err != nil {
			cancel()
			return 0, err
		}
		if pending == 0 {
			if dead != 0 {
				cancel()
				return 0, fmt.Errorf("%d dead letters", dead)
			}
			break
		}
		if time.Now().After(deadline) {
			cancel()
			return 0, fmt.Errorf("%d deliveries still pending after 5 minutes", pending)
		}
		time.Sleep(20 * time.Millisecond)
	}
	elapsed := time.Since(start)
	cancel()
	wg.Wait()
	if len(handled) != n {
		return 0, fmt.Errorf("%d of %d deliveries handled", len(handled), n)
	}
	for id, c := range handled {
		if c != 1 {
			return 0, fmt.Errorf("%s handled %d times", id, c)
		}
	}
	return float64(n) / elapsed.Seconds(), nil
}
