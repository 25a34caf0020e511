package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Issue states beyond GitHub's open and closed.
const (
	IssueOpen        = "open"
	IssueClosed      = "closed"
	IssueDeleted     = "deleted"
	IssueTransferred = "transferred"
)

// IssueState is an issue's state as last reported by GitHub.
type IssueState struct {
	State     string    `json:"state"` // open, closed, deleted, transferred
	Labels    []string  `json:"labels"`
	UpdatedAt time.Time `json:"updatedAt"` // the issue's updated_at as GitHub reported it
	// SpecDigest is the digest of the issue's title and body
	// (gating.SpecDigest) as the same payload or read showed them, "" when
	// it carried none (the text recorded before is kept). It is recorded
	// as of UpdatedAt, under an ordering guard of its own.
	SpecDigest string `json:"specDigest,omitempty"`
}

// HasLabel reports whether the issue carries the label name (compared as
// GitHub compares label names: without regard to case).
func (s IssueState) HasLabel(name string) bool { return HasLabel(s.Labels, name) }

// HasLabel reports whether labels hold name, compared as GitHub compares
// label names: without regard to case.
func HasLabel(labels []string, name string) bool {
	for _, l := range labels {
		if strings.EqualFold(strings.TrimSpace(l), strings.TrimSpace(name)) {
			return true
		}
	}
	return false
}

// RecordIssueState stores st for issue number of the repository, unless a
// state with a newer updated_at is already stored. It reports whether st
// was applied. Its specification digest, when it carries one, is stored
// unless one with a newer time is (the time a label warden noted moved
// updated_at to says nothing of the text), whether or not the rest was
// applied. Recording is bookkeeping: it needs no served repository and
// writes nothing to GitHub.
func (l *Ledger) RecordIssueState(ctx context.Context, repoID int64, number int, st IssueState) (bool, error) {
	if number <= 0 {
		return false, refusal(ReasonInvalidRequest, "issue number %d is not positive", number)
	}
	if st.State == "" {
		st.State = IssueOpen
	}
	labels := st.Labels
	if labels == nil {
		labels = []string{}
	}
	b, err := json.Marshal(labels)
	if err != nil {
		return false, fmt.Errorf("record state of #%d: %w", number, err)
	}
	// Every SET expression reads the row as it was: the state columns move
	// only for a newer state, the text only for a newer text.
	at := st.UpdatedAt.UnixMilli()
	specAt := int64(0) // no text: nothing to order
	if st.SpecDigest != "" {
		specAt = at
	}
	var stored int64
	err = l.db.Write.QueryRowContext(ctx, `INSERT INTO issue_state (repo_id, number, state, labels, updated_at, recorded_at, spec_digest, spec_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
		ON CONFLICT (repo_id, number) DO UPDATE SET
			state = CASE WHEN excluded.updated_at >= issue_state.updated_at THEN excluded.state ELSE issue_state.state END,
			labels = CASE WHEN excluded.updated_at >= issue_state.updated_at THEN excluded.labels ELSE issue_state.labels END,
			recorded_at = excluded.recorded_at,
			spec_digest = CASE WHEN excluded.spec_digest <> '' AND excluded.spec_at >= issue_state.spec_at THEN excluded.spec_digest ELSE issue_state.spec_digest END,
			spec_at = CASE WHEN excluded.spec_digest <> '' AND excluded.spec_at >= issue_state.spec_at THEN excluded.spec_at ELSE issue_state.spec_at END,
			updated_at = CASE WHEN excluded.updated_at >= issue_state.updated_at THEN excluded.updated_at ELSE issue_state.updated_at END
		WHERE excluded.updated_at >= issue_state.updated_at OR (excluded.spec_digest <> '' AND excluded.spec_at >= issue_state.spec_at)
		RETURNING updated_at`,
		repoID, number, st.State, string(b), at, l.nowMs(), st.SpecDigest, specAt).Scan(&stored)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil // older in every part
	}
	if err != nil {
		return false, fmt.Errorf("record state of #%d: %w", number, err)
	}
	return stored == at, nil
}

// IssueState returns the recorded state of an issue, or nil when none was
// recorded. SpecDigest is the newest text's digest recorded, which may be
// older than UpdatedAt (IssueSpec says as of when).
func (l *Ledger) IssueState(ctx context.Context, repoID int64, number int) (*IssueState, error) {
	var st IssueState
	var labels string
	var updated int64
	err := l.db.Read.QueryRowContext(ctx, `SELECT state, labels, updated_at, spec_digest FROM issue_state WHERE repo_id = $1 AND number = $2`,
		repoID, number).Scan(&st.State, &labels, &updated, &st.SpecDigest)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read state of #%d: %w", number, err)
	}
	if st.Labels, err = decodeLabels(labels); err != nil {
		return nil, fmt.Errorf("read state of #%d: %w", number, err)
	}
	st.UpdatedAt = msTime(updated)
	return &st, nil
}

func decodeLabels(s string) ([]string, error) {
	out := []string{}
	if err := json.Unmarshal([]byte(s), &out); err != nil {
		return nil, fmt.Errorf("labels %q: %w", s, err)
	}
	return out, nil
}

// NoteLabel brings the recorded labels of an issue up to what warden knows
// better than the deliveries it has seen: a label it just added or removed
// itself, or one a confirming read of the label events showed. at is when
// that was true, to the millisecond; a payload's updated_at has one-second
// resolution, so a payload about an earlier change in the same second (its
// time truncated) does not undo it. An issue with no recorded state is left
// alone (its first delivery records it).
func (l *Ledger) NoteLabel(ctx context.Context, repoID int64, number int, label string, present bool, at time.Time) error {
	return l.writeTx(ctx, func(tx *sql.Tx) error {
		var labels string
		var updated int64
		err := tx.QueryRowContext(ctx, `SELECT labels, updated_at FROM issue_state WHERE repo_id = $1 AND number = $2`, repoID, number).Scan(&labels, &updated)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("note %q on #%d: %w", label, number, err)
		}
		// What warden just did or read is newer than anything recorded
		// before it, even on a clock that has not moved (a frozen test
		// clock, or the same millisecond).
		ms := max(at.UnixMilli(), updated+1)
		ls, err := decodeLabels(labels)
		if err != nil {
			return fmt.Errorf("note %q on #%d: %w", label, number, err)
		}
		out := ls[:0:0]
		for _, x := range ls {
			if !strings.EqualFold(x, label) {
				out = append(out, x)
			}
		}
		if present {
			out = append(out, label)
		}
		b, err := json.Marshal(out)
		if err != nil {
			return fmt.Errorf("note %q on #%d: %w", label, number, err)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE issue_state SET labels = $1, updated_at = $2, recorded_at = $3 WHERE repo_id = $4 AND number = $5`,
			string(b), ms, l.nowMs(), repoID, number); err != nil {
			return fmt.Errorf("note %q on #%d: %w", label, number, err)
		}
		return nil
	})
}

// RecordIssueStateRead stores an issue's state as a REST read begun at
// readAt showed it (the reconcile's census). A read shows the issue as it is
// at that moment, so it is stamped max(updated_at, readAt): it replaces
// anything recorded before the read, even a label warden noted in the same
// second as a later change (GitHub's one-second resolution would otherwise
// hide that change), and a late delivery about a change from before the
// read does not undo it. (A change made within the same second after the
// read waits for the next pass.)
func (l *Ledger) RecordIssueStateRead(ctx context.Context, repoID int64, number int, st IssueState, readAt time.Time) (bool, error) {
	if st.UpdatedAt.Before(readAt) {
		st.UpdatedAt = readAt
	}
	return l.RecordIssueState(ctx, repoID, number, st)
}

// Unadopted counts the recorded issues (not pull requests: their state is
// not recorded here) that carry itemLabel and are not items: the census's
// adoption still to do.
func (l *Ledger) Unadopted(ctx context.Context, repoID int64, itemLabel string) (int, error) {
	rows, err := l.db.Read.QueryContext(ctx, `SELECT s.labels FROM issue_state s
		LEFT JOIN ledger_items i ON i.repo_id = s.repo_id AND i.number = s.number
		WHERE s.repo_id = $1 AND i.number IS NULL AND s.state IN ($2, $3)`, repoID, IssueOpen, IssueClosed)
	if err != nil {
		return 0, fmt.Errorf("unadopted issues of repository %d: %w", repoID, err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return 0, fmt.Errorf("unadopted issues of repository %d: %w", repoID, err)
		}
		labels, err := decodeLabels(s)
		if err != nil {
			return 0, fmt.Errorf("unadopted issues of repository %d: %w", repoID, err)
		}
		if HasLabel(labels, itemLabel) {
			n++
		}
	}
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("unadopted issues of repository %d: %w", repoID, err)
	}
	return n, nil
}
