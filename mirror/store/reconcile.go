package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

type ReconcileState struct {
	Since, ResumeSince, LastStarted int64 // Unix milliseconds
	ResumePhase                     string
	ResumePage                      int
}

func (l *Ledger) ReconcileState(ctx context.Context, repoID int64) (ReconcileState, error) {
	var s ReconcileState
	err := l.db.Read.QueryRowContext(ctx, `SELECT since, resume_phase, resume_page, resume_since, last_started FROM reconcile_state WHERE repo_id = $1`,
		repoID).Scan(&s.Since, &s.ResumePhase, &s.ResumePage, &s.ResumeSince, &s.LastStarted)
	if errors.Is(err, sql.ErrNoRows) {
		return ReconcileState{}, nil
	}
	if err != nil {
		return s, fmt.Errorf("reconcile state: %w", err)
	}
	return s, nil
}

func (l *Ledger) PutReconcileState(ctx context.Context, repoID int64, s ReconcileState, finished int64, result string) error {
	_, err := l.db.Write.ExecContext(ctx, `INSERT INTO reconcile_state (repo_id, since, resume_phase, resume_page, resume_since, last_started, last_finished, last_result)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (repo_id) DO UPDATE SET since = excluded.since, resume_phase = excluded.resume_phase,
		resume_page = excluded.resume_page, resume_since = excluded.resume_since, last_started = excluded.last_started,
		last_finished = excluded.last_finished, last_result = excluded.last_result`,
		repoID, s.Since, s.ResumePhase, s.ResumePage, s.ResumeSince, s.LastStarted, finished, result)
	if err != nil {
		return fmt.Errorf("record the reconcile state: %w", err)
	}
	return nil
}

// ReconcileDone is when a served repository's last complete reconcile pass
// finished, as the reconcile state records it.
type ReconcileDone struct {
	Repo     string // owner/name
	Finished int64  // Unix milliseconds
}

// LastCompleteReconciles lists the served repositories whose latest
// reconcile pass completed, with when it finished. A repository whose
// latest pass ran out of budget is not listed: the row keeps only the
// latest pass's finish (the metric's process-local copy covers it).
func (l *Ledger) LastCompleteReconciles(ctx context.Context) ([]ReconcileDone, error) {
	rows, err := l.db.Read.QueryContext(ctx, `SELECT r.full_name, s.last_finished FROM reconcile_state s
		JOIN ledger_repos r ON r.id = s.repo_id
		WHERE r.served = 1 AND s.last_result = 'complete' AND s.last_finished > 0 ORDER BY r.full_name`)
	if err != nil {
		return nil, fmt.Errorf("last complete reconciles: %w", err)
	}
	defer rows.Close()
	var out []ReconcileDone
	for rows.Next() {
		var d ReconcileDone
		if err := rows.Scan(&d.Repo, &d.Finished); err != nil {
			return nil, fmt.Errorf("last complete reconciles: %w", err)
		}
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("last complete reconciles: %w", err)
	}
	return out, nil
}
