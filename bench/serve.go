package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"time"

	"github.com/wardenhq/warden/internal/db"
	"github.com/wardenhq/warden/webhooks"
)

// serveConfig sizes the "serve" section.
type serveConfig struct {
	ingest     ingestConfig
	drainLarge int // the single-issue backlog drained with a no-op handler
	drainSmall int // the same, a tenth: the drain must be linear
	drainCap   time.Duration
}

// servedStack is warden's delivery path as `warden serve` runs it: the
// ingress, the inbox and the dispatcher, here with a handler that makes no
// GitHub call (it only counts), so the figures are the delivery path's own.
type servedStack struct {
	d       *db.DB
	ib      *webhooks.Inbox
	ingress *webhooks.Ingress
	disp    *webhooks.Dispatcher
	stop    context.CancelFunc
	done    chan error
	handled atomic.Int64
}

func openServed(ctx context.Context, path string, run bool) (*servedStack, error) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	d, err := db.Open(ctx, "sqlite:"+path)
	if err != nil {
		return nil, err
	}
	ib, err := webhooks.OpenInbox(ctx, d)
	if err != nil {
		d.Close()
		return nil, err
	}
	s := &servedStack{d: d, ib: ib, done: make(chan error, 1)}
	h := webhooks.HandlerFunc(func(ctx context.Context, dv *webhooks.Delivery) (webhooks.Result, error) {
		s.handled.Add(1)
		return webhooks.Result{Outcome: "handled"}, nil
	})
	s.disp = webhooks.NewDispatcher(ib, h, nil, log, webhooks.DispatchOptions{
		Identity: func(context.Context) (string, error) { return "warden-bench[bot]", nil }})
	ib.OnCommit(s.disp.Wake)
	s.ingress = webhooks.NewIngress(ib, nil, log, webhooks.IngressOptions{Secrets: [][]byte{benchSecret}, MaxConcurrentReads: 256})
	if run {
		s.start()
	}
	return s, nil
}

func (s *servedStack) start() {
	ctx, cancel := context.WithCancel(context.Background())
	s.stop = cancel
	go func() { s.done <- s.disp.Run(ctx) }()
}

func (s *servedStack) close() {
	if s.stop != nil {
		s.stop()
		<-s.done
	}
	s.ib.Close()
	s.d.Close()
}

// pending counts the inbox's pending deliveries.
func (s *servedStack) pending(ctx context.Context) int {
	p, _, _ := s.ib.Counts(ctx)
	return p
}

// benchServe measures `warden serve`'s delivery path with its dispatcher
// running: accepted deliveries per second against the ceiling (a handler
// that only checks the signature), interleaved in one run, for deliveries
// spread over 64 issues and for all on one issue; the acknowledgement
// latency at a fixed rate; and the drain of a single-issue backlog.
func benchServe(ctx context.Context, cfg serveConfig) ([]Figure, error) {
	dir, err := os.MkdirTemp("", "warden-bench-serve-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	ceiling := ceilingHandler()
	ic := cfg.ingest
	work := func(issues int) string {
		return fmt.Sprintf("%d deliveries of %d KB over %d issue(s), %d clients, %d rounds", ic.Deliveries, ic.PayloadBytes>>10, issues, ic.Clients, ic.Rounds)
	}
	var figs []Figure
	for _, issues := range []int{64, 1} {
		s, err := openServed(ctx, filepath.Join(dir, fmt.Sprintf("serve-%d.db", issues)), true)
		if err != nil {
			return nil, err
		}
		var ratios []float64
		var lag time.Duration
		for round := 0; round < ic.Rounds; round++ {
			c, err := loadIssues(ceiling, ic, fmt.Sprintf("c%d-%d", issues, round), issues)
			if err != nil {
				s.close()
				return nil, err
			}
			r, err := loadIssues(s.ingress, ic, fmt.Sprintf("s%d-%d", issues, round), issues)
			if err != nil {
				s.close()
				return nil, err
			}
			ratios = append(ratios, r.rate/c.rate)
			// Let the dispatcher finish before the next ceiling round, and
			// time how far behind the acknowledgements it was.
			t0 := time.Now()
			for s.pending(ctx) > 0 && time.Since(t0) < cfg.drainCap {
				time.Sleep(5 * time.Millisecond)
			}
			lag = max(lag, time.Since(t0))
		}
		left := s.pending(ctx)
		s.close()
		lo, hi := slices.Min(ratios), slices.Max(ratios)
		figs = append(figs,
			Figure{"serve", fmt.Sprintf("accepted / ceiling, %d issue(s)", issues), hi, "ratio", work(issues),
				fmt.Sprintf("aim ≥ 0.5; spread %.2f–%.2f", lo, hi)},
			Figure{"serve", fmt.Sprintf("dispatcher behind at the end, %d issue(s)", issues), lag.Seconds() * 1000, "ms",
				work(issues) + fmt.Sprintf(", worst round; %d still pending", left), "—"})
	}
	// Acknowledgement latency at a fixed rate, dispatcher running.
	s, err := openServed(ctx, filepath.Join(dir, "paced.db"), true)
	if err != nil {
		return nil, err
	}
	srv, err := startServer(s.ingress)
	if err != nil {
		s.close()
		return nil, err
	}
	p50, p99, err := paced([]string{srv.url}, ic, "paced")
	srv.srv.Close()
	s.close()
	if err != nil {
		return nil, err
	}
	paced := fmt.Sprintf("%d/s for %s, open loop, dispatcher running", ic.Rate, ic.RateFor)
	figs = append(figs,
		Figure{"serve", "ack latency p50", p50.Seconds() * 1000, "ms", paced, "—"},
		Figure{"serve", "ack latency p99", p99.Seconds() * 1000, "ms", paced, "aim < 10 ms"})
	drains, err := benchDrain(ctx, dir, cfg)
	if err != nil {
		return nil, err
	}
	return append(figs, drains...), nil
}

// benchDrain fills an inbox with a backlog about one issue (dispatcher
// stopped), then starts the dispatcher with a no-op handler and times the
// drain, for a large and a small backlog: the per-delivery cost must not
// grow with the backlog.
func benchDrain(ctx context.Context, dir string, cfg serveConfig) ([]Figure, error) {
	body, _ := deliveryAbout("drain", cfg.ingest.PayloadBytes, 1)
	type drain struct {
		n       int
		rate    float64
		cpu     time.Duration
		drained int
	}
	var out []drain
	for _, n := range []int{cfg.drainSmall, cfg.drainLarge} {
		s, err := openServed(ctx, filepath.Join(dir, fmt.Sprintf("drain-%d.db", n)), false)
		if err != nil {
			return nil, err
		}
		if err := fillInbox(ctx, s.ib, n, body); err != nil {
			s.close()
			return nil, err
		}
		cpu0, t0 := cpuTime(), time.Now()
		s.start()
		for s.handled.Load() < int64(n) && time.Since(t0) < cfg.drainCap {
			time.Sleep(2 * time.Millisecond)
		}
		el, cpu := time.Since(t0), cpuTime()-cpu0
		got := int(s.handled.Load())
		s.close()
		out = append(out, drain{n: n, rate: float64(got) / el.Seconds(), cpu: cpu / time.Duration(max(got, 1)), drained: got})
	}
	var figs []Figure
	for _, d := range out {
		work := fmt.Sprintf("%d deliveries about one issue, no-op handler", d.n)
		if d.drained < d.n {
			work += fmt.Sprintf("; only %d drained in %s", d.drained, cfg.drainCap)
		}
		figs = append(figs,
			Figure{"serve", fmt.Sprintf("drain of a %d backlog", d.n), d.rate, "/s", work, "aim ≥ 2000/s"},
			Figure{"serve", fmt.Sprintf("CPU per drained delivery, %d backlog", d.n), d.cpu.Seconds() * 1e6, "µs", work, "—"})
	}
	small, large := out[0], out[1]
	figs = append(figs, Figure{"serve", "drain CPU per delivery, large / small backlog", large.cpu.Seconds() / small.cpu.Seconds(), "ratio",
		fmt.Sprintf("%d vs %d deliveries about one issue", large.n, small.n), "linear: aim ≈ 1"})
	return figs, nil
}

// fillInbox stores n deliveries of body directly (no HTTP), concurrently so
// they group-commit like a burst.
func fillInbox(ctx context.Context, ib *webhooks.Inbox, n int, body []byte) error {
	errs := make(chan error, 64)
	var next atomic.Int64
	for w := 0; w < 64; w++ {
		go func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					errs <- nil
					return
				}
				_, err := ib.Accept(ctx, webhooks.Incoming{ID: guid("fill", i), Event: "issue_comment",
					Payload: body, ReceivedAt: time.Now()})
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	var first error
	for w := 0; w < 64; w++ {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// deliveryAbout is delivery with the issue number set to number.
func deliveryAbout(id string, size, number int) ([]byte, string) {
	m, _ := template()
	m = maps.Clone(m)
	if is, ok := m["issue"].(map[string]any); ok {
		is = maps.Clone(is)
		is["number"] = number
		m["issue"] = is
	}
	return deliveryFrom(m, id, size)
}

// loadIssues is load with the deliveries spread over issues issues.
func loadIssues(h http.Handler, cfg ingestConfig, prefix string, issues int) (run, error) {
	s, err := startServer(h)
	if err != nil {
		return run{}, err
	}
	defer s.srv.Close()
	return loadBodies([]string{s.url}, false, cfg, prefix, nil, func(i int) ([]byte, string) {
		return deliveryAbout(fmt.Sprintf("%s-%d", prefix, i), cfg.PayloadBytes, 1+i%issues)
	})
}
