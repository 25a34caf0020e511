package db_test

import (
	"context"
	"strings"
	"testing"

	"github.com/wardenhq/warden/internal/db"
	"github.com/wardenhq/warden/internal/db/dbtest"
)

// An unreachable PostgreSQL fails Open without showing its password.
func TestOpenPostgresUnreachableHidesPassword(t *testing.T) {
	for _, dsn := range []string{
		"postgres://u:hunter2@127.0.0.1:1/db?connect_timeout=2",
		"postgresql://u:hunter2@127.0.0.1:1/db?connect_timeout=2",
	} {
		_, err := db.Open(context.Background(), dsn)
		if err == nil {
			t.Fatalf("%s: opened an unreachable database", dsn)
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("error leaks the password: %v", err)
		}
	}
}

func TestPostgresOpenAndMigrate(t *testing.T) {
	d := dbtest.Postgres(t)
	ctx := context.Background()
	if d.Dialect != db.Postgres {
		t.Fatalf("dialect %q, want postgres", d.Dialect)
	}
	if strings.Contains(d.Source, "warden:") && !strings.Contains(d.Source, "xxxxx") {
		t.Errorf("Source shows a password: %s", d.Source)
	}
	steps := []db.Migration{
		// SQLite's DDL is invalid on PostgreSQL: the Postgres variant runs.
		{Version: 1, SQL: `CREATE TABLE t (id INTEGER PRIMARY KEY AUTOINCREMENT, b BLOB)`,
			Postgres: `CREATE TABLE t (id BIGSERIAL PRIMARY KEY, b BYTEA)`},
		{Version: 2, SQL: `INSERT INTO t (b) VALUES ('x'); INSERT INTO t (b) VALUES ('y')`},
	}
	for i := 0; i < 3; i++ {
		if err := d.Migrate(ctx, "c", steps); err != nil {
			t.Fatal(err)
		}
	}
	var n int
	if err := d.Read.QueryRowContext(ctx, `SELECT COUNT(*) FROM t`).Scan(&n); err != nil || n != 2 {
		t.Fatalf("step 2 inserted %d rows (%v), want 2 once", n, err)
	}
	err := d.Migrate(ctx, "c", append(steps, db.Migration{Version: 3, SQL: `INSERT INTO t (b) VALUES ('z'); INSERT INTO nope VALUES (1)`}))
	if err == nil || !strings.Contains(err.Error(), "migrate c v3") {
		t.Fatalf("got %v, want an error naming migrate c v3", err)
	}
	if err := d.Read.QueryRowContext(ctx, `SELECT COUNT(*) FROM t`).Scan(&n); err != nil || n != 2 {
		t.Fatalf("a failed step left %d rows (%v), want 2", n, err)
	}
}

// Replicas starting at once migrate one database: every step is applied
// once and none of them fails (a lock serialises the migrations).
func TestPostgresConcurrentMigrate(t *testing.T) {
	url := dbtest.PostgresURL(t)
	ctx := context.Background()
	steps := []db.Migration{
		{Version: 1, SQL: `CREATE TABLE t (id BIGINT NOT NULL)`},
		{Version: 2, SQL: `INSERT INTO t (id) VALUES (1)`},
		{Version: 3, SQL: `INSERT INTO t (id) VALUES (2)`},
	}
	const replicas = 6
	dbs := make([]*db.DB, replicas)
	for i := range dbs {
		d, err := db.Open(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		dbs[i] = d
	}
	errs := make(chan error, replicas)
	start := make(chan struct{})
	for _, d := range dbs {
		go func() {
			<-start
			errs <- d.Migrate(ctx, "c", steps)
		}()
	}
	close(start)
	for range dbs {
		if err := <-errs; err != nil {
			t.Errorf("a replica's migration failed: %v", err)
		}
	}
	var n int
	if err := dbs[0].Read.QueryRowContext(ctx, `SELECT COUNT(*) FROM t`).Scan(&n); err != nil || n != 2 {
		t.Fatalf("%d rows (%v), want 2: each step applied once", n, err)
	}
}
