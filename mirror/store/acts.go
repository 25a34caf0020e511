package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

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
}

// RecordAdmission records that by admitted the item (the first act wins;
// recording again changes nothing).
func (a *Acts) RecordAdmission(ctx context.Context, repoID int64, number int, adm Admission) error {
	_, err := a.db.Write.ExecContext(ctx, `INSERT INTO admissions (repo_id, number, admitted_by, admitted_at, how)
		VALUES ($1, $2, $3, $4, $5) ON CONFLICT (repo_id, number) DO NOTHING`, repoID, number, adm.By, adm.At.UnixMilli(), adm.How)
	if err != nil {
		return fmt.Errorf("record admission of #%d: %w", number, err)
	}
	return nil
}

// Admission returns the recorded admission act, if any.
func (a *Acts) Admission(ctx context.Context, repoID int64, number int) (*Admission, error) {
	var adm Admission
	var at int64
	err := a.db.Read.QueryRowContext(ctx, `SELECT admitted_by, admitted_at, how FROM admissions WHERE repo_id = $1 AND number = $2`,
		repoID, number).Scan(&adm.By, &at, &adm.How)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read admission of #%d: %w", number, err)
	}
	adm.At = time.UnixMilli(at).UTC()
	return &adm, nil
}
