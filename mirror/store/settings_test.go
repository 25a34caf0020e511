package store

import (
	"context"
	"testing"
	"time"

	"github.com/wardenhq/warden/internal/db"
	"github.com/wardenhq/warden/internal/db/dbtest"
)

func TestSettingsRowsSQLite(t *testing.T) { testSettingsRows(t, dbtest.SQLite(t)) }

func TestSettingsRowsPostgres(t *testing.T) { testSettingsRows(t, dbtest.Postgres(t)) }

// testSettingsRows: a row reads back as written, a write is fenced by the
// version it read, Forget deletes, and Lock excludes.
func testSettingsRows(t *testing.T, d *db.DB) {
	ctx := context.Background()
	st, err := Open(ctx, d, Config{Region: testRegion})
	if err != nil {
		t.Fatal(err)
	}
	s := st.Settings
	if _, found, err := s.Get(ctx, 1); err != nil || found {
		t.Fatalf("Get of no row: found=%v err=%v", found, err)
	}
	first := SettingsRow{SettingsJSON: `{"a":1}`, ProblemsJSON: `[]`, SourceSHA: "abc", PushedAt: 7, ChangedBy: "alice",
		PendingJSON: `{"sha":"def"}`, Version: 99}
	if ok, err := s.Save(ctx, 1, 0, false, first, 1000); err != nil || !ok {
		t.Fatalf("insert: ok=%v err=%v", ok, err)
	}
	got, found, err := s.Get(ctx, 1)
	if err != nil || !found {
		t.Fatalf("Get: found=%v err=%v", found, err)
	}
	want := first
	want.Version = 1 // prevVersion+1, not next.Version
	if got != want {
		t.Errorf("read back %+v, want %+v", got, want)
	}
	if ok, err := s.Save(ctx, 1, 0, false, first, 1001); err != nil || ok {
		t.Errorf("a second insert: ok=%v err=%v, want refused", ok, err)
	}
	second := first
	second.SettingsJSON, second.PendingJSON = `{"a":2}`, ""
	if ok, err := s.Save(ctx, 1, 1, true, second, 1002); err != nil || !ok {
		t.Fatalf("update at version 1: ok=%v err=%v", ok, err)
	}
	if ok, err := s.Save(ctx, 1, 1, true, first, 1003); err != nil || ok {
		t.Errorf("a stale update: ok=%v err=%v, want refused", ok, err)
	}
	if got, _, _ := s.Get(ctx, 1); got.SettingsJSON != `{"a":2}` || got.PendingJSON != "" || got.Version != 2 {
		t.Errorf("after the stale update: %+v, want the second write at version 2", got)
	}
	if ok, err := s.Save(ctx, 2, 5, true, first, 1004); err != nil || ok {
		t.Errorf("an update of no row: ok=%v err=%v, want refused", ok, err)
	}
	if err := s.Forget(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := s.Forget(ctx, 1); err != nil {
		t.Errorf("Forget of no row: %v", err)
	}
	if _, found, err := s.Get(ctx, 1); err != nil || found {
		t.Errorf("Get after Forget: found=%v err=%v", found, err)
	}

	release, err := s.Lock(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	other, err := s.Lock(ctx, 2) // another repository's lock is free
	if err != nil {
		t.Fatal(err)
	}
	other()
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if r, err := s.Lock(short, 1); err == nil {
		r()
		t.Fatal("a second Lock of the repository was granted while the first is held")
	}
	release()
	again, err := s.Lock(ctx, 1)
	if err != nil {
		t.Fatalf("Lock after release: %v", err)
	}
	again()
}
