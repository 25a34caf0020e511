package webhooks

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/wardenhq/warden/internal/db"
)

// Queued is a pending delivery as the dispatcher's queue holds it: its
// routing facts, read from the inbox's columns (never from the payload).
type Queued struct {
	Seq        int64
	Queued     int64 // the order of its becoming pending (the queued column)
	ID         string
	Event      string
	Attempts   int
	ReceivedAt time.Time
	Due        time.Time // next_attempt_at
	Meta       Meta
	// RouteErr says why the payload cannot be routed: the delivery becomes
	// a dead letter without reaching a handler.
	RouteErr string
	// payload is the body as received when the writer hands the delivery
	// over in memory (nil when read back from the inbox).
	payload []byte
}

// topQueued returns the highest queued number so far. Replicas sharing a
// PostgreSQL inbox number concurrently, so two may take the same numbers and
// commit out of order: a dispatcher reading "queued after N" may then miss
// another replica's delivery for a while. It is not lost: that replica
// queued it itself, a claim of a later delivery of the same key finds it
// (Inbox.Claim), and every replica re-reads the whole queue each minute.
func (ib *Inbox) topQueued(ctx context.Context, tx *sql.Tx) (int64, error) {
	var top int64
	if err := tx.StmtContext(ctx, ib.st.top).QueryRowContext(ctx).Scan(&top); err != nil {
		return 0, fmt.Errorf("inbox: read the queue's numbering: %w", err)
	}
	return top, nil
}

const insertDelivery = `INSERT INTO inbox (delivery_id, event, hook_id, payload, encoding, received_at, next_attempt_at,
	action, installation_id, repo_id, repo, number, sender, sender_type, order_key, routed, route_error, queued)
	VALUES ($1, $2, $3, $4, 's2', $5, $5, $6, $7, $8, $9, $10, $11, $12, $13, 1, $14, $15)
	ON CONFLICT (delivery_id) DO NOTHING RETURNING seq`

const requeueDelivery = `UPDATE inbox SET state = 'pending', attempts = 0, next_attempt_at = $1, last_error = '', queued = $2,
	action = $4, installation_id = $5, repo_id = $6, repo = $7, number = $8, sender = $9, sender_type = $10, order_key = $11,
	routed = 1, route_error = $12
	WHERE delivery_id = $3 AND state = 'dead' RETURNING seq, received_at`

// writeBatch writes one batch in one transaction: accepted deliveries
// (inserted, or dead letters re-queued), then completions and failures. It
// returns each request's answer and the deliveries the batch made pending.
// A statement that fails fails the batch; a completion or failure of a
// delivery no longer pending answers ErrNotPending alone.
func (ib *Inbox) writeBatch(batch []*writeReq) ([]writeRes, []Queued, error) {
	// The batch must not be abandoned half-way by a caller's cancellation.
	ctx := context.Background()
	tx, err := ib.db.Write.BeginTx(ctx, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("inbox: begin: %w", err)
	}
	defer tx.Rollback()
	results := make([]writeRes, len(batch))
	// Rows are inserted in delivery id order: replicas given the same
	// deliveries (a load balancer fanning out, GitHub redelivering) then
	// take the unique index's locks in one order and never deadlock.
	var accepts []int
	for i, r := range batch {
		if r.kind == writeAccept {
			accepts = append(accepts, i)
		}
	}
	sort.SliceStable(accepts, func(a, b int) bool { return batch[accepts[a]].in.ID < batch[accepts[b]].in.ID })
	var queued []Queued
	if len(accepts) > 0 {
		if queued, err = ib.writeAccepts(ctx, tx, batch, accepts, results); err != nil {
			return nil, nil, err
		}
	}
	now := time.Now().UnixMilli()
	var complete, fail *sql.Stmt
	for i, r := range batch {
		var res sql.Result
		switch r.kind {
		case writeComplete:
			if complete == nil {
				complete = tx.StmtContext(ctx, ib.st.complete)
			}
			res, err = complete.ExecContext(ctx, now, r.outcome, r.seq)
		case writeFail:
			if fail == nil {
				fail = tx.StmtContext(ctx, ib.st.fail)
			}
			res, err = fail.ExecContext(ctx, failState(r.dead), spent(r.deferred), r.cause, r.next.UnixMilli(), r.seq)
		default:
			continue
		}
		if err != nil {
			return nil, nil, fmt.Errorf("inbox: record the end of #%d: %w", r.seq, err)
		}
		if n, _ := res.RowsAffected(); n != 1 {
			results[i].err = ErrNotPending
		}
	}
	if err := tx.Commit(); err != nil {
		return nil, nil, fmt.Errorf("inbox: commit: %w", err)
	}
	return results, queued, nil
}

func (ib *Inbox) writeAccepts(ctx context.Context, tx *sql.Tx, batch []*writeReq, order []int, results []writeRes) ([]Queued, error) {
	top, err := ib.topQueued(ctx, tx)
	if err != nil {
		return nil, err
	}
	ins := tx.StmtContext(ctx, ib.st.insert)
	var requeue *sql.Stmt
	var queued []Queued
	for _, i := range order {
		r := batch[i]
		ms := r.in.ReceivedAt.UnixMilli()
		m := r.meta
		q := Queued{Queued: top + 1, ID: r.in.ID, Event: r.in.Event, ReceivedAt: r.in.ReceivedAt, Due: r.in.ReceivedAt,
			Meta: m, RouteErr: r.routeErr, payload: r.raw}
		err := ins.QueryRowContext(ctx, r.in.ID, r.in.Event, r.in.HookID, r.in.Payload, ms,
			m.Action, m.Installation, m.RepoID, m.Repo, m.Number, m.Sender, m.SenderType, m.OrderKey, r.routeErr, q.Queued).Scan(&q.Seq)
		switch {
		case err == nil:
			results[i].r = Stored
			top++
			queued = append(queued, q)
			continue
		case !errors.Is(err, sql.ErrNoRows):
			return nil, fmt.Errorf("inbox: insert %s: %w", r.in.ID, err)
		}
		if requeue == nil {
			requeue = tx.StmtContext(ctx, ib.st.requeue)
		}
		var recv int64
		err = requeue.QueryRowContext(ctx, ms, q.Queued, r.in.ID, m.Action, m.Installation, m.RepoID, m.Repo, m.Number,
			m.Sender, m.SenderType, m.OrderKey, r.routeErr).Scan(&q.Seq, &recv)
		switch {
		case err == nil:
			results[i].r = Requeued
			top++
			q.ReceivedAt = time.UnixMilli(recv)
			queued = append(queued, q)
		case errors.Is(err, sql.ErrNoRows):
			results[i].r = Duplicate
		default:
			return nil, fmt.Errorf("inbox: requeue %s: %w", r.in.ID, err)
		}
	}
	return queued, nil
}

const completeDelivery = `UPDATE inbox SET state = 'done', done_at = $1, attempts = attempts + 1,
	outcome = $2, last_error = '' WHERE seq = $3 AND state = 'pending'`

// failDelivery records a failed try ($2 = 1) or a deferral that spends none
// ($2 = 0: a rate limit's wait, Inbox.Defer).
const failDelivery = `UPDATE inbox SET state = $1, attempts = attempts + $2, last_error = $3,
	next_attempt_at = $4 WHERE seq = $5 AND state = 'pending'`

// spent is how many tries a recorded failure counts.
func spent(deferred bool) int {
	if deferred {
		return 0
	}
	return 1
}

func failState(dead bool) string {
	if dead {
		return StateDead
	}
	return StatePending
}

// statements are the inbox's hot statements, prepared once: the SQLite
// driver then keeps each compiled on its connection instead of parsing the
// SQL again on every call (a fifth of the writer's time before).
type statements struct {
	insert, requeue, complete, fail, top *sql.Stmt // on the write pool
	payload                              *sql.Stmt // on the read pool
}

func prepareStatements(ctx context.Context, d *db.DB) (*statements, error) {
	var st statements
	for _, p := range []struct {
		to   **sql.Stmt
		pool *sql.DB
		sql  string
	}{
		{&st.insert, d.Write, insertDelivery},
		{&st.requeue, d.Write, requeueDelivery},
		{&st.complete, d.Write, completeDelivery},
		{&st.fail, d.Write, failDelivery},
		{&st.top, d.Write, `SELECT COALESCE(MAX(queued), 0) FROM inbox`},
		{&st.payload, d.Read, `SELECT payload, encoding FROM inbox WHERE seq = $1`},
	} {
		s, err := p.pool.PrepareContext(ctx, p.sql)
		if err != nil {
			st.close()
			return nil, fmt.Errorf("inbox: prepare %q: %w", p.sql, err)
		}
		*p.to = s
	}
	return &st, nil
}

func (st *statements) close() {
	for _, s := range []*sql.Stmt{st.insert, st.requeue, st.complete, st.fail, st.top, st.payload} {
		if s != nil {
			s.Close()
		}
	}
}
