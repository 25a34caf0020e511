package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/internal/db"
)

// ReportRows is the report comments' rows (report_comments): what each item's report comment holds and its write lease.
type ReportRows struct {
	db *db.DB
	pg bool
}

// ReportRow is one item's report comment row: the desired state (findings,
// refusals, the body rendered from them), what was last written to GitHub,
// whether an edit is pending and when it is due, and the write lease. Times
// are unix milliseconds.
type ReportRow struct {
	// Repo is the item's repository as last recorded (its ID and Number
	// are the row's key).
	Repo   Repo
	Number int
	// CommentID is the report comment on GitHub (0: none recorded).
	CommentID int64
	// Body is the desired comment, as last rendered ("" when none is needed).
	Body string
	// WrittenHash is the hash of the body last written to GitHub ("":
	// unknown, write it again); WrittenAt is when it was written (0: never).
	WrittenHash string
	WrittenAt   int64
	// Findings are the item's open findings; Refusals the newest refusal
	// lines.
	Findings []gating.ReportFinding
	Refusals []string
	// Pending is set while an edit waits to be written; DueAt is when it
	// may be.
	Pending bool
	DueAt   int64
	// LeaseOwner is the writer writing to GitHub ("": none), until
	// LeaseUntil.
	LeaseOwner string
	LeaseUntil int64
}

// ReportRef names one item's report row: its repository as last recorded
// and its issue number.
type ReportRef struct {
	Repo   Repo
	Number int
}

const reportColumns = `full_name, installation, default_branch, comment_id, body, written_hash, written_at,
		findings_json, refusals_json, pending, due_at, lease_owner, lease_until`

// Get reads the item's row without a lock (from the read pool). found is
// false when the item has no row.
func (s *ReportRows) Get(ctx context.Context, repoID int64, number int) (w *ReportRow, found bool, err error) {
	return s.load(ctx, s.db.Read, repoID, number, false)
}

// Update runs fn on the item's row in one write transaction, the row
// locked (FOR UPDATE on PostgreSQL; on SQLite the write transaction already
// excludes other writers), and writes the row back when fn returns save and
// no error. now is read once, when the transaction has begun; fn gets that
// time (unix ms), and it is the row's updated_at.
//
// When the item has no row and create is set, one is inserted (if another
// writer has not inserted it meanwhile) with repo's names and nothing else,
// and read again under the lock, so that fn always decides on the committed
// row. When it has none and create is not set, fn gets a nil row and nothing
// is written.
func (s *ReportRows) Update(ctx context.Context, repo Repo, number int, create bool, now func() time.Time,
	fn func(w *ReportRow, now int64) (save bool, err error)) error {
	tx, err := s.db.Write.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("reports: begin: %w", err)
	}
	defer tx.Rollback()
	at := now().UnixMilli()
	w, found, err := s.load(ctx, tx, repo.ID, number, true)
	if err != nil {
		return err
	}
	if !found && create {
		if _, err := tx.ExecContext(ctx, `INSERT INTO report_comments (repo_id, number, full_name, installation, default_branch, updated_at)
			VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (repo_id, number) DO NOTHING`,
			repo.ID, number, repo.FullName, repo.Installation, repo.DefaultBranch, at); err != nil {
			return fmt.Errorf("report comment of %s: insert: %w", gating.IDFor(number), err)
		}
		if w, found, err = s.load(ctx, tx, repo.ID, number, true); err != nil {
			return err
		} else if !found {
			return fmt.Errorf("report comment of %s: row vanished", gating.IDFor(number))
		}
	}
	save, err := fn(w, at)
	if err != nil {
		return err
	}
	if save && found {
		if err := s.save(ctx, tx, repo.ID, number, w, at); err != nil {
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("reports: commit: %w", err)
	}
	return nil
}

// Due returns the items whose pending edit is due at now (unix ms), the
// earliest due first, at most limit of them.
func (s *ReportRows) Due(ctx context.Context, now int64, limit int) ([]ReportRef, error) {
	rows, err := s.db.Read.QueryContext(ctx, `SELECT repo_id, number, full_name, installation, default_branch
		FROM report_comments WHERE pending = 1 AND due_at <= $1 ORDER BY due_at, repo_id, number LIMIT $2`,
		now, limit)
	if err != nil {
		return nil, fmt.Errorf("due report comments: %w", err)
	}
	defer rows.Close()
	var dues []ReportRef
	for rows.Next() {
		var d ReportRef
		if err := rows.Scan(&d.Repo.ID, &d.Number, &d.Repo.FullName, &d.Repo.Installation, &d.Repo.DefaultBranch); err != nil {
			return nil, fmt.Errorf("due report comments: %w", err)
		}
		dues = append(dues, d)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("due report comments: %w", err)
	}
	return dues, nil
}

// Listed returns the codes of the findings each item's report row of the
// repository holds (what its report comment lists, or is about to once a
// pending edit is written), by issue number; rows listing none are left
// out.
func (s *ReportRows) Listed(ctx context.Context, repoID int64) (map[int][]string, error) {
	rows, err := s.db.Read.QueryContext(ctx, `SELECT number, findings_json FROM report_comments
		WHERE repo_id = $1 AND findings_json <> '[]'`, repoID)
	if err != nil {
		return nil, fmt.Errorf("listed report findings of repository %d: %w", repoID, err)
	}
	defer rows.Close()
	out := map[int][]string{}
	for rows.Next() {
		var n int
		var fj string
		if err := rows.Scan(&n, &fj); err != nil {
			return nil, fmt.Errorf("listed report findings of repository %d: %w", repoID, err)
		}
		var fs []gating.ReportFinding
		if err := json.Unmarshal([]byte(fj), &fs); err != nil {
			return nil, fmt.Errorf("listed report findings of %s: %w", gating.IDFor(n), err)
		}
		for _, f := range fs {
			out[n] = append(out[n], f.Code)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listed report findings of repository %d: %w", repoID, err)
	}
	return out, nil
}

// CommentID returns the id of the item's report comment (0: none).
func (s *ReportRows) CommentID(ctx context.Context, repoID int64, number int) (int64, error) {
	var id int64
	err := s.db.Read.QueryRowContext(ctx, `SELECT comment_id FROM report_comments WHERE repo_id = $1 AND number = $2`,
		repoID, number).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("report comment id of %s: %w", gating.IDFor(number), err)
	}
	return id, nil
}

// load reads an item's row; lock takes its row lock on PostgreSQL (on
// SQLite the write transaction already excludes other writers).
func (s *ReportRows) load(ctx context.Context, q Querier, repoID int64, number int, lock bool) (*ReportRow, bool, error) {
	query := `SELECT ` + reportColumns + `
		FROM report_comments WHERE repo_id = $1 AND number = $2`
	if lock && s.pg {
		query += " FOR UPDATE"
	}
	w := &ReportRow{Number: number}
	w.Repo.ID = repoID
	var fj, rj string
	var pending int64
	err := q.QueryRowContext(ctx, query, repoID, number).Scan(&w.Repo.FullName, &w.Repo.Installation, &w.Repo.DefaultBranch,
		&w.CommentID, &w.Body, &w.WrittenHash, &w.WrittenAt, &fj, &rj, &pending, &w.DueAt, &w.LeaseOwner, &w.LeaseUntil)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("report comment of %s: read: %w", gating.IDFor(number), err)
	}
	w.Pending = pending != 0
	if err := json.Unmarshal([]byte(fj), &w.Findings); err != nil {
		return nil, false, fmt.Errorf("report comment of %s: findings: %w", gating.IDFor(number), err)
	}
	if err := json.Unmarshal([]byte(rj), &w.Refusals); err != nil {
		return nil, false, fmt.Errorf("report comment of %s: refusals: %w", gating.IDFor(number), err)
	}
	return w, true, nil
}

// save writes the row back (it exists: Update found or inserted it).
func (s *ReportRows) save(ctx context.Context, tx *sql.Tx, repoID int64, number int, w *ReportRow, now int64) error {
	fs, rs := w.Findings, w.Refusals
	if fs == nil {
		fs = []gating.ReportFinding{}
	}
	if rs == nil {
		rs = []string{}
	}
	fj, err := json.Marshal(fs)
	if err != nil {
		return fmt.Errorf("report comment of %s: findings: %w", gating.IDFor(number), err)
	}
	rj, err := json.Marshal(rs)
	if err != nil {
		return fmt.Errorf("report comment of %s: refusals: %w", gating.IDFor(number), err)
	}
	pending := 0
	if w.Pending {
		pending = 1
	}
	if _, err := tx.ExecContext(ctx, `UPDATE report_comments SET full_name = $3, installation = $4, default_branch = $5,
		comment_id = $6, body = $7, written_hash = $8, written_at = $9, findings_json = $10, refusals_json = $11,
		pending = $12, due_at = $13, lease_owner = $14, lease_until = $15, updated_at = $16
		WHERE repo_id = $1 AND number = $2`,
		repoID, number, w.Repo.FullName, w.Repo.Installation, w.Repo.DefaultBranch,
		w.CommentID, w.Body, w.WrittenHash, w.WrittenAt, string(fj), string(rj),
		pending, w.DueAt, w.LeaseOwner, w.LeaseUntil, now); err != nil {
		return fmt.Errorf("report comment of %s: write: %w", gating.IDFor(number), err)
	}
	return nil
}
