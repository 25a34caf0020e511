package store

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"

	"github.com/wardenhq/warden/gating"
)

// SetGreen records whether a PR's head is green (read by the reconcile).
func (l *Ledger) SetGreen(ctx context.Context, repoID int64, number int, sha string, green bool) error {
	v := 2
	if green {
		v = 1
	}
	if _, err := l.db.Write.ExecContext(ctx, `UPDATE pull_requests SET green = $1, green_sha = $2 WHERE repo_id = $3 AND number = $4`,
		v, sha, repoID, number); err != nil {
		return fmt.Errorf("record whether #%d is green: %w", number, err)
	}
	return nil
}

// Greens returns the open PRs whose current head was read green.
func (l *Ledger) Greens(ctx context.Context, repoID int64) (map[int]bool, error) {
	rows, err := l.db.Read.QueryContext(ctx, `SELECT number FROM pull_requests WHERE repo_id = $1 AND state = 'open' AND green = 1 AND green_sha = head_sha`, repoID)
	if err != nil {
		return nil, fmt.Errorf("green pull requests: %w", err)
	}
	defer rows.Close()
	out := map[int]bool{}
	for rows.Next() {
		var n int
		if err := rows.Scan(&n); err != nil {
			return nil, fmt.Errorf("green pull requests: %w", err)
		}
		out[n] = true
	}
	return out, rows.Err()
}

// IssueFacts returns what warden recorded of each item's issue.
func (l *Ledger) IssueFacts(ctx context.Context, repoID int64) (map[int]gating.IssueFacts, error) {
	rows, err := l.db.Read.QueryContext(ctx, `SELECT number, state FROM issue_state WHERE repo_id = $1`, repoID)
	if err != nil {
		return nil, fmt.Errorf("issue states: %w", err)
	}
	defer rows.Close()
	out := map[int]gating.IssueFacts{}
	for rows.Next() {
		var n int
		var st string
		if err := rows.Scan(&n, &st); err != nil {
			return nil, fmt.Errorf("issue states: %w", err)
		}
		f := gating.IssueFacts{Number: n, State: st, Exists: true}
		if st == IssueDeleted || st == IssueTransferred {
			f.Exists, f.State = false, st
		}
		out[n] = f
	}
	return out, rows.Err()
}

// ReplaceDivergences stores the repository's divergences, replacing the
// previous set, and returns the items whose findings changed.
func (l *Ledger) ReplaceDivergences(ctx context.Context, repoID int64, ds []gating.Defect) ([]int, error) {
	var changed []int
	err := l.writeTx(ctx, func(tx *sql.Tx) error {
		old := map[int][]string{}
		rows, err := tx.QueryContext(ctx, `SELECT number, code, detail FROM item_divergences WHERE repo_id = $1`, repoID)
		if err != nil {
			return fmt.Errorf("divergences: %w", err)
		}
		for rows.Next() {
			var n int
			var c, d string
			if err := rows.Scan(&n, &c, &d); err != nil {
				rows.Close()
				return fmt.Errorf("divergences: %w", err)
			}
			old[n] = append(old[n], c+"\x00"+d)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("divergences: %w", err)
		}
		cur := map[int][]string{}
		var repoLevel []gating.Defect
		for _, d := range ds {
			if d.Item == "" {
				repoLevel = append(repoLevel, d)
				continue
			}
			cur[d.Item.Number()] = append(cur[d.Item.Number()], d.Code+"\x00"+d.Detail)
		}
		for n, v := range old {
			slices.Sort(v)
			w := slices.Compact(slices.Sorted(slices.Values(cur[n])))
			if !slices.Equal(slices.Compact(v), w) {
				changed = append(changed, n)
			}
		}
		for n := range cur {
			if _, ok := old[n]; !ok {
				changed = append(changed, n)
			}
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM item_divergences WHERE repo_id = $1`, repoID); err != nil {
			return fmt.Errorf("divergences: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM repo_divergences WHERE repo_id = $1`, repoID); err != nil {
			return fmt.Errorf("divergences: %w", err)
		}
		for n, v := range cur {
			for _, cd := range slices.Compact(slices.Sorted(slices.Values(v))) {
				c, d, _ := strings.Cut(cd, "\x00")
				if _, err := tx.ExecContext(ctx, `INSERT INTO item_divergences (repo_id, number, code, detail) VALUES ($1, $2, $3, $4)
					ON CONFLICT DO NOTHING`, repoID, n, c, d); err != nil {
					return fmt.Errorf("divergences: %w", err)
				}
			}
		}
		for _, d := range repoLevel {
			if _, err := tx.ExecContext(ctx, `INSERT INTO repo_divergences (repo_id, code, detail) VALUES ($1, $2, $3)
				ON CONFLICT DO NOTHING`, repoID, d.Code, d.Detail); err != nil {
				return fmt.Errorf("divergences: %w", err)
			}
		}
		return nil
	})
	slices.Sort(changed)
	return changed, err
}

// RepoDivergences returns the repository's divergences that name no item
// (a pull request linking none).
func (l *Ledger) RepoDivergences(ctx context.Context, repoID int64) ([]gating.Defect, error) {
	rows, err := l.db.Read.QueryContext(ctx, `SELECT code, detail FROM repo_divergences WHERE repo_id = $1 ORDER BY code, detail`, repoID)
	if err != nil {
		return nil, fmt.Errorf("repository divergences: %w", err)
	}
	defer rows.Close()
	var out []gating.Defect
	for rows.Next() {
		var d gating.Defect
		if err := rows.Scan(&d.Code, &d.Detail); err != nil {
			return nil, fmt.Errorf("repository divergences: %w", err)
		}
		out = append(out, d)
	}
	return out, rows.Err()
}
