package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Epoch is an item's attempt epoch and collision resolution.
type Epoch struct {
	Start      time.Time // the last human unpark (zero: never)
	StartBy    string
	ResolvedAt time.Time // the last /backlog resolve (zero: never)
	ResolvedBy string
}

// Epoch returns the item's epoch record (zero when none).
func (a *Acts) Epoch(ctx context.Context, repoID int64, number int) (Epoch, error) {
	var e Epoch
	var start, resolved int64
	err := a.db.Read.QueryRowContext(ctx, `SELECT epoch_start, epoch_by, resolved_at, resolved_by FROM item_epochs
		WHERE repo_id = $1 AND number = $2`, repoID, number).Scan(&start, &e.StartBy, &resolved, &e.ResolvedBy)
	if errors.Is(err, sql.ErrNoRows) {
		return e, nil
	}
	if err != nil {
		return e, fmt.Errorf("read the epoch of #%d: %w", number, err)
	}
	if start > 0 {
		e.Start = time.UnixMilli(start).UTC()
	}
	if resolved > 0 {
		e.ResolvedAt = time.UnixMilli(resolved).UTC()
	}
	return e, nil
}

// StartEpoch records a human unpark at `at` by `by`: a new attempt epoch.
// An older unpark never moves the epoch back.
func (a *Acts) StartEpoch(ctx context.Context, repoID int64, number int, at time.Time, by string) error {
	_, err := a.db.Write.ExecContext(ctx, `INSERT INTO item_epochs (repo_id, number, epoch_start, epoch_by, resolved_at, resolved_by)
		VALUES ($1, $2, $3, $4, 0, '') ON CONFLICT (repo_id, number) DO UPDATE SET epoch_start = excluded.epoch_start, epoch_by = excluded.epoch_by
		WHERE excluded.epoch_start > item_epochs.epoch_start`, repoID, number, at.UnixMilli(), by)
	if err != nil {
		return fmt.Errorf("start a new epoch for #%d: %w", number, err)
	}
	return nil
}

// Resolve records a /backlog resolve at `at` by `by` (collisions evidenced
// at or before it are resolved). An older one never moves it back.
func (a *Acts) Resolve(ctx context.Context, repoID int64, number int, at time.Time, by string) error {
	_, err := a.db.Write.ExecContext(ctx, `INSERT INTO item_epochs (repo_id, number, epoch_start, epoch_by, resolved_at, resolved_by)
		VALUES ($1, $2, 0, '', $3, $4) ON CONFLICT (repo_id, number) DO UPDATE SET resolved_at = excluded.resolved_at, resolved_by = excluded.resolved_by
		WHERE excluded.resolved_at > item_epochs.resolved_at`, repoID, number, at.UnixMilli(), by)
	if err != nil {
		return fmt.Errorf("record the resolve of #%d: %w", number, err)
	}
	return nil
}

// Park stages, in the ladder's order.
const (
	ParkTagged     = "tagged"     // state:parked and its route written, claim released
	ParkLabeled    = "labeled"    // the parked label added
	ParkCommenting = "commenting" // the park comment being posted (it may exist)
	ParkCommented  = "commented"  // the park comment posted: done
)

// ParkRecord is warden's own park of an item in progress or done.
type ParkRecord struct {
	Fence       int64 // the maintenance claim's fence
	Attempts    int
	RulingOwner string
	RulingTopic string
	Question    string
	Stage       string
	CommentID   int64
	At          time.Time
}

// ParkRecord returns the item's park record (nil: none).
func (a *Acts) ParkRecord(ctx context.Context, repoID int64, number int) (*ParkRecord, error) {
	var p ParkRecord
	var at int64
	err := a.db.Read.QueryRowContext(ctx, `SELECT fence, attempts, ruling_owner, ruling_topic, question, stage, comment_id, at
		FROM item_parks WHERE repo_id = $1 AND number = $2`, repoID, number).
		Scan(&p.Fence, &p.Attempts, &p.RulingOwner, &p.RulingTopic, &p.Question, &p.Stage, &p.CommentID, &at)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the park of #%d: %w", number, err)
	}
	p.At = time.UnixMilli(at).UTC()
	return &p, nil
}

// PutParkRecord records the park's progress (replacing the previous record).
func (a *Acts) PutParkRecord(ctx context.Context, repoID int64, number int, p ParkRecord) error {
	_, err := a.db.Write.ExecContext(ctx, `INSERT INTO item_parks (repo_id, number, fence, attempts, ruling_owner, ruling_topic, question, stage, comment_id, at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) ON CONFLICT (repo_id, number) DO UPDATE SET fence = excluded.fence,
		attempts = excluded.attempts, ruling_owner = excluded.ruling_owner, ruling_topic = excluded.ruling_topic,
		question = excluded.question, stage = excluded.stage, comment_id = excluded.comment_id, at = excluded.at`,
		repoID, number, p.Fence, p.Attempts, p.RulingOwner, p.RulingTopic, p.Question, p.Stage, p.CommentID, p.At.UnixMilli())
	if err != nil {
		return fmt.Errorf("record the park of #%d: %w", number, err)
	}
	return nil
}

// ClearParkRecord forgets the park (an unpark).
func (a *Acts) ClearParkRecord(ctx context.Context, repoID int64, number int) error {
	if _, err := a.db.Write.ExecContext(ctx, `DELETE FROM item_parks WHERE repo_id = $1 AND number = $2`, repoID, number); err != nil {
		return fmt.Errorf("clear the park of #%d: %w", number, err)
	}
	return nil
}

// LabelFinding is an open or closed finding from a label act.
type LabelFinding struct {
	Code   string
	Actor  string
	Detail string
	Count  int
	Open   bool
	At     time.Time
}

// NoteLabelFinding opens (or re-opens) a finding and counts the event that
// caused it, once per eventKey. It reports whether the event was new.
func (a *Acts) NoteLabelFinding(ctx context.Context, repoID int64, number int, code, actor, detail, eventKey string, at time.Time) (bool, error) {
	tx, err := a.db.Write.BeginTx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("note %s on #%d: %w", code, number, err)
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `INSERT INTO label_finding_events (repo_id, number, code, event_key) VALUES ($1, $2, $3, $4)
		ON CONFLICT (repo_id, number, code, event_key) DO NOTHING`, repoID, number, code, eventKey)
	if err != nil {
		return false, fmt.Errorf("note %s on #%d: %w", code, number, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return false, nil
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO label_findings (repo_id, number, code, actor, detail, count, open, at)
		VALUES ($1, $2, $3, $4, $5, 1, 1, $6) ON CONFLICT (repo_id, number, code) DO UPDATE SET actor = excluded.actor,
		detail = excluded.detail, count = label_findings.count + 1, open = 1, at = excluded.at`,
		repoID, number, code, actor, detail, at.UnixMilli())
	if err != nil {
		return false, fmt.Errorf("note %s on #%d: %w", code, number, err)
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("note %s on #%d: commit: %w", code, number, err)
	}
	return true, nil
}

// CloseLabelFinding closes an open finding (what resolves it happened).
func (a *Acts) CloseLabelFinding(ctx context.Context, repoID int64, number int, code string) error {
	if _, err := a.db.Write.ExecContext(ctx, `UPDATE label_findings SET open = 0 WHERE repo_id = $1 AND number = $2 AND code = $3 AND open = 1`,
		repoID, number, code); err != nil {
		return fmt.Errorf("close %s on #%d: %w", code, number, err)
	}
	return nil
}

// LabelFindings returns the item's findings from label acts, open ones only
// unless all.
func (a *Acts) LabelFindings(ctx context.Context, repoID int64, number int, all bool) ([]LabelFinding, error) {
	rows, err := a.db.Read.QueryContext(ctx, `SELECT code, actor, detail, count, open, at FROM label_findings
		WHERE repo_id = $1 AND number = $2 ORDER BY code`, repoID, number)
	if err != nil {
		return nil, fmt.Errorf("label findings of #%d: %w", number, err)
	}
	defer rows.Close()
	var out []LabelFinding
	for rows.Next() {
		var f LabelFinding
		var open, at int64
		if err := rows.Scan(&f.Code, &f.Actor, &f.Detail, &f.Count, &open, &at); err != nil {
			return nil, fmt.Errorf("label findings of #%d: %w", number, err)
		}
		f.Open, f.At = open == 1, time.UnixMilli(at).UTC()
		if f.Open || all {
			out = append(out, f)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("label findings of #%d: %w", number, err)
	}
	return out, nil
}

// Kinds of recorded logins.
const (
	AgentRecorded  = "undeclared-agent" // posted a backlog-worker marker with write access
	SharedIdentity = "shared-identity"  // seen acting as an agent and as a human
)

// RecordAgent records a login as kind (AgentRecorded or SharedIdentity);
// it reports whether it was new (each is reported once).
func (a *Acts) RecordAgent(ctx context.Context, repoID int64, login, kind, detail string, at time.Time) (bool, error) {
	res, err := a.db.Write.ExecContext(ctx, `INSERT INTO repo_agents (repo_id, login, kind, detail, at) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (repo_id, login, kind) DO NOTHING`, repoID, strings.ToLower(login), kind, detail, at.UnixMilli())
	if err != nil {
		return false, fmt.Errorf("record %s as %s: %w", login, kind, err)
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}

// RecordedLogin is a login recorded in the repository.
type RecordedLogin struct {
	Login, Kind, Detail string
	At                  time.Time
}

// RecordedLogins lists the repository's recorded agents and shared
// identities.
func (a *Acts) RecordedLogins(ctx context.Context, repoID int64) ([]RecordedLogin, error) {
	rows, err := a.db.Read.QueryContext(ctx, `SELECT login, kind, detail, at FROM repo_agents WHERE repo_id = $1 ORDER BY login, kind`, repoID)
	if err != nil {
		return nil, fmt.Errorf("recorded agents: %w", err)
	}
	defer rows.Close()
	var out []RecordedLogin
	for rows.Next() {
		var r RecordedLogin
		var at int64
		if err := rows.Scan(&r.Login, &r.Kind, &r.Detail, &at); err != nil {
			return nil, fmt.Errorf("recorded agents: %w", err)
		}
		r.At = time.UnixMilli(at).UTC()
		out = append(out, r)
	}
	return out, rows.Err()
}

// IsRecorded reports whether login is recorded as kind in the repository.
func (a *Acts) IsRecorded(ctx context.Context, repoID int64, login, kind string) (bool, error) {
	var n int
	err := a.db.Read.QueryRowContext(ctx, `SELECT COUNT(*) FROM repo_agents WHERE repo_id = $1 AND login = $2 AND kind = $3`,
		repoID, strings.ToLower(login), kind).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("is %s recorded as %s: %w", login, kind, err)
	}
	return n > 0, nil
}
