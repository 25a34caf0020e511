package webhooks

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Permanent marks an error that no retry can cure (a payload that is not
// JSON, say): the delivery becomes a dead letter at once.
func Permanent(err error) error { return permanentError{err} }

type permanentError struct{ error }

func (p permanentError) Unwrap() error { return p.error }

// RetryAfter marks an error that should be retried no sooner than at (a
// GitHub rate-limit reset, for example).
func RetryAfter(err error, at time.Time) error { return retryAfterError{err, at} }

type retryAfterError struct {
	error
	at time.Time
}

func (r retryAfterError) Unwrap() error { return r.error }

// DispatchOptions tune the dispatcher. Zero values take the defaults.
type DispatchOptions struct {
	Workers     int           // concurrent handlers; default 8
	MaxAttempts int           // tries before a dead letter; default 8
	BackoffBase time.Duration // first retry delay; default 2s, doubling, with jitter
	BackoffMax  time.Duration // default 10m
	Poll        time.Duration // how often due retries are looked for; default 1s
	Grace       time.Duration // how long in-flight handlers may finish at shutdown; default 20s
	Retention   time.Duration // how long processed deliveries are kept for de-duplication; default 7 days
	// Identity returns warden's bot login. The dispatcher processes nothing
	// until it has succeeded once: a delivery warden itself caused must never
	// be mistaken for someone else's.
	Identity func(ctx context.Context) (string, error)
}

// Dispatcher drains the inbox: deliveries with the same order key (the same
// issue or pull request) run one at a time, others in parallel on a bounded
// pool; failures are retried with exponential backoff and jitter and become
// dead letters after the last try.
type Dispatcher struct {
	inbox   *Inbox
	handler Handler
	log     *slog.Logger
	m       *Metrics
	opt     DispatchOptions

	wake      chan struct{}
	results   chan taskResult
	bot       atomic.Value // string
	heartbeat atomic.Int64 // unix ms of the last loop turn

	// loop-goroutine state
	inflight  map[int64]bool
	busy      map[string]bool
	meta      map[int64]Meta       // parsed routing fields of pending deliveries seen
	elsewhere map[string]time.Time // order keys another replica held, until when not to try them
}

type taskResult struct {
	seq       int64
	key       string
	elsewhere bool // the claim failed: another replica holds the delivery or its key
}

// elsewhereFor is how long a replica leaves an order key alone after
// finding another replica holding it: that replica's own loop takes the
// key's next delivery as soon as it finishes, so trying again soon only
// spends round trips (25 ms here cost a third of the three-replica
// throughput in the bench's "dispatch (PostgreSQL)"); should the holder die,
// its deliveries wait this long at most.
const elsewhereFor = 250 * time.Millisecond

// NewDispatcher builds a dispatcher; call Run to start it.
func NewDispatcher(ib *Inbox, h Handler, m *Metrics, log *slog.Logger, opt DispatchOptions) *Dispatcher {
	if opt.Workers <= 0 {
		opt.Workers = 8
	}
	if opt.MaxAttempts <= 0 {
		opt.MaxAttempts = 8
	}
	if opt.BackoffBase <= 0 {
		opt.BackoffBase = 2 * time.Second
	}
	if opt.BackoffMax <= 0 {
		opt.BackoffMax = 10 * time.Minute
	}
	if opt.Poll <= 0 {
		opt.Poll = time.Second
	}
	if opt.Grace <= 0 {
		opt.Grace = 20 * time.Second
	}
	if opt.Retention <= 0 {
		opt.Retention = 7 * 24 * time.Hour
	}
	if m == nil {
		m = NewMetrics(nil)
	}
	if log == nil {
		log = slog.Default()
	}
	return &Dispatcher{
		inbox: ib, handler: h, log: log, m: m, opt: opt,
		wake:      make(chan struct{}, 1),
		results:   make(chan taskResult, opt.Workers),
		inflight:  map[int64]bool{},
		busy:      map[string]bool{},
		meta:      map[int64]Meta{},
		elsewhere: map[string]time.Time{},
	}
}

// Wake asks the dispatcher to look for work now (ingress calls it after each
// durable commit). It never blocks.
func (d *Dispatcher) Wake() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// Bot returns warden's bot login once learned, else "".
func (d *Dispatcher) Bot() string {
	s, _ := d.bot.Load().(string)
	return s
}

// Healthy reports whether the dispatcher is draining: it knows warden's
// identity and its loop turned recently.
func (d *Dispatcher) Healthy() error {
	if d.Bot() == "" {
		return errors.New("dispatcher: waiting for the App's identity (GET /app)")
	}
	last := time.UnixMilli(d.heartbeat.Load())
	if time.Since(last) > 10*d.opt.Poll+5*time.Second {
		return fmt.Errorf("dispatcher: loop stalled since %s", last.UTC().Format(time.RFC3339))
	}
	return nil
}

// Run processes deliveries until ctx ends, then lets in-flight handlers
// finish within the grace period; a handler still running after that is
// cancelled and its delivery stays pending (re-queued, no try counted).
func (d *Dispatcher) Run(ctx context.Context) error {
	if err := d.learnIdentity(ctx); err != nil {
		return err
	}
	workCtx, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWork()
	var wg sync.WaitGroup
	poll := time.NewTicker(d.opt.Poll)
	defer poll.Stop()
	lastPrune := time.Time{}
	var graceTimer <-chan time.Time
	stopping := false
	for {
		d.heartbeat.Store(time.Now().UnixMilli())
		if stopping && len(d.inflight) == 0 {
			wg.Wait()
			return nil
		}
		if !stopping {
			d.fill(ctx, workCtx, &wg)
			if time.Since(lastPrune) > time.Hour {
				d.prune(ctx)
				lastPrune = time.Now()
			}
		}
		select {
		case <-d.wake:
		case <-poll.C:
			d.refreshGauges(ctx)
		case r := <-d.results:
			d.finish(r)
		case <-ctx.Done():
			if !stopping {
				stopping = true
				d.log.Info("dispatcher stopping", "in_flight", len(d.inflight), "grace", d.opt.Grace.String())
				graceTimer = time.After(d.opt.Grace)
			}
		case <-graceTimer:
			d.log.Warn("grace period over; cancelling in-flight handlers", "in_flight", len(d.inflight))
			cancelWork()
			graceTimer = nil
		}
		if stopping {
			// Drain results without blocking on new work.
			for {
				select {
				case r := <-d.results:
					d.finish(r)
					continue
				default:
				}
				break
			}
		}
	}
}

func (d *Dispatcher) learnIdentity(ctx context.Context) error {
	if d.opt.Identity == nil {
		return errors.New("dispatcher: no Identity function: warden must know its own bot before processing")
	}
	delay := 500 * time.Millisecond
	for {
		bot, err := d.opt.Identity(ctx)
		if err == nil && bot != "" {
			d.bot.Store(bot)
			d.log.Info("dispatcher ready", "bot", bot)
			return nil
		}
		if err == nil {
			err = errors.New("empty bot login")
		}
		d.log.Warn("cannot learn the App's identity; deliveries stay queued", "err", err, "retry_in", delay.String())
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		}
		delay = min(delay*2, time.Minute)
	}
}

func (d *Dispatcher) finish(r taskResult) {
	delete(d.inflight, r.seq)
	delete(d.busy, r.key)
	delete(d.meta, r.seq)
	if r.elsewhere {
		if len(d.elsewhere) > 10_000 {
			clear(d.elsewhere)
		}
		d.elsewhere[r.key] = time.Now().Add(elsewhereFor)
	}
}

// fill starts handlers for due deliveries while workers are free. It pages
// through due deliveries in receipt order, so a backlog about one busy issue
// never keeps a free worker from another issue's delivery.
//
// Each handler first claims its delivery (Inbox.Claim): on PostgreSQL
// another replica may hold it or its issue, and then the key is left alone
// for a moment (elsewhereFor). Within one scan, and while a key is busy or
// left alone, every later delivery about it is passed over too, so a
// replica never overtakes an earlier delivery still pending, even one whose
// replica has just died.
func (d *Dispatcher) fill(ctx, workCtx context.Context, wg *sync.WaitGroup) {
	free := d.opt.Workers - len(d.inflight)
	if free <= 0 {
		return
	}
	now := time.Now()
	// Candidates are the first due delivery of each key that is free here.
	// Alone, a replica starts the oldest; sharing the inbox (PostgreSQL), it
	// picks at random among a few times as many, so replicas scanning the
	// same queue do not all reach for the same deliveries.
	want := free
	if d.inbox.Shared() {
		want = free * 4
	}
	type candidate struct {
		p       Pending
		m       Meta
		payload []byte
	}
	var cands []candidate
	seen := map[string]bool{}
	var after int64
scan:
	for scanned := 0; scanned < maxScan; {
		due, err := d.inbox.Due(ctx, now, after, scanPage)
		if err != nil {
			if ctx.Err() == nil {
				d.log.Error("dispatcher: list due deliveries", "err", err)
			}
			return
		}
		for _, p := range due {
			after = p.Seq
			if d.inflight[p.Seq] {
				continue
			}
			m, payload, ok := d.metaFor(ctx, p)
			if !ok {
				continue
			}
			key := m.OrderKey
			if seen[key] || d.busy[key] || d.elsewhere[key].After(now) {
				seen[key] = true // a later delivery never overtakes this key's first
				continue
			}
			seen[key] = true
			cands = append(cands, candidate{p, m, payload})
			if len(cands) >= want {
				break scan
			}
		}
		scanned += len(due)
		if len(due) < scanPage {
			break
		}
	}
	if want > free {
		rand.Shuffle(len(cands), func(i, j int) { cands[i], cands[j] = cands[j], cands[i] })
	}
	for _, c := range cands[:min(free, len(cands))] {
		d.inflight[c.p.Seq] = true
		d.busy[c.m.OrderKey] = true
		wg.Add(1)
		go func() {
			defer wg.Done()
			claim, ok, err := d.inbox.Claim(workCtx, c.p.Seq, c.m.OrderKey, now)
			if err != nil && workCtx.Err() == nil {
				d.log.Warn("dispatcher: claim delivery", "delivery", c.p.ID, "err", err)
			}
			if !ok {
				d.results <- taskResult{seq: c.p.Seq, key: c.m.OrderKey, elsewhere: true}
				return
			}
			d.process(workCtx, claim, c.p, c.m, c.payload)
			d.results <- taskResult{seq: c.p.Seq, key: c.m.OrderKey}
		}()
	}
}

// scanPage and maxScan bound one fill: pages of due deliveries, and how many
// it looks at before waiting for the next wake-up.
const (
	scanPage = 32
	maxScan  = 100_000
)

// metaFor returns a pending delivery's routing fields, parsing its payload
// the first time it is seen. A payload that cannot be parsed is a dead letter.
func (d *Dispatcher) metaFor(ctx context.Context, p Pending) (Meta, []byte, bool) {
	if m, ok := d.meta[p.Seq]; ok {
		return m, nil, true
	}
	payload, err := d.inbox.Payload(ctx, p.Seq)
	if err != nil {
		d.log.Error("dispatcher: load payload", "delivery", p.ID, "err", err)
		return Meta{}, nil, false
	}
	m, err := ParseMeta(p.Event, payload)
	if err != nil {
		d.log.Error("delivery is not a JSON object; dead letter", "delivery", p.ID, "event", p.Event, "err", err)
		if ferr := d.inbox.Fail(ctx, &Claim{Seq: p.Seq}, Meta{}, err.Error(), time.Now(), true); ferr != nil {
			d.log.Error("dispatcher: record dead letter", "delivery", p.ID, "err", ferr)
		}
		d.m.DeadTotal.WithLabelValues(p.Event).Inc()
		return Meta{}, nil, false
	}
	if len(d.meta) < 100_000 {
		d.meta[p.Seq] = m
	}
	return m, payload, true
}

func (d *Dispatcher) process(ctx context.Context, claim *Claim, p Pending, m Meta, payload []byte) {
	log := d.log.With("delivery", p.ID, "event", p.Event, "action", m.Action,
		"installation", m.Installation, "repo", m.Repo, "number", m.Number)
	if payload == nil {
		var err error
		if payload, err = d.inbox.Payload(ctx, p.Seq); err != nil {
			log.Error("load payload", "err", err)
			d.inbox.Abandon(claim)
			return // still pending; the next scan tries again
		}
	}
	dv := &Delivery{Seq: p.Seq, ID: p.ID, Event: p.Event, Payload: payload, Attempt: p.Attempts + 1, Meta: m,
		FromSelf: IsBot(m.Sender, d.Bot())}
	log.Debug("delivery handling", "attempt", dv.Attempt)
	start := time.Now()
	res, err := safeHandle(ctx, d.handler, dv)
	if err == nil {
		outcome := res.Outcome
		if outcome == "" {
			outcome = "handled"
		}
		err = d.inbox.Complete(ctx, claim, m, outcome)
		if err == nil {
			d.m.Processing.WithLabelValues(p.Event).Observe(time.Since(start).Seconds())
			d.m.Latency.WithLabelValues(p.Event).Observe(time.Since(p.ReceivedAt).Seconds())
			d.m.Outcomes.WithLabelValues(p.Event, outcomeClass(outcome)).Inc()
			log.Debug("delivery processed", "outcome", outcome, "attempt", dv.Attempt)
			return
		}
		if errors.Is(err, ErrNotPending) {
			log.Warn("delivery changed state under its handler; dropped", "err", err)
			return
		}
	}
	if ctx.Err() != nil {
		d.inbox.Abandon(claim)
		log.Info("handler interrupted by shutdown; delivery stays queued", "err", err)
		return
	}
	d.m.Processing.WithLabelValues(p.Event).Observe(time.Since(start).Seconds())
	d.recordFailure(log, claim, p, m, dv.Attempt, err)
}

// outcomeClass is the bounded metric label for a free-text outcome: its
// first word ("self: ignored" → "self"), or "other".
func outcomeClass(outcome string) string {
	w := outcome
	if i := strings.IndexAny(w, " :;,"); i >= 0 {
		w = w[:i]
	}
	if w == "" || len(w) > 32 {
		return "other"
	}
	for _, c := range w {
		if (c < 'a' || c > 'z') && c != '-' && c != '_' {
			return "other"
		}
	}
	return w
}

// safeHandle runs a handler, turning a panic into a failed try (retried,
// then a dead letter) instead of a crash that would repeat at every restart.
func safeHandle(ctx context.Context, h Handler, dv *Delivery) (res Result, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("handler panicked: %v\n%s", p, debug.Stack())
		}
	}()
	return h.Handle(ctx, dv)
}

func (d *Dispatcher) recordFailure(log *slog.Logger, claim *Claim, p Pending, m Meta, attempt int, cause error) {
	var perm permanentError
	dead := errors.As(cause, &perm) || attempt >= d.opt.MaxAttempts
	next := time.Now().Add(d.backoff(attempt))
	var ra retryAfterError
	if errors.As(cause, &ra) && ra.at.After(next) {
		next = ra.at
	}
	// Record the failure even during shutdown.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := d.inbox.Fail(ctx, claim, m, cause.Error(), next, dead); err != nil {
		d.inbox.Abandon(claim)
		log.Error("record delivery failure", "err", err, "cause", cause)
		return
	}
	if dead {
		d.m.DeadTotal.WithLabelValues(p.Event).Inc()
		log.Error("delivery failed its last try; dead letter", "attempt", attempt, "err", cause)
		return
	}
	d.m.Retries.WithLabelValues(p.Event).Inc()
	log.Warn("delivery failed; will retry", "attempt", attempt, "retry_at", next.UTC().Format(time.RFC3339Nano), "err", cause)
}

// backoff is exponential with equal jitter: half fixed, half random.
func (d *Dispatcher) backoff(attempt int) time.Duration {
	b := d.opt.BackoffBase
	for i := 1; i < attempt && b < d.opt.BackoffMax; i++ {
		b *= 2
	}
	b = min(b, d.opt.BackoffMax)
	half := b / 2
	return half + rand.N(half+1)
}

func (d *Dispatcher) refreshGauges(ctx context.Context) {
	pending, dead, err := d.inbox.Counts(ctx)
	if err != nil {
		return
	}
	d.m.Depth.Set(float64(pending))
	d.m.Dead.Set(float64(dead))
}

func (d *Dispatcher) prune(ctx context.Context) {
	n, err := d.inbox.Prune(ctx, time.Now().Add(-d.opt.Retention))
	if err != nil {
		d.log.Error("prune inbox", "err", err)
		return
	}
	if n > 0 {
		d.log.Info("pruned processed deliveries", "count", n, "older_than", d.opt.Retention.String())
	}
}
