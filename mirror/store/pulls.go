package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/wardenhq/warden/gating"
)

// mergeable as stored: GitHub reports true, false or null (not computed yet).
const (
	mergeableUnknown = 0
	mergeableTrue    = 1
	mergeableFalse   = 2
)

// PullRecord is a pull request as warden recorded it.
type PullRecord struct {
	gating.PullRequest
	UpdatedAt time.Time
	// Author is the login that opened it ("" unknown: the stored one
	// stays): a holder's pull request is evidence of its work.
	Author string
}

// RecordPull stores a PR's view unless a newer one is stored. It reports
// whether it applied.
func (l *Ledger) RecordPull(ctx context.Context, repoID int64, p PullRecord) (bool, error) {
	if err := checkPullRecord(p); err != nil {
		return false, err
	}
	mergeable := mergeableUnknown
	if p.Mergeable != nil {
		mergeable = mergeableFalse
		if *p.Mergeable {
			mergeable = mergeableTrue
		}
	}
	var mergedAt int64
	if !p.MergedAt.IsZero() {
		mergedAt = p.MergedAt.UnixMilli()
	}
	res, err := l.db.Write.ExecContext(ctx, `INSERT INTO pull_requests (repo_id, number, state, merged, draft, title, body, head_ref, head_sha,
		head_repo, base_ref, merged_at, mergeable, updated_at, author) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)
		ON CONFLICT (repo_id, number) DO UPDATE SET state = excluded.state, merged = excluded.merged, draft = excluded.draft,
		author = CASE WHEN excluded.author <> '' THEN excluded.author ELSE pull_requests.author END,
		title = excluded.title, body = excluded.body, head_ref = excluded.head_ref, head_sha = excluded.head_sha,
		head_repo = excluded.head_repo, base_ref = excluded.base_ref, merged_at = excluded.merged_at,
		mergeable = excluded.mergeable, updated_at = excluded.updated_at
		WHERE excluded.updated_at >= pull_requests.updated_at`,
		repoID, p.Number, p.State, b2i(p.Merged), b2i(p.Draft), p.Title, p.Body, p.HeadRef, p.HeadSHA, p.HeadRepoFullName,
		p.BaseRef, mergedAt, mergeable, p.UpdatedAt.UnixMilli(), p.Author)
	if err != nil {
		return false, fmt.Errorf("record pull request #%d: %w", p.Number, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("record pull request #%d: %w", p.Number, err)
	}
	return n > 0, nil
}

const pullSelect = `SELECT number, state, merged, draft, title, body, head_ref, head_sha, head_repo, base_ref, merged_at, mergeable, updated_at FROM pull_requests`

func scanPull(rows interface{ Scan(...any) error }) (PullRecord, error) {
	var p PullRecord
	var merged, draft, mergedAt, mergeable, updated int64
	if err := rows.Scan(&p.Number, &p.State, &merged, &draft, &p.Title, &p.Body, &p.HeadRef, &p.HeadSHA, &p.HeadRepoFullName,
		&p.BaseRef, &mergedAt, &mergeable, &updated); err != nil {
		return p, err
	}
	p.Merged, p.Draft = merged == 1, draft == 1
	if mergedAt > 0 {
		p.MergedAt = msTime(mergedAt)
	}
	switch mergeable {
	case mergeableTrue:
		v := true
		p.Mergeable = &v
	case mergeableFalse:
		v := false
		p.Mergeable = &v
	}
	p.UpdatedAt = msTime(updated)
	return p, nil
}

// Pulls returns the repository's recorded PRs matching where (a SQL
// condition on pull_requests with $2... arguments), by number.
func (l *Ledger) pulls(ctx context.Context, repoID int64, where string, args ...any) ([]PullRecord, error) {
	q := pullSelect + ` WHERE repo_id = $1`
	if where != "" {
		q += ` AND ` + where
	}
	rows, err := l.db.Read.QueryContext(ctx, q+` ORDER BY number`, append([]any{repoID}, args...)...)
	if err != nil {
		return nil, fmt.Errorf("pull requests: %w", err)
	}
	defer rows.Close()
	var out []PullRecord
	for rows.Next() {
		p, err := scanPull(rows)
		if err != nil {
			return nil, fmt.Errorf("pull requests: %w", err)
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// OpenPulls returns the repository's open PRs as recorded.
func (l *Ledger) OpenPulls(ctx context.Context, repoID int64) ([]PullRecord, error) {
	return l.pulls(ctx, repoID, `state = $2`, "open")
}

// PullsWithHead returns the recorded open PRs whose head is sha.
func (l *Ledger) PullsWithHead(ctx context.Context, repoID int64, sha string) ([]PullRecord, error) {
	return l.pulls(ctx, repoID, `head_sha = $2 AND state = $3`, sha, "open")
}

// Pull returns one recorded PR (ErrNotFound when none).
func (l *Ledger) Pull(ctx context.Context, repoID int64, number int) (PullRecord, error) {
	ps, err := l.pulls(ctx, repoID, `number = $2`, number)
	if err != nil {
		return PullRecord{}, err
	}
	if len(ps) == 0 {
		return PullRecord{}, fmt.Errorf("pull request #%d: %w", number, ErrNotFound)
	}
	return ps[0], nil
}

// ClosedPullsSince returns the recorded PRs closed (merged or not) whose
// last change is at or after since.
func (l *Ledger) ClosedPullsSince(ctx context.Context, repoID int64, since time.Time) ([]PullRecord, error) {
	return l.pulls(ctx, repoID, `state = $2 AND updated_at >= $3`, "closed", since.UnixMilli())
}

// CheckRunRecord is warden's check run on one head commit.
type CheckRunRecord struct {
	ID          int64
	Conclusion  string
	WrittenHash string
}

func (l *Ledger) CheckRun(ctx context.Context, repoID int64, sha string) (*CheckRunRecord, error) {
	var c CheckRunRecord
	err := l.db.Read.QueryRowContext(ctx, `SELECT check_run_id, conclusion, written_hash FROM check_runs WHERE repo_id = $1 AND head_sha = $2`,
		repoID, sha).Scan(&c.ID, &c.Conclusion, &c.WrittenHash)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("check run on %s: %w", shortSHA(sha), err)
	}
	return &c, nil
}

func (l *Ledger) PutCheckRun(ctx context.Context, repoID int64, sha string, c CheckRunRecord) error {
	_, err := l.db.Write.ExecContext(ctx, `INSERT INTO check_runs (repo_id, head_sha, check_run_id, conclusion, written_hash, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (repo_id, head_sha) DO UPDATE SET check_run_id = excluded.check_run_id,
		conclusion = excluded.conclusion, written_hash = excluded.written_hash, updated_at = excluded.updated_at`,
		repoID, sha, c.ID, c.Conclusion, c.WrittenHash, l.nowMs())
	if err != nil {
		return fmt.Errorf("record the check run on %s: %w", shortSHA(sha), err)
	}
	return nil
}

// checkPullRecord refuses a pull request view that lacks what warden keys
// it by (hostile or truncated payloads are not recorded half).
func checkPullRecord(r PullRecord) error {
	if r.Number <= 0 || r.HeadSHA == "" || (r.State != "open" && r.State != "closed") || r.UpdatedAt.IsZero() {
		return fmt.Errorf("pull request #%d: number, head sha, state (%q) or updated_at missing", r.Number, r.State)
	}
	return nil
}

// shortSHA is a commit's short form for messages.
func shortSHA(sha string) string {
	if sha == "" {
		return "(none)"
	}
	if len(sha) > 7 {
		return sha[:7]
	}
	return sha
}

// MergedPulls are the repository's recorded merged pull requests.
func (l *Ledger) MergedPulls(ctx context.Context, repoID int64) ([]PullRecord, error) {
	return l.pulls(ctx, repoID, `state = $2 AND merged = 1`, "closed")
}
