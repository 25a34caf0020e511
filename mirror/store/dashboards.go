package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/wardenhq/warden/internal/db"
)

// DashboardRows is the dashboards' rows (dashboards): each repository's dashboard issue, what was last written to it, and its write lease.
type DashboardRows struct {
	db *db.DB
	pg bool
}

// DashboardRow is one repository's row of dashboards: which issue is its
// dashboard, what was last written to it, and who is writing it now.
type DashboardRow struct {
	// Number is the dashboard issue's number; 0: none known.
	Number int
	// Hash is the hash of the body last written to the issue; "": unknown
	// (the next write goes to GitHub whatever the body).
	Hash string
	// LeaseOwner is the token of the writer holding the write lease ("":
	// nobody); LeaseUntil (unix milliseconds) is when that lease lapses.
	LeaseOwner string
	LeaseUntil int64
}

// Leased reports whether a writer holds the row's lease at now (unix
// milliseconds).
func (w *DashboardRow) Leased(now int64) bool { return w.LeaseOwner != "" && w.LeaseUntil > now }

// Get returns the repository's row as last committed (no lock taken); with
// none, found is false.
func (r *DashboardRows) Get(ctx context.Context, repoID int64) (row *DashboardRow, found bool, err error) {
	return r.load(ctx, r.db.Read, repoID, false)
}

// Update runs fn on the repository's row in one write transaction, the row
// created first (number 0, no hash, no lease) when there is none, and saves
// what fn left in it when fn returns nil and changed it; an error from fn
// writes nothing (not even the new row) and is returned as it is. The row is locked from its read to the commit
// (FOR UPDATE on PostgreSQL; on SQLite the write transaction excludes every
// other writer), so what fn decides from the row (taking the lease, say)
// is decided by one writer at a time. now (unix milliseconds) is read once,
// inside the transaction, and handed to fn; it is also the row's
// updated_at.
func (r *DashboardRows) Update(ctx context.Context, repoID int64, now func() int64, fn func(w *DashboardRow, now int64) error) error {
	return r.update(ctx, repoID, true, now, fn)
}

// UpdateExisting is Update on a row that must be there already: with none,
// it returns an error and fn is not called.
func (r *DashboardRows) UpdateExisting(ctx context.Context, repoID int64, now func() int64, fn func(w *DashboardRow, now int64) error) error {
	return r.update(ctx, repoID, false, now, fn)
}

func (r *DashboardRows) update(ctx context.Context, repoID int64, create bool, clock func() int64, fn func(w *DashboardRow, now int64) error) error {
	return r.writeTx(ctx, func(tx *sql.Tx) error {
		now := clock()
		w, found, err := r.load(ctx, tx, repoID, true)
		if err != nil {
			return err
		}
		if !found {
			if !create {
				return fmt.Errorf("dashboard of repository %d: the row vanished", repoID)
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO dashboards (repo_id, updated_at) VALUES ($1, $2)
				ON CONFLICT (repo_id) DO NOTHING`, repoID, now); err != nil {
				return fmt.Errorf("dashboard of repository %d: insert: %w", repoID, err)
			}
			if w, found, err = r.load(ctx, tx, repoID, true); err != nil {
				return err
			} else if !found {
				return fmt.Errorf("dashboard of repository %d: the row vanished", repoID)
			}
		}
		was := *w
		if err := fn(w, now); err != nil {
			return err
		}
		if *w == was {
			return nil
		}
		return r.save(ctx, tx, repoID, w, now)
	})
}

// Release gives up the repository's lease if token still holds it (a
// writer whose lease was taken over releases nothing); now (unix
// milliseconds) is recorded as the row's updated_at.
func (r *DashboardRows) Release(ctx context.Context, repoID int64, token string, now int64) error {
	err := r.writeTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE dashboards SET lease_owner = '', lease_until = 0, updated_at = $3
			WHERE repo_id = $1 AND lease_owner = $2`, repoID, token, now)
		return err
	})
	if err != nil {
		return fmt.Errorf("dashboard of repository %d: release the lease: %w", repoID, err)
	}
	return nil
}

// Invalidate forgets the hash of the body last written to the repository's
// dashboard (not which issue it is, nor the lease), so that the next write
// goes to GitHub even with an unchanged body; now (unix milliseconds) is
// recorded as the row's updated_at. A repository with no row is no error.
func (r *DashboardRows) Invalidate(ctx context.Context, repoID int64, now int64) error {
	if _, err := r.db.Write.ExecContext(ctx, `UPDATE dashboards SET body_hash = '', updated_at = $2 WHERE repo_id = $1`,
		repoID, now); err != nil {
		return fmt.Errorf("dashboard of repository %d: invalidate: %w", repoID, err)
	}
	return nil
}

// writeTx runs fn in one write transaction and commits when it returns nil.
func (r *DashboardRows) writeTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := r.db.Write.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("dashboards: begin: %w", err)
	}
	defer tx.Rollback()
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("dashboards: commit: %w", err)
	}
	return nil
}

// load reads a repository's row; lock takes its row lock on PostgreSQL (on
// SQLite the write transaction already excludes other writers).
func (r *DashboardRows) load(ctx context.Context, q Querier, repoID int64, lock bool) (*DashboardRow, bool, error) {
	query := `SELECT issue_number, body_hash, lease_owner, lease_until FROM dashboards WHERE repo_id = $1`
	if lock && r.pg {
		query += " FOR UPDATE"
	}
	w := &DashboardRow{}
	err := q.QueryRowContext(ctx, query, repoID).Scan(&w.Number, &w.Hash, &w.LeaseOwner, &w.LeaseUntil)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("dashboard of repository %d: read: %w", repoID, err)
	}
	return w, true, nil
}

// save writes w as the repository's row inside tx.
func (r *DashboardRows) save(ctx context.Context, tx *sql.Tx, repoID int64, w *DashboardRow, now int64) error {
	if _, err := tx.ExecContext(ctx, `UPDATE dashboards SET issue_number = $2, body_hash = $3, lease_owner = $4,
		lease_until = $5, updated_at = $6 WHERE repo_id = $1`,
		repoID, w.Number, w.Hash, w.LeaseOwner, w.LeaseUntil, now); err != nil {
		return fmt.Errorf("dashboard of repository %d: write: %w", repoID, err)
	}
	return nil
}
