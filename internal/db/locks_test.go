package db_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/wardenhq/warden/internal/db"
	"github.com/wardenhq/warden/internal/db/dbtest"
)

// exclusive runs 100 holders of one lock and 100 of another across the
// given handles and reports the most that were ever inside one at once.
func exclusive(t *testing.T, handles []*db.DB) (worst map[string]int) {
	t.Helper()
	var wg sync.WaitGroup
	var mu sync.Mutex
	inside, worst := map[string]int{}, map[string]int{}
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := []string{"a", "b"}[i%2]
			unlock, err := handles[i%len(handles)].Lock(context.Background(), name)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			inside[name]++
			worst[name] = max(worst[name], inside[name])
			mu.Unlock()
			time.Sleep(100 * time.Microsecond)
			mu.Lock()
			inside[name]--
			mu.Unlock()
			unlock()
		}()
	}
	wg.Wait()
	return worst
}

func TestLockIsExclusiveInOneProcess(t *testing.T) {
	d := dbtest.SQLite(t)
	for name, n := range exclusive(t, []*db.DB{d}) {
		if n != 1 {
			t.Errorf("lock %s had %d holders at once", name, n)
		}
	}
	unlock, ok, err := d.TryLock(context.Background(), "x")
	if err != nil || !ok {
		t.Fatalf("TryLock of a free lock: ok %v, err %v", ok, err)
	}
	if _, ok, _ := d.TryLock(context.Background(), "x"); ok {
		t.Fatal("TryLock took a lock already held")
	}
	wctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := d.Lock(wctx, "x"); err == nil {
		t.Fatal("Lock returned a lock held in this process")
	}
	unlock()
	unlock() // a second release is harmless
	if _, ok, _ := d.TryLock(context.Background(), "x"); !ok {
		t.Fatal("TryLock could not take a released lock")
	}
}

// On PostgreSQL the lock holds across handles (replicas): three pools on
// one schema never let two holders in; a handle that dies releases its
// locks; the same name in another schema is another lock.
func TestLockAcrossReplicasPostgres(t *testing.T) {
	dsn := dbtest.PostgresURL(t)
	ctx := context.Background()
	open := func() *db.DB {
		d, err := db.Open(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		return d
	}
	a, b, c := open(), open(), open()
	for name, n := range exclusive(t, []*db.DB{a, b, c}) {
		if n != 1 {
			t.Errorf("lock %s had %d holders at once across three replicas", name, n)
		}
	}
	if _, ok, err := a.TryLock(ctx, "reconcile"); err != nil || !ok {
		t.Fatalf("replica a: TryLock: ok %v, err %v", ok, err)
	}
	if _, ok, err := b.TryLock(ctx, "reconcile"); err != nil || ok {
		t.Fatalf("replica b took the lock replica a holds (ok %v, err %v)", ok, err)
	}
	// b waits for the lock while a holds it; a dies; b gets it.
	got := make(chan error, 1)
	go func() {
		unlock, err := b.Lock(ctx, "reconcile")
		if err == nil {
			defer unlock()
		}
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("replica b got the lock while a held it (err %v)", err)
	case <-time.After(100 * time.Millisecond):
	}
	// Replica a dies: its connections drop (the server ends its sessions).
	var killed int
	if err := c.Read.QueryRowContext(ctx, `SELECT COUNT(pg_terminate_backend(pid)) FROM pg_locks
		WHERE locktype = 'advisory' AND granted AND objsubid = 1
		AND ((classid::bigint << 32) | objid::bigint) = hashtextextended(current_schema() || '/' || 'reconcile', 0)`).Scan(&killed); err != nil {
		t.Fatal(err)
	}
	if killed != 1 {
		t.Fatalf("%d sessions held replica a's lock, want 1", killed)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the lock of a dead replica was not taken over")
	}
	// A waiter whose context ends gives up with an error.
	unlock, err := c.Lock(ctx, "held")
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	wctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if _, err := b.Lock(wctx, "held"); err == nil {
		t.Fatal("Lock returned a lock another replica holds")
	}
	// Another schema, another lock.
	other, err := db.Open(ctx, dbtest.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, ok, err := other.TryLock(ctx, "held"); err != nil || !ok {
		t.Fatalf("a lock in another schema blocked this one (ok %v, err %v)", ok, err)
	}
}
