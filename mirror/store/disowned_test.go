package store

import (
	"context"
	"maps"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/wardenhq/warden/internal/db"
	"github.com/wardenhq/warden/internal/db/dbtest"
)

func TestDisownedSQLite(t *testing.T) {
	runDisowned(t, dbtest.SQLite(t))
}

func TestDisownedPostgres(t *testing.T) {
	if os.Getenv(dbtest.PostgresEnv) == "" {
		t.Skip("PostgreSQL undelivered rulings skipped: set " + dbtest.PostgresEnv + " to a postgres:// URL to run it")
	}
	runDisowned(t, dbtest.Postgres(t))
}

// runDisowned: a /backlog undelivered ruling is recorded once per item and
// pull request (the first one kept), read back per item with its author
// and time, and listed per repository for the divergences, without mixing
// items or repositories.
func runDisowned(t *testing.T, d *db.DB) {
	ctx := context.Background()
	st, err := Open(ctx, d, Config{Region: "local"})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2030, 1, 2, 3, 4, 5, 678_000_000, time.UTC)
	const repo, other = 9, 10

	if got, err := st.Ledger.DisownedPRs(ctx, repo); err != nil || len(got) != 0 {
		t.Fatalf("empty: %v %v", got, err)
	}
	steps := []struct {
		repo     int64
		n, pr    int
		by       string
		at       time.Time
		recorded bool
	}{
		{repo, 5, 12, "maria", at, true},
		{repo, 5, 12, "tom", at.Add(time.Minute), false}, // the first ruling is kept
		{repo, 5, 3, "tom", at.Add(2 * time.Minute), true},
		{repo, 6, 12, "maria", at, true}, // another item, the same pull request
		{other, 5, 99, "olga", at, true}, // another repository
	}
	for _, s := range steps {
		got, err := st.Acts.Disown(ctx, s.repo, s.n, s.pr, s.by, s.at)
		if err != nil {
			t.Fatal(err)
		}
		if got != s.recorded {
			t.Errorf("Disown(%d, #%d, pr #%d, %s) recorded %v, want %v", s.repo, s.n, s.pr, s.by, got, s.recorded)
		}
	}
	ds, err := st.Acts.Disownings(ctx, repo, 5)
	if err != nil {
		t.Fatal(err)
	}
	want := []Disowning{{5, 3, "tom", at.Add(2 * time.Minute)}, {5, 12, "maria", at}}
	if !slices.Equal(ds, want) {
		t.Errorf("Disownings(#5) = %+v, want %+v", ds, want)
	}
	if ds, err := st.Acts.Disownings(ctx, repo, 7); err != nil || len(ds) != 0 {
		t.Errorf("Disownings(#7) = %+v %v, want none", ds, err)
	}
	got, err := st.Ledger.DisownedPRs(ctx, repo)
	if err != nil {
		t.Fatal(err)
	}
	if w := map[int][]int{5: {3, 12}, 6: {12}}; !maps.EqualFunc(got, w, slices.Equal) {
		t.Errorf("DisownedPRs = %v, want %v", got, w)
	}
	if got, err := st.Ledger.DisownedPRs(ctx, other); err != nil || !maps.EqualFunc(got, map[int][]int{5: {99}}, slices.Equal) {
		t.Errorf("DisownedPRs(other) = %v %v", got, err)
	}
	// The rulings outlive a reopening of the store (they are acts).
	st2, err := Open(ctx, d, Config{Region: "local"})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := st2.Ledger.DisownedPRs(ctx, repo); err != nil || len(got[5]) != 2 {
		t.Errorf("after reopening: %v %v", got, err)
	}
}
