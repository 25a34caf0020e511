package service

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/wardenhq/warden/internal/db"
	"github.com/wardenhq/warden/internal/db/dbtest"
)

// TestSharedPassesTakeTurns: of two replicas, one runs a shared pass at a
// time and once per interval; a pass whose holder stopped before finishing
// is run by the next replica that looks; errors are recorded.
func TestSharedPassesTakeTurns(t *testing.T) {
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			var da, dbb *db.DB
			if backend == "sqlite" {
				da = dbtest.SQLite(t)
				dbb = da // one process on SQLite: the lock is a mutex
			} else {
				dsn := dbtest.PostgresURL(t)
				open := func() *db.DB {
					d, err := db.Open(context.Background(), dsn)
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { d.Close() })
					return d
				}
				da, dbb = open(), open()
			}
			ctx := context.Background()
			if err := da.Migrate(ctx, "coordination", coordinationMigrations); err != nil {
				t.Fatal(err)
			}
			a, b := &Service{DB: da, replica: "a/1/aaaaaa"}, &Service{DB: dbb, replica: "b/2/bbbbbb"}
			runs := 0
			pass := func(context.Context) error { runs++; return nil }

			if ran, err := a.runShared(ctx, "reconcile", time.Hour, pass); err != nil || !ran {
				t.Fatalf("a: ran %v, err %v; want the first pass run", ran, err)
			}
			if ran, err := b.runShared(ctx, "reconcile", time.Hour, pass); err != nil || ran {
				t.Fatalf("b: ran %v, err %v; a ran it this interval", ran, err)
			}
			// While a runs the pass, b does not.
			inside, release := make(chan struct{}), make(chan struct{})
			done := make(chan error, 1)
			go func() {
				_, err := a.runShared(ctx, "catchup", 0, func(context.Context) error {
					close(inside)
					<-release
					return errors.New("GitHub said <503>")
				})
				done <- err
			}()
			<-inside
			if ran, err := b.runShared(ctx, "catchup", 0, pass); err != nil || ran {
				t.Fatalf("b ran the catch-up while a held it (ran %v, err %v)", ran, err)
			}
			close(release)
			if err := <-done; err == nil || err.Error() != "GitHub said <503>" {
				t.Fatalf("a's pass error %v", err)
			}
			rec, err := b.lastRun(ctx, "catchup")
			if err != nil || rec.Holder != "a/1/aaaaaa" || rec.FinishedAt.IsZero() || rec.LastError != "GitHub said <503>" {
				t.Fatalf("catch-up record %+v, %v", rec, err)
			}
			// a stops mid-pass: its record has no finish; b takes the pass.
			if _, err := da.Write.ExecContext(ctx, `UPDATE replica_runs SET finished_at = 0 WHERE name = 'reconcile'`); err != nil {
				t.Fatal(err)
			}
			if ran, err := b.runShared(ctx, "reconcile", time.Hour, pass); err != nil || !ran {
				t.Fatalf("b: ran %v, err %v; the unfinished pass must be taken over", ran, err)
			}
			rec, err = a.lastRun(ctx, "reconcile")
			if err != nil || rec.Holder != "b/2/bbbbbb" || rec.FinishedAt.IsZero() {
				t.Fatalf("reconcile record after the takeover: %+v, %v", rec, err)
			}
			if runs != 2 {
				t.Fatalf("%d passes ran, want 2", runs)
			}
		})
	}
}
