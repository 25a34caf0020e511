package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/wardenhq/warden/gating"
)

// The records of the transitions warden mirrors to GitHub after an API
// write (schema_transitions.go). Each is written before the ledger write it
// follows, so that a crash between the two leaves a record the timer pass
// finishes (or drops, when the ledger write never committed).

// SubIssueSync is a pending alignment of an item's native parent with its
// partOf.
type SubIssueSync struct {
	Number     int
	FromParent int // the epic's issue before the write (0: none)
	ToParent   int // the epic's issue the write names (0: none)
	Tries      int
	NextAt     time.Time
	LastError  string
	CreatedAt  time.Time // the record's version: Done deletes only this one
}

// PlanSubIssueSync records that item number's parent is to go from `from`
// to `to` (issue numbers, 0 for none), due for the timer pass at due. An
// earlier pending record keeps its from (GitHub may still show it).
func (a *Acts) PlanSubIssueSync(ctx context.Context, repoID int64, number, from, to int, at, due time.Time) error {
	_, err := a.db.Write.ExecContext(ctx, `INSERT INTO subissue_sync (repo_id, number, from_parent, to_parent, tries, next_at, last_error, created_at)
		VALUES ($1, $2, $3, $4, 0, $5, '', $6) ON CONFLICT (repo_id, number) DO UPDATE SET to_parent = excluded.to_parent,
		tries = 0, next_at = excluded.next_at, last_error = '', created_at = excluded.created_at`,
		repoID, number, from, to, due.UnixMilli(), at.UnixMilli())
	if err != nil {
		return fmt.Errorf("record the sub-issue change of #%d: %w", number, err)
	}
	return nil
}

// DoneSubIssueSync deletes the record written at createdAt (a newer one is
// kept).
func (a *Acts) DoneSubIssueSync(ctx context.Context, repoID int64, number int, createdAt time.Time) error {
	if _, err := a.db.Write.ExecContext(ctx, `DELETE FROM subissue_sync WHERE repo_id = $1 AND number = $2 AND created_at = $3`,
		repoID, number, createdAt.UnixMilli()); err != nil {
		return fmt.Errorf("clear the sub-issue change of #%d: %w", number, err)
	}
	return nil
}

// RetrySubIssueSync counts a failed try and sets when the next is due.
func (a *Acts) RetrySubIssueSync(ctx context.Context, repoID int64, number int, createdAt time.Time, why string, next time.Time) error {
	if _, err := a.db.Write.ExecContext(ctx, `UPDATE subissue_sync SET tries = tries + 1, last_error = $4, next_at = $5
		WHERE repo_id = $1 AND number = $2 AND created_at = $3`, repoID, number, createdAt.UnixMilli(), why, next.UnixMilli()); err != nil {
		return fmt.Errorf("record a failed sub-issue change of #%d: %w", number, err)
	}
	return nil
}

// SubIssueSyncs returns the repository's pending records due at or before
// due (all of them with a zero due), oldest first, at most limit.
func (a *Acts) SubIssueSyncs(ctx context.Context, repoID int64, due time.Time, limit int) ([]SubIssueSync, error) {
	until := int64(1<<62 - 1)
	if !due.IsZero() {
		until = due.UnixMilli()
	}
	rows, err := a.db.Read.QueryContext(ctx, `SELECT number, from_parent, to_parent, tries, next_at, last_error, created_at
		FROM subissue_sync WHERE repo_id = $1 AND next_at <= $2 ORDER BY next_at, number LIMIT $3`, repoID, until, limit)
	if err != nil {
		return nil, fmt.Errorf("pending sub-issue changes of repository %d: %w", repoID, err)
	}
	defer rows.Close()
	var out []SubIssueSync
	for rows.Next() {
		var s SubIssueSync
		var next, created int64
		if err := rows.Scan(&s.Number, &s.FromParent, &s.ToParent, &s.Tries, &next, &s.LastError, &created); err != nil {
			return nil, fmt.Errorf("pending sub-issue changes of repository %d: %w", repoID, err)
		}
		s.NextAt, s.CreatedAt = msTime(next), msTime(created)
		out = append(out, s)
	}
	return out, rows.Err()
}

// Stages of a completion's close.
const (
	ClosePending = "pending" // decided once the ledger write is known to have committed
)

// CompleteClose is the close of an item's issue for a recorded completion.
type CompleteClose struct {
	Number      int
	Stage       string // ClosePending, or a gating.CompletionClose decision once made
	CompletedAt time.Time
	ClosedAt    time.Time
	Tries       int
	NextAt      time.Time
	LastError   string
	ReopenedBy  string
	ReopenedAt  time.Time
	ReclosedAt  time.Time
}

// PlanCompleteClose records a completion of item number being written at
// `at` (replacing the record of an earlier completion), due for the timer
// pass at due.
func (a *Acts) PlanCompleteClose(ctx context.Context, repoID int64, number int, at, due time.Time) error {
	_, err := a.db.Write.ExecContext(ctx, `INSERT INTO complete_closes (repo_id, number, stage, completed_at, closed_at, tries, next_at,
		last_error, reopened_by, reopened_at, reclosed_at) VALUES ($1, $2, $3, $4, 0, 0, $5, '', '', 0, 0)
		ON CONFLICT (repo_id, number) DO UPDATE SET stage = excluded.stage, completed_at = excluded.completed_at, closed_at = 0,
		tries = 0, next_at = excluded.next_at, last_error = '', reopened_by = '', reopened_at = 0, reclosed_at = 0`,
		repoID, number, ClosePending, at.UnixMilli(), due.UnixMilli())
	if err != nil {
		return fmt.Errorf("record the completion of #%d: %w", number, err)
	}
	return nil
}

const completeCloseCols = `number, stage, completed_at, closed_at, tries, next_at, last_error, reopened_by, reopened_at, reclosed_at`

func scanCompleteClose(sc interface{ Scan(...any) error }) (CompleteClose, error) {
	var c CompleteClose
	var done, closed, next, reopened, reclosed int64
	err := sc.Scan(&c.Number, &c.Stage, &done, &closed, &c.Tries, &next, &c.LastError, &c.ReopenedBy, &reopened, &reclosed)
	c.CompletedAt, c.NextAt = msTime(done), msTime(next)
	if closed > 0 {
		c.ClosedAt = msTime(closed)
	}
	if reopened > 0 {
		c.ReopenedAt = msTime(reopened)
	}
	if reclosed > 0 {
		c.ReclosedAt = msTime(reclosed)
	}
	return c, err
}

// CompleteCloseOf returns item number's record (nil: none).
func (a *Acts) CompleteCloseOf(ctx context.Context, repoID int64, number int) (*CompleteClose, error) {
	c, err := scanCompleteClose(a.db.Read.QueryRowContext(ctx, `SELECT `+completeCloseCols+` FROM complete_closes
		WHERE repo_id = $1 AND number = $2`, repoID, number))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the completion close of #%d: %w", number, err)
	}
	return &c, nil
}

// PendingCompleteCloses returns the repository's pending closes due at or
// before due, oldest first, at most limit.
func (a *Acts) PendingCompleteCloses(ctx context.Context, repoID int64, due time.Time, limit int) ([]CompleteClose, error) {
	rows, err := a.db.Read.QueryContext(ctx, `SELECT `+completeCloseCols+` FROM complete_closes
		WHERE repo_id = $1 AND stage = $2 AND next_at <= $3 ORDER BY next_at, number LIMIT $4`, repoID, ClosePending, due.UnixMilli(), limit)
	if err != nil {
		return nil, fmt.Errorf("pending completion closes of repository %d: %w", repoID, err)
	}
	defer rows.Close()
	var out []CompleteClose
	for rows.Next() {
		c, err := scanCompleteClose(rows)
		if err != nil {
			return nil, fmt.Errorf("pending completion closes of repository %d: %w", repoID, err)
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// DecideCompleteClose moves the pending close of the completion recorded at
// completedAt to stage (closedAt: when warden closed the issue, zero when
// it did not). It reports whether the record was still that pending one.
func (a *Acts) DecideCompleteClose(ctx context.Context, repoID int64, number int, completedAt time.Time, stage string, closedAt time.Time) (bool, error) {
	var closed int64
	if !closedAt.IsZero() {
		closed = closedAt.UnixMilli()
	}
	res, err := a.db.Write.ExecContext(ctx, `UPDATE complete_closes SET stage = $4, closed_at = $5, last_error = ''
		WHERE repo_id = $1 AND number = $2 AND completed_at = $3 AND stage = $6`,
		repoID, number, completedAt.UnixMilli(), stage, closed, ClosePending)
	if err != nil {
		return false, fmt.Errorf("record the completion close of #%d: %w", number, err)
	}
	n, _ := res.RowsAffected()
	return n > 0, nil
}

// RetryCompleteClose counts a failed try of a pending close.
func (a *Acts) RetryCompleteClose(ctx context.Context, repoID int64, number int, completedAt time.Time, why string, next time.Time) error {
	if _, err := a.db.Write.ExecContext(ctx, `UPDATE complete_closes SET tries = tries + 1, last_error = $4, next_at = $5
		WHERE repo_id = $1 AND number = $2 AND completed_at = $3 AND stage = $6`,
		repoID, number, completedAt.UnixMilli(), why, next.UnixMilli(), ClosePending); err != nil {
		return fmt.Errorf("record a failed completion close of #%d: %w", number, err)
	}
	return nil
}

// DropCompleteClose deletes the pending close of the completion recorded at
// completedAt (its ledger write was refused, or never committed).
func (a *Acts) DropCompleteClose(ctx context.Context, repoID int64, number int, completedAt time.Time) error {
	if _, err := a.db.Write.ExecContext(ctx, `DELETE FROM complete_closes WHERE repo_id = $1 AND number = $2 AND completed_at = $3 AND stage = $4`,
		repoID, number, completedAt.UnixMilli(), ClosePending); err != nil {
		return fmt.Errorf("drop the completion close of #%d: %w", number, err)
	}
	return nil
}

// closedStages are the stages after which the issue was closed for the
// completion (by warden, or before it): a reopening then is reported.
var closedStages = []any{gating.CloseIssue, gating.CloseSkipClosed}

// NoteReopened records that the issue of item number was reopened by `by`
// at `at`, once its completion closed it (or found it closed); the latest
// reopening is kept. It reports whether a record changed.
func (a *Acts) NoteReopened(ctx context.Context, repoID int64, number int, by string, at time.Time) (bool, error) {
	res, err := a.db.Write.ExecContext(ctx, `UPDATE complete_closes SET reopened_by = $3, reopened_at = $4
		WHERE repo_id = $1 AND number = $2 AND reopened_at < $4 AND stage IN ($5, $6)`,
		repoID, number, by, at.UnixMilli(), closedStages[0], closedStages[1])
	if err != nil {
		return false, fmt.Errorf("record the reopening of #%d: %w", number, err)
	}
	n, _ := res.RowsAffected()
	return n > 0, nil
}

// NoteReclosed records that the issue of item number was closed at `at`
// (anyone's close, kept for the record: whether a reopening is listed
// follows the recorded issue state).
func (a *Acts) NoteReclosed(ctx context.Context, repoID int64, number int, at time.Time) error {
	if _, err := a.db.Write.ExecContext(ctx, `UPDATE complete_closes SET reclosed_at = $3 WHERE repo_id = $1 AND number = $2 AND reclosed_at < $3`,
		repoID, number, at.UnixMilli()); err != nil {
		return fmt.Errorf("record the close of #%d: %w", number, err)
	}
	return nil
}

// EdgeRemoval is an edge a pm token removed.
type EdgeRemoval struct {
	Rel       gating.Rel
	Target    string
	Actor     string
	Role      gating.Role
	RemovedAt time.Time
	AckedBy   string
	AckedAt   time.Time
	AckedHow  string
}

// PlanEdgeRemovals records edges of item number being removed (each
// replacing an earlier record of the same edge, acknowledged or not).
func (a *Acts) PlanEdgeRemovals(ctx context.Context, repoID int64, number int, rs []EdgeRemoval) error {
	for _, r := range rs {
		_, err := a.db.Write.ExecContext(ctx, `INSERT INTO edge_removals (repo_id, number, rel, target, actor, role, removed_at, acked_by, acked_at, acked_how)
			VALUES ($1, $2, $3, $4, $5, $6, $7, '', 0, '') ON CONFLICT (repo_id, number, rel, target) DO UPDATE SET actor = excluded.actor,
			role = excluded.role, removed_at = excluded.removed_at, acked_by = '', acked_at = 0, acked_how = ''`,
			repoID, number, string(r.Rel), r.Target, r.Actor, string(r.Role), r.RemovedAt.UnixMilli())
		if err != nil {
			return fmt.Errorf("record the removal of %s %s from #%d: %w", r.Rel, r.Target, number, err)
		}
	}
	return nil
}

// DropEdgeRemovals deletes the unacknowledged records rs wrote (their
// ledger write was refused).
func (a *Acts) DropEdgeRemovals(ctx context.Context, repoID int64, number int, rs []EdgeRemoval) error {
	for _, r := range rs {
		if _, err := a.db.Write.ExecContext(ctx, `DELETE FROM edge_removals WHERE repo_id = $1 AND number = $2 AND rel = $3 AND target = $4
			AND removed_at = $5 AND acked_at = 0`, repoID, number, string(r.Rel), r.Target, r.RemovedAt.UnixMilli()); err != nil {
			return fmt.Errorf("drop the removal of %s %s from #%d: %w", r.Rel, r.Target, number, err)
		}
	}
	return nil
}

// AckEdgeRemovals acknowledges item number's open removals — of the edge
// rel→target, or all of them when rel is "" — by `by` at `at`, how saying
// how ("/backlog resolve", "restored"). It returns how many it acknowledged.
func (a *Acts) AckEdgeRemovals(ctx context.Context, repoID int64, number int, rel gating.Rel, target, by, how string, at time.Time) (int, error) {
	q := `UPDATE edge_removals SET acked_by = $3, acked_at = $4, acked_how = $5 WHERE repo_id = $1 AND number = $2 AND acked_at = 0`
	args := []any{repoID, number, by, at.UnixMilli(), how}
	if rel != "" {
		q += ` AND rel = $6 AND target = $7`
		args = append(args, string(rel), target)
	}
	res, err := a.db.Write.ExecContext(ctx, q, args...)
	if err != nil {
		return 0, fmt.Errorf("acknowledge the edge removals of #%d: %w", number, err)
	}
	n, _ := res.RowsAffected()
	return int(n), nil
}

// EdgeRemovals returns item number's records, open ones only unless all.
func (a *Acts) EdgeRemovals(ctx context.Context, repoID int64, number int, all bool) ([]EdgeRemoval, error) {
	rows, err := a.db.Read.QueryContext(ctx, `SELECT rel, target, actor, role, removed_at, acked_by, acked_at, acked_how FROM edge_removals
		WHERE repo_id = $1 AND number = $2 ORDER BY rel, target`, repoID, number)
	if err != nil {
		return nil, fmt.Errorf("edge removals of #%d: %w", number, err)
	}
	defer rows.Close()
	var out []EdgeRemoval
	for rows.Next() {
		var r EdgeRemoval
		var rel, role string
		var removed, acked int64
		if err := rows.Scan(&rel, &r.Target, &r.Actor, &role, &removed, &r.AckedBy, &acked, &r.AckedHow); err != nil {
			return nil, fmt.Errorf("edge removals of #%d: %w", number, err)
		}
		r.Rel, r.Role, r.RemovedAt = gating.Rel(rel), gating.Role(role), msTime(removed)
		if acked > 0 {
			r.AckedAt = msTime(acked)
		}
		if all || acked == 0 {
			out = append(out, r)
		}
	}
	return out, rows.Err()
}

// loadTransitionFindings reads, for the snapshot, the items' open
// edge-removed lines (unacknowledged removals of edges the item still
// lacks) and reopened-after-complete lines (a reopening after the
// completion's close while the issue is recorded open — the recorded issue
// state keeps GitHub's order, so a close in the reopening's own second ends
// it too — and the item complete).
func loadTransitionFindings(ctx context.Context, q Querier, repoID int64, nums []int, into map[int][]gating.Defect) error {
	err := eachChunk(ctx, q, repoID, nums, `SELECT e.number, e.rel, e.target, e.actor, e.role, e.removed_at FROM edge_removals e
		WHERE e.repo_id = $1 AND e.acked_at = 0 AND NOT EXISTS (SELECT 1 FROM ledger_links l
		WHERE l.repo_id = e.repo_id AND l.number = e.number AND l.rel = e.rel AND l.target = e.target)`, "e.number", func(rows *sql.Rows) error {
		var n int
		var rel, target, actor, role string
		var at int64
		if err := rows.Scan(&n, &rel, &target, &actor, &role, &at); err != nil {
			return err
		}
		into[n] = append(into[n], gating.Defect{Code: gating.CodeEdgeRemoved, Item: gating.IDFor(n),
			Detail: gating.EdgeRemovedDetail(gating.Rel(rel), target, actor, gating.Role(role), msTime(at))})
		return nil
	})
	if err != nil {
		return fmt.Errorf("edge removals: %w", err)
	}
	err = eachChunk(ctx, q, repoID, nums, `SELECT c.number, c.reopened_by, c.reopened_at FROM complete_closes c
		WHERE c.repo_id = $1 AND c.reopened_at > 0 AND EXISTS (SELECT 1 FROM ledger_tags t
		WHERE t.repo_id = c.repo_id AND t.number = c.number AND t.tag = 'state:complete')
		AND EXISTS (SELECT 1 FROM issue_state s WHERE s.repo_id = c.repo_id AND s.number = c.number AND s.state = 'open')`, "c.number", func(rows *sql.Rows) error {
		var n int
		var by string
		var at int64
		if err := rows.Scan(&n, &by, &at); err != nil {
			return err
		}
		into[n] = append(into[n], gating.Defect{Code: gating.CodeReopenedAfterComplete, Item: gating.IDFor(n),
			Detail: gating.ReopenedAfterCompleteDetail(n, by, msTime(at))})
		return nil
	})
	if err != nil {
		return fmt.Errorf("completion reopenings: %w", err)
	}
	return nil
}
