package webhooks

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// storeFor stores an issues delivery of installation inst.
func storeFor(t *testing.T, ib *Inbox, id string, inst int64, number int) {
	t.Helper()
	p := fmt.Appendf(nil, `{"action":"opened","installation":{"id":%d},"repository":{"id":%d,"full_name":"o/r%d"},`+
		`"issue":{"number":%d},"sender":{"login":"alice","type":"User"}}`, inst, inst, inst, number)
	mustAccept(t, ib, Incoming{ID: id, Event: "issues", Payload: p, ReceivedAt: time.Now()}, Stored)
}

// A rate limit holds its installation's deliveries until the reset without
// spending tries, however often it recurs; other installations flow
// meanwhile; nothing is dead-lettered.
func TestDispatchThrottledWaitsForReset(t *testing.T) {
	_, ib := newTestInbox(t)
	const hold = 300 * time.Millisecond
	var mu sync.Mutex
	var reset time.Time
	limits := 0 // rate-limit answers given to installation 1
	calls := map[string][]time.Time{}
	attempts := map[string][]int{}
	h := HandlerFunc(func(ctx context.Context, d *Delivery) (Result, error) {
		mu.Lock()
		defer mu.Unlock()
		now := time.Now()
		calls[d.ID] = append(calls[d.ID], now)
		attempts[d.ID] = append(attempts[d.ID], d.Attempt)
		if d.Meta.Installation == 1 && limits < 3 {
			limits++
			reset = now.Add(hold)
			return Result{}, Throttled(errors.New("github primary rate limit exceeded"), 1, reset)
		}
		return Result{}, nil
	})
	storeFor(t, ib, "a1", 1, 1)
	storeFor(t, ib, "a2", 1, 2)
	storeFor(t, ib, "b1", 2, 1)
	rd := startDispatcher(t, ib, h, DispatchOptions{MaxAttempts: 2, Workers: 1})
	for _, id := range []string{"a1", "a2", "b1"} {
		r := waitState(t, ib, id, StateDone)
		if r.Attempts != 1 {
			t.Errorf("%s: %d attempts recorded, want 1 (a rate limit spends none)", id, r.Attempts)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if limits != 3 {
		t.Fatalf("rate limits given = %d, want 3", limits)
	}
	// Every try of installation 1 is told it is its first.
	for _, id := range []string{"a1", "a2"} {
		for i, a := range attempts[id] {
			if a != 1 {
				t.Errorf("%s try %d: Attempt %d, want 1", id, i+1, a)
			}
		}
	}
	// After each limit, installation 1 sent nothing before its reset.
	var all []time.Time
	for _, id := range []string{"a1", "a2"} {
		all = append(all, calls[id]...)
	}
	sortTimes(all)
	for i := 1; i < len(all) && i <= 3; i++ {
		if gap := all[i].Sub(all[i-1]); gap < hold-10*time.Millisecond {
			t.Errorf("installation 1 call %d came %v after a limit, want no sooner than %v", i+1, gap, hold)
		}
	}
	// Installation 2 was not held: it ran before installation 1's first reset.
	if len(calls["b1"]) != 1 || !calls["b1"][0].Before(all[0].Add(hold)) {
		t.Errorf("installation 2 ran at %v, want before installation 1's first reset (%v)", calls["b1"], all[0].Add(hold))
	}
	if got := testutil.ToFloat64(rd.m.Deferred.WithLabelValues("issues")); got != 3 {
		t.Errorf("deferred = %v, want 3", got)
	}
	if got := testutil.ToFloat64(rd.m.DeadTotal.WithLabelValues("issues")); got != 0 {
		t.Errorf("dead letters = %v, want 0", got)
	}
}

// A limit on the App's own budget (installation 0) holds everything.
func TestDispatchThrottledAppHoldsAll(t *testing.T) {
	_, ib := newTestInbox(t)
	const hold = 250 * time.Millisecond
	var first atomic.Int64
	var mu sync.Mutex
	var later []time.Time
	h := HandlerFunc(func(ctx context.Context, d *Delivery) (Result, error) {
		if first.CompareAndSwap(0, time.Now().UnixNano()) {
			return Result{}, Throttled(errors.New("app limit"), 0, time.Now().Add(hold))
		}
		mu.Lock()
		later = append(later, time.Now())
		mu.Unlock()
		return Result{}, nil
	})
	storeFor(t, ib, "a", 1, 1)
	rd := startDispatcher(t, ib, h, DispatchOptions{Workers: 1})
	waitFor(t, 5*time.Second, "the hold", func() bool { return len(rd.d.Holds()) == 1 })
	if hd := rd.d.Holds()[0]; hd.Installation != 0 || hd.Cause == "" {
		t.Errorf("hold = %+v, want every installation, with its cause", hd)
	}
	storeFor(t, ib, "b", 2, 1)
	storeFor(t, ib, "c", 3, 1)
	for _, id := range []string{"a", "b", "c"} {
		waitState(t, ib, id, StateDone)
	}
	mu.Lock()
	defer mu.Unlock()
	start := time.Unix(0, first.Load())
	for _, at := range later {
		if at.Sub(start) < hold-10*time.Millisecond {
			t.Errorf("a delivery ran %v after the App's limit, want no sooner than %v", at.Sub(start), hold)
		}
	}
}

// A handler stuck past SlowAfter stops counting against Workers: with every
// worker stuck, other deliveries still start.
func TestDispatchHungHandlersDoNotTakeEveryWorker(t *testing.T) {
	_, ib := newTestInbox(t)
	release := make(chan struct{})
	var done atomic.Int32
	h := HandlerFunc(func(ctx context.Context, d *Delivery) (Result, error) {
		if d.Meta.Number <= 2 {
			select {
			case <-release:
			case <-ctx.Done():
				return Result{}, ctx.Err()
			}
		}
		done.Add(1)
		return Result{}, nil
	})
	storeIssue(t, ib, "hung-1", "issues", 1, 1, "alice")
	storeIssue(t, ib, "hung-2", "issues", 1, 2, "alice")
	for i := 3; i <= 6; i++ {
		storeIssue(t, ib, fmt.Sprintf("ok-%d", i), "issues", 1, i, "alice")
	}
	startDispatcher(t, ib, h, DispatchOptions{Workers: 2, SlowAfter: 50 * time.Millisecond})
	for i := 3; i <= 6; i++ {
		waitState(t, ib, fmt.Sprintf("ok-%d", i), StateDone)
	}
	if r := records(t, ib)["hung-1"]; r.State != StatePending {
		t.Errorf("hung-1 = %s, want still pending (its handler is stuck)", r.State)
	}
	close(release)
	waitState(t, ib, "hung-1", StateDone)
	waitState(t, ib, "hung-2", StateDone)
}

// A handler run past HandlerTimeout fails its try, naming the deadline.
func TestDispatchHandlerTimeout(t *testing.T) {
	_, ib := newTestInbox(t)
	h := HandlerFunc(func(ctx context.Context, d *Delivery) (Result, error) {
		<-ctx.Done()
		return Result{}, ctx.Err()
	})
	storeIssue(t, ib, "slow", "issues", 1, 1, "alice")
	startDispatcher(t, ib, h, DispatchOptions{HandlerTimeout: 50 * time.Millisecond, MaxAttempts: 2})
	r := waitState(t, ib, "slow", StateDead)
	if r.Attempts != 2 {
		t.Errorf("attempts = %d, want 2 (each timed-out try counted)", r.Attempts)
	}
	if !strings.Contains(r.LastError, "handler gave up after 50ms") {
		t.Errorf("last error %q, want the deadline named", r.LastError)
	}
}

func sortTimes(ts []time.Time) { slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) }) }
