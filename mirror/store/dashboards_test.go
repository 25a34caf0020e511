package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/wardenhq/warden/internal/db"
	"github.com/wardenhq/warden/internal/db/dbtest"
)

func TestDashboardRowsSQLite(t *testing.T) {
	testDashboardRows(t, dbtest.SQLite)
}

// TestDashboardRowsPostgres runs when WARDEN_TEST_POSTGRES holds a URL.
func TestDashboardRowsPostgres(t *testing.T) {
	testDashboardRows(t, dbtest.Postgres)
}

func testDashboardRows(t *testing.T, open func(testing.TB) *db.DB) {
	ctx := context.Background()
	st, err := Open(ctx, open(t), Config{Region: "local"})
	if err != nil {
		t.Fatal(err)
	}
	rows := st.Dashboards
	var clock int64 = 1000
	now := func() int64 { return clock }
	get := func(repoID int64) (DashboardRow, bool) {
		t.Helper()
		w, found, err := rows.Get(ctx, repoID)
		if err != nil {
			t.Fatal(err)
		}
		if !found {
			return DashboardRow{}, false
		}
		return *w, true
	}

	if _, found := get(7); found {
		t.Fatal("a row before any write")
	}
	if err := rows.UpdateExisting(ctx, 7, now, func(*DashboardRow, int64) error {
		t.Error("fn called on a missing row")
		return nil
	}); err == nil {
		t.Error("UpdateExisting on a missing row: no error")
	}
	boom := errors.New("boom")
	if err := rows.Update(ctx, 7, now, func(w *DashboardRow, _ int64) error {
		w.Number = 3
		return boom
	}); !errors.Is(err, boom) {
		t.Errorf("Update: %v, want fn's error", err)
	}
	if _, found := get(7); found {
		t.Error("an Update whose fn failed created the row")
	}

	// Unchanged by fn: the new row is kept, empty.
	if err := rows.Update(ctx, 7, now, func(w *DashboardRow, at int64) error {
		if *w != (DashboardRow{}) || at != clock {
			t.Errorf("new row %+v at %d", *w, at)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if w, found := get(7); !found || w != (DashboardRow{}) {
		t.Errorf("row %+v (found %v), want an empty one", w, found)
	}

	if err := rows.Update(ctx, 7, now, func(w *DashboardRow, at int64) error {
		w.Number, w.Hash, w.LeaseOwner, w.LeaseUntil = 12, "h1", "tok", at+500
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	want := DashboardRow{Number: 12, Hash: "h1", LeaseOwner: "tok", LeaseUntil: 1500}
	if w, _ := get(7); w != want {
		t.Errorf("row %+v, want %+v", w, want)
	}
	if !want.Leased(1499) || want.Leased(1500) || (&DashboardRow{LeaseUntil: 2000}).Leased(1000) {
		t.Error("Leased: wrong at the lease's edges")
	}

	// Release by a writer whose lease was taken over: nothing.
	if err := rows.Release(ctx, 7, "other", clock); err != nil {
		t.Fatal(err)
	}
	if w, _ := get(7); w != want {
		t.Errorf("released by another token: %+v", w)
	}
	if err := rows.Release(ctx, 7, "tok", clock); err != nil {
		t.Fatal(err)
	}
	want.LeaseOwner, want.LeaseUntil = "", 0
	if w, _ := get(7); w != want {
		t.Errorf("after the release %+v, want %+v", w, want)
	}
	if err := rows.Invalidate(ctx, 7, clock); err != nil {
		t.Fatal(err)
	}
	want.Hash = ""
	if w, _ := get(7); w != want {
		t.Errorf("after Invalidate %+v, want %+v", w, want)
	}
	if err := rows.Invalidate(ctx, 8, clock); err != nil {
		t.Errorf("Invalidate with no row: %v", err)
	}
	if _, found := get(8); found {
		t.Error("Invalidate created a row")
	}
	if err := rows.UpdateExisting(ctx, 7, now, func(w *DashboardRow, _ int64) error {
		w.Hash = "h2"
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if w, _ := get(7); w.Hash != "h2" || w.Number != 12 {
		t.Errorf("after UpdateExisting %+v", w)
	}

	// Concurrent writers, on a repository with no row yet (9) and on one
	// whose row is there, unleased (7): the read and the lease are decided
	// under one lock, so exactly one takes the lease.
	for _, repoID := range []int64{9, 7} {
		if won := raceForLease(t, rows, repoID, now); won != 1 {
			t.Errorf("repository %d: %d writers took the lease, want 1", repoID, won)
		}
	}
}

// raceForLease has several writers take the repository's lease at once
// (each only when nobody holds it) and returns how many did.
func raceForLease(t *testing.T, rows *DashboardRows, repoID int64, now func() int64) int {
	t.Helper()
	ctx := context.Background()
	const writers = 8
	var wg sync.WaitGroup
	var mu sync.Mutex
	won := 0
	errs := make(chan error, writers)
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := rows.Update(ctx, repoID, now, func(w *DashboardRow, at int64) error {
				if w.Leased(at) {
					return nil
				}
				w.LeaseOwner, w.LeaseUntil = fmt.Sprint("w", i), at+1000
				mu.Lock()
				won++
				mu.Unlock()
				return nil
			})
			if err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	return won
}
