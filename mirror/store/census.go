package store

import (
	"context"
	"fmt"
	"time"
)

// What the reconcile's census compares each listed issue with, read once
// per pass: which issues are items, and when each recorded issue and pull
// request last changed as warden recorded it.

// ItemNumbers are the issue numbers of the repository's items (the census
// asks which labelled issues are not items yet).
func (l *Ledger) ItemNumbers(ctx context.Context, repoID int64) (map[int]bool, error) {
	out := map[int]bool{}
	err := l.perNumber(ctx, `SELECT number, 0 FROM ledger_items WHERE repo_id = $1`, repoID, func(n int, _ int64) { out[n] = true })
	if err != nil {
		return nil, fmt.Errorf("item numbers of repository %d: %w", repoID, err)
	}
	return out, nil
}

// PullsUpdatedAt is when GitHub last changed each recorded pull request, as
// recorded (the census reads again a PR its listing shows newer).
func (l *Ledger) PullsUpdatedAt(ctx context.Context, repoID int64) (map[int]time.Time, error) {
	out := map[int]time.Time{}
	err := l.perNumber(ctx, `SELECT number, updated_at FROM pull_requests WHERE repo_id = $1`, repoID, func(n int, at int64) { out[n] = msTime(at) })
	if err != nil {
		return nil, fmt.Errorf("pull requests of repository %d: %w", repoID, err)
	}
	return out, nil
}

// IssuesUpdatedAt is, per recorded issue, the updated_at its recorded
// state carries (the census reads again the comments of an item whose
// issue GitHub lists as changed after it: deliveries were missed).
func (l *Ledger) IssuesUpdatedAt(ctx context.Context, repoID int64) (map[int]time.Time, error) {
	out := map[int]time.Time{}
	err := l.perNumber(ctx, `SELECT number, updated_at FROM issue_state WHERE repo_id = $1`, repoID, func(n int, at int64) { out[n] = msTime(at) })
	if err != nil {
		return nil, fmt.Errorf("issue states of repository %d: %w", repoID, err)
	}
	return out, nil
}

// perNumber runs query (selecting a number and an integer for repoID) and
// hands each row to row.
func (l *Ledger) perNumber(ctx context.Context, query string, repoID int64, row func(n int, v int64)) error {
	rows, err := l.db.Read.QueryContext(ctx, query, repoID)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var n int
		var v int64
		if err := rows.Scan(&n, &v); err != nil {
			return err
		}
		row(n, v)
	}
	return rows.Err()
}
