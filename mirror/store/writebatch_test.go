package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

// batchEnv holds the SQLite writer busy with a first write until release
// is closed, so that the writes started meanwhile queue into one batch.
type batchEnv struct {
	t       *testing.T
	e       *env
	release chan struct{}
	blocked chan struct{}
	wg      sync.WaitGroup
}

func newBatchEnv(t *testing.T) *batchEnv {
	b := &batchEnv{t: t, e: newEnv(t, openSQLiteLedger), release: make(chan struct{}), blocked: make(chan struct{})}
	b.e.create(1, tags())
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		b.e.l.writeTxQ(context.Background(), func(ctx context.Context, q Querier) error {
			close(b.blocked)
			<-b.release
			return nil
		})
	}()
	<-b.blocked
	return b
}

// queued waits until n writes wait behind the blocker.
func (b *batchEnv) queued(n int) {
	b.t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		b.e.l.batch.mu.Lock()
		k := len(b.e.l.batch.queue)
		b.e.l.batch.mu.Unlock()
		if k >= n {
			return
		}
	}
	b.t.Fatalf("fewer than %d writes queued", n)
}

// tag is a write of tag x on issue-1.
func tag(x string) func(ctx context.Context, q Querier) error {
	return func(ctx context.Context, q Querier) error {
		_, err := q.ExecContext(ctx, `INSERT INTO ledger_tags (repo_id, number, tag) VALUES (42, 1, $1)`, x)
		return err
	}
}

func (b *batchEnv) hasTag(x string) bool {
	b.t.Helper()
	var n int
	if err := b.e.l.db.Read.QueryRow(`SELECT COUNT(*) FROM ledger_tags WHERE repo_id = 42 AND number = 1 AND tag = $1`, x).Scan(&n); err != nil {
		b.t.Fatal(err)
	}
	return n > 0
}

// TestWriteBatchSavepoints: writes queued together share one commit; one
// that fails is rolled back to its savepoint and the others stand; one
// whose caller gave up before it ran is not run; each caller hears its own
// answer, after the commit.
func TestWriteBatchSavepoints(t *testing.T) {
	var sizes []int
	var mu sync.Mutex
	batchObserved = func(n int) { mu.Lock(); sizes = append(sizes, n); mu.Unlock() }
	defer func() { batchObserved = nil }()
	b := newBatchEnv(t)
	const n = 9
	errs := make([]error, n)
	ran := make([]bool, n)
	gone, cancel := context.WithCancel(context.Background())
	for i := range n {
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			ctx := context.Background()
			if i == 4 {
				ctx = gone
			}
			errs[i] = b.e.l.writeTxQ(ctx, func(ctx context.Context, q Querier) error {
				ran[i] = true
				if err := tag(fmt.Sprintf("t%d", i))(ctx, q); err != nil {
					return err
				}
				if i%3 == 2 {
					return fmt.Errorf("write %d fails after its insert", i)
				}
				return nil
			})
		}()
		b.queued(i + 1)
	}
	cancel()
	close(b.release)
	b.wg.Wait()
	for i := range n {
		switch {
		case i == 4:
			if !errors.Is(errs[i], context.Canceled) || ran[i] || b.hasTag("t4") {
				t.Errorf("the write whose caller gave up: %v, ran %v", errs[i], ran[i])
			}
		case i%3 == 2:
			if errs[i] == nil || b.hasTag(fmt.Sprintf("t%d", i)) {
				t.Errorf("failed write %d: %v, its insert kept %v", i, errs[i], b.hasTag(fmt.Sprintf("t%d", i)))
			}
		default:
			if errs[i] != nil || !b.hasTag(fmt.Sprintf("t%d", i)) {
				t.Errorf("write %d: %v, its insert kept %v", i, errs[i], b.hasTag(fmt.Sprintf("t%d", i)))
			}
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(sizes) != 2 || sizes[1] != n {
		t.Errorf("batch sizes %v, want the blocker alone then all %d together", sizes, n)
	}
}

// TestWriteBatchLostTransaction: when a batch's transaction is lost under
// it (here a write ends it by hand, as SQLite does on an I/O error or an
// interrupt), every write of the batch fails, none is kept, and no write
// after it runs outside a transaction.
func TestWriteBatchLostTransaction(t *testing.T) {
	b := newBatchEnv(t)
	fns := []func(ctx context.Context, q Querier) error{
		tag("before"),
		func(ctx context.Context, q Querier) error {
			_, err := q.ExecContext(ctx, `ROLLBACK`)
			return err
		},
		tag("after"),
	}
	errs := make([]error, len(fns))
	for i, fn := range fns {
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			errs[i] = b.e.l.writeTxQ(context.Background(), fn)
		}()
		b.queued(i + 1)
	}
	close(b.release)
	b.wg.Wait()
	for i, err := range errs {
		if !errors.Is(err, errBatchLost) {
			t.Errorf("write %d: %v, want the lost batch's error", i, err)
		}
	}
	if b.hasTag("before") || b.hasTag("after") {
		t.Errorf("a write of the lost batch was kept: before %v, after %v", b.hasTag("before"), b.hasTag("after"))
	}
	// The writer carries on.
	if err := b.e.l.writeTxQ(context.Background(), tag("later")); err != nil || !b.hasTag("later") {
		t.Fatalf("a write after the lost batch: %v", err)
	}
}
