package webhooks

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/klauspost/compress/s2"
	dto "github.com/prometheus/client_model/go"
)

// TestDispatchReadsEachPendingDeliveryOnce: picking work costs the work
// started, not the backlog. A backlog about one issue, stored before the
// dispatcher existed (so nothing is handed over in memory), is drained with
// each pending row read from the inbox's queue once and each payload once —
// the inbox scan this replaced read the due rows again on every wake-up.
// (That other issues' deliveries run meanwhile is
// TestDispatchBacklogDoesNotStarveOtherKeys.)
func TestDispatchReadsEachPendingDeliveryOnce(t *testing.T) {
	_, ib := newTestInbox(t)
	const burst = 600
	for i := range burst {
		storeIssue(t, ib, fmt.Sprintf("busy-%04d", i), "issue_comment", 1, 1, "chatty")
	}
	storeIssue(t, ib, "other", "issues", 1, 2, "alice")
	var handled atomic.Int32
	h := HandlerFunc(func(ctx context.Context, d *Delivery) (Result, error) {
		handled.Add(1)
		return Result{}, nil
	})
	startDispatcher(t, ib, h, DispatchOptions{Workers: 4})
	waitFor(t, 30*time.Second, "the backlog drained", func() bool { return handled.Load() == burst+1 })
	rows, payloads := ib.queueRowsRead.Load(), ib.payloadReads.Load()
	t.Logf("%d deliveries: %d queue rows read, %d payloads read", burst+1, rows, payloads)
	if rows < burst+1 || rows > burst+1+syncPage {
		t.Errorf("read %d queue rows for %d pending deliveries: want each once", rows, burst+1)
	}
	if payloads != burst+1 {
		t.Errorf("read %d payloads for %d deliveries: want each once", payloads, burst+1)
	}
}

// TestDispatchHandsOverInMemory: a delivery accepted while the dispatcher
// runs reaches it from the writer with its payload, without reading the
// inbox back.
func TestDispatchHandsOverInMemory(t *testing.T) {
	_, ib := newTestInbox(t)
	done := make(chan Meta, 10)
	h := HandlerFunc(func(ctx context.Context, d *Delivery) (Result, error) {
		done <- d.Meta
		return Result{}, nil
	})
	startDispatcher(t, ib, h, DispatchOptions{})
	time.Sleep(50 * time.Millisecond) // the dispatcher has loaded the (empty) inbox
	storeIssue(t, ib, "live", "issues", 7, 3, "alice")
	select {
	case m := <-done:
		if m.OrderKey != "r7#3" || m.Sender != "alice" || m.Number != 3 {
			t.Fatalf("handler got meta %+v", m)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the delivery was never handled")
	}
	waitState(t, ib, "live", StateDone)
	if n := ib.payloadReads.Load(); n != 0 {
		t.Errorf("the payload was read back %d times; the writer had handed it over", n)
	}
}

// TestDispatchSeesAnotherProcessesRetry: an operator's `warden deliveries
// retry` runs in another process, on another connection to the same
// database: the running dispatcher learns of the re-queued dead letter from
// the inbox's queue numbering, even when its own deliveries were numbered
// after it.
func TestDispatchSeesAnotherProcessesRetry(t *testing.T) {
	path := filepath.Join(t.TempDir(), "w.db")
	d := openTestDB(t, path)
	ib, err := OpenInbox(context.Background(), d)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ib.Close(); d.Close() })
	storeIssue(t, ib, "doomed", "issues", 1, 1, "alice")
	var healed atomic.Bool
	var mu sync.Mutex
	handled := map[string]int{}
	h := HandlerFunc(func(ctx context.Context, dv *Delivery) (Result, error) {
		mu.Lock()
		handled[dv.ID]++
		mu.Unlock()
		if dv.ID == "doomed" && !healed.Load() {
			return Result{}, Permanent(fmt.Errorf("not yet"))
		}
		return Result{}, nil
	})
	startDispatcher(t, ib, h, DispatchOptions{Poll: 20 * time.Millisecond})
	waitState(t, ib, "doomed", StateDead)
	healed.Store(true)

	// The other process.
	d2 := openTestDB(t, path)
	ib2, err := OpenInbox(context.Background(), d2)
	if err != nil {
		t.Fatal(err)
	}
	if err := ib2.Retry(context.Background(), []string{"doomed"}); err != nil {
		t.Fatal(err)
	}
	ib2.Close()
	d2.Close()
	// And a delivery of this process's own, numbered after the retry.
	storeIssue(t, ib, "after", "issues", 1, 2, "alice")
	waitState(t, ib, "after", StateDone)
	waitState(t, ib, "doomed", StateDone)
	mu.Lock()
	defer mu.Unlock()
	if handled["doomed"] != 2 || handled["after"] != 1 {
		t.Fatalf("handled %v, want doomed twice (dead, then retried) and after once", handled)
	}
}

// TestDispatchRoutesDeliveriesStoredByAnEarlierWarden: a delivery an
// earlier warden stored (no routing columns) is routed from its payload
// once, its columns filled, and handled in its order.
func TestDispatchRoutesDeliveriesStoredByAnEarlierWarden(t *testing.T) {
	d, ib := newTestInbox(t)
	ctx := context.Background()
	for i, id := range []string{"old-1", "old-2"} {
		if _, err := d.Write.ExecContext(ctx, `INSERT INTO inbox (delivery_id, event, payload, encoding, received_at, next_attempt_at, queued)
			VALUES ($1, 'issues', $2, 's2', $3, $3, $4)`, id, s2.Encode(nil, issuePayload(5, 9, "alice")), time.Now().UnixMilli(), i+1); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	var order []string
	var keys []string
	h := HandlerFunc(func(ctx context.Context, dv *Delivery) (Result, error) {
		mu.Lock()
		order, keys = append(order, dv.ID), append(keys, dv.Meta.OrderKey)
		mu.Unlock()
		return Result{}, nil
	})
	startDispatcher(t, ib, h, DispatchOptions{})
	waitState(t, ib, "old-2", StateDone)
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(order) != "[old-1 old-2]" || fmt.Sprint(keys) != "[r5#9 r5#9]" {
		t.Fatalf("handled %v with keys %v", order, keys)
	}
	var routed int
	var key string
	if err := d.Read.QueryRowContext(ctx, `SELECT routed, order_key FROM inbox WHERE delivery_id = 'old-1'`).Scan(&routed, &key); err != nil {
		t.Fatal(err)
	}
	if routed != 1 || key != "r5#9" {
		t.Fatalf("old-1's columns: routed %d, order_key %q", routed, key)
	}
}

// TestDispatchSyncWaitsForTheHandOver: a delivery committed by this
// process's writer is not read from the inbox before its hand-over: else a
// delivery read, run and finished before its hand-over arrived would be
// queued a second time by it. The writer is held between a commit and its
// hand-over; the dispatcher's read of the inbox waits, then finds the
// delivery known, handed over with its payload.
func TestDispatchSyncWaitsForTheHandOver(t *testing.T) {
	_, ib := newTestInbox(t)
	inHook, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	ib.afterWrite = func() { once.Do(func() { close(inHook); <-release }) }
	var released sync.Once
	t.Cleanup(func() { released.Do(func() { close(release) }) }) // before the inbox closes
	d := NewDispatcher(ib, HandlerFunc(func(context.Context, *Delivery) (Result, error) { return Result{}, nil }),
		nil, discardLogger(), fastOptions(DispatchOptions{}))
	go storeIssue(t, ib, "x", "issues", 1, 1, "alice")
	<-inHook // committed, not handed over
	synced := make(chan struct{})
	go func() {
		d.sync(context.Background(), time.Now())
		close(synced)
	}()
	select {
	case <-synced:
		t.Fatal("the inbox was read between a commit and its hand-over")
	case <-time.After(100 * time.Millisecond):
	}
	released.Do(func() { close(release) })
	<-synced
	if d.q.len() != 1 {
		t.Fatalf("queue holds %d deliveries, want 1", d.q.len())
	}
	for _, e := range d.q.known {
		if e.ID != "x" || e.payload == nil {
			t.Fatalf("queued %s with payload %v: want x as handed over", e.ID, e.payload != nil)
		}
	}
}

// TestDispatchHandOverIsBoundedBeforeItRuns: while the dispatcher waits
// for the App's identity, the writer's hand-overs pile up; their payloads
// are held only up to the queue's bound (the deliveries themselves are in
// the inbox, and are read back when they run).
func TestDispatchHandOverIsBoundedBeforeItRuns(t *testing.T) {
	_, ib := newTestInbox(t)
	d := NewDispatcher(ib, HandlerFunc(func(context.Context, *Delivery) (Result, error) { return Result{}, nil }),
		nil, discardLogger(), fastOptions(DispatchOptions{}))
	big := make([]byte, 1<<20)
	for i := range 100 {
		d.handOver([]Queued{{Seq: int64(i + 1), Meta: Meta{OrderKey: "k"}, payload: big}})
	}
	d.handMu.Lock()
	defer d.handMu.Unlock()
	held := 0
	for _, q := range d.handed {
		held += len(q.payload)
	}
	if len(d.handed) != 100 || held > maxCached || held == 0 {
		t.Fatalf("%d handed over holding %d payload bytes; want all 100, at most %d bytes", len(d.handed), held, maxCached)
	}
}

// TestDispatchGaugesFollowTheInbox: the depth and dead-letter gauges are
// refreshed while the dispatcher runs, not only at its start.
func TestDispatchGaugesFollowTheInbox(t *testing.T) {
	_, ib := newTestInbox(t)
	h := HandlerFunc(func(context.Context, *Delivery) (Result, error) { return Result{}, Permanent(fmt.Errorf("no")) })
	rd := startDispatcher(t, ib, h, DispatchOptions{Poll: 5 * time.Millisecond})
	time.Sleep(100 * time.Millisecond) // well past the first refresh
	storeIssue(t, ib, "doomed", "issues", 1, 1, "alice")
	waitState(t, ib, "doomed", StateDead)
	waitFor(t, 5*time.Second, "the dead-letter gauge at 1", func() bool {
		var pb dto.Metric
		if err := rd.m.Dead.Write(&pb); err != nil {
			t.Fatal(err)
		}
		return pb.GetGauge().GetValue() == 1
	})
}

// TestDispatchEarlierDeliveryRunsFirst: a claim refused because an earlier
// due delivery of the key is pending (PostgreSQL, Inbox.Claim) queues that
// one first, and takes the inbox's due time for it even when the queue knew
// it with a stale one (else the refused delivery would be tried again at
// once, and refused again, until the stale time passed).
func TestDispatchEarlierDeliveryRunsFirst(t *testing.T) {
	_, ib := newTestInbox(t)
	d := NewDispatcher(ib, HandlerFunc(func(context.Context, *Delivery) (Result, error) { return Result{}, nil }),
		nil, discardLogger(), fastOptions(DispatchOptions{}))
	now := time.Now()
	key := Meta{OrderKey: "r1#1"}
	d.q.add(Queued{Seq: 1, Meta: key, Due: now.Add(time.Hour)}, now) // known, stale
	d.q.add(Queued{Seq: 2, Meta: key, Due: now}, now)
	e := d.q.pop(now)
	if e == nil || e.Seq != 2 {
		t.Fatalf("popped %v, want 2", e)
	}
	d.inflight++
	d.finish(taskResult{e: e, due: e.Due, add: &Queued{Seq: 1, Meta: key, Due: now}})
	if e = d.q.pop(time.Now()); e == nil || e.Seq != 1 {
		t.Fatalf("after the refusal popped %v, want the earlier delivery 1", e)
	}
}
