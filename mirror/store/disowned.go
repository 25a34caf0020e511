package store

import (
	"context"
	"fmt"
	"time"
)

// Disowning is a recorded /backlog undelivered ruling: a human ruled that
// merged pull request PR did not deliver item Number, so it makes no
// merged-not-complete for that item.
type Disowning struct {
	Number int
	PR     int
	By     string
	At     time.Time
}

// Disown records the ruling of by, at at, that pull request pr did not
// deliver item number. The first ruling is kept: recording it again changes
// nothing and answers false.
func (a *Acts) Disown(ctx context.Context, repoID int64, number, pr int, by string, at time.Time) (bool, error) {
	res, err := a.db.Write.ExecContext(ctx, `INSERT INTO pr_disowned (repo_id, number, pr, disowned_by, disowned_at)
		VALUES ($1, $2, $3, $4, $5) ON CONFLICT (repo_id, number, pr) DO NOTHING`, repoID, number, pr, by, at.UnixMilli())
	if err != nil {
		return false, fmt.Errorf("record that pull request #%d did not deliver #%d: %w", pr, number, err)
	}
	k, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("record that pull request #%d did not deliver #%d: %w", pr, number, err)
	}
	return k == 1, nil
}

// Disownings returns the rulings recorded for item number, by pull request
// number.
func (a *Acts) Disownings(ctx context.Context, repoID int64, number int) ([]Disowning, error) {
	rows, err := a.db.Read.QueryContext(ctx, `SELECT pr, disowned_by, disowned_at FROM pr_disowned
		WHERE repo_id = $1 AND number = $2 ORDER BY pr`, repoID, number)
	if err != nil {
		return nil, fmt.Errorf("read the undelivered rulings of #%d: %w", number, err)
	}
	defer rows.Close()
	var out []Disowning
	for rows.Next() {
		d := Disowning{Number: number}
		var at int64
		if err := rows.Scan(&d.PR, &d.By, &at); err != nil {
			return nil, fmt.Errorf("read the undelivered rulings of #%d: %w", number, err)
		}
		d.At = msTime(at)
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the undelivered rulings of #%d: %w", number, err)
	}
	return out, nil
}

// DisownedPRs returns, by item number, the pull requests a human ruled did
// not deliver that item, in number order (gating.RepoFacts.Disowned).
func (l *Ledger) DisownedPRs(ctx context.Context, repoID int64) (map[int][]int, error) {
	rows, err := l.db.Read.QueryContext(ctx, `SELECT number, pr FROM pr_disowned WHERE repo_id = $1 ORDER BY number, pr`, repoID)
	if err != nil {
		return nil, fmt.Errorf("undelivered rulings of repository %d: %w", repoID, err)
	}
	defer rows.Close()
	out := map[int][]int{}
	for rows.Next() {
		var n, pr int
		if err := rows.Scan(&n, &pr); err != nil {
			return nil, fmt.Errorf("undelivered rulings of repository %d: %w", repoID, err)
		}
		out[n] = append(out[n], pr)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("undelivered rulings of repository %d: %w", repoID, err)
	}
	return out, nil
}
