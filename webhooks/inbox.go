package webhooks

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/s2"

	"github.com/wardenhq/warden/internal/db"
)

// Delivery states in the inbox.
const (
	StatePending = "pending" // waiting to be processed, or for its next retry
	StateDone    = "done"    // processed; kept for de-duplication until pruned
	StateDead    = "dead"    // failed its last try; shown to operators, retryable
)

// AcceptResult says what the inbox did with a delivery.
type AcceptResult int

// The outcomes of Accept.
const (
	Stored    AcceptResult = iota // new, durable, queued
	Duplicate                     // already in the inbox and not a dead letter
	Requeued                      // was a dead letter; queued again
)

func (r AcceptResult) String() string {
	switch r {
	case Stored:
		return "stored"
	case Duplicate:
		return "duplicate"
	case Requeued:
		return "requeued"
	}
	return "unknown"
}

// Incoming is a verified delivery on its way into the inbox.
type Incoming struct {
	ID         string // X-GitHub-Delivery
	Event      string // X-GitHub-Event
	HookID     string // X-GitHub-Hook-ID, may be empty
	Payload    []byte
	ReceivedAt time.Time
}

// ErrClosed is returned by Accept after Close.
var ErrClosed = errors.New("inbox is closed")

// ErrNotPending is returned when a delivery left the pending state under a
// worker (an operator or another process changed it).
var ErrNotPending = errors.New("delivery is no longer pending")

var inboxMigrations = []db.Migration{{Version: 1, SQL: `
CREATE TABLE inbox (
	seq INTEGER PRIMARY KEY AUTOINCREMENT,
	delivery_id TEXT NOT NULL UNIQUE,
	event TEXT NOT NULL,
	hook_id TEXT NOT NULL DEFAULT '',
	payload BLOB NOT NULL,
	encoding TEXT NOT NULL DEFAULT '',
	received_at INTEGER NOT NULL,
	state TEXT NOT NULL DEFAULT 'pending',
	attempts INTEGER NOT NULL DEFAULT 0,
	next_attempt_at INTEGER NOT NULL,
	last_error TEXT NOT NULL DEFAULT '',
	done_at INTEGER,
	outcome TEXT NOT NULL DEFAULT '',
	action TEXT NOT NULL DEFAULT '',
	installation_id INTEGER NOT NULL DEFAULT 0,
	repo TEXT NOT NULL DEFAULT '',
	number INTEGER NOT NULL DEFAULT 0,
	sender TEXT NOT NULL DEFAULT ''
);
CREATE INDEX inbox_pending ON inbox (next_attempt_at, seq) WHERE state = 'pending';
CREATE INDEX inbox_dead ON inbox (seq) WHERE state = 'dead';
CREATE INDEX inbox_done ON inbox (done_at) WHERE state = 'done';
`, Postgres: `
CREATE TABLE inbox (
	seq BIGSERIAL PRIMARY KEY,
	delivery_id TEXT NOT NULL UNIQUE,
	event TEXT NOT NULL,
	hook_id TEXT NOT NULL DEFAULT '',
	payload BYTEA NOT NULL,
	encoding TEXT NOT NULL DEFAULT '',
	received_at BIGINT NOT NULL,
	state TEXT NOT NULL DEFAULT 'pending',
	attempts BIGINT NOT NULL DEFAULT 0,
	next_attempt_at BIGINT NOT NULL,
	last_error TEXT NOT NULL DEFAULT '',
	done_at BIGINT,
	outcome TEXT NOT NULL DEFAULT '',
	action TEXT NOT NULL DEFAULT '',
	installation_id BIGINT NOT NULL DEFAULT 0,
	repo TEXT NOT NULL DEFAULT '',
	number BIGINT NOT NULL DEFAULT 0,
	sender TEXT NOT NULL DEFAULT ''
);
CREATE INDEX inbox_pending ON inbox (next_attempt_at, seq) WHERE state = 'pending';
CREATE INDEX inbox_dead ON inbox (seq) WHERE state = 'dead';
CREATE INDEX inbox_done ON inbox (done_at) WHERE state = 'done';
`}, {Version: 2, SQL: `
-- Due walks the pending deliveries in receipt order: without this index the
-- planner (no ANALYZE statistics) walks every row of the inbox by rowid.
CREATE INDEX inbox_pending_seq ON inbox (seq) WHERE state = 'pending';
`}, {Version: 3, SQL: `
-- Routing facts are read from the payload once, when a delivery is
-- accepted, and kept here: the dispatcher decides what may start from these
-- columns and never decodes a payload for it. routed is 0 for deliveries
-- stored by an earlier warden (the dispatcher fills their columns the first
-- time it loads them); route_error names why a payload cannot be routed.
-- queued orders every delivery's becoming pending (stored, or a dead letter
-- re-queued): a dispatcher reads what was queued since it last looked.
ALTER TABLE inbox ADD COLUMN repo_id INTEGER NOT NULL DEFAULT 0;
ALTER TABLE inbox ADD COLUMN sender_type TEXT NOT NULL DEFAULT '';
ALTER TABLE inbox ADD COLUMN order_key TEXT NOT NULL DEFAULT '';
ALTER TABLE inbox ADD COLUMN routed INTEGER NOT NULL DEFAULT 0;
ALTER TABLE inbox ADD COLUMN route_error TEXT NOT NULL DEFAULT '';
ALTER TABLE inbox ADD COLUMN queued INTEGER NOT NULL DEFAULT 0;
UPDATE inbox SET queued = seq;
CREATE INDEX inbox_queued ON inbox (queued);
`, Postgres: `
ALTER TABLE inbox ADD COLUMN repo_id BIGINT NOT NULL DEFAULT 0;
ALTER TABLE inbox ADD COLUMN sender_type TEXT NOT NULL DEFAULT '';
ALTER TABLE inbox ADD COLUMN order_key TEXT NOT NULL DEFAULT '';
ALTER TABLE inbox ADD COLUMN routed BIGINT NOT NULL DEFAULT 0;
ALTER TABLE inbox ADD COLUMN route_error TEXT NOT NULL DEFAULT '';
ALTER TABLE inbox ADD COLUMN queued BIGINT NOT NULL DEFAULT 0;
UPDATE inbox SET queued = seq;
CREATE INDEX inbox_queued ON inbox (queued);
`}, {Version: 4, SQL: `SELECT 1 -- PostgreSQL only: one process drains a SQLite inbox`, Postgres: `
-- A replica claiming a delivery checks that no earlier due delivery of its
-- order key is pending (one another replica accepted and it has not read).
CREATE INDEX inbox_pending_key ON inbox (order_key, seq) WHERE state = 'pending';
`}, {Version: 5, SQL: `
-- The dispatcher no longer walks pending deliveries by due time (it keeps
-- them in memory, read through inbox_queued): the index only cost page
-- writes at every acceptance and completion.
DROP INDEX inbox_pending;
`}, redeliveriesMigration}

// Inbox is the durable delivery inbox. One writer goroutine gathers every
// write that arrived while the previous commit was being synced (deliveries
// accepted, and on SQLite deliveries completed or failed) and writes them in
// one transaction, so one fsync acknowledges many. Payloads are stored
// S2-compressed (GitHub's JSON shrinks about five-fold) and their routing
// facts read, both by the caller's goroutine, so the single writer only
// moves bytes.
type Inbox struct {
	db       *db.DB
	st       *statements
	reqs     chan *writeReq
	closing  chan struct{}
	stopped  chan struct{}
	once     sync.Once
	maxBatch int
	// Under load a batch smaller than minBatch waits up to gatherWait.
	minBatch   int
	gatherWait time.Duration
	// afterCommit, when set, is called after each durable batch.
	afterCommit func()
	// queuedTo, when set, is handed the deliveries each batch made pending
	// (the dispatcher's queue), after the commit. A dispatcher started on a
	// running inbox (a replica restarting it) sets it while the writer runs.
	queuedTo atomic.Pointer[func([]Queued)]
	syncMu   sync.Mutex // held by the writer from a batch's write to its hand-over
	// afterWrite, set by tests before use, runs between a batch's commit and
	// its hand-over.
	afterWrite func()
	// queueRowsRead and payloadReads count the dispatcher's reads (what
	// picking work costs; the tests hold it to the work started).
	queueRowsRead, payloadReads atomic.Int64
}

// writeKind is what a writer request does.
type writeKind int

const (
	writeAccept writeKind = iota
	writeComplete
	writeFail
)

type writeReq struct {
	kind writeKind
	// accept
	in       Incoming // Payload compressed
	raw      []byte   // the payload as received, for the dispatcher's queue
	meta     Meta
	routeErr string
	// complete and fail
	seq      int64
	outcome  string // complete
	cause    string // fail
	next     time.Time
	dead     bool
	deferred bool // fail: no try spent (Inbox.Defer)

	res chan writeRes
}

type writeRes struct {
	r   AcceptResult
	err error
}

// OpenInbox migrates the inbox schema and starts its writer.
func OpenInbox(ctx context.Context, d *db.DB) (*Inbox, error) {
	if err := d.Migrate(ctx, "inbox", inboxMigrations); err != nil {
		return nil, err
	}
	st, err := prepareStatements(ctx, d)
	if err != nil {
		return nil, err
	}
	ib := &Inbox{
		db:         d,
		st:         st,
		reqs:       make(chan *writeReq, 4096),
		closing:    make(chan struct{}),
		stopped:    make(chan struct{}),
		maxBatch:   1024,
		minBatch:   16,
		gatherWait: time.Millisecond,
	}
	go ib.writer()
	return ib, nil
}

// OnCommit registers f to run after each durable batch. Call before use.
func (ib *Inbox) OnCommit(f func()) { ib.afterCommit = f }

// onQueued registers f to receive, after each durable batch, the
// deliveries it made pending. f must not block.
func (ib *Inbox) onQueued(f func([]Queued)) { ib.queuedTo.Store(&f) }

// Accept stores a verified delivery durably (committed with fsync) and says
// whether it was new, a duplicate, or a re-queued dead letter. It returns
// only after the commit, or with an error when nothing is known to be stored.
// It reads the delivery's routing facts (ParseMeta) here, once: a payload
// that cannot be routed is stored all the same, with the reason, and the
// dispatcher makes it a dead letter.
func (ib *Inbox) Accept(ctx context.Context, in Incoming) (AcceptResult, error) {
	req := &writeReq{kind: writeAccept, raw: in.Payload, res: make(chan writeRes, 1)}
	m, err := ParseMeta(in.Event, in.Payload)
	if err != nil {
		req.routeErr = err.Error()
	}
	req.meta = m
	// Compress here, in parallel across callers, not in the single writer.
	in.Payload = s2.Encode(nil, in.Payload)
	req.in = in
	r, err := ib.submit(ctx, req)
	return r.r, err
}

// submit hands req to the writer and waits for its commit.
func (ib *Inbox) submit(ctx context.Context, req *writeReq) (writeRes, error) {
	select {
	case <-ib.closing:
		return writeRes{}, ErrClosed
	default:
	}
	select {
	case ib.reqs <- req:
	case <-ib.closing:
		return writeRes{}, ErrClosed
	case <-ctx.Done():
		return writeRes{}, ctx.Err()
	}
	select {
	case r := <-req.res:
		return r, r.err
	case <-ib.stopped:
		// Close won the race: the writer may have answered before stopping.
		select {
		case r := <-req.res:
			return r, r.err
		default:
			return writeRes{}, ErrClosed
		}
	case <-ctx.Done():
		// The batch may still commit; a redelivery then answers Duplicate.
		return writeRes{}, ctx.Err()
	}
}

// Close stops the writer after the batches already queued are written.
func (ib *Inbox) Close() {
	ib.once.Do(func() {
		close(ib.closing)
		<-ib.stopped
		ib.st.close()
	})
	<-ib.stopped
}

func (ib *Inbox) writer() {
	defer close(ib.stopped)
	batch := make([]*writeReq, 0, ib.maxBatch)
	var lastEnd time.Time
	for {
		var first *writeReq
		select {
		case first = <-ib.reqs:
		case <-ib.closing:
			// Fail whatever is still queued: those callers were not acknowledged.
			for {
				select {
				case r := <-ib.reqs:
					r.res <- writeRes{err: ErrClosed}
				default:
					return
				}
			}
		}
		// Under load (the last batch was not tiny and work arrived soon after
		// its commit) a small batch waits briefly for company; a trickle of
		// deliveries is never held back.
		busy := len(batch) >= 4 && time.Since(lastEnd) < ib.gatherWait
		batch = ib.gather(append(batch[:0], first), busy)
		// The commit and the hand-over are one step to a dispatcher reading
		// the inbox's queue (syncMu): it never reads a committed delivery
		// whose hand-over is still to come, and so never takes one twice.
		ib.syncMu.Lock()
		results, queued, err := ib.writeBatch(batch)
		if ib.afterWrite != nil {
			ib.afterWrite()
		}
		if f := ib.queuedTo.Load(); err == nil && len(queued) > 0 && f != nil {
			(*f)(queued)
		}
		ib.syncMu.Unlock()
		lastEnd = time.Now()
		for i, r := range batch {
			if err != nil {
				r.res <- writeRes{err: err}
			} else {
				r.res <- results[i]
			}
		}
		if err == nil && ib.afterCommit != nil {
			ib.afterCommit()
		}
	}
}

// gather adds every queued request to batch. When the writer is busy and
// the batch is still small, it waits up to gatherWait for more: every commit
// costs an fsync (on this kind of machine, a fifth of a millisecond of CPU),
// and without the wait a burst splits into many one-row commits.
func (ib *Inbox) gather(batch []*writeReq, busy bool) []*writeReq {
	var deadline <-chan time.Time
	for len(batch) < ib.maxBatch {
		select {
		case r := <-ib.reqs:
			batch = append(batch, r)
			continue
		default:
		}
		if !busy || len(batch) >= ib.minBatch {
			return batch
		}
		if deadline == nil {
			t := time.NewTimer(ib.gatherWait)
			defer t.Stop()
			deadline = t.C
		}
		select {
		case r := <-ib.reqs:
			batch = append(batch, r)
		case <-deadline:
			return batch
		}
	}
	return batch
}
