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

// DispatchOptions tune the dispatcher. Zero values take the defaults.
type DispatchOptions struct {
	Workers     int           // concurrent handlers; default 8
	MaxAttempts int           // tries before a dead letter; default 8
	BackoffBase time.Duration // first retry delay; default 2s, doubling, with jitter
	BackoffMax  time.Duration // default 10m
	Poll        time.Duration // how often due retries are looked for; default 1s
	Grace       time.Duration // how long in-flight handlers may finish at shutdown; default 20s
	Retention   time.Duration // how long processed deliveries are kept for de-duplication; default 7 days
	// HandlerTimeout bounds one handler run; past it the run's context
	// ends and the try fails (retried like any failure). Default 5m.
	HandlerTimeout time.Duration
	// SlowAfter is how long a handler runs before it stops counting
	// against Workers: the loop starts other deliveries beside it, up to
	// 4×Workers in flight, so hung GitHub calls never take every worker.
	// Default 5s (GitHub answers in a second or two).
	SlowAfter time.Duration
	// Now is warden's clock, which GitHub's rate-limit resets are judged
	// by (holds); nil: time.Now. Due times and backoff run on real time.
	Now func() time.Time
	// Identity returns warden's bot login. The dispatcher processes nothing
	// until it has succeeded once: a delivery warden itself caused must never
	// be mistaken for someone else's.
	Identity func(ctx context.Context) (string, error)
}

// Dispatcher drains the inbox: deliveries with the same order key (the same
// issue or pull request) run one at a time, others in parallel on a bounded
// pool; failures are retried with exponential backoff and jitter and become
// dead letters after the last try. What may start is decided from an
// in-memory queue of the pending deliveries' routing facts (see queue),
// never by walking the inbox or decoding payloads.
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

	// handed holds what the inbox's writer handed over since the loop last
	// looked (see Inbox.onQueued).
	handMu      sync.Mutex
	handed      []Queued
	handedBytes int // payload bytes in handed

	// loop-goroutine state
	q          *queue
	inflight   int
	running    map[int64]time.Time // seq → when its handler started
	holds      holds               // installations waiting out a rate limit
	lastQueued int64               // the highest queued number read or handed over without a gap
	loaded     bool                // the queue holds every delivery pending at start
	loadMore   bool                // the start's load read a full page: more to read
	lastSync   time.Time           // the last look for deliveries queued elsewhere
	lastFull   time.Time           // the last full re-read (shared inbox only)
}

// taskResult is how one started delivery ended, for the loop.
type taskResult struct {
	e    *entry
	gone bool      // done, dead, or no longer pending: leaves the queue
	due  time.Time // otherwise: when it may run again
	// held: another replica holds the delivery or its key.
	held bool
	// add is an earlier delivery of the key to queue (see Inbox.Claim).
	add *Queued
	// throttle: a rate limit stopped it; its installation waits.
	throttle *throttle
}

// elsewhereFor is how long a replica leaves an order key alone after
// finding another replica holding it: that replica's own loop takes the
// key's next delivery as soon as it finishes, so trying again soon only
// spends round trips (25 ms here cost a third of the three-replica
// throughput in the bench's "dispatch (PostgreSQL)"); should the holder die,
// its deliveries wait this long at most.
const elsewhereFor = 250 * time.Millisecond

// syncPage is how many deliveries one read of the inbox's queue returns;
// syncPages bounds the pages one loop turn reads (a large backlog at start
// is loaded over several turns, work starting meanwhile).
const (
	syncPage  = 1000
	syncPages = 8
	// fullSyncEvery is how often a dispatcher sharing its inbox (PostgreSQL)
	// re-reads every pending delivery, forgetting those other replicas
	// finished; between, it learns of them when it tries to claim one.
	fullSyncEvery = time.Minute
)

// NewDispatcher builds a dispatcher; call Run to start it. It takes the
// inbox's hand-over of every delivery committed from now on.
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
	if opt.HandlerTimeout <= 0 {
		opt.HandlerTimeout = 5 * time.Minute
	}
	if opt.SlowAfter <= 0 {
		opt.SlowAfter = 5 * time.Second
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	if m == nil {
		m = NewMetrics(nil)
	}
	if log == nil {
		log = slog.Default()
	}
	d := &Dispatcher{
		inbox: ib, handler: h, log: log, m: m, opt: opt,
		wake:    make(chan struct{}, 1),
		results: make(chan taskResult, opt.Workers*maxInFlightFactor),
		q:       newQueue(),
		running: map[int64]time.Time{},
	}
	ib.onQueued(d.handOver)
	return d
}

// handOver is the inbox writer's hand-over of deliveries it just made
// pending. It never blocks on the loop.
func (d *Dispatcher) handOver(qs []Queued) {
	d.handMu.Lock()
	for _, q := range qs {
		// Until the loop takes them (it waits for the App's identity
		// first), payloads are held only up to the queue's own bound.
		if d.handedBytes+len(q.payload) > maxCached {
			q.payload = nil
		}
		d.handedBytes += len(q.payload)
		d.handed = append(d.handed, q)
	}
	d.handMu.Unlock()
	d.Wake()
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
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	lastPrune, lastGauges, lastCount := time.Time{}, time.Time{}, time.Time{}
	var graceTimer <-chan time.Time
	stopping := false
	for {
		now := time.Now()
		d.heartbeat.Store(now.UnixMilli())
		if stopping && d.inflight == 0 {
			wg.Wait()
			return nil
		}
		if !stopping {
			d.absorb(now)
			if !d.loaded || now.Sub(d.lastSync) >= d.opt.Poll {
				d.sync(ctx, now)
			}
			d.q.tick(now)
			d.fill(workCtx, &wg, now)
			if now.Sub(lastGauges) >= d.opt.Poll {
				count := now.Sub(lastCount) >= 10*d.opt.Poll
				d.refreshGauges(ctx, count)
				lastGauges = now
				if count {
					lastCount = now
				}
			}
			if now.Sub(lastPrune) > time.Hour {
				d.prune(ctx)
				lastPrune = now
			}
		}
		// Sleep until woken, a result, the poll, or the queue's next timer.
		wait := d.opt.Poll
		if d.loadMore {
			wait = 0 // the start's load is under way: its next pages now
		}
		if at := d.q.next(); !at.IsZero() {
			wait = min(wait, max(time.Until(at), 0))
		}
		timer.Reset(wait)
		select {
		case <-d.wake:
		case <-poll.C:
		case <-timer.C:
		case r := <-d.results:
			d.finish(r)
		case <-ctx.Done():
			if !stopping {
				stopping = true
				d.log.Info("dispatcher stopping", "in_flight", d.inflight, "grace", d.opt.Grace.String())
				graceTimer = time.After(d.opt.Grace)
			}
		case <-graceTimer:
			d.log.Warn("grace period over; cancelling in-flight handlers", "in_flight", d.inflight)
			cancelWork()
			graceTimer = nil
		}
		// Take every result already in: a burst of short handlers finishes
		// many per turn.
		for drained := false; !drained; {
			select {
			case r := <-d.results:
				d.finish(r)
			default:
				drained = true
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

// absorb moves the writer's hand-over into the queue. A batch numbered on
// from the last number known moves lastQueued on; a gap (another process
// queued something meanwhile) is left for sync to read.
func (d *Dispatcher) absorb(now time.Time) {
	d.handMu.Lock()
	handed := d.handed
	d.handed, d.handedBytes = nil, 0
	d.handMu.Unlock()
	for _, h := range handed {
		if d.loaded && h.Queued == d.lastQueued+1 {
			d.lastQueued = h.Queued
		}
		d.q.add(h, now)
	}
}

// sync reads what was queued since lastQueued and is not yet in the queue:
// at start every pending delivery (over several turns when the backlog is
// large), then what other processes queued (an operator's retry, other
// replicas' deliveries). On a shared inbox it also re-reads everything now
// and then, forgetting deliveries other replicas finished.
func (d *Dispatcher) sync(ctx context.Context, now time.Time) {
	d.lastSync = now
	// Nothing this process's writer commits can be read here before its
	// hand-over is taken (see Inbox.writer): a delivery read from the inbox
	// is then either known already or never handed over.
	d.inbox.syncMu.Lock()
	defer d.inbox.syncMu.Unlock()
	d.absorb(now)
	if d.inbox.Shared() && d.loaded && now.Sub(d.lastFull) >= fullSyncEvery {
		d.fullSync(ctx, now)
		return
	}
	d.loadMore = false
	for page := 0; page < syncPages; page++ {
		qs, err := d.inbox.queuedSince(ctx, d.lastQueued, syncPage)
		if err != nil {
			if ctx.Err() == nil {
				d.log.Error("dispatcher: read the inbox's queue", "err", err)
			}
			return
		}
		for _, q := range qs {
			d.q.add(q, now)
			d.lastQueued = max(d.lastQueued, q.Queued)
		}
		if len(qs) < syncPage {
			if !d.loaded {
				d.loaded = true
				d.lastFull = now
				d.log.Info("dispatcher loaded the inbox's pending deliveries", "pending", d.q.len())
			}
			return
		}
	}
	d.loadMore = !d.loaded
}

// fullSync re-reads every pending delivery of a shared inbox.
func (d *Dispatcher) fullSync(ctx context.Context, now time.Time) {
	pending := map[int64]bool{}
	var after, top int64
	for {
		qs, err := d.inbox.queuedSince(ctx, after, syncPage)
		if err != nil {
			if ctx.Err() == nil {
				d.log.Error("dispatcher: re-read the inbox's queue", "err", err)
			}
			return
		}
		for _, q := range qs {
			pending[q.Seq] = true
			d.q.add(q, now)
			after, top = q.Queued, max(top, q.Queued)
		}
		if len(qs) < syncPage {
			break
		}
	}
	for seq, e := range d.q.known {
		if !pending[seq] && !e.kq.busy {
			d.q.remove(e)
		}
	}
	d.lastQueued = max(d.lastQueued, top)
	d.lastFull = now
}

func (d *Dispatcher) finish(r taskResult) {
	d.inflight--
	delete(d.running, r.e.Seq)
	now := time.Now()
	if r.throttle != nil {
		d.holdFor(*r.throttle, d.opt.Now())
	}
	if r.held {
		d.q.holdKey(r.e.kq, now.Add(elsewhereFor))
	}
	if r.add != nil {
		// Known here already (with a stale due time), or new: either way
		// the inbox's reading stands. Its key is busy: it is considered
		// when the key is freed below.
		if e := d.q.known[r.add.Seq]; e != nil {
			e.Due, e.Attempts = r.add.Due, r.add.Attempts
		} else {
			d.q.add(*r.add, now)
		}
	}
	d.q.finished(r.e, r.gone, r.due, now)
}

// fill starts handlers for startable deliveries while workers are free,
// the delivery received first first. Sharing the inbox (PostgreSQL), a
// replica picks at random among a few times as many as it can start, so
// replicas do not all reach for the same deliveries.
//
// Each handler first claims its delivery (Inbox.Claim): on PostgreSQL
// another replica may hold it or its issue, and then the key is left alone
// for a moment (elsewhereFor); the key stays busy meanwhile, so a replica
// never overtakes an earlier delivery still pending.
func (d *Dispatcher) fill(workCtx context.Context, wg *sync.WaitGroup, now time.Time) {
	free := d.freeWorkers(now)
	if free <= 0 {
		return
	}
	want := free
	if d.inbox.Shared() {
		want = free * 4
	}
	var cands []*entry
	for len(cands) < want {
		e := d.q.pop(now)
		if e == nil {
			break
		}
		if wait, held := d.heldFor(e.Meta.Installation); held {
			// Its installation waits out a rate limit: the key waits
			// with it, and nothing probes GitHub meanwhile.
			d.q.holdKey(e.kq, now.Add(wait))
			d.q.putBack(e, now)
			continue
		}
		cands = append(cands, e)
	}
	if want > free {
		rand.Shuffle(len(cands), func(i, j int) { cands[i], cands[j] = cands[j], cands[i] })
	}
	for i, e := range cands {
		if i >= free {
			d.q.putBack(e, now)
			continue
		}
		d.inflight++
		d.running[e.Seq] = now
		wg.Add(1)
		go func() {
			defer wg.Done()
			d.results <- d.run(workCtx, e, now)
		}()
	}
}

// run claims and processes one delivery and says how it ended.
func (d *Dispatcher) run(ctx context.Context, e *entry, now time.Time) taskResult {
	claim, ok, earlier, err := d.inbox.Claim(ctx, e.Seq, e.Meta.OrderKey, now)
	if err != nil && ctx.Err() == nil {
		d.log.Warn("dispatcher: claim delivery", "delivery", e.ID, "err", err)
	}
	if earlier > 0 {
		// Another replica's delivery of this key, earlier, not yet read
		// here: it is queued, and runs first.
		q, pending, err := d.inbox.queuedOne(ctx, earlier)
		if err != nil || !pending {
			return taskResult{e: e, due: time.Now().Add(d.opt.Poll)}
		}
		return taskResult{e: e, due: e.Due, add: &q}
	}
	if !ok {
		return d.unclaimed(ctx, e, err)
	}
	return d.process(ctx, claim, e)
}

// unclaimed learns why a claim failed: the delivery is gone (done or dead,
// by another replica or an operator), not due yet (another replica
// recorded a failed try), or held elsewhere.
func (d *Dispatcher) unclaimed(ctx context.Context, e *entry, claimErr error) taskResult {
	if claimErr != nil {
		return taskResult{e: e, due: time.Now().Add(d.opt.Poll)}
	}
	st, err := d.inbox.stateOf(ctx, e.Seq)
	switch {
	case err != nil:
		return taskResult{e: e, due: time.Now().Add(d.opt.Poll)}
	case st.State != StatePending:
		return taskResult{e: e, gone: true}
	case st.Due.After(time.Now()):
		e.Attempts = st.Attempts
		return taskResult{e: e, due: st.Due}
	}
	return taskResult{e: e, due: e.Due, held: true}
}

func (d *Dispatcher) process(ctx context.Context, claim *Claim, e *entry) taskResult {
	m := e.Meta
	// The delivery's logger is built only when something is logged: most
	// deliveries log nothing above debug, and building it is a formatting
	// of six attributes.
	log := sync.OnceValue(func() *slog.Logger {
		return d.log.With("delivery", e.ID, "event", e.Event, "action", m.Action,
			"installation", m.Installation, "repo", m.Repo, "number", m.Number)
	})
	debug := d.log.Enabled(ctx, slog.LevelDebug)
	if e.RouteErr != "" {
		log().Error("delivery cannot be routed; dead letter", "err", e.RouteErr)
		return d.recordFailure(log(), claim, e, e.Attempts+1, Permanent(errors.New(e.RouteErr)))
	}
	payload := e.payload
	if payload == nil {
		var err error
		if payload, err = d.inbox.Payload(ctx, e.Seq); err != nil {
			log().Error("load payload", "err", err)
			d.inbox.Abandon(claim)
			return taskResult{e: e, due: time.Now().Add(d.opt.Poll)} // still pending; tried again soon
		}
	}
	dv := &Delivery{Seq: e.Seq, ID: e.ID, Event: e.Event, Payload: payload, Attempt: e.Attempts + 1, Meta: m,
		FromSelf: IsBot(m.Sender, d.Bot())}
	if debug {
		log().Debug("delivery handling", "attempt", dv.Attempt)
	}
	start := time.Now()
	res, err := d.handle(ctx, dv)
	if err == nil {
		outcome := res.Outcome
		if outcome == "" {
			outcome = "handled"
		}
		err = d.inbox.Complete(ctx, claim, outcome)
		if err == nil {
			d.m.Processing.WithLabelValues(e.Event).Observe(time.Since(start).Seconds())
			d.m.Latency.WithLabelValues(e.Event).Observe(time.Since(e.ReceivedAt).Seconds())
			d.m.Outcomes.WithLabelValues(e.Event, outcomeClass(outcome)).Inc()
			if debug {
				log().Debug("delivery processed", "outcome", outcome, "attempt", dv.Attempt)
			}
			return taskResult{e: e, gone: true}
		}
		if errors.Is(err, ErrNotPending) {
			log().Warn("delivery changed state under its handler; dropped", "err", err)
			return taskResult{e: e, gone: true}
		}
	}
	if ctx.Err() != nil {
		d.inbox.Abandon(claim)
		log().Info("handler interrupted by shutdown; delivery stays queued", "err", err)
		return taskResult{e: e, due: e.Due}
	}
	d.m.Processing.WithLabelValues(e.Event).Observe(time.Since(start).Seconds())
	return d.recordFailure(log(), claim, e, dv.Attempt, err)
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

func (d *Dispatcher) recordFailure(log *slog.Logger, claim *Claim, e *entry, attempt int, cause error) taskResult {
	var th throttledError
	if errors.As(cause, &th) {
		return d.recordThrottle(log, claim, e, th)
	}
	var perm permanentError
	dead := errors.As(cause, &perm) || attempt >= d.opt.MaxAttempts
	next := time.Now().Add(d.backoff(attempt))
	// Record the failure even during shutdown.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := d.inbox.Fail(ctx, claim, cause.Error(), next, dead); err != nil {
		d.inbox.Abandon(claim)
		if errors.Is(err, ErrNotPending) {
			log.Warn("delivery changed state under its handler; dropped", "err", err, "cause", cause)
			return taskResult{e: e, gone: true}
		}
		log.Error("record delivery failure", "err", err, "cause", cause)
		return taskResult{e: e, due: time.Now().Add(d.opt.Poll)}
	}
	if dead {
		d.m.DeadTotal.WithLabelValues(e.Event).Inc()
		log.Error("delivery failed its last try; dead letter", "attempt", attempt, "err", cause)
		return taskResult{e: e, gone: true}
	}
	e.Attempts = attempt
	d.m.Retries.WithLabelValues(e.Event).Inc()
	log.Warn("delivery failed; will retry", "attempt", attempt, "retry_at", next.UTC().Format(time.RFC3339Nano), "err", cause)
	return taskResult{e: e, due: next}
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

// refreshGauges sets the inbox gauges: the pending depth from the queue,
// and now and then (counting reads the inbox) the dead letters.
func (d *Dispatcher) refreshGauges(ctx context.Context, count bool) {
	if d.loaded {
		d.m.Depth.Set(float64(d.q.len()))
	}
	if !count {
		return
	}
	pending, dead, err := d.inbox.Counts(ctx)
	if err != nil {
		return
	}
	if !d.loaded {
		d.m.Depth.Set(float64(pending))
	}
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
