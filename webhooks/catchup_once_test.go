package webhooks_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wardenhq/warden/internal/db"
	"github.com/wardenhq/warden/internal/db/dbtest"
	"github.com/wardenhq/warden/webhooks"
)

// runCatchUp runs one catch-up on e without failing the test from another
// goroutine and without waiting for the deliveries it asked for.
func (e *catchUpEnv) runCatchUp(o webhooks.CatchUpOptions) (webhooks.CatchUpResult, error) {
	return webhooks.CatchUp(context.Background(), e.app.AppClient(), e.inbox, handlesIssues, o)
}

// TestCatchUpAsksOncePerMissedDelivery: two catch-up runs at once, then a
// third right after them, while GitHub has not yet sent the redeliveries
// the first asked for (as at start-up, when the reconcile's catch-up
// follows the start's by a few milliseconds): GitHub is asked for each
// missed delivery once in all.
func TestCatchUpAsksOncePerMissedDelivery(t *testing.T) {
	e := newCatchUpEnv(t)
	e.sim.DropDeliveries(true)
	var lost []string
	for i := range 3 {
		lost = append(lost, e.open(t, "lost "+string(rune('a'+i))))
	}
	e.sim.DropDeliveries(false)
	// GitHub accepts the redeliveries but sends them later.
	e.sim.HoldDeliveries()
	e.asks.Store(0)

	var wg sync.WaitGroup
	results := make([]webhooks.CatchUpResult, 3)
	errs := make([]error, 3)
	for i := range 2 {
		wg.Go(func() { results[i], errs[i] = e.runCatchUp(webhooks.CatchUpOptions{}) })
	}
	wg.Wait()
	results[2], errs[2] = e.runCatchUp(webhooks.CatchUpOptions{}) // back to back
	redelivered, waiting := 0, 0
	for i, r := range results {
		if errs[i] != nil {
			t.Fatalf("run %d: %v (%+v)", i, errs[i], r)
		}
		if r.Missing != 3 {
			t.Errorf("run %d: %+v, want 3 missing", i, r)
		}
		if r.Redelivered+r.Waiting != 3 || r.Failed != 0 || r.Again != 0 {
			t.Errorf("run %d: %+v, want each missing delivery asked for or awaited", i, r)
		}
		redelivered += r.Redelivered
		waiting += r.Waiting
	}
	if n := e.asks.Load(); n != 3 {
		t.Errorf("%d redelivery requests for 3 missed deliveries over three runs, want 3 (one each)", n)
	}
	if redelivered != 3 || waiting != 6 {
		t.Errorf("%d redeliveries and %d awaited over the runs, want 3 and 6", redelivered, waiting)
	}

	e.sim.ReleaseDeliveries(nil)
	e.flush(t)
	got := e.stored(t, lost...)
	for _, g := range lost {
		if !got[g] {
			t.Errorf("%s was not redelivered", g)
		}
		if _, re := e.attempts(g); re != 1 {
			t.Errorf("%s redelivered %d times, want once", g, re)
		}
	}
	if res := e.catchUp(t, webhooks.CatchUpOptions{}); res.Missing != 0 || res.Redelivered != 0 {
		t.Errorf("a run after the redeliveries arrived: %+v, want nothing missing", res)
	}
	if n := e.asks.Load(); n != 3 {
		t.Errorf("%d redelivery requests in all, want 3", n)
	}
}

// logBuffer collects a logger's JSON lines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// take returns what was logged since the last take.
func (b *logBuffer) take() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.buf.String()
	b.buf.Reset()
	return s
}

func (b *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewJSONHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// at is catch-up options whose clock runs shift ahead of the real one (the
// simulator's clock stays: it checks the App's JWT, minted on real time).
func at(shift time.Duration, log *slog.Logger) webhooks.CatchUpOptions {
	return webhooks.CatchUpOptions{Now: func() time.Time { return time.Now().Add(shift) }, Log: log}
}

// TestCatchUpAsksAgainOnlyAfterTheWait: a redelivery GitHub accepted but
// that never reached warden (unreachable again) is not asked for again by
// the next runs, nor by a warden started again on the same database; after
// DefaultRetryAfter it is, once, and the log says why; the wait then
// doubles.
func TestCatchUpAsksAgainOnlyAfterTheWait(t *testing.T) {
	e := newCatchUpEnv(t)
	var logs logBuffer
	log := logs.logger()
	e.sim.DropDeliveries(true)
	lost := e.open(t, "lost, and its redelivery too")
	e.asks.Store(0)
	run := func(name string, shift time.Duration) webhooks.CatchUpResult {
		t.Helper()
		res, err := e.runCatchUp(at(shift, log))
		if err != nil {
			t.Fatalf("%s: %v (%+v)", name, err, res)
		}
		e.flush(t)
		return res
	}
	if res := run("first run", 0); res.Missing != 1 || res.Redelivered != 1 || res.Again != 0 {
		t.Fatalf("first run %+v, want 1 redelivered", res)
	}
	if all, re := e.attempts(lost); all != 2 || re != 1 {
		t.Fatalf("%s has %d attempts (%d redeliveries), want 2 (1): the redelivery was not sent and lost", lost, all, re)
	}
	logs.take()
	if res := run("second run", 0); res.Missing != 1 || res.Waiting != 1 || res.Redelivered != 0 {
		t.Errorf("second run %+v, want the delivery awaited, not asked for", res)
	}
	if l := logs.take(); !strings.Contains(l, "redelivery already asked for; waiting for it") || !strings.Contains(l, lost) {
		t.Errorf("second run's log does not say %s is awaited:\n%s", lost, l)
	}

	// A warden started again on the same database remembers the request.
	d, err := db.Open(context.Background(), e.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	again, err := webhooks.OpenInbox(context.Background(), d)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	res, err := webhooks.CatchUp(context.Background(), e.app.AppClient(), again, handlesIssues, at(0, log))
	if err != nil || res.Waiting != 1 || res.Redelivered != 0 {
		t.Errorf("a run on the database reopened: %+v (%v), want the delivery awaited", res, err)
	}

	if res := run("a minute before the wait ends", webhooks.DefaultRetryAfter-time.Minute); res.Waiting != 1 || res.Redelivered != 0 {
		t.Errorf("run before the wait ended %+v, want the delivery awaited", res)
	}
	if n := e.asks.Load(); n != 1 {
		t.Fatalf("%d redelivery requests before the wait ended, want 1", n)
	}
	logs.take()
	shift := webhooks.DefaultRetryAfter + time.Minute
	if res := run("after the wait", shift); res.Redelivered != 1 || res.Again != 1 || res.Waiting != 0 {
		t.Errorf("run after the wait %+v, want the delivery asked for again", res)
	}
	if l := logs.take(); !strings.Contains(l, "a redelivery GitHub accepted never arrived; asking again") || !strings.Contains(l, lost) {
		t.Errorf("the log does not say the redelivery of %s never arrived:\n%s", lost, l)
	}
	// The second request waits twice as long.
	if res := run("one wait after the second request", shift+webhooks.DefaultRetryAfter+time.Minute); res.Waiting != 1 || res.Redelivered != 0 {
		t.Errorf("run one wait after the second request %+v, want the delivery awaited (the wait doubled)", res)
	}
	e.sim.DropDeliveries(false)
	if res := run("two waits after the second request", shift+2*webhooks.DefaultRetryAfter+time.Minute); res.Redelivered != 1 || res.Again != 1 {
		t.Errorf("run two waits after the second request %+v, want the delivery asked for again", res)
	}
	if !e.stored(t, lost)[lost] {
		t.Errorf("%s is not in the inbox after the third request", lost)
	}
	if n := e.asks.Load(); n != 3 {
		t.Errorf("%d redelivery requests in all, want 3", n)
	}
	if res := run("after it arrived", shift+4*webhooks.DefaultRetryAfter); res.Missing != 0 || res.Redelivered != 0 {
		t.Errorf("run after the redelivery arrived %+v, want nothing missing", res)
	}
}

// TestCatchUpRecordsRefusals: a redelivery GitHub refuses for the moment
// (a 502) is recorded with the reason and asked for again only after the
// wait; one GitHub refuses for good (too old: 422) is not asked for again.
func TestCatchUpRecordsRefusals(t *testing.T) {
	e := newCatchUpEnv(t)
	var logs logBuffer
	log := logs.logger()
	// Too old for GitHub, not for a catch-up whose window is longer.
	e.clk.Set(-(webhooks.RedeliveryWindow + time.Hour))
	e.sim.DropDeliveries(true)
	old := e.open(t, "lost three days and an hour ago")
	e.clk.Set(0)
	lost := e.open(t, "lost now")
	e.sim.DropDeliveries(false)
	e.asks.Store(0)
	for _, d := range e.sim.Deliveries() {
		if d.GUID == lost {
			e.refuseAsk.Store(d.ID)
		}
	}
	opts := func(shift time.Duration) webhooks.CatchUpOptions {
		o := at(shift, log)
		o.Window = webhooks.RedeliveryWindow + 2*time.Hour
		return o
	}

	res, err := e.runCatchUp(opts(0))
	if err == nil || res.Failed != 2 || res.Redelivered != 0 {
		t.Fatalf("first run %+v (%v), want both refused, and an error", res, err)
	}
	l := logs.take()
	if !strings.Contains(l, "redelivery refused; not asking for it again") || !strings.Contains(l, "too old") {
		t.Errorf("the log does not say GitHub refused %s for good:\n%s", old, l)
	}
	if !strings.Contains(l, `"msg":"catch-up: redelivery refused"`) || !strings.Contains(l, "502") || !strings.Contains(l, "ask_again_after") {
		t.Errorf("the log does not say GitHub refused %s for now, and when it is asked for again:\n%s", lost, l)
	}
	if n := e.asks.Load(); n != 2 {
		t.Fatalf("%d redelivery requests, want 2", n)
	}

	res, err = e.runCatchUp(opts(0))
	if err != nil || res.Waiting != 2 || res.Failed != 0 || res.Redelivered != 0 {
		t.Errorf("second run %+v (%v), want both left alone, no error", res, err)
	}
	if l := logs.take(); strings.Count(l, "redelivery refused before; not asking again yet") != 2 || !strings.Contains(l, "Delivery is too old") {
		t.Errorf("second run's log does not say both were refused, and why:\n%s", l)
	}
	e.refuseAsk.Store(0)
	res, err = e.runCatchUp(opts(webhooks.DefaultRetryAfter + time.Minute))
	if err != nil || res.Redelivered != 1 || res.Again != 1 || res.Waiting != 1 {
		t.Errorf("run after the wait %+v (%v), want the one refused for now asked again, the other left alone", res, err)
	}
	if l := logs.take(); !strings.Contains(l, "redelivery refused before; asking again") {
		t.Errorf("the log does not say %s is asked for again after a refusal:\n%s", lost, l)
	}
	e.flush(t)
	if !e.stored(t, lost)[lost] {
		t.Errorf("%s is not in the inbox", lost)
	}
	if n := e.asks.Load(); n != 3 {
		t.Errorf("%d redelivery requests in all, want 3", n)
	}
	if res, err := e.runCatchUp(opts(50 * time.Minute)); err != nil || res.Waiting != 1 || res.Redelivered != 0 || e.asks.Load() != 3 {
		t.Errorf("run 50 minutes on %+v (%v), %d requests: want the delivery too old for GitHub left alone", res, err, e.asks.Load())
	}
}

// onlyStored hides the inbox's redelivery records from CatchUp.
type onlyStored struct{ webhooks.StoredChecker }

// TestCatchUpAsksOnceWithoutTheInbox: on a StoredChecker that is not an
// *Inbox, runs in one process still ask for a delivery once.
func TestCatchUpAsksOnceWithoutTheInbox(t *testing.T) {
	e := newCatchUpEnv(t)
	e.sim.DropDeliveries(true)
	lost := e.open(t, "lost")
	e.sim.DropDeliveries(false)
	e.sim.HoldDeliveries()
	e.asks.Store(0)
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			if _, err := webhooks.CatchUp(context.Background(), e.app.AppClient(), onlyStored{e.inbox}, handlesIssues, webhooks.CatchUpOptions{}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if n := e.asks.Load(); n != 1 {
		t.Errorf("%d redelivery requests over three runs, want 1", n)
	}
	e.sim.ReleaseDeliveries(nil)
	e.flush(t)
	if _, re := e.attempts(lost); re != 1 {
		t.Errorf("%s redelivered %d times, want once", lost, re)
	}
}

// TestCatchUpReplicasPostgres: two replicas on one PostgreSQL database, each
// running two catch-ups at once, ask for each missed delivery once.
func TestCatchUpReplicasPostgres(t *testing.T) {
	dsn := dbtest.PostgresURL(t)
	e := newCatchUpEnvOn(t, dsn)
	e.sim.DropDeliveries(true)
	var lost []string
	for i := range 4 {
		lost = append(lost, e.open(t, "lost "+string(rune('a'+i))))
	}
	e.sim.DropDeliveries(false)
	d, err := db.Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	other, err := webhooks.OpenInbox(context.Background(), d)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(other.Close)
	e.sim.HoldDeliveries()
	e.asks.Store(0)
	var wg sync.WaitGroup
	var mu sync.Mutex
	redelivered, waiting := 0, 0
	for _, ib := range []*webhooks.Inbox{e.inbox, other, e.inbox, other} {
		wg.Go(func() {
			res, err := webhooks.CatchUp(context.Background(), e.app.AppClient(), ib, handlesIssues, webhooks.CatchUpOptions{})
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			redelivered += res.Redelivered
			waiting += res.Waiting
			mu.Unlock()
		})
	}
	wg.Wait()
	if n := e.asks.Load(); n != 4 || redelivered != 4 || waiting != 12 {
		t.Errorf("%d redelivery requests (%d counted, %d awaited) for 4 missed deliveries over four runs on two replicas, want 4 (4, 12)",
			n, redelivered, waiting)
	}
	e.sim.ReleaseDeliveries(nil)
	e.flush(t)
	got := e.stored(t, lost...)
	for _, g := range lost {
		if _, re := e.attempts(g); re != 1 || !got[g] {
			t.Errorf("%s redelivered %d times (stored %v), want once", g, re, got[g])
		}
	}
}
