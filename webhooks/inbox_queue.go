package webhooks

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// queuedSelect reads a pending delivery's routing facts from its columns.
const queuedSelect = `SELECT seq, queued, delivery_id, event, attempts, received_at, next_attempt_at, routed, route_error,
	action, installation_id, repo_id, repo, number, sender, sender_type, order_key FROM inbox`

// queuedSince lists up to limit pending deliveries queued after number
// after, in queued order, through the queued index: what became pending
// since a dispatcher last looked. Deliveries stored by an earlier warden
// (their routing columns empty) are routed first, from their payloads, and
// their columns filled, once.
func (ib *Inbox) queuedSince(ctx context.Context, after int64, limit int) ([]Queued, error) {
	return ib.queuedWhere(ctx, ` WHERE state = 'pending' AND queued > $1 ORDER BY queued LIMIT $2`, after, limit)
}

// queuedWhere reads pending deliveries' routing facts, routing those an
// earlier warden stored.
func (ib *Inbox) queuedWhere(ctx context.Context, where string, args ...any) ([]Queued, error) {
	rows, err := ib.db.Read.QueryContext(ctx, queuedSelect+where, args...)
	if err != nil {
		return nil, fmt.Errorf("inbox: list queued: %w", err)
	}
	var out []Queued
	var legacy []int
	for rows.Next() {
		var q Queued
		var recv, due int64
		var routed int
		m := &q.Meta
		if err := rows.Scan(&q.Seq, &q.Queued, &q.ID, &q.Event, &q.Attempts, &recv, &due, &routed, &q.RouteErr,
			&m.Action, &m.Installation, &m.RepoID, &m.Repo, &m.Number, &m.Sender, &m.SenderType, &m.OrderKey); err != nil {
			rows.Close()
			return nil, fmt.Errorf("inbox: scan queued: %w", err)
		}
		q.ReceivedAt, q.Due = time.UnixMilli(recv), time.UnixMilli(due)
		ib.queueRowsRead.Add(1)
		if routed == 0 {
			legacy = append(legacy, len(out))
		}
		out = append(out, q)
	}
	err = rows.Err()
	rows.Close()
	if err != nil {
		return nil, fmt.Errorf("inbox: list queued: %w", err)
	}
	if len(legacy) > 0 {
		if err := ib.routeLegacy(ctx, out, legacy); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// routeLegacy reads the routing facts of deliveries stored before the inbox
// kept them (out[i] for i in which) from their payloads, and records them.
func (ib *Inbox) routeLegacy(ctx context.Context, out []Queued, which []int) error {
	tx, err := ib.db.Write.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("inbox: begin routing stored deliveries: %w", err)
	}
	defer tx.Rollback()
	for _, i := range which {
		q := &out[i]
		payload, err := ib.Payload(ctx, q.Seq)
		if err != nil {
			return err
		}
		m, perr := ParseMeta(q.Event, payload)
		q.Meta, q.RouteErr = m, ""
		if perr != nil {
			q.RouteErr = perr.Error()
		}
		if _, err := tx.ExecContext(ctx, `UPDATE inbox SET action = $1, installation_id = $2, repo_id = $3, repo = $4,
			number = $5, sender = $6, sender_type = $7, order_key = $8, routed = 1, route_error = $9 WHERE seq = $10`,
			m.Action, m.Installation, m.RepoID, m.Repo, m.Number, m.Sender, m.SenderType, m.OrderKey, q.RouteErr, q.Seq); err != nil {
			return fmt.Errorf("inbox: record the routing of #%d: %w", q.Seq, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("inbox: commit routing stored deliveries: %w", err)
	}
	return nil
}

// queuedOne reads pending delivery seq's routing facts (ok false when it
// is no longer pending).
func (ib *Inbox) queuedOne(ctx context.Context, seq int64) (Queued, bool, error) {
	qs, err := ib.queuedWhere(ctx, ` WHERE state = 'pending' AND seq = $1`, seq)
	if err != nil || len(qs) == 0 {
		return Queued{}, false, err
	}
	return qs[0], true, nil
}

// deliveryState is where a delivery stands now: its state, and when a
// pending one is next due.
type deliveryState struct {
	State    string
	Due      time.Time
	Attempts int
}

// stateOf reads delivery seq's state; a delivery no longer in the inbox
// (pruned) reads as done.
func (ib *Inbox) stateOf(ctx context.Context, seq int64) (deliveryState, error) {
	var st deliveryState
	var due int64
	err := ib.db.Read.QueryRowContext(ctx, `SELECT state, next_attempt_at, attempts FROM inbox WHERE seq = $1`, seq).
		Scan(&st.State, &due, &st.Attempts)
	if errors.Is(err, sql.ErrNoRows) {
		return deliveryState{State: StateDone}, nil
	}
	if err != nil {
		return st, fmt.Errorf("inbox: read the state of #%d: %w", seq, err)
	}
	st.Due = time.UnixMilli(due)
	return st, nil
}
