package webhooks

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"
)

// Permanent marks an error that no retry can cure (a payload that is not
// JSON, say): the delivery becomes a dead letter at once.
func Permanent(err error) error { return permanentError{err} }

type permanentError struct{ error }

func (p permanentError) Unwrap() error { return p.error }

// Throttled marks an error caused by a GitHub rate limit that lasts until
// until. The delivery waits for it without spending a try — a limit says
// nothing about the delivery, so it is never dead-lettered for one — and
// the dispatcher starts none of installation's deliveries before then
// (installation <= 0: the App's own budget, so none at all), instead of
// probing GitHub with each of them.
func Throttled(err error, installation int64, until time.Time) error {
	return throttledError{error: err, t: throttle{installation: max(installation, 0), until: until}}
}

type throttle struct {
	installation int64 // 0: every installation
	until        time.Time
	cause        string
}

type throttledError struct {
	error
	t throttle
}

func (t throttledError) Unwrap() error { return t.error }

// maxInFlightFactor bounds the handlers in flight, slow ones included, to
// this many times Workers.
const maxInFlightFactor = 4

// minThrottle is the shortest wait a throttled delivery is given: a reset
// already past (clock skew) must not become a tight loop.
const minThrottle = 100 * time.Millisecond

// holdRecheck is the longest a held key or a deferred delivery sleeps
// before the hold is looked at again: holds are judged by warden's clock
// (DispatchOptions.Now), which a test or the demo may move, while the
// queue's timers run on real time. A held key costs one look per recheck.
const holdRecheck = time.Second

// heldFor reports whether installation's deliveries are held now, and how
// long (real time) to leave them before looking again.
func (d *Dispatcher) heldFor(installation int64) (time.Duration, bool) {
	clockNow := d.opt.Now()
	until, held := d.holds.until(installation, clockNow)
	if !held {
		return 0, false
	}
	return min(until.Sub(clockNow), holdRecheck), true
}

// Hold is a stop the dispatcher put on an installation's deliveries while a
// GitHub rate limit lasts (for the status page).
type Hold struct {
	// Installation is the installation held; 0 means every installation
	// (the App's own budget is exhausted).
	Installation int64 `json:"installation"`
	// Since is when the hold began; Until when deliveries start again.
	Since time.Time `json:"since"`
	Until time.Time `json:"until"`
	// Cause is the rate-limit refusal that began it.
	Cause string `json:"cause"`
}

// holds are the dispatcher's installation holds. The loop sets and reads
// them; Holds reads them from other goroutines.
type holds struct {
	mu sync.Mutex
	m  map[int64]Hold
}

// set holds installation until until (extending, never shortening, a hold
// in force) and reports whether the hold is new or longer.
func (h *holds) set(t throttle, now time.Time) (Hold, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.m == nil {
		h.m = map[int64]Hold{}
	}
	cur, ok := h.m[t.installation]
	if ok && now.Before(cur.Until) {
		if !t.until.After(cur.Until) {
			return cur, false
		}
		cur.Until, cur.Cause = t.until, t.cause
		h.m[t.installation] = cur
		return cur, true
	}
	cur = Hold{Installation: t.installation, Since: now, Until: t.until, Cause: t.cause}
	h.m[t.installation] = cur
	return cur, true
}

// until reports whether installation's deliveries are held at now, and
// until when (the later of its own hold and a hold on every installation).
func (h *holds) until(installation int64, now time.Time) (time.Time, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.m) == 0 {
		return time.Time{}, false
	}
	var until time.Time
	for _, inst := range []int64{installation, 0} {
		hd, ok := h.m[inst]
		if !ok {
			continue
		}
		if !now.Before(hd.Until) {
			delete(h.m, inst)
			continue
		}
		if hd.Until.After(until) {
			until = hd.Until
		}
	}
	return until, !until.IsZero()
}

func (h *holds) list(now time.Time) []Hold {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []Hold
	for _, hd := range h.m {
		if now.Before(hd.Until) {
			out = append(out, hd)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Installation < out[j].Installation })
	return out
}

// Holds are the installations whose deliveries wait out a GitHub rate
// limit now.
func (d *Dispatcher) Holds() []Hold { return d.holds.list(d.opt.Now()) }

// holdFor puts a throttle's hold in force, saying so once per hold.
func (d *Dispatcher) holdFor(t throttle, now time.Time) {
	hd, changed := d.holds.set(t, now)
	if !changed {
		return
	}
	who := fmt.Sprint(hd.Installation)
	if hd.Installation == 0 {
		who = "every installation (the App's own budget)"
	}
	d.log.Warn("github rate limit: deliveries held until the reset, no tries spent",
		"installation", who, "until", hd.Until.UTC().Format(time.RFC3339), "cause", hd.Cause)
}

// recordThrottle puts a delivery a rate limit stopped back to wait for the
// reset, spending no try.
func (d *Dispatcher) recordThrottle(log *slog.Logger, claim *Claim, e *entry, th throttledError) taskResult {
	t := th.t
	clockNow := d.opt.Now()
	if t.until.Before(clockNow.Add(minThrottle)) {
		t.until = clockNow.Add(minThrottle)
	}
	t.cause = th.Error()
	// The delivery is due again soon; the installation's hold (recorded
	// when this result reaches the loop) is what keeps it waiting.
	next := time.Now().Add(min(t.until.Sub(clockNow), holdRecheck))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := d.inbox.Defer(ctx, claim, "waiting for GitHub: "+t.cause, next); err != nil {
		d.inbox.Abandon(claim)
		if errors.Is(err, ErrNotPending) {
			log.Warn("delivery changed state under its handler; dropped", "err", err, "cause", th)
			return taskResult{e: e, gone: true}
		}
		log.Error("record delivery deferral", "err", err, "cause", th)
		return taskResult{e: e, due: time.Now().Add(d.opt.Poll), throttle: &t}
	}
	d.m.Deferred.WithLabelValues(e.Event).Inc()
	log.Debug("delivery waits for GitHub", "until", t.until.UTC().Format(time.RFC3339))
	return taskResult{e: e, due: next, throttle: &t}
}

// freeWorkers is how many handlers may start now: Workers, less those
// started within SlowAfter (a handler running longer waits on GitHub, and
// no longer holds a worker back), within the ceiling of
// maxInFlightFactor×Workers in flight.
func (d *Dispatcher) freeWorkers(now time.Time) int {
	busy := 0
	for _, started := range d.running {
		if now.Sub(started) < d.opt.SlowAfter {
			busy++
		}
	}
	return min(d.opt.Workers-busy, d.opt.Workers*maxInFlightFactor-d.inflight)
}

// handle runs the handler under the run deadline (HandlerTimeout).
func (d *Dispatcher) handle(ctx context.Context, dv *Delivery) (Result, error) {
	hctx, cancel := context.WithTimeout(ctx, d.opt.HandlerTimeout)
	defer cancel()
	res, err := safeHandle(hctx, d.handler, dv)
	if err != nil && ctx.Err() == nil && errors.Is(hctx.Err(), context.DeadlineExceeded) {
		err = fmt.Errorf("handler gave up after %s: %w", d.opt.HandlerTimeout, err)
	}
	return res, err
}
