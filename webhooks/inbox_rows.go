package webhooks

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/klauspost/compress/s2"
	"github.com/wardenhq/warden/internal/db"
)

// Payload loads a delivery's body as GitHub sent it.
func (ib *Inbox) Payload(ctx context.Context, seq int64) ([]byte, error) {
	var p []byte
	var enc string
	ib.payloadReads.Add(1)
	if err := ib.st.payload.QueryRowContext(ctx, seq).Scan(&p, &enc); err != nil {
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
// holds, and looks for an earlier due delivery of the key still pending
// (one this replica has not heard of yet: another replica accepted it).
const claimBoth = `SELECT pg_try_advisory_xact_lock(hashtextextended(current_schema() || '/inbox/' || $1, 0)),
	(SELECT seq FROM inbox WHERE seq = $2 AND state = 'pending' AND next_attempt_at <= $3 FOR UPDATE SKIP LOCKED),
	(SELECT MIN(seq) FROM inbox WHERE order_key = $1 AND state = 'pending' AND next_attempt_at <= $3 AND seq < $2)`

// Claim takes pending delivery seq, due at now, whose order key is key. ok
// is false when the delivery is no longer pending and due, when another
// replica holds it or another delivery with the same key, or when an
// earlier due delivery of the key is pending (earlier names it: that one
// runs first). The claim's transaction lives as long as ctx: cancelling
// ctx abandons it.
func (ib *Inbox) Claim(ctx context.Context, seq int64, key string, now time.Time) (c *Claim, ok bool, earlier int64, err error) {
	if ib.db.Dialect != db.Postgres {
		return &Claim{Seq: seq}, true, 0, nil
	}
	tx, err := ib.db.Write.BeginTx(ctx, nil)
	if err != nil {
		return nil, false, 0, fmt.Errorf("inbox: begin claim #%d: %w", seq, err)
	}
	// One round trip takes both locks; whichever fails, the rollback
	// releases the other.
	var locked bool
	var row, first sql.NullInt64
	err = tx.QueryRowContext(ctx, claimBoth, key, seq, now.UnixMilli()).Scan(&locked, &row, &first)
	if err != nil || !locked || !row.Valid || first.Valid {
		tx.Rollback()
		if err != nil {
			return nil, false, 0, fmt.Errorf("inbox: claim #%d: %w", seq, err)
		}
		if locked && first.Valid {
			return nil, false, first.Int64, nil
		}
		return nil, false, 0, nil
	}
	return &Claim{Seq: seq, tx: tx}, true, 0, nil
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

// Complete marks a claimed delivery done with its outcome. The dispatcher
// calls it only after the delivery's handler returned success, and nothing
// else commits with it but other deliveries' bookkeeping: a crash before it
// leaves the delivery pending, to be handled again. If the delivery is no
// longer pending nothing is written and ErrNotPending is returned. The claim
// ends. A claim holding a transaction (PostgreSQL) commits in it; otherwise
// the inbox's writer group-commits it with whatever else is being written.
func (ib *Inbox) Complete(ctx context.Context, c *Claim, outcome string) error {
	if c.tx == nil {
		_, err := ib.submit(ctx, &writeReq{kind: writeComplete, seq: c.Seq, outcome: outcome, res: make(chan writeRes, 1)})
		if err != nil && !errors.Is(err, ErrNotPending) {
			return fmt.Errorf("inbox: complete #%d: %w", c.Seq, err)
		}
		return err
	}
	tx := c.tx
	c.tx = nil
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `UPDATE inbox SET state = 'done', done_at = $1, attempts = attempts + 1,
		outcome = $2, last_error = '' WHERE seq = $3 AND state = 'pending'`, time.Now().UnixMilli(), outcome, c.Seq)
	if err != nil {
		return fmt.Errorf("inbox: complete #%d: %w", c.Seq, err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return ErrNotPending
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("inbox: commit complete #%d: %w", c.Seq, err)
	}
	return nil
}

// Fail records a failed try of a claimed delivery (c may hold no
// transaction): it is retried at next, or becomes a dead letter when dead is
// true. The claim ends.
func (ib *Inbox) Fail(ctx context.Context, c *Claim, cause string, next time.Time, dead bool) error {
	return ib.fail(ctx, c, cause, next, dead, false)
}

// Defer puts a claimed delivery back to wait until next without counting a
// try: what stopped it (a GitHub rate limit) says nothing about the
// delivery, so it must never bring it closer to a dead letter. cause is kept
// as its last error, for operators.
func (ib *Inbox) Defer(ctx context.Context, c *Claim, cause string, next time.Time) error {
	return ib.fail(ctx, c, cause, next, false, true)
}

func (ib *Inbox) fail(ctx context.Context, c *Claim, cause string, next time.Time, dead, deferred bool) error {
	if len(cause) > 2000 {
		cause = cause[:2000]
	}
	if c.tx == nil {
		_, err := ib.submit(ctx, &writeReq{kind: writeFail, seq: c.Seq, cause: cause, next: next, dead: dead,
			deferred: deferred, res: make(chan writeRes, 1)})
		if err != nil && !errors.Is(err, ErrNotPending) {
			return fmt.Errorf("inbox: record failure of #%d: %w", c.Seq, err)
		}
		return err
	}
	tx := c.tx
	c.tx = nil
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, failDelivery, failState(dead), spent(deferred), cause, next.UnixMilli(), c.Seq)
	if err != nil {
		return fmt.Errorf("inbox: record failure of #%d: %w", c.Seq, err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return ErrNotPending
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("inbox: commit failure of #%d: %w", c.Seq, err)
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
	top, err := ib.topQueued(ctx, tx)
	if err != nil {
		return fmt.Errorf("retry: %w", err)
	}
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
		top++
		if _, err := tx.ExecContext(ctx, `UPDATE inbox SET state = 'pending', attempts = 0, next_attempt_at = $1,
			last_error = '', queued = $3 WHERE delivery_id = $2`, now, id, top); err != nil {
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
