package store

import (
	"context"
	"fmt"
	"time"
)

func (a *Acts) Backfilled(ctx context.Context, repoID int64, number int) (bool, error) {
	var n int
	if err := a.db.Read.QueryRowContext(ctx, `SELECT COUNT(*) FROM item_backfills WHERE repo_id = $1 AND number = $2`, repoID, number).Scan(&n); err != nil {
		return false, fmt.Errorf("is #%d backfilled: %w", number, err)
	}
	return n > 0, nil
}

func (a *Acts) MarkBackfilled(ctx context.Context, repoID int64, number, comments int, at time.Time) error {
	_, err := a.db.Write.ExecContext(ctx, `INSERT INTO item_backfills (repo_id, number, at, comments) VALUES ($1, $2, $3, $4)
		ON CONFLICT (repo_id, number) DO NOTHING`, repoID, number, at.UnixMilli(), comments)
	if err != nil {
		return fmt.Errorf("record the backfill of #%d: %w", number, err)
	}
	return nil
}
