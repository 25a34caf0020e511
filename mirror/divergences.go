package mirror

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/internal/db"
)

// The reconcile's divergences between the ledger and GitHub (CONTRACT.md
// §8, §9; the PM's reconcile table): item_divergences holds each item's,
// repo_divergences the repository's (a pull request linking no item). Both
// are recomputed whole from what warden recorded (cheap: no GitHub call),
// after a pass read GitHub and whenever a pull request closes; the snapshot
// reports the items' ones with the ready set's defects, the report comment
// lists them, and they leave when resolved.
var divergenceMigrations = []db.Migration{
	{Version: 1, SQL: `CREATE TABLE item_divergences (
	repo_id BIGINT NOT NULL,
	number BIGINT NOT NULL,
	code TEXT NOT NULL,
	detail TEXT NOT NULL,
	PRIMARY KEY (repo_id, number, code, detail))`},
	{Version: 2, SQL: `CREATE TABLE repo_divergences (
	repo_id BIGINT NOT NULL,
	code TEXT NOT NULL,
	detail TEXT NOT NULL,
	PRIMARY KEY (repo_id, code, detail))`},
}

// setGreen records whether a PR's head is green (read by the reconcile).
func (l *Ledger) setGreen(ctx context.Context, repoID int64, number int, sha string, green bool) error {
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

// greens returns the open PRs whose current head was read green.
func (l *Ledger) greens(ctx context.Context, repoID int64) (map[int]bool, error) {
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

// issueFacts returns what warden recorded of each item's issue.
func (l *Ledger) issueFacts(ctx context.Context, repoID int64) (map[int]gating.IssueFacts, error) {
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

// replaceDivergences stores the repository's divergences, replacing the
// previous set, and returns the items whose findings changed.
func (l *Ledger) replaceDivergences(ctx context.Context, repoID int64, ds []gating.Defect) ([]int, error) {
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

// divergences computes the repository's divergences from what warden
// recorded (gating.Divergences), storing nothing.
func (m *Mirror) divergences(ctx context.Context, repo Repo) ([]gating.Defect, error) {
	f, err := m.repoFacts(ctx, repo)
	if err != nil {
		return nil, err
	}
	return gating.Divergences(f), nil
}

// repoFacts gathers what the divergences read from warden's records: the
// snapshot, the issues' states, the open and merged pull requests with
// their links, and the heads last read green.
func (m *Mirror) repoFacts(ctx context.Context, repo Repo) (gating.RepoFacts, error) {
	var f gating.RepoFacts
	rs, err := m.Ledger.Snapshot(ctx, repo.ID)
	if err != nil {
		return f, err
	}
	issues, err := m.Ledger.issueFacts(ctx, repo.ID)
	if err != nil {
		return f, err
	}
	open, err := m.Ledger.OpenPulls(ctx, repo.ID)
	if err != nil {
		return f, err
	}
	merged, err := m.Ledger.pulls(ctx, repo.ID, `state = $2 AND merged = 1`, "closed")
	if err != nil {
		return f, err
	}
	greens, err := m.Ledger.greens(ctx, repo.ID)
	if err != nil {
		return f, err
	}
	f = gating.RepoFacts{Snapshot: rs.Snapshot, RepoFullName: repo.FullName, Issues: issues, Green: greens,
		Links: map[int][]gating.PRLink{}}
	for _, p := range open {
		f.OpenPRs = append(f.OpenPRs, p.PullRequest)
		f.Links[p.Number] = gating.PRLinks(p.PullRequest, repo.FullName, rs.Snapshot)
	}
	for _, p := range merged {
		f.MergedPRs = append(f.MergedPRs, p.PullRequest)
		f.Links[p.Number] = gating.PRLinks(p.PullRequest, repo.FullName, rs.Snapshot)
	}
	return f, nil
}

// refreshDivergences recomputes the repository's divergences from what
// warden recorded, stores them, and returns the items whose findings
// changed (their report comments are the caller's to settle). No GitHub
// call.
func (m *Mirror) refreshDivergences(ctx context.Context, repo Repo) ([]int, error) {
	ds, err := m.divergences(ctx, repo)
	if err != nil {
		return nil, err
	}
	return m.Ledger.replaceDivergences(ctx, repo.ID, ds)
}

// reconcileItems re-derives the divergences after a change that bears on
// some items (a pull request merged or closed, an item completed or
// released), and settles each item whose findings changed (its report
// comment). The whole set is recomputed from the ledger.
func (m *Mirror) reconcileItems(ctx context.Context, repo Repo) error {
	changed, err := m.refreshDivergences(ctx, repo)
	if err != nil {
		return err
	}
	for _, n := range changed {
		if _, err := m.settleItem(ctx, repo, n); err != nil {
			return err
		}
	}
	return nil
}
