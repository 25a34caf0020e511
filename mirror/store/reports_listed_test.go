package store

import (
	"context"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/internal/db"
	"github.com/wardenhq/warden/internal/db/dbtest"
)

func TestReportRowsListedSQLite(t *testing.T) {
	runReportRowsListed(t, dbtest.SQLite(t))
}

func TestReportRowsListedPostgres(t *testing.T) {
	if os.Getenv(dbtest.PostgresEnv) == "" {
		t.Skip("PostgreSQL report rows skipped: set " + dbtest.PostgresEnv + " to a postgres:// URL to run it")
	}
	runReportRowsListed(t, dbtest.Postgres(t))
}

// runReportRowsListed: Listed gives each row's finding codes of one
// repository, and leaves out the rows that list none.
func runReportRowsListed(t *testing.T, d *db.DB) {
	ctx := context.Background()
	st, err := Open(ctx, d, Config{Region: "local"})
	if err != nil {
		t.Fatal(err)
	}
	s := st.Reports
	clock := func() time.Time { return time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC) }
	set := func(repo Repo, n int, codes ...string) {
		t.Helper()
		err := s.Update(ctx, repo, n, true, clock, func(w *ReportRow, _ int64) (bool, error) {
			w.Findings = nil
			for _, c := range codes {
				w.Findings = append(w.Findings, gating.ReportFinding{Code: c, Detail: "d"})
			}
			return true, nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	a := Repo{ID: 9, FullName: "acme/app", Installation: 3, DefaultBranch: "main"}
	b := Repo{ID: 10, FullName: "acme/other", Installation: 3, DefaultBranch: "main"}
	set(a, 1, "admission-unrecorded", "cycle")
	set(a, 2) // resolved: no findings
	set(a, 3, "poisoned")
	set(b, 1, "cycle")
	got, err := s.Listed(ctx, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || !slices.Equal(got[1], []string{"admission-unrecorded", "cycle"}) || !slices.Equal(got[3], []string{"poisoned"}) {
		t.Errorf("Listed = %v, want 1: [admission-unrecorded cycle], 3: [poisoned]", got)
	}
	if got, err := s.Listed(ctx, 99); err != nil || len(got) != 0 {
		t.Errorf("Listed of a repository with no rows = %v, %v", got, err)
	}
}
