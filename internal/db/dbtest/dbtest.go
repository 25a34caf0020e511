// Package dbtest gives tests a fresh, empty database on each backend warden
// supports. PostgreSQL runs only when WARDEN_TEST_POSTGRES holds a URL (as
// .ci/run exports); each call then gets a schema of its own, dropped when
// the test ends.
package dbtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"path/filepath"
	"testing"

	"github.com/wardenhq/warden/internal/db"
)

// PostgresEnv names the variable holding a PostgreSQL URL for tests.
const PostgresEnv = "WARDEN_TEST_POSTGRES"

// SQLite opens a fresh SQLite database in a temporary directory.
func SQLite(t testing.TB) *db.DB {
	t.Helper()
	d, err := db.Open(context.Background(), "sqlite:"+filepath.Join(t.TempDir(), "test.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// PostgresURL returns a URL to a fresh, empty schema in the database named by
// WARDEN_TEST_POSTGRES, skipping the test when the variable is unset. The
// schema is dropped when the test ends.
func PostgresURL(t testing.TB) string {
	t.Helper()
	base := os.Getenv(PostgresEnv)
	if base == "" {
		t.Skip("PostgreSQL suite skipped: set " + PostgresEnv + " to a postgres:// URL to run it")
	}
	ctx := context.Background()
	admin, err := db.Open(ctx, base)
	if err != nil {
		t.Fatalf("%s: %v", PostgresEnv, err)
	}
	var b [6]byte
	rand.Read(b[:])
	schema := "wt_" + hex.EncodeToString(b[:])
	if _, err := admin.Write.ExecContext(ctx, "CREATE SCHEMA "+schema); err != nil {
		admin.Close()
		t.Fatalf("create schema: %v", err)
	}
	t.Cleanup(func() {
		admin.Write.ExecContext(context.Background(), "DROP SCHEMA "+schema+" CASCADE")
		admin.Close()
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("%s: %v", PostgresEnv, err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// Postgres opens a fresh, empty PostgreSQL schema (see PostgresURL).
func Postgres(t testing.TB) *db.DB {
	t.Helper()
	dsn := PostgresURL(t)
	d, err := db.Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	// Registered after PostgresURL's cleanup, so it runs before the drop.
	t.Cleanup(func() { d.Close() })
	return d
}
