package webhooks

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
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
`}}

// Inbox is the durable delivery inbox. Accept group-commits concurrent
// deliveries: one writer goroutine gathers every delivery that arrived while
// the previous commit was being synced and writes them in one transaction, so
// one fsync acknowledges many deliveries. Payloads are stored S2-compressed
// (GitHub's JSON shrinks about five-fold), compressed by the caller's
// goroutine so the single writer only moves bytes.
type Inbox struct {
	db       *db.DB
	reqs     chan *acceptReq
	closing  chan struct{}
	stopped  chan struct{}
	once     sync.Once
	maxBatch int
	// Under load a batch smaller than minBatch waits up to gatherWait.
	minBatch   int
	gatherWait time.Duration
	// afterCommit, when set, is called after each durable batch (the
	// dispatcher's wake-up).
	afterCommit func()
}

type acceptReq struct {
	in  Incoming
	res chan acceptRes
}

type acceptRes struct {
	r   AcceptResult
	err error
}

// OpenInbox migrates the inbox schema and starts its writer.
func OpenInbox(ctx context.Context, d *db.DB) (*Inbox, error) {
	if err := d.Migrate(ctx, "inbox", inboxMigrations); err != nil {
		return nil, err
	}
	ib := &Inbox{
		db:         d,
		reqs:       make(chan *acceptReq, 4096),
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

// Accept stores a verified delivery durably (committed with fsync) and says
// whether it was new, a duplicate, or a re-queued dead letter. It returns
// only after the commit, or with an error when nothing is known to be stored.
func (ib *Inbox) Accept(ctx context.Context, in Incoming) (AcceptResult, error) {
	// Compress here, in parallel across callers, not in the single writer.
	in.Payload = s2.Encode(nil, in.Payload)
	req := &acceptReq{in: in, res: make(chan acceptRes, 1)}
	select {
	case <-ib.closing:
		return 0, ErrClosed
	default:
	}
	select {
	case ib.reqs <- req:
	case <-ib.closing:
		return 0, ErrClosed
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	select {
	case r := <-req.res:
		return r.r, r.err
	case <-ib.stopped:
		// Close won the race: the writer may have answered before stopping.
		select {
		case r := <-req.res:
			return r.r, r.err
		default:
			return 0, ErrClosed
		}
	case <-ctx.Done():
		// The batch may still commit; a redelivery then answers Duplicate.
		return 0, ctx.Err()
	}
}

// Close stops the writer after the batches already queued are written.
func (ib *Inbox) Close() {
	ib.once.Do(func() { close(ib.closing) })
	<-ib.stopped
}

func (ib *Inbox) writer() {
	defer close(ib.stopped)
	batch := make([]*acceptReq, 0, ib.maxBatch)
	var lastEnd time.Time
	for {
		var first *acceptReq
		select {
		case first = <-ib.reqs:
		case <-ib.closing:
			// Fail whatever is still queued: those callers were not acknowledged.
			for {
				select {
				case r := <-ib.reqs:
					r.res <- acceptRes{err: ErrClosed}
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
		results, err := ib.writeBatch(batch)
		lastEnd = time.Now()
		for i, r := range batch {
			if err != nil {
				r.res <- acceptRes{err: err}
			} else {
				r.res <- acceptRes{r: results[i]}
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
func (ib *Inbox) gather(batch []*acceptReq, busy bool) []*acceptReq {
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

func (ib *Inbox) writeBatch(batch []*acceptReq) ([]AcceptResult, error) {
	// The batch must not be abandoned half-way by a caller's cancellation.
	ctx := context.Background()
	tx, err := ib.db.Write.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("inbox: begin: %w", err)
	}
	defer tx.Rollback()
	ins, err := tx.PrepareContext(ctx, `INSERT INTO inbox (delivery_id, event, hook_id, payload, encoding, received_at, next_attempt_at)
		VALUES ($1, $2, $3, $4, 's2', $5, $5) ON CONFLICT (delivery_id) DO NOTHING`)
	if err != nil {
		return nil, fmt.Errorf("inbox: prepare insert: %w", err)
	}
	defer ins.Close()
	var requeue *sql.Stmt
	results := make([]AcceptResult, len(batch))
	// Rows are inserted in delivery id order: replicas given the same
	// deliveries (a load balancer fanning out, GitHub redelivering) then
	// take the unique index's locks in one order and never deadlock.
	order := make([]int, len(batch))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return batch[order[a]].in.ID < batch[order[b]].in.ID })
	for _, i := range order {
		r := batch[i]
		ms := r.in.ReceivedAt.UnixMilli()
		res, err := ins.ExecContext(ctx, r.in.ID, r.in.Event, r.in.HookID, r.in.Payload, ms)
		if err != nil {
			return nil, fmt.Errorf("inbox: insert %s: %w", r.in.ID, err)
		}
		if n, _ := res.RowsAffected(); n == 1 {
			results[i] = Stored
			continue
		}
		if requeue == nil {
			requeue, err = tx.PrepareContext(ctx, `UPDATE inbox SET state = 'pending', attempts = 0,
				next_attempt_at = $1, last_error = '' WHERE delivery_id = $2 AND state = 'dead'`)
			if err != nil {
				return nil, fmt.Errorf("inbox: prepare requeue: %w", err)
			}
			defer requeue.Close()
		}
		res, err = requeue.ExecContext(ctx, ms, r.in.ID)
		if err != nil {
			return nil, fmt.Errorf("inbox: requeue %s: %w", r.in.ID, err)
		}
		if n, _ := res.RowsAffected(); n == 1 {
			results[i] = Requeued
		} else {
			results[i] = Duplicate
		}
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("inbox: commit: %w", err)
	}
	return results, nil
}

// Pending is a due delivery as the dispatcher first sees it.
type Pending struct {
	Seq        int64
	ID         string
	Event      string
	Attempts   int
	ReceivedAt time.Time
}

// Due lists up to limit pending deliveries whose next attempt is due at now,
// in receipt order, starting after sequence number after (0 for the first).
func (ib *Inbox) Due(ctx context.Context, now time.Time, after int64, limit int) ([]Pending, error) {
	rows, err := ib.db.Read.QueryContext(ctx, `SELECT seq, delivery_id, event, attempts, received_at FROM inbox
		WHERE state = 'pending' AND next_attempt_at <= $1 AND seq > $2 ORDER BY seq LIMIT $3`, now.UnixMilli(), after, limit)
	if err != nil {
		return nil, fmt.Errorf("inbox: list due: %w", err)
	}
	defer rows.Close()
	var out []Pending
	for rows.Next() {
		var p Pending
		var ms int64
		if err := rows.Scan(&p.Seq, &p.ID, &p.Event, &p.Attempts, &ms); err != nil {
			return nil, fmt.Errorf("inbox: scan due: %w", err)
		}
		p.ReceivedAt = time.UnixMilli(ms)
		out = append(out, p)
	}
	return out, rows.Err()
}

// NextDue returns when the earliest pending delivery becomes due, if any.
func (ib *Inbox) NextDue(ctx context.Context) (time.Time, bool, error) {
	var ms sql.NullInt64
	err := ib.db.Read.QueryRowContext(ctx, `SELECT MIN(next_attempt_at) FROM inbox WHERE state = 'pending'`).Scan(&ms)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("inbox: next due: %w", err)
	}
	if !ms.Valid {
		return time.Time{}, false, nil
	}
	return time.UnixMilli(ms.Int64), true, nil
}

// Payload loads a delivery's body as GitHub sent it.
func (ib *Inbox) Payload(ctx context.Context, seq int64) ([]byte, error) {
	var p []byte
	var enc string
	if err := ib.db.Read.QueryRowContext(ctx, `SELECT payload, encoding FROM inbox WHERE seq = $1`, seq).Scan(&p, &enc); err != nil {
		return nil, fmt.Errorf("inbox: load payload of #%d: %w", seq, err)
	}
	switch enc {
	case "":
		return p, nil
	case "s2":
		out, err := s2.Decode(nil, p)
		if err != nil {
			return nil, fmt.Errorf("inbox: payload of #%d is corrupt: %w", seq, err)
		}
		return out, nil
	}
	return nil, fmt.Errorf("inbox: payload of #%d has unknown encoding %q", seq, enc)
}

// Claim is a due delivery taken for processing. On PostgreSQL, where
// several replicas drain one inbox (CONTRACT.md §10), it is an open
// transaction holding the delivery's row lock (SELECT … FOR UPDATE SKIP
// LOCKED) and its order key's advisory lock until Complete, Fail or Abandon
// ends it: no other replica can take the delivery, or another delivery about
// the same issue, meanwhile, and a replica that dies releases both with its
// connection. On SQLite one process drains the inbox and a Claim holds
// nothing.
type Claim struct {
	Seq int64
	tx  *sql.Tx
}

// claimBoth takes the advisory lock of an order key (an issue, a pull
// request, an installation; namespaced by schema like the db package's
// named locks) and the delivery's row lock, skipping a row another replica
// holds.
const claimBoth = `SELECT pg_try_advisory_xact_lock(hashtextextended(current_schema() || '/inbox/' || $1, 0)),
	(SELECT seq FROM inbox WHERE seq = $2 AND state = 'pending' AND next_attempt_at <= $3 FOR UPDATE SKIP LOCKED)`

// Claim takes pending delivery seq, due at now, whose order key is key. ok
// is false when the delivery is no longer pending and due, or when another
// replica holds it or another delivery with the same key. The claim's
// transaction lives as long as ctx: cancelling ctx abandons it.
func (ib *Inbox) Claim(ctx context.Context, seq int64, key string, now time.Time) (c *Claim, ok bool, err error) {
	if ib.db.Dialect != db.Postgres {
		return &Claim{Seq: seq}, true, nil
	}
	tx, err := ib.db.Write.BeginTx(ctx, nil)
	if err != nil {
		return nil, false, fmt.Errorf("inbox: begin claim #%d: %w", seq, err)
	}
	// One round trip takes both locks; whichever fails, the rollback
	// releases the other.
	var locked bool
	var row sql.NullInt64
	err = tx.QueryRowContext(ctx, claimBoth, key, seq, now.UnixMilli()).Scan(&locked, &row)
	if err != nil || !locked || !row.Valid {
		tx.Rollback()
		if err != nil {
			return nil, false, fmt.Errorf("inbox: claim #%d: %w", seq, err)
		}
		return nil, false, nil
	}
	return &Claim{Seq: seq, tx: tx}, true, nil
}

// Shared reports whether other replicas may drain this inbox too (it is on
// PostgreSQL).
func (ib *Inbox) Shared() bool { return ib.db.Dialect == db.Postgres }

// Abandon gives a claimed delivery back untouched (no try counted): it stays
// pending for the next scan, on this replica or another.
func (ib *Inbox) Abandon(c *Claim) {
	if c != nil && c.tx != nil {
		c.tx.Rollback()
		c.tx = nil
	}
}

// begin takes the claim's transaction (a claim's transaction serves one
// Complete or Fail), or begins a new one when the claim holds none (SQLite,
// a delivery never claimed, or a Complete that failed before a Fail).
func (ib *Inbox) begin(ctx context.Context, c *Claim) (*sql.Tx, error) {
	if c.tx != nil {
		tx := c.tx
		c.tx = nil
		return tx, nil
	}
	return ib.db.Write.BeginTx(ctx, nil)
}

// Complete marks a claimed delivery done with its outcome. The dispatcher
// calls it only after the delivery's handler returned success, and nothing
// else commits with it: a crash before it leaves the delivery pending, to be
// handled again. If the delivery is no longer pending nothing is written and
// ErrNotPending is returned. The claim ends.
func (ib *Inbox) Complete(ctx context.Context, c *Claim, m Meta, outcome string) error {
	seq := c.Seq
	tx, err := ib.begin(ctx, c)
	if err != nil {
		return fmt.Errorf("inbox: begin complete #%d: %w", seq, err)
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `UPDATE inbox SET state = 'done', done_at = $1, attempts = attempts + 1,
		outcome = $2, last_error = '', action = $3, installation_id = $4, repo = $5, number = $6, sender = $7
		WHERE seq = $8 AND state = 'pending'`,
		time.Now().UnixMilli(), outcome, m.Action, m.Installation, m.Repo, m.Number, m.Sender, seq)
	if err != nil {
		return fmt.Errorf("inbox: complete #%d: %w", seq, err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return ErrNotPending
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("inbox: commit complete #%d: %w", seq, err)
	}
	return nil
}

// Fail records a failed try of a claimed delivery (c may be nil for one
// never claimed, such as a payload that cannot be parsed): it is retried at
// next, or becomes a dead letter when dead is true. The claim ends.
func (ib *Inbox) Fail(ctx context.Context, c *Claim, m Meta, cause string, next time.Time, dead bool) error {
	seq := c.Seq
	state := StatePending
	if dead {
		state = StateDead
	}
	if len(cause) > 2000 {
		cause = cause[:2000]
	}
	tx, err := ib.begin(ctx, c)
	if err != nil {
		return fmt.Errorf("inbox: begin failure of #%d: %w", seq, err)
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `UPDATE inbox SET state = $1, attempts = attempts + 1, last_error = $2,
		next_attempt_at = $3, action = $4, installation_id = $5, repo = $6, number = $7, sender = $8
		WHERE seq = $9 AND state = 'pending'`,
		state, cause, next.UnixMilli(), m.Action, m.Installation, m.Repo, m.Number, m.Sender, seq)
	if err != nil {
		return fmt.Errorf("inbox: record failure of #%d: %w", seq, err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return ErrNotPending
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("inbox: commit failure of #%d: %w", seq, err)
	}
	return nil
}

// Record is one row of the inbox as operators see it.
type Record struct {
	Seq        int64     `json:"seq"`
	ID         string    `json:"id"`
	Event      string    `json:"event"`
	Action     string    `json:"action,omitempty"`
	Repo       string    `json:"repo,omitempty"`
	Number     int       `json:"number,omitempty"`
	Sender     string    `json:"sender,omitempty"`
	State      string    `json:"state"`
	Attempts   int       `json:"attempts"`
	Outcome    string    `json:"outcome,omitempty"`
	LastError  string    `json:"lastError,omitempty"`
	ReceivedAt time.Time `json:"receivedAt"`
	NextTry    time.Time `json:"nextTry"`
}

// List returns the most recent deliveries (newest first), only dead letters
// when failed is true.
func (ib *Inbox) List(ctx context.Context, failed bool, limit int) ([]Record, error) {
	q := `SELECT seq, delivery_id, event, action, repo, number, sender, state, attempts, outcome, last_error,
		received_at, next_attempt_at FROM inbox`
	if failed {
		q += ` WHERE state = 'dead'`
	}
	q += ` ORDER BY seq DESC LIMIT $1`
	rows, err := ib.db.Read.QueryContext(ctx, q, limit)
	if err != nil {
		return nil, fmt.Errorf("inbox: list: %w", err)
	}
	defer rows.Close()
	var out []Record
	for rows.Next() {
		var r Record
		var recv, next int64
		if err := rows.Scan(&r.Seq, &r.ID, &r.Event, &r.Action, &r.Repo, &r.Number, &r.Sender, &r.State,
			&r.Attempts, &r.Outcome, &r.LastError, &recv, &next); err != nil {
			return nil, fmt.Errorf("inbox: list: %w", err)
		}
		r.ReceivedAt, r.NextTry = time.UnixMilli(recv).UTC(), time.UnixMilli(next).UTC()
		out = append(out, r)
	}
	return out, rows.Err()
}

// Retry re-queues dead letters by delivery id. Every id must name a dead
// letter; otherwise nothing is changed and the error names each bad id.
func (ib *Inbox) Retry(ctx context.Context, ids []string) error {
	if len(ids) == 0 {
		return errors.New("retry: no delivery ids given")
	}
	tx, err := ib.db.Write.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("retry: begin: %w", err)
	}
	defer tx.Rollback()
	var bad []string
	now := time.Now().UnixMilli()
	for _, id := range ids {
		var state string
		err := tx.QueryRowContext(ctx, `SELECT state FROM inbox WHERE delivery_id = $1`, id).Scan(&state)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			bad = append(bad, fmt.Sprintf("%s: no such delivery", id))
			continue
		case err != nil:
			return fmt.Errorf("retry %s: %w", id, err)
		case state != StateDead:
			bad = append(bad, fmt.Sprintf("%s: is %s, not a dead letter", id, state))
			continue
		}
		if _, err := tx.ExecContext(ctx, `UPDATE inbox SET state = 'pending', attempts = 0, next_attempt_at = $1,
			last_error = '' WHERE delivery_id = $2`, now, id); err != nil {
			return fmt.Errorf("retry %s: %w", id, err)
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("retry refused, nothing changed: %s", strings.Join(bad, "; "))
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("retry: commit: %w", err)
	}
	return nil
}

// Counts returns how many deliveries are pending and dead.
func (ib *Inbox) Counts(ctx context.Context) (pending, dead int, err error) {
	err = ib.db.Read.QueryRowContext(ctx, `SELECT
		(SELECT COUNT(*) FROM inbox WHERE state = 'pending'),
		(SELECT COUNT(*) FROM inbox WHERE state = 'dead')`).Scan(&pending, &dead)
	if err != nil {
		return 0, 0, fmt.Errorf("inbox: count: %w", err)
	}
	return pending, dead, nil
}

// Prune deletes processed deliveries finished before cutoff. Their ids stop
// de-duplicating then, so cutoff must lie beyond GitHub's redelivery window.
func (ib *Inbox) Prune(ctx context.Context, cutoff time.Time) (int64, error) {
	res, err := ib.db.Write.ExecContext(ctx, `DELETE FROM inbox WHERE state = 'done' AND done_at < $1`, cutoff.UnixMilli())
	if err != nil {
		return 0, fmt.Errorf("inbox: prune: %w", err)
	}
	n, _ := res.RowsAffected()
	return n, nil
}

// Stored reports which of ids the inbox holds (in any state). It reads only;
// the redelivery catch-up uses it to find deliveries warden never stored.
func (ib *Inbox) Stored(ctx context.Context, ids []string) (map[string]bool, error) {
	out := make(map[string]bool, len(ids))
	const chunk = 500
	for start := 0; start < len(ids); start += chunk {
		part := ids[start:min(start+chunk, len(ids))]
		marks := make([]string, len(part))
		args := make([]any, len(part))
		for i, id := range part {
			marks[i], args[i] = fmt.Sprintf("$%d", i+1), id
		}
		rows, err := ib.db.Read.QueryContext(ctx,
			`SELECT delivery_id FROM inbox WHERE delivery_id IN (`+strings.Join(marks, ", ")+`)`, args...)
		if err != nil {
			return nil, fmt.Errorf("inbox: stored: %w", err)
		}
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return nil, fmt.Errorf("inbox: stored: %w", err)
			}
			out[id] = true
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, fmt.Errorf("inbox: stored: %w", err)
		}
	}
	return out, nil
}
