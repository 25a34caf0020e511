package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// PutRepo records a repository warden serves, or updates it by id: the full
// name may change (a rename or a transfer), and a removed repository is
// served again.
func (l *Ledger) PutRepo(ctx context.Context, r Repo) error {
	if r.ID <= 0 {
		return refusal(ReasonInvalidRequest, "repository id %d must be positive", r.ID)
	}
	owner, name, ok := strings.Cut(r.FullName, "/")
	if !ok || owner == "" || name == "" || strings.Contains(name, "/") || len(r.FullName) > 200 ||
		!utf8.ValidString(r.FullName) || strings.ContainsAny(r.FullName, " \t\r\n\x00") {
		return refusal(ReasonInvalidRequest, "repository full name %q is not owner/name", r.FullName)
	}
	if r.Installation < 0 {
		return refusal(ReasonInvalidRequest, "installation id %d is negative", r.Installation)
	}
	if err := checkText("defaultBranch", r.DefaultBranch, 255); err != nil {
		return err
	}
	_, err := l.db.Write.ExecContext(ctx, `INSERT INTO ledger_repos (id, full_name, name_key, installation, default_branch, served, updated_at)
		VALUES ($1, $2, $3, $4, $5, 1, $6)
		ON CONFLICT (id) DO UPDATE SET full_name = excluded.full_name, name_key = excluded.name_key,
			installation = excluded.installation, default_branch = excluded.default_branch, served = 1,
			updated_at = excluded.updated_at`,
		r.ID, r.FullName, nameKey(r.FullName), r.Installation, r.DefaultBranch, l.nowMs())
	if err != nil {
		return fmt.Errorf("put repository %d (%s): %w", r.ID, r.FullName, err)
	}
	return nil
}

// RemoveRepo marks a repository no longer served (the App was uninstalled
// from it). Its items stay, untouched; PutRepo serves it again. Removing a
// repository the ledger does not know is ErrNotFound.
func (l *Ledger) RemoveRepo(ctx context.Context, id int64) error {
	res, err := l.db.Write.ExecContext(ctx, `UPDATE ledger_repos SET served = 0, updated_at = $1 WHERE id = $2`, l.nowMs(), id)
	if err != nil {
		return fmt.Errorf("remove repository %d: %w", id, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("remove repository %d: %w", id, err)
	} else if n == 0 {
		return fmt.Errorf("repository %d: %w", id, ErrNotFound)
	}
	return nil
}

// Repo returns the served repository named fullName, compared without
// regard to case. A repository that is not (or no longer) served is
// ErrNotFound. When two rows carry the name (a repository renamed away and
// another created in its place before warden heard of the rename), the one
// recorded last wins.
func (l *Ledger) Repo(ctx context.Context, fullName string) (Repo, error) {
	r, err := scanRepo(l.db.Read.QueryRowContext(ctx, `SELECT id, full_name, installation, default_branch FROM ledger_repos
		WHERE name_key = $1 AND served = 1 ORDER BY updated_at DESC, id DESC LIMIT 1`, nameKey(fullName)))
	if errors.Is(err, sql.ErrNoRows) {
		return Repo{}, fmt.Errorf("repository %s: %w", fullName, ErrNotFound)
	}
	if err != nil {
		return Repo{}, fmt.Errorf("repository %s: %w", fullName, err)
	}
	return r, nil
}

// RepoByID returns the served repository with this id, or ErrNotFound.
func (l *Ledger) RepoByID(ctx context.Context, id int64) (Repo, error) {
	return servedRepo(ctx, l.db.Read, id)
}

// Repos returns the served repositories, by id.
func (l *Ledger) Repos(ctx context.Context) ([]Repo, error) {
	rows, err := l.db.Read.QueryContext(ctx, `SELECT id, full_name, installation, default_branch FROM ledger_repos
		WHERE served = 1 ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("list repositories: %w", err)
	}
	defer rows.Close()
	out := []Repo{}
	for rows.Next() {
		r, err := scanRepo(rows)
		if err != nil {
			return nil, fmt.Errorf("list repositories: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list repositories: %w", err)
	}
	return out, nil
}

// servedRepo reads a served repository through q (a transaction or a pool).
func servedRepo(ctx context.Context, q Querier, id int64) (Repo, error) {
	r, err := scanRepo(q.QueryRowContext(ctx, `SELECT id, full_name, installation, default_branch FROM ledger_repos
		WHERE id = $1 AND served = 1`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Repo{}, fmt.Errorf("repository %d is not served: %w", id, ErrNotFound)
	}
	if err != nil {
		return Repo{}, fmt.Errorf("repository %d: %w", id, err)
	}
	return r, nil
}

func scanRepo(s interface{ Scan(...any) error }) (Repo, error) {
	var r Repo
	err := s.Scan(&r.ID, &r.FullName, &r.Installation, &r.DefaultBranch)
	return r, err
}

// nameKey is the case-insensitive form of a repository's full name (GitHub
// compares owner and repository names without regard to case).
func nameKey(fullName string) string { return strings.ToLower(fullName) }
