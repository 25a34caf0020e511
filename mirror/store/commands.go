package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"
)

// Answered reports whether the comment was already answered as a command.
func (a *Acts) Answered(ctx context.Context, repoID, commentID int64) (bool, error) {
	var n int
	err := a.db.Read.QueryRowContext(ctx, `SELECT COUNT(*) FROM command_log WHERE repo_id = $1 AND comment_id = $2`, repoID, commentID).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("is comment %d answered: %w", commentID, err)
	}
	return n > 0, nil
}

// LastCommand is when login last ran a command (not rate-limited) on the
// item before `before`, other than the comment commentID (zero: never).
func (a *Acts) LastCommand(ctx context.Context, repoID int64, number int, login string, commentID int64, before time.Time) (time.Time, error) {
	var at sql.NullInt64
	err := a.db.Read.QueryRowContext(ctx, `SELECT MAX(at) FROM command_log WHERE repo_id = $1 AND number = $2 AND login = $3
		AND comment_id <> $4 AND at <= $5 AND result <> $6`, repoID, number, strings.ToLower(login), commentID, before.UnixMilli(), CommandRateLimited).Scan(&at)
	if err != nil {
		return time.Time{}, fmt.Errorf("last command of %s on #%d: %w", login, number, err)
	}
	if !at.Valid {
		return time.Time{}, nil
	}
	return time.UnixMilli(at.Int64).UTC(), nil
}

func (a *Acts) LogCommand(ctx context.Context, repoID, commentID int64, number int, login, verb string, at time.Time, result string) error {
	_, err := a.db.Write.ExecContext(ctx, `INSERT INTO command_log (repo_id, comment_id, number, login, verb, at, result)
		VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (repo_id, comment_id) DO NOTHING`,
		repoID, commentID, number, strings.ToLower(login), verb, at.UnixMilli(), result)
	if err != nil {
		return fmt.Errorf("log the command in comment %d: %w", commentID, err)
	}
	return nil
}

// Command answers, as the command log records them.
const (
	CommandDone        = "done"
	CommandRefused     = "refused"
	CommandRateLimited = "rate-limited"
)
