package service

import (
	"context"
	"testing"
	"time"

	"github.com/wardenhq/warden/internal/config"
	"github.com/wardenhq/warden/internal/db/dbtest"
)

// TestMigratePostgres creates every component's schema on PostgreSQL (when
// WARDEN_TEST_POSTGRES holds a URL) and checks that a second run is a no-op.
func TestMigratePostgres(t *testing.T) {
	d := dbtest.Postgres(t)
	ctx := context.Background()
	s := &config.Settings{Region: "local", LeaseDefault: 30 * time.Second, LeaseMax: 30 * time.Minute}
	for i := 0; i < 2; i++ {
		if err := Migrate(ctx, d, s); err != nil {
			t.Fatalf("run %d: %v", i+1, err)
		}
	}
	var n int
	if err := d.Read.QueryRowContext(ctx, `SELECT COUNT(DISTINCT component) FROM schema_migrations`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n < 10 {
		t.Fatalf("%d components migrated, want every one", n)
	}
}
