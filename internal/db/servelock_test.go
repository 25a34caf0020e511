package db

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestLockServe(t *testing.T) {
	path := filepath.Join(t.TempDir(), "w.db")
	dsn := "sqlite:" + path
	release, err := LockServe(dsn)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path + ".lock"); strings.TrimSpace(string(b)) != strconv.Itoa(os.Getpid()) {
		t.Errorf("the lock file holds %q, want this process's id", b)
	}
	// A second holder, even in this process (another open file), is refused.
	_, err = LockServe(dsn)
	if !errors.Is(err, ErrServeRunning) || !strings.Contains(err.Error(), "process "+strconv.Itoa(os.Getpid())) ||
		!strings.Contains(err.Error(), path+".lock") {
		t.Fatalf("second lock: %v; want ErrServeRunning naming the holder and the lock file", err)
	}
	// Another database beside it is not affected.
	other, err := LockServe("sqlite:" + filepath.Join(filepath.Dir(path), "other.db"))
	if err != nil {
		t.Fatalf("a lock on another database: %v", err)
	}
	other()
	release()
	again, err := LockServe(dsn)
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	again()
	// PostgreSQL takes several replicas: no lock.
	for _, d := range []string{"postgres://warden@db.example/warden", "sqlite::memory:"} {
		r1, err1 := LockServe(d)
		r2, err2 := LockServe(d)
		if err1 != nil || err2 != nil {
			t.Fatalf("%s: %v %v, want no lock", d, err1, err2)
		}
		r1()
		r2()
	}
}

func TestOpenExistingCreatesNothing(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "w.db")
	_, err := OpenExisting(context.Background(), "sqlite:"+path)
	if !errors.Is(err, ErrNoDatabase) || !strings.Contains(err.Error(), "no database at "+path) {
		t.Fatalf("OpenExisting on no file: %v; want ErrNoDatabase naming %s", err, path)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("OpenExisting left %v", ents)
	}
	if err := os.Mkdir(filepath.Join(dir, "d.db"), 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenExisting(context.Background(), "sqlite:"+filepath.Join(dir, "d.db")); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("OpenExisting on a directory: %v", err)
	}
	d, err := Open(context.Background(), "sqlite:"+path)
	if err != nil {
		t.Fatal(err)
	}
	d.Close()
	d, err = OpenExisting(context.Background(), "sqlite:"+path)
	if err != nil {
		t.Fatalf("OpenExisting on an existing database: %v", err)
	}
	d.Close()
}
