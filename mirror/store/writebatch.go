package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
)

// Group commit for the hot writers on SQLite (claim, renew, release): as
// the inbox does for deliveries, the writes that arrive while a commit is
// under way wait for it, and are then written together in one transaction
// with one fsync, each in a SAVEPOINT of its own. A write whose function
// fails is rolled back to its savepoint (the others stand), and every
// caller is answered only after the commit that made its write durable (a
// failed commit fails every write in it).
//
// Two things keep one write from undoing another's:
//
//   - Each function runs its statements under a context that is not
//     cancelled (context.WithoutCancel of its caller's): the driver answers
//     a cancellation by interrupting the connection, and SQLite rolls back
//     the whole transaction on an interrupted write. A caller whose context
//     ends before its function starts is answered with that error and
//     skipped.
//   - Every write ends with RELEASE (or ROLLBACK TO, then RELEASE) of its
//     savepoint, which fails if the transaction was lost (an I/O error, a
//     full disk): the batch then fails whole, and no later write runs
//     outside it. A write is never run twice.
//
// A batch of one is written as writeTx would, without a savepoint. No
// goroutine outlives its work: the first write of a burst starts the writer,
// which ends when it finds nothing queued.

// writeReq is one write waiting for the writer.
type writeReq struct {
	ctx  context.Context
	fn   func(ctx context.Context, q Querier) error
	err  error
	done chan struct{}
}

// writeBatcher queues the hot writers' transactions (SQLite).
type writeBatcher struct {
	mu      sync.Mutex
	queue   []*writeReq
	running bool
}

// batchObserved, set by tests before use, is told each batch's size.
var batchObserved func(n int)

// maxBatch bounds how many writes share one commit.
const maxBatch = 64

// writeTxQ runs fn in a write transaction, as writeTx does, for the hot
// writers: on SQLite through the statement cache and group commit; fn must
// run its statements under the context it is given.
func (l *Ledger) writeTxQ(ctx context.Context, fn func(ctx context.Context, q Querier) error) error {
	if l.pg {
		return l.writeTx(ctx, func(tx *sql.Tx) error { return fn(ctx, tx) })
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	r := &writeReq{ctx: ctx, fn: fn, done: make(chan struct{})}
	b := &l.batch
	b.mu.Lock()
	b.queue = append(b.queue, r)
	if !b.running {
		b.running = true
		go l.writeBatches()
	}
	b.mu.Unlock()
	<-r.done // after the commit, whatever the caller's context says
	return r.err
}

// writeBatches writes the queue, a batch at a time, until it is empty.
func (l *Ledger) writeBatches() {
	b := &l.batch
	for {
		b.mu.Lock()
		n := min(len(b.queue), maxBatch)
		if n == 0 {
			b.running = false
			b.mu.Unlock()
			return
		}
		batch := b.queue[:n:n]
		b.queue = append([]*writeReq(nil), b.queue[n:]...)
		b.mu.Unlock()
		if batchObserved != nil {
			batchObserved(len(batch))
		}
		l.writeBatch(batch)
		for _, r := range batch {
			close(r.done)
		}
		l.stmts.prepare(context.Background(), l.db.Write)
	}
}

// errBatchLost is a batch's error when its transaction was lost under it.
var errBatchLost = errors.New("ledger: the transaction was lost")

// writeBatch writes batch in one transaction and sets each write's error.
func (l *Ledger) writeBatch(batch []*writeReq) {
	live := batch[:0:0]
	for _, r := range batch {
		if err := r.ctx.Err(); err != nil {
			r.err = err
		} else {
			live = append(live, r)
		}
	}
	if len(live) == 0 {
		return
	}
	fail := func(err error) {
		for _, r := range live {
			if r.err == nil {
				r.err = err
			}
		}
	}
	ctx := context.WithoutCancel(live[0].ctx)
	tx, err := l.db.Write.BeginTx(ctx, nil)
	if err != nil {
		fail(fmt.Errorf("ledger: begin: %w", err))
		return
	}
	defer tx.Rollback()
	q := cachedTx{tx: tx, c: &l.stmts}
	if len(live) == 1 {
		r := live[0]
		if r.err = r.fn(context.WithoutCancel(r.ctx), q); r.err != nil {
			return
		}
	} else {
		for _, r := range live {
			if _, err := tx.ExecContext(ctx, `SAVEPOINT batch_write`); err != nil {
				fail(fmt.Errorf("%w: savepoint: %v", errBatchLost, err))
				return
			}
			err := r.fn(context.WithoutCancel(r.ctx), q)
			if err != nil {
				r.err = err
				if _, err := tx.ExecContext(ctx, `ROLLBACK TO batch_write`); err != nil {
					fail(fmt.Errorf("%w: rollback to savepoint: %v", errBatchLost, err))
					return
				}
			}
			if _, err := tx.ExecContext(ctx, `RELEASE batch_write`); err != nil {
				fail(fmt.Errorf("%w: release savepoint: %v", errBatchLost, err))
				return
			}
		}
	}
	if err := tx.Commit(); err != nil {
		fail(fmt.Errorf("ledger: commit: %w", err))
	}
}
