package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/internal/db"
	"github.com/wardenhq/warden/internal/db/dbtest"
)

func TestReportRowsSQLite(t *testing.T) {
	runReportRows(t, func(t *testing.T) *db.DB { return dbtest.SQLite(t) })
}

func TestReportRowsPostgres(t *testing.T) {
	if os.Getenv(dbtest.PostgresEnv) == "" {
		t.Skip("PostgreSQL report rows skipped: set " + dbtest.PostgresEnv + " to a postgres:// URL to run it")
	}
	runReportRows(t, func(t *testing.T) *db.DB { return dbtest.Postgres(t) })
}

func runReportRows(t *testing.T, open func(t *testing.T) *db.DB) {
	ctx := context.Background()
	repo := Repo{ID: 9, FullName: "acme/app", Installation: 3, DefaultBranch: "main"}
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	clock := func() time.Time { return at }
	rowsOf := func(t *testing.T) (*ReportRows, *db.DB) {
		d := open(t)
		st, err := Open(ctx, d, Config{Region: "local"})
		if err != nil {
			t.Fatal(err)
		}
		return st.Reports, d
	}

	t.Run("missing row not created", func(t *testing.T) {
		s, _ := rowsOf(t)
		called := false
		err := s.Update(ctx, repo, 1, false, clock, func(w *ReportRow, now int64) (bool, error) {
			called = true
			if w != nil {
				t.Errorf("row %+v for a missing item", w)
			}
			return true, nil
		})
		if err != nil || !called {
			t.Fatalf("Update: %v (fn called %v)", err, called)
		}
		if _, found, err := s.Get(ctx, repo.ID, 1); err != nil || found {
			t.Fatalf("Get after a non-creating update: found %v, %v", found, err)
		}
		if dues, err := s.Due(ctx, at.UnixMilli()+1e9, 10); err != nil || len(dues) != 0 {
			t.Fatalf("Due: %v %v", dues, err)
		}
	})

	t.Run("create, save and read back", func(t *testing.T) {
		s, d := rowsOf(t)
		err := s.Update(ctx, repo, 2, true, clock, func(w *ReportRow, now int64) (bool, error) {
			if w == nil {
				return false, errors.New("no row after create")
			}
			if now != at.UnixMilli() {
				t.Errorf("now %d, want %d", now, at.UnixMilli())
			}
			if w.Repo != repo || w.Number != 2 || w.CommentID != 0 || w.Pending || w.LeaseOwner != "" ||
				len(w.Findings) != 0 || len(w.Refusals) != 0 {
				t.Errorf("fresh row %+v", w)
			}
			w.Findings = []gating.ReportFinding{{Code: "cycle", Detail: "a to b"}}
			w.Refusals = nil
			w.CommentID, w.Body, w.WrittenHash, w.WrittenAt = 77, "body", "h", now
			w.Pending, w.DueAt = true, now+1000
			w.LeaseOwner, w.LeaseUntil = "me", now+2000
			return true, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		w, found, err := s.Get(ctx, repo.ID, 2)
		if err != nil || !found {
			t.Fatalf("Get: %v %v", found, err)
		}
		want := ReportRow{Repo: repo, Number: 2, CommentID: 77, Body: "body", WrittenHash: "h", WrittenAt: at.UnixMilli(),
			Findings: []gating.ReportFinding{{Code: "cycle", Detail: "a to b"}}, Refusals: []string{},
			Pending: true, DueAt: at.UnixMilli() + 1000, LeaseOwner: "me", LeaseUntil: at.UnixMilli() + 2000}
		if fmt.Sprintf("%+v", *w) != fmt.Sprintf("%+v", want) {
			t.Errorf("row\n%+v\nwant\n%+v", *w, want)
		}
		// The columns keep their encoding (JSON arrays, 0/1 flags).
		var fj, rj string
		var pending int64
		if err := d.Read.QueryRowContext(ctx, `SELECT findings_json, refusals_json, pending FROM report_comments WHERE repo_id = $1 AND number = $2`,
			repo.ID, 2).Scan(&fj, &rj, &pending); err != nil {
			t.Fatal(err)
		}
		if fj != `[{"code":"cycle","detail":"a to b"}]` || rj != `[]` || pending != 1 {
			t.Errorf("columns %s %s %d", fj, rj, pending)
		}
		if id, err := s.CommentID(ctx, repo.ID, 2); err != nil || id != 77 {
			t.Errorf("CommentID %d %v", id, err)
		}
		if id, err := s.CommentID(ctx, repo.ID, 3); err != nil || id != 0 {
			t.Errorf("CommentID of a missing row %d %v", id, err)
		}
	})

	t.Run("no save and errors leave the row", func(t *testing.T) {
		s, _ := rowsOf(t)
		if err := s.Update(ctx, repo, 4, true, clock, func(w *ReportRow, _ int64) (bool, error) {
			w.Body = "kept"
			return true, nil
		}); err != nil {
			t.Fatal(err)
		}
		if err := s.Update(ctx, repo, 4, false, clock, func(w *ReportRow, _ int64) (bool, error) {
			w.Body = "not saved"
			return false, nil
		}); err != nil {
			t.Fatal(err)
		}
		boom := errors.New("boom")
		if err := s.Update(ctx, repo, 4, false, clock, func(w *ReportRow, _ int64) (bool, error) {
			w.Body = "rolled back"
			return true, boom
		}); !errors.Is(err, boom) {
			t.Fatalf("Update: %v, want fn's error", err)
		}
		if w, _, err := s.Get(ctx, repo.ID, 4); err != nil || w.Body != "kept" {
			t.Fatalf("body %q %v, want kept", w.Body, err)
		}
		// A failed create inserts nothing.
		if err := s.Update(ctx, repo, 5, true, clock, func(*ReportRow, int64) (bool, error) { return true, boom }); !errors.Is(err, boom) {
			t.Fatalf("Update: %v, want fn's error", err)
		}
		if _, found, err := s.Get(ctx, repo.ID, 5); err != nil || found {
			t.Fatalf("row after a failed create: %v %v", found, err)
		}
	})

	t.Run("due rows", func(t *testing.T) {
		s, _ := rowsOf(t)
		other := Repo{ID: 8, FullName: "acme/lib", Installation: 3, DefaultBranch: "trunk"}
		set := func(r Repo, n int, pending bool, due int64) {
			t.Helper()
			if err := s.Update(ctx, r, n, true, clock, func(w *ReportRow, _ int64) (bool, error) {
				w.Pending, w.DueAt = pending, due
				return true, nil
			}); err != nil {
				t.Fatal(err)
			}
		}
		set(repo, 1, true, 300)
		set(repo, 2, true, 100)
		set(other, 7, true, 100)
		set(repo, 3, false, 50) // not pending
		set(repo, 4, true, 500) // not yet due
		dues, err := s.Due(ctx, 300, 10)
		if err != nil {
			t.Fatal(err)
		}
		want := []ReportRef{{other, 7}, {repo, 2}, {repo, 1}}
		if fmt.Sprint(dues) != fmt.Sprint(want) {
			t.Errorf("due %v, want %v", dues, want)
		}
		if dues, err := s.Due(ctx, 300, 2); err != nil || len(dues) != 2 {
			t.Errorf("due with a limit of 2: %v %v", dues, err)
		}
	})

	// Concurrent writers on one missing row: each creates it or finds it,
	// under the lock, and none loses another's change.
	t.Run("concurrent updates serialise", func(t *testing.T) {
		s, _ := rowsOf(t)
		const writers = 16
		var wg sync.WaitGroup
		errs := make([]error, writers)
		for i := range writers {
			wg.Go(func() {
				errs[i] = s.Update(ctx, repo, 6, true, clock, func(w *ReportRow, _ int64) (bool, error) {
					if w == nil {
						return false, errors.New("no row after create")
					}
					w.Refusals = append(w.Refusals, fmt.Sprint(i))
					w.DueAt++
					return true, nil
				})
			})
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("writer %d: %v", i, err)
			}
		}
		w, _, err := s.Get(ctx, repo.ID, 6)
		if err != nil {
			t.Fatal(err)
		}
		if len(w.Refusals) != writers || w.DueAt != writers {
			t.Errorf("%d refusals, counter %d, want %d each: a change was lost", len(w.Refusals), w.DueAt, writers)
		}
	})
}
