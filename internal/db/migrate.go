package db

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// Migration is one forward step of a component's schema. Steps are applied in
// Version order, each in its own transaction, and recorded so that each runs
// once.
type Migration struct {
	Version int
	// SQL is run as one script; on SQLite it may hold several statements.
	SQL string
	// Postgres, when set, replaces SQL on PostgreSQL (for a step whose DDL
	// differs between the dialects: AUTOINCREMENT, BLOB, 32-bit INTEGER).
	// SQLite always runs SQL, so existing SQLite databases keep their schema.
	Postgres string
}

// script is the step's SQL for dialect.
func (s Migration) script(dialect Dialect) string {
	if dialect == Postgres && s.Postgres != "" {
		return s.Postgres
	}
	return s.SQL
}

// migrationLock is the PostgreSQL advisory lock key under which migrations
// run ("warden-migrate" as a number): replicas starting at once take turns.
const migrationLock = 0x77617264656e6d

// Migrate applies the component's migrations that have not run yet. It is
// safe to call at every start, and from several replicas at once: on
// PostgreSQL the migrations run under a session advisory lock, so each step
// is applied once and nobody fails on another's CREATE.
func (d *DB) Migrate(ctx context.Context, component string, steps []Migration) error {
	for i, s := range steps {
		if i > 0 && s.Version <= steps[i-1].Version {
			return fmt.Errorf("migrate %s: versions out of order at %d", component, s.Version)
		}
	}
	conn, err := d.Write.Conn(ctx)
	if err != nil {
		return fmt.Errorf("migrate %s: %w", component, err)
	}
	defer conn.Close()
	if d.Dialect == Postgres {
		if _, err := conn.ExecContext(ctx, `SELECT pg_advisory_lock($1)`, int64(migrationLock)); err != nil {
			return fmt.Errorf("migrate %s: take the migration lock: %w", component, err)
		}
		defer conn.ExecContext(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, int64(migrationLock))
	}
	if _, err := conn.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		component TEXT NOT NULL,
		version INTEGER NOT NULL,
		applied_at INTEGER NOT NULL,
		PRIMARY KEY (component, version))`); err != nil {
		return fmt.Errorf("migrate %s: create schema_migrations: %w", component, err)
	}
	for _, s := range steps {
		if err := d.apply(ctx, conn, component, s); err != nil {
			return err
		}
	}
	return nil
}

func (d *DB) apply(ctx context.Context, conn *sql.Conn, component string, s Migration) error {
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("migrate %s v%d: begin: %w", component, s.Version, err)
	}
	defer tx.Rollback()
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM schema_migrations WHERE component = $1 AND version = $2`,
		component, s.Version).Scan(&n); err != nil {
		return fmt.Errorf("migrate %s v%d: %w", component, s.Version, err)
	}
	if n > 0 {
		return nil
	}
	if _, err := tx.ExecContext(ctx, s.script(d.Dialect)); err != nil {
		return fmt.Errorf("migrate %s v%d: %w", component, s.Version, err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (component, version, applied_at) VALUES ($1, $2, $3)`,
		component, s.Version, time.Now().Unix()); err != nil {
		return fmt.Errorf("migrate %s v%d: record: %w", component, s.Version, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("migrate %s v%d: commit: %w", component, s.Version, err)
	}
	return nil
}
