package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/wardenhq/warden/internal/db"
)

// SettingsRows is the settings in effect per repository (repo_settings), written compare-and-swap on a version.
type SettingsRows struct {
	db *db.DB
	pg bool
}

// SettingsRow is one repository's row of repo_settings, its columns as
// stored. The store does not read the encoded columns: whoever writes them
// decodes them.
type SettingsRow struct {
	// SettingsJSON is the settings in effect, encoded.
	SettingsJSON string
	// ProblemsJSON is the findings shown for them, encoded.
	ProblemsJSON string
	// SourceSHA, PushedAt (unix seconds, GitHub's clock) and ChangedBy are
	// the push whose file is in effect ("" and 0 when none).
	SourceSHA string
	PushedAt  int64
	ChangedBy string
	// PendingJSON is the latest push not made by a human after that one,
	// with the file it brought, encoded; "" for none.
	PendingJSON string
	// Version is bumped on every write (compare-and-swap; see Save).
	Version int64
}

// Get returns the repository's row; with none, found is false.
func (s *SettingsRows) Get(ctx context.Context, repoID int64) (row SettingsRow, found bool, err error) {
	err = s.db.Read.QueryRowContext(ctx, `SELECT settings_json, problems_json, source_sha, pushed_at, changed_by, pending_json, version
		FROM repo_settings WHERE repo_id = $1`, repoID).Scan(&row.SettingsJSON, &row.ProblemsJSON, &row.SourceSHA, &row.PushedAt,
		&row.ChangedBy, &row.PendingJSON, &row.Version)
	if errors.Is(err, sql.ErrNoRows) {
		return SettingsRow{}, false, nil
	}
	if err != nil {
		return SettingsRow{}, false, fmt.Errorf("read the settings of repository %d: %w", repoID, err)
	}
	return row, true, nil
}

// Save writes next as the repository's row, at version prevVersion+1
// (next.Version is not read), if nobody wrote the row since it was read
// at prevVersion (found) or found missing (!found); ok is false when
// somebody did, and nothing is written. now (unix milliseconds) is
// recorded as the row's updated_at.
func (s *SettingsRows) Save(ctx context.Context, repoID, prevVersion int64, found bool, next SettingsRow, now int64) (ok bool, err error) {
	var res sql.Result
	if found {
		res, err = s.db.Write.ExecContext(ctx, `UPDATE repo_settings SET settings_json = $1, problems_json = $2, source_sha = $3,
			pushed_at = $4, changed_by = $5, pending_json = $6, version = $7, updated_at = $8 WHERE repo_id = $9 AND version = $10`,
			next.SettingsJSON, next.ProblemsJSON, next.SourceSHA, next.PushedAt, next.ChangedBy, next.PendingJSON,
			prevVersion+1, now, repoID, prevVersion)
	} else {
		res, err = s.db.Write.ExecContext(ctx, `INSERT INTO repo_settings (repo_id, settings_json, problems_json, source_sha,
			pushed_at, changed_by, pending_json, version, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
			ON CONFLICT (repo_id) DO NOTHING`,
			repoID, next.SettingsJSON, next.ProblemsJSON, next.SourceSHA, next.PushedAt, next.ChangedBy, next.PendingJSON,
			prevVersion+1, now)
	}
	if err != nil {
		return false, fmt.Errorf("save the settings of repository %d: %w", repoID, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("save the settings of repository %d: %w", repoID, err)
	}
	return n > 0, nil
}

// Forget deletes the repository's row; there being none is no error.
func (s *SettingsRows) Forget(ctx context.Context, repoID int64) error {
	if _, err := s.db.Write.ExecContext(ctx, `DELETE FROM repo_settings WHERE repo_id = $1`, repoID); err != nil {
		return fmt.Errorf("forget the settings of repository %d: %w", repoID, err)
	}
	return nil
}

// Lock waits for the lock serialising the writers of one repository's
// settings (or until ctx ends) and returns its release. It holds across
// replicas on PostgreSQL (db.DB.Lock); Save's version still fences a write
// that raced one anyway.
func (s *SettingsRows) Lock(ctx context.Context, repoID int64) (release func(), err error) {
	release, err = s.db.Lock(ctx, fmt.Sprintf("settings/%d", repoID))
	if err != nil {
		return nil, fmt.Errorf("wait for the settings of repository %d: %w", repoID, err)
	}
	return release, nil
}
