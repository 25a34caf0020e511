package webhooks

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

const testBot = "warden-app[bot]"

// issuePayload is a small issues/issue_comment payload about repository
// repoID's issue number, sent by sender.
func issuePayload(repoID int64, number int, sender string) []byte {
	return fmt.Appendf(nil, `{"action":"opened","installation":{"id":77},`+
		`"repository":{"id":%d,"full_name":"o/r%d"},"issue":{"number":%d},`+
		`"sender":{"login":%q,"type":"User"}}`, repoID, repoID, number, sender)
}

func storeIssue(t testing.TB, ib *Inbox, id, event string, repoID int64, number int, sender string) {
	t.Helper()
	mustAccept(t, ib, Incoming{ID: id, Event: event, Payload: issuePayload(repoID, number, sender), ReceivedAt: time.Now()}, Stored)
}

// fastOptions are dispatcher options that make a test quick.
func fastOptions(opt DispatchOptions) DispatchOptions {
	if opt.BackoffBase == 0 {
		opt.BackoffBase = 5 * time.Millisecond
	}
	if opt.BackoffMax == 0 {
		opt.BackoffMax = 20 * time.Millisecond
	}
	if opt.Poll == 0 {
		opt.Poll = 10 * time.Millisecond
	}
	if opt.Identity == nil {
		opt.Identity = func(context.Context) (string, error) { return testBot, nil }
	}
	return opt
}

type runningDispatcher struct {
	d      *Dispatcher
	m      *Metrics
	cancel context.CancelFunc
	done   chan error
}

// startDispatcher runs a dispatcher until the test ends (or stop is called).
func startDispatcher(t *testing.T, ib *Inbox, h Handler, opt DispatchOptions) *runningDispatcher {
	t.Helper()
	m := NewMetrics(nil)
	d := NewDispatcher(ib, h, m, discardLogger(), fastOptions(opt))
	ctx, cancel := context.WithCancel(context.Background())
	rd := &runningDispatcher{d: d, m: m, cancel: cancel, done: make(chan error, 1)}
	go func() { rd.done <- d.Run(ctx) }()
	t.Cleanup(func() { rd.stop(t) })
	return rd
}

// stop cancels Run and waits for it to return.
func (rd *runningDispatcher) stop(t *testing.T) error {
	t.Helper()
	rd.cancel()
	select {
	case err := <-rd.done:
		rd.done <- err // for a second stop (cleanup)
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("dispatcher did not stop")
		return nil
	}
}

// waitState waits until delivery id is in state.
func waitState(t *testing.T, ib *Inbox, id, state string) Record {
	t.Helper()
	var r Record
	waitFor(t, 10*time.Second, id+" to be "+state, func() bool {
		r = records(t, ib)[id]
		return r.State == state
	})
	return r
}

func TestDispatchOrderKeys(t *testing.T) {
	_, ib := newTestInbox(t)
	type key struct {
		repo   int64
		number int
	}
	keys := []key{{1, 1}, {1, 2}, {2, 1}, {1, 3}}
	active := map[string]*atomic.Int32{}
	for _, k := range keys {
		active[fmt.Sprintf("r%d#%d", k.repo, k.number)] = new(atomic.Int32)
	}
	const perKey = 5
	n := 0
	for i := range perKey {
		for _, k := range keys {
			// issues and issue_comment about one issue share its order key.
			event := "issues"
			if i%2 == 1 {
				event = "issue_comment"
			}
			storeIssue(t, ib, fmt.Sprintf("d-%d-%d-%d", k.repo, k.number, i), event, k.repo, k.number, "alice")
			n++
		}
	}
	var running, maxRunning, overlaps, calls atomic.Int32
	h := HandlerFunc(func(ctx context.Context, d *Delivery) (Result, error) {
		calls.Add(1)
		c := active[d.Meta.OrderKey]
		if c == nil {
			t.Errorf("unexpected order key %q", d.Meta.OrderKey)
			return Result{}, Permanent(errors.New("bad key"))
		}
		if c.Add(1) > 1 {
			overlaps.Add(1)
		}
		now := running.Add(1)
		for {
			m := maxRunning.Load()
			if now <= m || maxRunning.CompareAndSwap(m, now) {
				break
			}
		}
		time.Sleep(15 * time.Millisecond)
		running.Add(-1)
		c.Add(-1)
		return Result{Outcome: "ok"}, nil
	})
	startDispatcher(t, ib, h, DispatchOptions{Workers: 8})
	waitFor(t, 15*time.Second, "every delivery done", func() bool {
		pending, dead, _ := ib.Counts(context.Background())
		return pending == 0 && dead == 0 && len(records(t, ib)) == n
	})
	if o := overlaps.Load(); o != 0 {
		t.Fatalf("%d times two deliveries with the same order key ran at once", o)
	}
	if m := maxRunning.Load(); m < 2 {
		t.Fatalf("at most %d handlers ran at once: different order keys must run in parallel", m)
	}
	if c := calls.Load(); int(c) != n {
		t.Fatalf("handler called %d times for %d deliveries", c, n)
	}
	for id, r := range records(t, ib) {
		if r.State != StateDone || r.Outcome != "ok" || r.Attempts != 1 {
			t.Errorf("%s: %+v", id, r)
		}
	}
	t.Logf("max concurrency %d", maxRunning.Load())
}

func TestDispatchRetriesThenSucceeds(t *testing.T) {
	_, ib := newTestInbox(t)
	storeIssue(t, ib, "flaky", "issues", 1, 1, "alice")
	var mu sync.Mutex
	var attempts []int
	var times []time.Time
	h := HandlerFunc(func(ctx context.Context, d *Delivery) (Result, error) {
		mu.Lock()
		attempts = append(attempts, d.Attempt)
		times = append(times, time.Now())
		mu.Unlock()
		if d.Attempt < 3 {
			return Result{}, fmt.Errorf("transient failure %d", d.Attempt)
		}
		return Result{Outcome: "finally"}, nil
	})
	rd := startDispatcher(t, ib, h, DispatchOptions{MaxAttempts: 5})
	r := waitState(t, ib, "flaky", StateDone)
	if r.Attempts != 3 || r.Outcome != "finally" || r.LastError != "" {
		t.Fatalf("record %+v, want done after 3 attempts, outcome finally, no error", r)
	}
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(attempts) != "[1 2 3]" {
		t.Fatalf("handler saw attempts %v, want [1 2 3]", attempts)
	}
	// Backoff: the second try waits at least half of BackoffBase.
	if gap := times[1].Sub(times[0]); gap < 2*time.Millisecond {
		t.Errorf("retry after %s, want backoff >= 2.5ms", gap)
	}
	if got := counterValue(t, rd.m.Retries.WithLabelValues("issues")); got != 2 {
		t.Errorf("retries = %v, want 2", got)
	}
	if got := waitCounter(t, rd.m.Outcomes.WithLabelValues("issues", "finally"), 1); got != 1 {
		t.Errorf("outcomes{finally} = %v, want 1", got)
	}
}

// waitCounter waits up to two seconds for c to reach want and returns its
// value: outcomes are counted just after the commit a test sees, so a test
// must not race them.
func waitCounter(t *testing.T, c prometheus.Counter, want float64) float64 {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for counterValue(t, c) != want && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	return counterValue(t, c)
}

func TestDispatchDeadAfterMaxAttemptsThenRetried(t *testing.T) {
	_, ib := newTestInbox(t)
	storeIssue(t, ib, "doomed", "issues", 1, 1, "alice")
	var calls atomic.Int32
	var healed atomic.Bool
	h := HandlerFunc(func(ctx context.Context, d *Delivery) (Result, error) {
		calls.Add(1)
		if healed.Load() {
			return Result{Outcome: "healed"}, nil
		}
		return Result{}, fmt.Errorf("github says no (try %d)", d.Attempt)
	})
	rd := startDispatcher(t, ib, h, DispatchOptions{MaxAttempts: 3})
	r := waitState(t, ib, "doomed", StateDead)
	if r.Attempts != 3 || r.LastError != "github says no (try 3)" {
		t.Fatalf("dead letter %+v, want 3 attempts and the last error", r)
	}
	time.Sleep(50 * time.Millisecond) // a dead letter is not tried again
	if c := calls.Load(); c != 3 {
		t.Fatalf("handler called %d times, want 3", c)
	}
	if got := waitCounter(t, rd.m.DeadTotal.WithLabelValues("issues"), 1); got != 1 {
		t.Errorf("dead letters total = %v, want 1", got)
	}
	// An operator retries it.
	healed.Store(true)
	if err := ib.Retry(context.Background(), []string{"doomed"}); err != nil {
		t.Fatal(err)
	}
	r = waitState(t, ib, "doomed", StateDone)
	if r.Attempts != 1 || r.Outcome != "healed" {
		t.Fatalf("after retry %+v, want done on its first new attempt", r)
	}
}

func TestDispatchPermanentError(t *testing.T) {
	_, ib := newTestInbox(t)
	storeIssue(t, ib, "perm", "issues", 1, 1, "alice")
	storeIssue(t, ib, "perm-wrapped", "issues", 1, 2, "alice")
	var calls atomic.Int32
	h := HandlerFunc(func(ctx context.Context, d *Delivery) (Result, error) {
		calls.Add(1)
		if d.ID == "perm" {
			return Result{}, Permanent(errors.New("malformed command"))
		}
		return Result{}, fmt.Errorf("handling #2: %w", Permanent(errors.New("cannot be cured")))
	})
	startDispatcher(t, ib, h, DispatchOptions{MaxAttempts: 8})
	for _, id := range []string{"perm", "perm-wrapped"} {
		r := waitState(t, ib, id, StateDead)
		if r.Attempts != 1 || r.LastError == "" {
			t.Fatalf("%s: %+v, want dead after 1 attempt with its error", id, r)
		}
	}
	time.Sleep(30 * time.Millisecond)
	if c := calls.Load(); c != 2 {
		t.Fatalf("handler called %d times, want 2", c)
	}
}

func TestDispatchSelfDeliveries(t *testing.T) {
	_, ib := newTestInbox(t)
	var issueCalls, commentBook atomic.Int32
	var sawSelf atomic.Bool
	router := NewRouter()
	router.Handle("issues", HandlerFunc(func(ctx context.Context, d *Delivery) (Result, error) {
		issueCalls.Add(1)
		if d.FromSelf {
			sawSelf.Store(true)
		}
		return Result{Outcome: "acted"}, nil
	}))
	router.Handle("issue_comment", HandlerFunc(func(ctx context.Context, d *Delivery) (Result, error) {
		t.Error("issue_comment handler called for warden's own comment")
		return Result{}, nil
	}))
	router.Bookkeep("issue_comment", HandlerFunc(func(ctx context.Context, d *Delivery) (Result, error) {
		commentBook.Add(1)
		if !d.FromSelf {
			t.Error("bookkeeper got a delivery not FromSelf")
		}
		return Result{Outcome: "booked"}, nil
	}))
	storeIssue(t, ib, "own-issue", "issues", 1, 1, "Warden-App[BOT]") // case differs from the bot
	storeIssue(t, ib, "own-comment", "issue_comment", 1, 2, testBot)
	storeIssue(t, ib, "human", "issues", 1, 3, "alice")
	storeIssue(t, ib, "lookalike", "issues", 1, 4, "warden-app") // not the bot: no [bot]
	storeIssue(t, ib, "unrouted", "star", 1, 5, "alice")

	rd := startDispatcher(t, ib, HandlerFunc(router.Dispatch), DispatchOptions{})
	want := map[string]string{
		"own-issue":   OutcomeSelf,
		"own-comment": OutcomeSelf + ": booked",
		"human":       "acted",
		"lookalike":   "acted",
		"unrouted":    OutcomeUnhandled,
	}
	for id, outcome := range want {
		if r := waitState(t, ib, id, StateDone); r.Outcome != outcome {
			t.Errorf("%s: outcome %q, want %q", id, r.Outcome, outcome)
		}
	}
	if c := issueCalls.Load(); c != 2 {
		t.Errorf("issues handler called %d times, want 2 (human, lookalike)", c)
	}
	if sawSelf.Load() {
		t.Error("issues handler got a FromSelf delivery")
	}
	if c := commentBook.Load(); c != 1 {
		t.Errorf("bookkeeper called %d times, want 1", c)
	}
	if got := waitCounter(t, rd.m.Outcomes.WithLabelValues("issues", OutcomeSelf), 1); got != 1 {
		t.Errorf("outcomes{issues,self} = %v, want 1", got)
	}
	if rd.d.Bot() != testBot {
		t.Errorf("Bot() = %q", rd.d.Bot())
	}
}

func TestDispatchWaitsForIdentity(t *testing.T) {
	_, ib := newTestInbox(t)
	storeIssue(t, ib, "early", "issues", 1, 1, "alice")
	var handled atomic.Int32
	var identityCalls atomic.Int32
	var handledBeforeIdentity atomic.Int32
	var rd *runningDispatcher
	var unhealthy atomic.Bool
	identity := func(ctx context.Context) (string, error) {
		n := identityCalls.Add(1)
		handledBeforeIdentity.Add(handled.Load())
		if rd != nil && rd.d.Healthy() != nil && rd.d.Bot() == "" {
			unhealthy.Store(true)
		}
		switch n {
		case 1:
			return "", errors.New("GET /app: 502")
		case 2:
			return "", nil // an empty login is no identity either
		}
		return testBot, nil
	}
	h := HandlerFunc(func(ctx context.Context, d *Delivery) (Result, error) {
		handled.Add(1)
		if identityCalls.Load() < 3 {
			t.Error("delivery processed before the identity was known")
		}
		return Result{}, nil
	})
	m := NewMetrics(nil)
	d := NewDispatcher(ib, h, m, discardLogger(), fastOptions(DispatchOptions{Identity: identity}))
	ctx, cancel := context.WithCancel(context.Background())
	rd = &runningDispatcher{d: d, m: m, cancel: cancel, done: make(chan error, 1)}
	go func() { rd.done <- d.Run(ctx) }()
	t.Cleanup(func() { rd.stop(t) })

	waitFor(t, 5*time.Second, "the second identity call", func() bool { return identityCalls.Load() >= 2 })
	if r := record(t, ib, "early"); r.State != StatePending || r.Attempts != 0 {
		t.Fatalf("while the identity is unknown: %+v, want untouched", r)
	}
	if h := handled.Load(); h != 0 {
		t.Fatalf("handler ran %d times before the identity was known", h)
	}
	waitState(t, ib, "early", StateDone)
	if n := identityCalls.Load(); n != 3 {
		t.Fatalf("identity called %d times, want 3", n)
	}
	if handledBeforeIdentity.Load() != 0 {
		t.Fatal("a delivery was handled while the identity was still being learned")
	}
	if !unhealthy.Load() {
		t.Error("Healthy() reported healthy before the identity was known")
	}
	if err := d.Healthy(); err != nil {
		t.Errorf("Healthy() after start: %v", err)
	}
}

func TestDispatchWithoutIdentityRefusesToRun(t *testing.T) {
	_, ib := newTestInbox(t)
	d := NewDispatcher(ib, HandlerFunc(func(context.Context, *Delivery) (Result, error) { return Result{}, nil }),
		nil, discardLogger(), DispatchOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := d.Run(ctx); err == nil || ctx.Err() != nil {
		t.Fatalf("Run without Identity = %v, want an immediate error", err)
	}
}

func TestDispatchUnparseablePayloadIsDead(t *testing.T) {
	_, ib := newTestInbox(t)
	for id, payload := range map[string]string{
		"not-json":  `this is not json`,
		"array":     `[1,2,3]`,
		"truncated": `{"action":"opened","issue":{"number":`,
	} {
		mustAccept(t, ib, Incoming{ID: id, Event: "issues", Payload: []byte(payload), ReceivedAt: time.Now()}, Stored)
	}
	storeIssue(t, ib, "fine", "issues", 1, 1, "alice")
	var calls atomic.Int32
	h := HandlerFunc(func(ctx context.Context, d *Delivery) (Result, error) {
		calls.Add(1)
		if d.ID != "fine" {
			t.Errorf("handler got unparseable delivery %s", d.ID)
		}
		return Result{}, nil
	})
	rd := startDispatcher(t, ib, h, DispatchOptions{})
	for _, id := range []string{"not-json", "array", "truncated"} {
		r := waitState(t, ib, id, StateDead)
		if r.LastError == "" || r.Attempts != 1 {
			t.Errorf("%s: %+v, want dead after one attempt with the parse error", id, r)
		}
	}
	waitState(t, ib, "fine", StateDone)
	if c := calls.Load(); c != 1 {
		t.Fatalf("handler called %d times, want 1", c)
	}
	if got := waitCounter(t, rd.m.DeadTotal.WithLabelValues("issues"), 3); got != 3 {
		t.Errorf("dead letters total = %v, want 3", got)
	}
}

func TestDispatchGracefulStopFinishesInFlight(t *testing.T) {
	_, ib := newTestInbox(t)
	storeIssue(t, ib, "slow", "issues", 1, 1, "alice")
	started := make(chan struct{})
	var finished atomic.Bool
	var ctxCancelled atomic.Bool
	h := HandlerFunc(func(ctx context.Context, d *Delivery) (Result, error) {
		close(started)
		time.Sleep(150 * time.Millisecond)
		if ctx.Err() != nil {
			ctxCancelled.Store(true)
		}
		finished.Store(true)
		return Result{Outcome: "finished"}, nil
	})
	rd := startDispatcher(t, ib, h, DispatchOptions{Grace: 5 * time.Second})
	select {
	case <-started:
	case <-time.After(5 * time.Second):
		t.Fatal("handler never started")
	}
	// A delivery stored during shutdown is left for the next start.
	if err := rd.stop(t); err != nil {
		t.Fatalf("Run returned %v, want nil", err)
	}
	if !finished.Load() {
		t.Fatal("Run returned before the in-flight handler finished")
	}
	if ctxCancelled.Load() {
		t.Fatal("the handler's context was cancelled within the grace period")
	}
	if r := record(t, ib, "slow"); r.State != StateDone || r.Outcome != "finished" || r.Attempts != 1 {
		t.Fatalf("in-flight delivery after a graceful stop: %+v, want done", r)
	}
}

func TestDispatchGraceExpiredLeavesDeliveryPending(t *testing.T) {
	_, ib := newTestInbox(t)
	storeIssue(t, ib, "stuck", "issues", 1, 1, "alice")
	started := make(chan struct{})
	h := HandlerFunc(func(ctx context.Context, d *Delivery) (Result, error) {
		close(started)
		<-ctx.Done()
		return Result{}, ctx.Err()
	})
	rd := startDispatcher(t, ib, h, DispatchOptions{Grace: 30 * time.Millisecond, MaxAttempts: 1})
	select {
	case <-started:
	case <-time.After(5 * time.Second):
		t.Fatal("handler never started")
	}
	begin := time.Now()
	if err := rd.stop(t); err != nil {
		t.Fatalf("Run returned %v, want nil", err)
	}
	if d := time.Since(begin); d > 3*time.Second {
		t.Fatalf("Run took %s to stop with a 30ms grace", d)
	}
	// MaxAttempts is 1, so a counted try would have made it a dead letter.
	if r := record(t, ib, "stuck"); r.State != StatePending || r.Attempts != 0 || r.LastError != "" {
		t.Fatalf("interrupted delivery: %+v, want pending, 0 attempts, no error", r)
	}
}

// TestDispatchBacklogDoesNotStarveOtherKeys: a burst of deliveries about one
// issue must not hold up deliveries about other issues ("others in
// parallel"): a dispatcher that walks the due rows in receipt order never
// sees later keys while the burst fills its window.
func TestDispatchBacklogDoesNotStarveOtherKeys(t *testing.T) {
	_, ib := newTestInbox(t)
	const burst = 120
	for i := range burst {
		storeIssue(t, ib, fmt.Sprintf("busy-%03d", i), "issue_comment", 1, 1, "chatty")
	}
	storeIssue(t, ib, "other", "issues", 1, 2, "alice")
	var busyDone atomic.Int32
	busyDoneWhenOtherStarted := make(chan int32, 1)
	h := HandlerFunc(func(ctx context.Context, d *Delivery) (Result, error) {
		if d.ID == "other" {
			busyDoneWhenOtherStarted <- busyDone.Load()
			return Result{}, nil
		}
		time.Sleep(3 * time.Millisecond)
		busyDone.Add(1)
		return Result{}, nil
	})
	startDispatcher(t, ib, h, DispatchOptions{Workers: 4})
	select {
	case n := <-busyDoneWhenOtherStarted:
		if n > 10 {
			t.Fatalf("the delivery about issue #2 waited for %d deliveries about issue #1 with 3 workers idle", n)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the delivery about issue #2 never ran")
	}
}

// TestDispatchHandlerPanicIsAFailedTry: a handler that panics must cost one
// try (and in the end make a dead letter), not take the process down: a
// panic that kills the process is retried at every restart and never becomes
// a dead letter. The dispatcher runs in a child process so that the panic
// cannot kill this test binary.
func TestDispatchHandlerPanicIsAFailedTry(t *testing.T) {
	if os.Getenv("WEBHOOKS_PANIC_CHILD") == "1" {
		panicChild(t)
		return
	}
	if testing.Short() {
		t.Skip("spawns a child test process")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestDispatchHandlerPanicIsAFailedTry$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "WEBHOOKS_PANIC_CHILD=1", "WEBHOOKS_PANIC_DIR="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		s := string(out)
		if i := strings.Index(s, "panic:"); i >= 0 {
			s = s[i:min(len(s), i+600)]
		}
		t.Fatalf("a panicking handler took the process down (%v):\n%s", err, s)
	}
}

func panicChild(t *testing.T) {
	d := openTestDB(t, filepath.Join(os.Getenv("WEBHOOKS_PANIC_DIR"), "w.db"))
	defer d.Close()
	ib, err := OpenInbox(context.Background(), d)
	if err != nil {
		t.Fatal(err)
	}
	defer ib.Close()
	storeIssue(t, ib, "bomb", "issues", 1, 1, "alice")
	storeIssue(t, ib, "fine", "issues", 1, 2, "alice")
	h := HandlerFunc(func(ctx context.Context, d *Delivery) (Result, error) {
		if d.ID == "bomb" {
			var m map[string]int
			m["x"]++ // a nil-map bug in a handler
		}
		return Result{}, nil
	})
	startDispatcher(t, ib, h, DispatchOptions{MaxAttempts: 2})
	r := waitState(t, ib, "bomb", StateDead)
	if !strings.Contains(r.LastError, "panic") {
		t.Errorf("dead letter's last error %q does not say it panicked", r.LastError)
	}
	waitState(t, ib, "fine", StateDone)
}
