package store

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"slices"
	"time"

	"github.com/wardenhq/warden/gating"
)

// Dispatch outcomes (the dispatches table's outcome column).
const (
	DispatchGranted  = "granted"
	DispatchRefused  = "refused"
	DispatchReleased = "released"
	DispatchComplete = "complete"
)

// Dispatch is one assignment of an agent to an item, as warden handled it
// (schema_dispatch.go).
type Dispatch struct {
	Number     int
	Delivery   string
	Login      string
	Owner      string
	Fence      int64 // the claim's fence; 0 when refused
	AssignedAt time.Time
	Outcome    string
	Reason     string // refused: the exclusion code or the ledger's reason
	Detail     string // refused: the agent-dispatch-refused line's detail
	EndedAt    time.Time
	// ForcedBy is the human whose /backlog dispatch forced it: a maintenance
	// claim taken for the agent, readiness skipped (empty: an assignment).
	ForcedBy string
}

// Forced reports whether d was forced by a human's /backlog dispatch.
func (d Dispatch) Forced() bool { return d.ForcedBy != "" }

// Live reports whether d is a granted dispatch that has not ended.
func (d Dispatch) Live() bool { return d.Outcome == DispatchGranted && d.EndedAt.IsZero() }

// RecordDispatch records d under its delivery id. A delivery already
// recorded is left as it was and returned (recorded false): a redelivery
// answers with what the first delivery did.
func (a *Acts) RecordDispatch(ctx context.Context, repoID int64, d Dispatch) (Dispatch, bool, error) {
	if d.Delivery == "" || d.Number <= 0 || d.Login == "" {
		return Dispatch{}, false, fmt.Errorf("record a dispatch: delivery %q, issue #%d and login %q are all required", d.Delivery, d.Number, d.Login)
	}
	if err := checkText("dispatch detail", d.Detail, 4000); err != nil {
		return Dispatch{}, false, fmt.Errorf("record the dispatch of #%d: %w", d.Number, err)
	}
	res, err := a.db.Write.ExecContext(ctx, `INSERT INTO dispatches (repo_id, number, delivery, login, owner, fence, assigned_at, outcome, reason, detail, ended_at, forced_by)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) ON CONFLICT (repo_id, number, delivery) DO NOTHING`,
		repoID, d.Number, d.Delivery, d.Login, d.Owner, d.Fence, d.AssignedAt.UnixMilli(), d.Outcome, d.Reason, d.Detail, unixMs(d.EndedAt), d.ForcedBy)
	if err != nil {
		return Dispatch{}, false, fmt.Errorf("record the dispatch of #%d: %w", d.Number, err)
	}
	if n, _ := res.RowsAffected(); n > 0 {
		return d, true, nil
	}
	prev, err := a.DispatchByDelivery(ctx, repoID, d.Number, d.Delivery)
	return prev, false, err
}

// DispatchByDelivery is the dispatch recorded for delivery on issue number
// (ErrNotFound when none is).
func (a *Acts) DispatchByDelivery(ctx context.Context, repoID int64, number int, delivery string) (Dispatch, error) {
	ds, err := a.dispatches(ctx, `WHERE repo_id = $1 AND number = $2 AND delivery = $3`, repoID, number, delivery)
	if err != nil {
		return Dispatch{}, err
	}
	if len(ds) == 0 {
		return Dispatch{}, ErrNotFound
	}
	return ds[0], nil
}

// Dispatches lists issue number's dispatches, oldest first.
func (a *Acts) Dispatches(ctx context.Context, repoID int64, number int) ([]Dispatch, error) {
	return a.dispatches(ctx, `WHERE repo_id = $1 AND number = $2`, repoID, number)
}

// LiveDispatches lists issue number's granted dispatches that have not
// ended, oldest first.
func (a *Acts) LiveDispatches(ctx context.Context, repoID int64, number int) ([]Dispatch, error) {
	return a.dispatches(ctx, `WHERE repo_id = $1 AND number = $2 AND outcome = $3 AND ended_at = 0`, repoID, number, DispatchGranted)
}

// AnyLiveDispatch reports whether any item of the repository has a live
// dispatch: the cheap question asked before a pull request's links are
// worked out for one.
func (a *Acts) AnyLiveDispatch(ctx context.Context, repoID int64) (bool, error) {
	var one int
	err := a.db.Read.QueryRowContext(ctx, `SELECT 1 FROM dispatches WHERE repo_id = $1 AND outcome = $2 AND ended_at = 0 LIMIT 1`, repoID, DispatchGranted).Scan(&one)
	if err == sql.ErrNoRows {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("live dispatches of repository %d: %w", repoID, err)
	}
	return true, nil
}

// AllLiveDispatches lists the repository's live dispatches, by item then
// age.
func (a *Acts) AllLiveDispatches(ctx context.Context, repoID int64) ([]Dispatch, error) {
	ds, err := a.dispatches(ctx, `WHERE repo_id = $1 AND outcome = $2 AND ended_at = 0`, repoID, DispatchGranted)
	slices.SortStableFunc(ds, func(x, y Dispatch) int { return cmp.Compare(x.Number, y.Number) })
	return ds, err
}

// EndDispatch ends the live dispatch of issue number with fence: outcome
// (DispatchReleased, DispatchComplete) at `at`. ended is false when no live dispatch has that
// fence (ended already: a redelivery, or another path got there first).
func (a *Acts) EndDispatch(ctx context.Context, repoID int64, number int, fence int64, outcome string, at time.Time) (bool, error) {
	res, err := a.db.Write.ExecContext(ctx, `UPDATE dispatches SET outcome = $4, ended_at = $5
		WHERE repo_id = $1 AND number = $2 AND fence = $3 AND outcome = $6 AND ended_at = 0`,
		repoID, number, fence, outcome, max(at.UnixMilli(), 1), DispatchGranted)
	if err != nil {
		return false, fmt.Errorf("end the dispatch of #%d (fence %d): %w", number, fence, err)
	}
	n, _ := res.RowsAffected()
	return n > 0, nil
}

func (a *Acts) dispatches(ctx context.Context, where string, args ...any) ([]Dispatch, error) {
	rows, err := a.db.Read.QueryContext(ctx, `SELECT number, delivery, login, owner, fence, assigned_at, outcome, reason, detail, ended_at, forced_by
		FROM dispatches `+where+` ORDER BY assigned_at, delivery`, args...)
	if err != nil {
		return nil, fmt.Errorf("read dispatches: %w", err)
	}
	defer rows.Close()
	var out []Dispatch
	for rows.Next() {
		d, err := scanDispatch(rows)
		if err != nil {
			return nil, fmt.Errorf("read dispatches: %w", err)
		}
		out = append(out, d)
	}
	return out, rows.Err()
}

func scanDispatch(rows *sql.Rows) (Dispatch, error) {
	var d Dispatch
	var assigned, ended int64
	if err := rows.Scan(&d.Number, &d.Delivery, &d.Login, &d.Owner, &d.Fence, &assigned, &d.Outcome, &d.Reason, &d.Detail, &ended, &d.ForcedBy); err != nil {
		return Dispatch{}, err
	}
	d.AssignedAt = msTime(assigned)
	if ended > 0 {
		d.EndedAt = msTime(ended)
	}
	return d, nil
}

func unixMs(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// loadDispatchFindings reads, for the snapshot, the items whose latest
// dispatch was refused: one agent-dispatch-refused line each, the detail
// recorded when it was refused. A later dispatch that warden granted ends
// the line.
func loadDispatchFindings(ctx context.Context, q Querier, repoID int64, nums []int, into map[int][]gating.Defect) error {
	err := eachChunk(ctx, q, repoID, nums, `SELECT d.number, d.detail FROM dispatches d
		WHERE d.repo_id = $1 AND d.outcome = 'refused' AND NOT EXISTS (SELECT 1 FROM dispatches e
		WHERE e.repo_id = d.repo_id AND e.number = d.number
		AND (e.assigned_at > d.assigned_at OR (e.assigned_at = d.assigned_at AND e.delivery > d.delivery)))`, "d.number", func(rows *sql.Rows) error {
		var n int
		var detail string
		if err := rows.Scan(&n, &detail); err != nil {
			return err
		}
		into[n] = append(into[n], gating.Defect{Code: gating.CodeAgentDispatchRefused, Item: gating.IDFor(n), Detail: detail})
		return nil
	})
	if err != nil {
		return fmt.Errorf("dispatches: %w", err)
	}
	return nil
}
