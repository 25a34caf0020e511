package webhooks

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wardenhq/warden/internal/db"
	"github.com/wardenhq/warden/internal/db/dbtest"
)

// replicaLog is what the handlers of every replica saw, shared because the
// replicas run in this process.
type replicaLog struct {
	mu        sync.Mutex
	started   map[string]int     // handler runs per delivery id
	completed map[string]int     // runs that returned success
	order     map[string][]int64 // per order key, the seqs handled successfully, in order
	running   map[string]int     // per order key, handlers running now
	overlaps  int                // times two handlers ran for one key at once
	cut       map[string]bool    // deliveries whose handler the kill interrupted
}

// TestDispatchReplicasPostgres runs three inboxes and dispatchers, each
// with a database pool of its own (as three replicas would), on one
// PostgreSQL schema. Every delivery is offered to all three (a load
// balancer and GitHub's redeliveries), one replica is killed while its
// handlers run, and the test checks that each delivery's handler succeeded
// exactly once, that no two deliveries about one issue ran at once on any
// replicas, and that each issue's deliveries were handled in receipt order.
// Some deliveries fail their first try on purpose: the instrument counting
// runs must see those twice.
func TestDispatchReplicasPostgres(t *testing.T) {
	dsn := dbtest.PostgresURL(t)
	ctx := context.Background()
	const replicas, keys, perKey = 3, 24, 6
	type replica struct {
		db     *db.DB
		ib     *Inbox
		cancel context.CancelFunc
		done   chan error
	}
	log := &replicaLog{started: map[string]int{}, completed: map[string]int{}, order: map[string][]int64{},
		running: map[string]int{}, cut: map[string]bool{}}
	flaky := map[string]bool{} // the last delivery of every fourth issue fails once
	var failed sync.Map
	var killed atomic.Bool
	var blocked atomic.Int32 // the victim's handlers caught by the kill
	handler := func(victim bool) Handler {
		return HandlerFunc(func(ctx context.Context, d *Delivery) (Result, error) {
			log.mu.Lock()
			log.started[d.ID]++
			log.running[d.Meta.OrderKey]++
			if log.running[d.Meta.OrderKey] > 1 {
				log.overlaps++
			}
			log.mu.Unlock()
			defer func() {
				log.mu.Lock()
				log.running[d.Meta.OrderKey]--
				log.mu.Unlock()
			}()
			select {
			case <-time.After(3 * time.Millisecond):
			case <-ctx.Done():
				log.mu.Lock()
				log.cut[d.ID] = true
				log.mu.Unlock()
				return Result{}, ctx.Err()
			}
			if victim && killed.Load() {
				blocked.Add(1)
				<-ctx.Done() // the kill is under way: never finish
				log.mu.Lock()
				log.cut[d.ID] = true
				log.mu.Unlock()
				return Result{}, ctx.Err()
			}
			if _, again := failed.LoadOrStore(d.ID, true); flaky[d.ID] && !again {
				return Result{}, errors.New("transient failure (on purpose)")
			}
			log.mu.Lock()
			log.completed[d.ID]++
			log.order[d.Meta.OrderKey] = append(log.order[d.Meta.OrderKey], d.Seq)
			log.mu.Unlock()
			return Result{Outcome: "ok"}, nil
		})
	}
	rs := make([]*replica, replicas)
	for i := range rs {
		d, err := db.Open(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		ib, err := OpenInbox(ctx, d)
		if err != nil {
			t.Fatal(err)
		}
		rs[i] = &replica{db: d, ib: ib, done: make(chan error, 1)}
		t.Cleanup(func() { ib.Close(); d.Close() })
	}
	// Every delivery reaches every replica; exactly one stores it.
	stored := map[string]int{}
	var ids []string
	for i := range perKey {
		for k := 1; k <= keys; k++ {
			id := fmt.Sprintf("d-%02d-%d", k, i)
			ids = append(ids, id)
			if i == perKey-1 && k%4 == 0 {
				flaky[id] = true
			}
			for _, r := range rs {
				res, err := r.ib.Accept(ctx, Incoming{ID: id, Event: "issues", Payload: issuePayload(1, k, "alice"), ReceivedAt: time.Now()})
				if err != nil {
					t.Fatal(err)
				}
				if res == Stored {
					stored[id]++
				}
			}
		}
	}
	for _, id := range ids {
		if stored[id] != 1 {
			t.Fatalf("%s stored %d times by three replicas, want once", id, stored[id])
		}
	}
	for i, r := range rs {
		opt := fastOptions(DispatchOptions{Workers: 4, Poll: 5 * time.Millisecond, Grace: time.Millisecond})
		disp := NewDispatcher(r.ib, handler(i == 0), nil, discardLogger(), opt)
		rctx, cancel := context.WithCancel(ctx)
		r.cancel = cancel
		go func() { r.done <- disp.Run(rctx) }()
	}
	// Kill replica 0 once it has handled a few deliveries, while handlers
	// of its own are running: they never finish, and its sessions end.
	waitFor(t, 20*time.Second, "some deliveries handled", func() bool {
		log.mu.Lock()
		defer log.mu.Unlock()
		return len(log.completed) >= keys
	})
	killed.Store(true)
	waitFor(t, 20*time.Second, "a handler of the victim in flight", func() bool { return blocked.Load() > 0 })
	rs[0].cancel()
	<-rs[0].done
	rs[0].ib.Close()
	rs[0].db.Close()
	waitFor(t, 30*time.Second, "every delivery done", func() bool {
		pending, dead, err := rs[1].ib.Counts(ctx)
		return err == nil && pending == 0 && dead == 0
	})
	for _, r := range rs[1:] {
		r.cancel()
		<-r.done
	}

	log.mu.Lock()
	defer log.mu.Unlock()
	if log.overlaps != 0 {
		t.Errorf("%d times two deliveries about one issue ran at once", log.overlaps)
	}
	twice := 0
	for _, id := range ids {
		if log.completed[id] != 1 {
			t.Errorf("%s handled successfully %d times, want once", id, log.completed[id])
		}
		want := 1
		if flaky[id] {
			want = 2
		}
		if log.cut[id] {
			want++
		}
		if log.started[id] != want {
			t.Errorf("%s started %d times, want %d (flaky %v, cut by the kill %v)", id, log.started[id], want, flaky[id], log.cut[id])
		}
		if log.started[id] > 1 {
			twice++
		}
	}
	if len(flaky) == 0 || twice < len(flaky) {
		t.Errorf("the run counter saw %d deliveries run twice; %d failed once on purpose", twice, len(flaky))
	}
	if len(log.cut) == 0 {
		t.Error("the kill interrupted no handler: the test did not kill a replica mid-way")
	}
	for key, seqs := range log.order {
		for i := 1; i < len(seqs); i++ {
			if seqs[i] < seqs[i-1] {
				t.Errorf("%s handled out of receipt order: %v", key, seqs)
				break
			}
		}
	}
	recs, err := rs[1].ib.List(ctx, false, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != len(ids) {
		t.Fatalf("the inbox holds %d deliveries, want %d", len(recs), len(ids))
	}
	for _, r := range recs {
		want := 1
		if flaky[r.ID] {
			want = 2
		}
		if r.State != StateDone || r.Attempts != want {
			t.Errorf("%s: state %s after %d tries, want done after %d", r.ID, r.State, r.Attempts, want)
		}
	}
	t.Logf("%d deliveries on 3 replicas, %d interrupted by the kill, %d failed once on purpose", len(ids), len(log.cut), len(flaky))
}

// TestDispatchReplicasKeepOrderAcrossAcceptors: replicas behind a load
// balancer each accept some of an issue's deliveries while all of them run;
// a replica handed its own later delivery must not run it before an
// earlier one another replica accepted (Inbox.Claim finds it). Per issue,
// deliveries are handled in receipt order.
func TestDispatchReplicasKeepOrderAcrossAcceptors(t *testing.T) {
	dsn := dbtest.PostgresURL(t)
	ctx := context.Background()
	const replicas, keys, perKey = 3, 4, 40
	var mu sync.Mutex
	order := map[string][]int64{}
	handled := map[string]int{}
	h := HandlerFunc(func(ctx context.Context, d *Delivery) (Result, error) {
		mu.Lock()
		order[d.Meta.OrderKey] = append(order[d.Meta.OrderKey], d.Seq)
		handled[d.ID]++
		mu.Unlock()
		time.Sleep(time.Millisecond)
		return Result{}, nil
	})
	ibs := make([]*Inbox, replicas)
	for i := range ibs {
		d, err := db.Open(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		ib, err := OpenInbox(ctx, d)
		if err != nil {
			t.Fatal(err)
		}
		ibs[i] = ib
		disp := NewDispatcher(ib, h, nil, discardLogger(), fastOptions(DispatchOptions{Workers: 4}))
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- disp.Run(rctx) }()
		t.Cleanup(func() { cancel(); <-done; ib.Close(); d.Close() })
	}
	var wg sync.WaitGroup
	for k := 1; k <= keys; k++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perKey {
				// Each delivery to one replica, in turn: the load balancer.
				storeIssue(t, ibs[(k+i)%replicas], fmt.Sprintf("k%d-%03d", k, i), "issue_comment", 1, k, "alice")
			}
		}()
	}
	wg.Wait()
	waitFor(t, 60*time.Second, "every delivery handled", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(handled) == keys*perKey
	})
	mu.Lock()
	defer mu.Unlock()
	for key, seqs := range order {
		for i := 1; i < len(seqs); i++ {
			if seqs[i] < seqs[i-1] {
				t.Errorf("%s handled out of receipt order at %d: %v", key, i, seqs)
				break
			}
		}
	}
	for id, n := range handled {
		if n != 1 {
			t.Errorf("%s handled %d times", id, n)
		}
	}
}
