package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/wardenhq/warden/gating"
)

// The gate after admission (schema_spec.go): the admitted specification's
// digest, the issue's recorded text and the edits deliveries showed.

// SpecEditsKept is how many edits spec_edits keeps per issue (the newest):
// only the edit that made the issue's current text decides, and every
// delivery about an item judges it again.
const SpecEditsKept = 20

// specMs is a spec state's time in unix milliseconds (0 without a digest).
func specMs(s gating.SpecState) int64 {
	if s.Digest == "" {
		return 0
	}
	return s.At.UnixMilli()
}

// specTime is a stored spec time (zero without a digest).
func specTime(digest string, ms int64) time.Time {
	if digest == "" {
		return time.Time{}
	}
	return msTime(ms)
}

// SpecFacts is what the gate after admission reads of one item, in one
// query: the specification a human admitted, the admission's time, and the
// issue's text as recorded.
type SpecFacts struct {
	Accepted, Current gating.SpecState
	AdmittedAt        time.Time
}

// SpecFacts reads an item's SpecFacts; ok is false when no admission is
// recorded.
func (a *Acts) SpecFacts(ctx context.Context, repoID int64, number int) (f SpecFacts, ok bool, err error) {
	var ad string
	var cd sql.NullString
	var admitted, aat int64
	var cat sql.NullInt64
	err = a.db.Read.QueryRowContext(ctx, `SELECT a.admitted_at, a.spec_digest, a.spec_at, s.spec_digest, s.spec_at FROM admissions a
		LEFT JOIN issue_state s ON s.repo_id = a.repo_id AND s.number = a.number
		WHERE a.repo_id = $1 AND a.number = $2`, repoID, number).Scan(&admitted, &ad, &aat, &cd, &cat)
	if errors.Is(err, sql.ErrNoRows) {
		return f, false, nil
	}
	if err != nil {
		return f, false, fmt.Errorf("read the admitted specification of #%d: %w", number, err)
	}
	f.AdmittedAt = msTime(admitted)
	f.Accepted = gating.SpecState{Digest: ad, At: specTime(ad, aat)}
	f.Current = gating.SpecState{Digest: cd.String, At: specTime(cd.String, cat.Int64)}
	return f, true, nil
}

// IssueSpec is the issue's text as recorded (its digest and as of when;
// zero when none is).
func (a *Acts) IssueSpec(ctx context.Context, repoID int64, number int) (gating.SpecState, error) {
	var d string
	var at int64
	err := a.db.Read.QueryRowContext(ctx, `SELECT spec_digest, spec_at FROM issue_state WHERE repo_id = $1 AND number = $2`,
		repoID, number).Scan(&d, &at)
	if errors.Is(err, sql.ErrNoRows) {
		return gating.SpecState{}, nil
	}
	if err != nil {
		return gating.SpecState{}, fmt.Errorf("read the recorded text of #%d: %w", number, err)
	}
	return gating.SpecState{Digest: d, At: specTime(d, at)}, nil
}

// AcceptSpec makes spec the item's admitted specification (a human's edit
// made it, or an admission recorded without one trusts it on first use),
// unless a newer one is recorded. It reports whether it was applied.
func (a *Acts) AcceptSpec(ctx context.Context, repoID int64, number int, spec gating.SpecState) (bool, error) {
	if spec.Digest == "" {
		return false, nil
	}
	res, err := a.db.Write.ExecContext(ctx, `UPDATE admissions SET spec_digest = $1, spec_at = $2
		WHERE repo_id = $3 AND number = $4 AND (spec_digest = '' OR spec_at <= $2)`, spec.Digest, spec.At.UnixMilli(), repoID, number)
	if err != nil {
		return false, fmt.Errorf("accept the specification of #%d: %w", number, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("accept the specification of #%d: %w", number, err)
	}
	return n > 0, nil
}

// RecordSpecEdit logs an edit of issue number's title or body (once per
// delivery) and keeps the newest SpecEditsKept. It reports whether the
// edit was new.
func (a *Acts) RecordSpecEdit(ctx context.Context, repoID int64, number int, e gating.SpecEdit) (bool, error) {
	tx, err := a.db.Write.BeginTx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("log an edit of #%d: %w", number, err)
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `INSERT INTO spec_edits (repo_id, number, delivery_id, at, editor, standing, why, digest, prior)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (repo_id, number, delivery_id) DO NOTHING`,
		repoID, number, e.Delivery, e.At.UnixMilli(), e.Editor, e.Standing, e.Why, e.Digest, e.Prior)
	if err != nil {
		return false, fmt.Errorf("log an edit of #%d: %w", number, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return false, nil
	}
	// Keep the newest: drop what is older than the SpecEditsKept-th.
	if _, err := tx.ExecContext(ctx, `DELETE FROM spec_edits WHERE repo_id = $1 AND number = $2 AND at < (
		SELECT at FROM spec_edits WHERE repo_id = $1 AND number = $2 ORDER BY at DESC LIMIT 1 OFFSET $3)`,
		repoID, number, SpecEditsKept-1); err != nil {
		return false, fmt.Errorf("log an edit of #%d: prune: %w", number, err)
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("log an edit of #%d: commit: %w", number, err)
	}
	return true, nil
}

// SpecEdits are the logged edits of issue number's title or body, oldest
// first.
func (a *Acts) SpecEdits(ctx context.Context, repoID int64, number int) ([]gating.SpecEdit, error) {
	rows, err := a.db.Read.QueryContext(ctx, `SELECT delivery_id, at, editor, standing, why, digest, prior FROM spec_edits
		WHERE repo_id = $1 AND number = $2 ORDER BY at, delivery_id`, repoID, number)
	if err != nil {
		return nil, fmt.Errorf("edits of #%d: %w", number, err)
	}
	defer rows.Close()
	var out []gating.SpecEdit
	for rows.Next() {
		var e gating.SpecEdit
		var at int64
		if err := rows.Scan(&e.Delivery, &at, &e.Editor, &e.Standing, &e.Why, &e.Digest, &e.Prior); err != nil {
			return nil, fmt.Errorf("edits of #%d: %w", number, err)
		}
		e.At = msTime(at)
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("edits of #%d: %w", number, err)
	}
	return out, nil
}

// SpecsToJudge are the repository's admitted items (an admission recorded,
// the admission label absent as recorded, no spec-changed-by-agent open)
// whose recorded text is not the admitted text and is at least as new as
// it, or whose admission has no digest yet: the items whose specification
// the gate after admission has still to judge. Judging takes each out of
// the list (the text accepted, or the item re-gated).
func (a *Acts) SpecsToJudge(ctx context.Context, repoID int64, admissionLabel string) ([]int, error) {
	rows, err := a.db.Read.QueryContext(ctx, `SELECT a.number, s.labels FROM admissions a
		JOIN issue_state s ON s.repo_id = a.repo_id AND s.number = a.number
		JOIN ledger_items i ON i.repo_id = a.repo_id AND i.number = a.number
		WHERE a.repo_id = $1 AND s.state IN ($3, $4) AND s.spec_digest <> '' AND s.spec_digest <> a.spec_digest AND s.spec_at >= a.spec_at
		AND NOT EXISTS (SELECT 1 FROM label_findings f WHERE f.repo_id = a.repo_id AND f.number = a.number AND f.code = $2 AND f.open = 1)
		ORDER BY a.number`, repoID, gating.CodeSpecChangedByAgent, IssueOpen, IssueClosed)
	if err != nil {
		return nil, fmt.Errorf("specifications to judge in repository %d: %w", repoID, err)
	}
	defer rows.Close()
	var out []int
	for rows.Next() {
		var n int
		var labels string
		if err := rows.Scan(&n, &labels); err != nil {
			return nil, fmt.Errorf("specifications to judge in repository %d: %w", repoID, err)
		}
		ls, err := decodeLabels(labels)
		if err != nil {
			return nil, fmt.Errorf("specifications to judge in repository %d: #%d: %w", repoID, n, err)
		}
		if !HasLabel(ls, admissionLabel) {
			out = append(out, n)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("specifications to judge in repository %d: %w", repoID, err)
	}
	return out, nil
}

// NoteSpecFinding opens spec-changed-by-agent on an item with detail,
// counting the edit (eventKey) that caused it once. Unlike a label act's
// finding (NoteLabelFinding), it is opened even when that edit was counted
// before: the judgement is made from what is recorded now, not replayed
// from a delivery.
func (a *Acts) NoteSpecFinding(ctx context.Context, repoID int64, number int, actor, detail, eventKey string, at time.Time) error {
	code := gating.CodeSpecChangedByAgent
	tx, err := a.db.Write.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("note %s on #%d: %w", code, number, err)
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `INSERT INTO label_finding_events (repo_id, number, code, event_key) VALUES ($1, $2, $3, $4)
		ON CONFLICT (repo_id, number, code, event_key) DO NOTHING`, repoID, number, code, eventKey)
	if err != nil {
		return fmt.Errorf("note %s on #%d: %w", code, number, err)
	}
	fresh := int64(0)
	if n, _ := res.RowsAffected(); n > 0 {
		fresh = 1
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO label_findings (repo_id, number, code, actor, detail, count, open, at)
		VALUES ($1, $2, $3, $4, $5, 1, 1, $6) ON CONFLICT (repo_id, number, code) DO UPDATE SET actor = excluded.actor,
		detail = excluded.detail, count = label_findings.count + $7, open = 1, at = excluded.at`,
		repoID, number, code, actor, detail, at.UnixMilli(), fresh)
	if err != nil {
		return fmt.Errorf("note %s on #%d: %w", code, number, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("note %s on #%d: commit: %w", code, number, err)
	}
	return nil
}
