package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/internal/db"
)

// Acts records the human acts warden has seen and must remember: who
// admitted an item, and when. An item's admission label being absent means
// nothing without a recorded act (admission-unrecorded).
type Acts struct{ db *db.DB }

// Admission is a recorded admission act.
type Admission struct {
	By  string
	At  time.Time
	How string // "created by a human with triage+", "label removed", "/backlog admit", "human token"
	// Spec is the specification the human admitted: the digest of the
	// issue's title and body as the act's payload showed them, and that
	// payload's updated_at (zero Digest: not known; trusted on first use).
	Spec gating.SpecState
}

// RecordAdmission records that by admitted the item. The first act's who
// and when win; the admitted specification is the newest any act showed
// (an act about older text, delivered late, does not replace it).
func (a *Acts) RecordAdmission(ctx context.Context, repoID int64, number int, adm Admission) error {
	_, err := a.db.Write.ExecContext(ctx, `INSERT INTO admissions (repo_id, number, admitted_by, admitted_at, how, spec_digest, spec_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (repo_id, number) DO UPDATE SET spec_digest = excluded.spec_digest, spec_at = excluded.spec_at
		WHERE excluded.spec_digest <> '' AND (admissions.spec_digest = '' OR excluded.spec_at >= admissions.spec_at)`,
		repoID, number, adm.By, adm.At.UnixMilli(), adm.How, adm.Spec.Digest, specMs(adm.Spec))
	if err != nil {
		return fmt.Errorf("record admission of #%d: %w", number, err)
	}
	return nil
}

// Admission returns the recorded admission act, if any.
func (a *Acts) Admission(ctx context.Context, repoID int64, number int) (*Admission, error) {
	var adm Admission
	var at, specAt int64
	err := a.db.Read.QueryRowContext(ctx, `SELECT admitted_by, admitted_at, how, spec_digest, spec_at FROM admissions WHERE repo_id = $1 AND number = $2`,
		repoID, number).Scan(&adm.By, &at, &adm.How, &adm.Spec.Digest, &specAt)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read admission of #%d: %w", number, err)
	}
	adm.At = time.UnixMilli(at).UTC()
	adm.Spec.At = specTime(adm.Spec.Digest, specAt)
	return &adm, nil
}
