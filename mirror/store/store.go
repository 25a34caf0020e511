// Package store is warden's storage: every table and every SQL statement.
// It keeps the ledger (backlog items, tags, links, fenced and leased claims,
// the grant log), the acts warden must remember (admissions, epochs, parks,
// label findings, recorded agents, the command log), what it recorded of
// GitHub (repositories, issue states, pull requests, the comment trail,
// anchors, check runs, divergences, the reconcile's progress) and the leases
// of the comments it keeps (report comments, dashboards) and of the
// settings in effect. It knows no GitHub: every rule it applies is a pure
// function in gating, and it stores, locks and sequences.
package store

import (
	"context"
	"fmt"

	"github.com/wardenhq/warden/internal/db"
)

// Store is the storage opened once over one database.
type Store struct {
	// DB is the database everything is kept in.
	DB *db.DB
	// Ledger is the backlog ledger and what GitHub told warden.
	Ledger *Ledger
	// Acts is the human and agent acts warden remembers.
	Acts *Acts
	// Reports, Dashboards and Settings are the rows of the comments warden
	// keeps on GitHub and of the settings in effect.
	Reports    *ReportRows
	Dashboards *DashboardRows
	Settings   *SettingsRows
}

// Open migrates the whole schema on d and returns the store over it.
func Open(ctx context.Context, d *db.DB, cfg Config) (*Store, error) {
	l, err := newLedger(d, cfg)
	if err != nil {
		return nil, err
	}
	if err := Migrate(ctx, d); err != nil {
		return nil, fmt.Errorf("open the store: %w", err)
	}
	pg := d.Dialect == db.Postgres
	return &Store{DB: d, Ledger: l, Acts: &Acts{db: d}, Reports: &ReportRows{db: d, pg: pg},
		Dashboards: &DashboardRows{db: d, pg: pg}, Settings: &SettingsRows{db: d, pg: pg}}, nil
}
