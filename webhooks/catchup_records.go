package webhooks

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/wardenhq/warden/internal/db"
)

// The catch-up's record of the redeliveries it asked GitHub for, kept in the
// inbox's database (one row per delivery guid): when it last asked, how
// often, what GitHub answered, and when it may ask again (next_at). A run
// asks for a delivery only once its row is due, and claims it by moving
// next_at in one conditional upsert before asking: of two runs, in one
// process or on two replicas of one PostgreSQL database, one wins the
// claim and the other leaves the delivery alone. The record outlives a
// restart, so a warden started again does not ask again for what it asked
// for minutes before.
//
// The step is the inbox's sixth migration (inboxMigrations lists it),
// written here beside the code that uses it.
var redeliveriesMigration = db.Migration{Version: 6, SQL: `
CREATE TABLE redeliveries (
	delivery_id TEXT PRIMARY KEY,
	event TEXT NOT NULL,
	attempt_id INTEGER NOT NULL,
	first_requested_at INTEGER NOT NULL,
	requested_at INTEGER NOT NULL,
	requests INTEGER NOT NULL,
	outcome TEXT NOT NULL,
	reason TEXT NOT NULL DEFAULT '',
	next_at INTEGER NOT NULL
);
CREATE INDEX redeliveries_requested ON redeliveries (requested_at);
`, Postgres: `
CREATE TABLE redeliveries (
	delivery_id TEXT PRIMARY KEY,
	event TEXT NOT NULL,
	attempt_id BIGINT NOT NULL,
	first_requested_at BIGINT NOT NULL,
	requested_at BIGINT NOT NULL,
	requests BIGINT NOT NULL,
	outcome TEXT NOT NULL,
	reason TEXT NOT NULL DEFAULT '',
	next_at BIGINT NOT NULL
);
CREATE INDEX redeliveries_requested ON redeliveries (requested_at);
`}

// Outcomes of a redelivery request, as recorded.
const (
	redeliveryRequesting = "requesting" // claimed; GitHub's answer not recorded (yet, or the asker died)
	redeliveryAccepted   = "accepted"   // GitHub answered 202
	redeliveryRefused    = "refused"    // GitHub refused, or the request failed: reason says why
)

// redelivery is the record of the requests for one delivery's redelivery.
type redelivery struct {
	guid, event string
	attempt     int64     // the delivery-log row last asked for
	first       time.Time // the first request
	requested   time.Time // the last request (identifies its claim)
	requests    int       // requests made, the last included
	outcome     string
	reason      string    // why GitHub refused the last request
	next        time.Time // not asked for again before
}

// redeliveryLog keeps the catch-up's redelivery records. *Inbox keeps them
// in its database; memoryRedeliveries serves any other StoredChecker.
type redeliveryLog interface {
	// redeliveries returns the records of those of guids that have one.
	redeliveries(ctx context.Context, guids []string) (map[string]redelivery, error)
	// claimRedelivery records r as requested now (r.requested) if the
	// delivery has no record or its record is due by then; false if
	// another run holds it.
	claimRedelivery(ctx context.Context, r redelivery) (bool, error)
	// settleRedelivery records GitHub's answer to the claim r made
	// (r.outcome, r.reason, r.next), unless a later claim replaced it.
	settleRedelivery(ctx context.Context, r redelivery) error
	// pruneRedeliveries deletes the records last requested before cutoff.
	pruneRedeliveries(ctx context.Context, cutoff time.Time) (int64, error)
}

func (ib *Inbox) redeliveries(ctx context.Context, guids []string) (map[string]redelivery, error) {
	out := make(map[string]redelivery, len(guids))
	const chunk = 500
	for start := 0; start < len(guids); start += chunk {
		part := guids[start:min(start+chunk, len(guids))]
		marks := make([]string, len(part))
		args := make([]any, len(part))
		for i, g := range part {
			marks[i], args[i] = fmt.Sprintf("$%d", i+1), g
		}
		if err := ib.readRedeliveries(ctx, out, `SELECT delivery_id, event, attempt_id, first_requested_at, requested_at,
			requests, outcome, reason, next_at FROM redeliveries WHERE delivery_id IN (`+strings.Join(marks, ", ")+`)`, args...); err != nil {
			return nil, fmt.Errorf("inbox: read the redeliveries asked for: %w", err)
		}
	}
	return out, nil
}

func (ib *Inbox) readRedeliveries(ctx context.Context, out map[string]redelivery, query string, args ...any) error {
	rows, err := ib.db.Read.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var r redelivery
		var first, requested, next int64
		if err := rows.Scan(&r.guid, &r.event, &r.attempt, &first, &requested, &r.requests, &r.outcome, &r.reason, &next); err != nil {
			return err
		}
		r.first, r.requested, r.next = time.UnixMilli(first), time.UnixMilli(requested), time.UnixMilli(next)
		out[r.guid] = r
	}
	return rows.Err()
}

func (ib *Inbox) claimRedelivery(ctx context.Context, r redelivery) (bool, error) {
	// One statement, so that of two runs claiming at once one inserts or
	// updates the row and the other finds it not due and changes nothing.
	res, err := ib.db.Write.ExecContext(ctx, `INSERT INTO redeliveries
		(delivery_id, event, attempt_id, first_requested_at, requested_at, requests, outcome, reason, next_at)
		VALUES ($1, $2, $3, $4, $4, 1, $5, '', $6)
		ON CONFLICT (delivery_id) DO UPDATE SET event = excluded.event, attempt_id = excluded.attempt_id,
			requested_at = excluded.requested_at, requests = redeliveries.requests + 1,
			outcome = excluded.outcome, next_at = excluded.next_at
		WHERE redeliveries.next_at <= excluded.requested_at`,
		r.guid, r.event, r.attempt, r.requested.UnixMilli(), redeliveryRequesting, r.next.UnixMilli())
	if err != nil {
		return false, fmt.Errorf("inbox: claim the redelivery of %s: %w", r.guid, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("inbox: claim the redelivery of %s: %w", r.guid, err)
	}
	return n == 1, nil
}

func (ib *Inbox) settleRedelivery(ctx context.Context, r redelivery) error {
	if _, err := ib.db.Write.ExecContext(ctx, `UPDATE redeliveries SET outcome = $1, reason = $2, next_at = $3
		WHERE delivery_id = $4 AND requested_at = $5`,
		r.outcome, r.reason, r.next.UnixMilli(), r.guid, r.requested.UnixMilli()); err != nil {
		return fmt.Errorf("inbox: record GitHub's answer to the redelivery of %s: %w", r.guid, err)
	}
	return nil
}

func (ib *Inbox) pruneRedeliveries(ctx context.Context, cutoff time.Time) (int64, error) {
	res, err := ib.db.Write.ExecContext(ctx, `DELETE FROM redeliveries WHERE requested_at < $1`, cutoff.UnixMilli())
	if err != nil {
		return 0, fmt.Errorf("inbox: prune the redeliveries asked for: %w", err)
	}
	n, _ := res.RowsAffected()
	return n, nil
}

// memoryLog keeps redelivery records in this process, for a catch-up whose
// StoredChecker is not an *Inbox: runs in one process still ask once.
type memoryLog struct {
	mu   sync.Mutex
	recs map[string]redelivery
}

// memoryRedeliveries is the process's record for catch-ups on a
// StoredChecker other than *Inbox (guids are unique across GitHub).
var memoryRedeliveries = &memoryLog{recs: map[string]redelivery{}}

func (m *memoryLog) redeliveries(_ context.Context, guids []string) (map[string]redelivery, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]redelivery{}
	for _, g := range guids {
		if r, ok := m.recs[g]; ok {
			out[g] = r
		}
	}
	return out, nil
}

func (m *memoryLog) claimRedelivery(_ context.Context, r redelivery) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	old, ok := m.recs[r.guid]
	if ok && old.next.After(r.requested) {
		return false, nil
	}
	r.first, r.requests, r.outcome = r.requested, 1, redeliveryRequesting
	if ok {
		r.first, r.requests, r.reason = old.first, old.requests+1, old.reason
	}
	m.recs[r.guid] = r
	return true, nil
}

func (m *memoryLog) settleRedelivery(_ context.Context, r redelivery) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if old, ok := m.recs[r.guid]; ok && old.requested.Equal(r.requested) {
		old.outcome, old.reason, old.next = r.outcome, r.reason, r.next
		m.recs[r.guid] = old
	}
	return nil
}

func (m *memoryLog) pruneRedeliveries(_ context.Context, cutoff time.Time) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var n int64
	for g, r := range m.recs {
		if r.requested.Before(cutoff) {
			delete(m.recs, g)
			n++
		}
	}
	return n, nil
}
