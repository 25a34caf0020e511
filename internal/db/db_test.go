package db

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

func TestOpenRefusesUnknownDatabases(t *testing.T) {
	cases := []struct{ dsn, want string }{
		{"mysql://u:p@h/db", "neither sqlite:PATH nor a postgres:// URL"},
		{"sqlite:", "needs a file path"},
	}
	for _, c := range cases {
		_, err := Open(context.Background(), c.dsn)
		if err == nil || !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want ErrUnsupported naming %q", c.dsn, err, c.want)
		}
		if err != nil && (strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), ":p@")) {
			t.Errorf("%s: error leaks a password: %v", c.dsn, err)
		}
	}
}

func TestOpenRefusesMissingDirectory(t *testing.T) {
	_, err := Open(context.Background(), "sqlite:"+filepath.Join(t.TempDir(), "no", "such", "w.db"))
	if err == nil || !strings.Contains(err.Error(), "directory") {
		t.Fatalf("got %v, want an error naming the directory", err)
	}
}

func TestOpenSetsDurableWAL(t *testing.T) {
	d, err := Open(context.Background(), "sqlite:"+filepath.Join(t.TempDir(), "w.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for _, pool := range []struct {
		name string
		q    func(string) (string, error)
	}{
		{"write", func(p string) (string, error) {
			var v string
			return v, d.Write.QueryRow("PRAGMA " + p).Scan(&v)
		}},
		{"read", func(p string) (string, error) {
			var v string
			return v, d.Read.QueryRow("PRAGMA " + p).Scan(&v)
		}},
	} {
		if v, err := pool.q("journal_mode"); err != nil || v != "wal" {
			t.Errorf("%s journal_mode = %q, %v; want wal", pool.name, v, err)
		}
		// synchronous=FULL is 2: a commit survives a power loss.
		if v, err := pool.q("synchronous"); err != nil || v != "2" {
			t.Errorf("%s synchronous = %q, %v; want 2 (FULL)", pool.name, v, err)
		}
	}
	var auto string
	if err := d.Write.QueryRow("PRAGMA wal_autocheckpoint").Scan(&auto); err != nil || auto != "0" {
		t.Errorf("writer checkpoints inside commits (wal_autocheckpoint=%q, %v)", auto, err)
	}
}

func TestMigrateAppliesEachStepOnce(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "w.db")
	d, err := Open(ctx, "sqlite:"+path)
	if err != nil {
		t.Fatal(err)
	}
	steps := []Migration{
		{Version: 1, SQL: `CREATE TABLE t (x INTEGER)`},
		{Version: 2, SQL: `INSERT INTO t (x) VALUES (1)`},
	}
	for i := 0; i < 3; i++ {
		if err := d.Migrate(ctx, "c", steps); err != nil {
			t.Fatal(err)
		}
	}
	var n int
	if err := d.Read.QueryRow(`SELECT COUNT(*) FROM t`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("step 2 ran %d times (%v), want once", n, err)
	}
	d.Close()
	// A failing step leaves nothing half-written and names itself.
	d, err = Open(ctx, "sqlite:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	err = d.Migrate(ctx, "c", append(steps, Migration{Version: 3, SQL: `INSERT INTO t (x) VALUES (3); INSERT INTO nope VALUES (1)`}))
	if err == nil || !strings.Contains(err.Error(), "migrate c v3") {
		t.Fatalf("got %v, want an error naming migrate c v3", err)
	}
	if err := d.Read.QueryRow(`SELECT COUNT(*) FROM t`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("a failed step left %d rows (%v), want 1", n, err)
	}
	if err := d.Migrate(ctx, "c", []Migration{{Version: 2}, {Version: 1}}); err == nil {
		t.Fatal("out-of-order versions accepted")
	}
}
