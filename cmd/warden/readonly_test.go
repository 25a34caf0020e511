package main

import (
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/wardenhq/warden/internal/db"
)

// TestReadCommandsCreateNoDatabase: a command that reads (or acts on) an
// existing database, pointed at none, refuses in one line naming the file
// and what creates it, and leaves no file behind.
func TestReadCommandsCreateNoDatabase(t *testing.T) {
	for _, args := range [][]string{
		{"ready", "--repo", "acme/app"},
		{"deliveries", "list"},
		{"deliveries", "retry", "d-1"},
		{"items", "list", "--repo", "acme/app"},
		{"items", "show", "--repo", "acme/app", "issue-1"},
		{"items", "claim", "--repo", "acme/app", "issue-1", "--owner", "a/b"},
	} {
		t.Run(strings.Join(args[:2], " "), func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "warden.db")
			code, out, errs := runCLI(map[string]string{"WARDEN_DATABASE": "sqlite:" + path}, args...)
			if code != exitSetting || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, "no database at "+path) ||
				!strings.Contains(errs, "warden serve or warden migrate creates it") {
				t.Fatalf("exit %d, stderr %q, stdout %q; want 2 and one line naming %s and what creates it", code, errs, out, path)
			}
			if ents, _ := os.ReadDir(dir); len(ents) != 0 {
				t.Fatalf("the command left %v in an empty directory", ents)
			}
		})
	}
	// The same commands on an existing database work (migrate creates it).
	path := filepath.Join(t.TempDir(), "warden.db")
	env := map[string]string{"WARDEN_DATABASE": "sqlite:" + path}
	if code, _, errs := runCLI(env, "migrate"); code != exitOK {
		t.Fatalf("migrate: %d %s", code, errs)
	}
	if code, out, errs := runCLI(env, "deliveries", "list"); code != exitOK || !strings.Contains(out, "the inbox is empty") {
		t.Fatalf("deliveries list on a new database: %d %q %q", code, out, errs)
	}
}

// TestSecondServeIsRefused: while a warden serve holds a SQLite database, a
// second serve on it is refused in one line before it opens anything;
// backup and the read commands still work meanwhile.
func TestSecondServeIsRefused(t *testing.T) {
	var allowed atomic.Bool
	allowed.Store(true)
	var calls atomic.Int64
	gh := fakeGitHub(t, &allowed, &calls)
	_, env := testSettings(t, gh.URL)
	env["WARDEN_LISTEN"], env["WARDEN_ADMIN_LISTEN"] = "127.0.0.1:0", "127.0.0.1:0"
	if code, _, errs := runCLI(env, "migrate"); code != exitOK {
		t.Fatalf("migrate: %d %s", code, errs)
	}
	// The first serve's lock, as serve takes it.
	release, err := db.LockServe(env["WARDEN_DATABASE"])
	if err != nil {
		t.Fatal(err)
	}
	path := strings.TrimPrefix(env["WARDEN_DATABASE"], "sqlite:")
	before := calls.Load()
	code, _, errs := runCLI(env, "serve")
	if code != exitSetting || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, path+" is in use by another warden serve") ||
		!strings.Contains(errs, path+".lock") || !strings.Contains(errs, "PostgreSQL") {
		t.Fatalf("second serve: exit %d, stderr %q; want 2 and one line naming the database and its lock", code, errs)
	}
	if calls.Load() != before {
		t.Errorf("the refused serve called GitHub %d times", calls.Load()-before)
	}
	if code, _, errs := runCLI(env, "backup", filepath.Join(t.TempDir(), "copy.db")); code != exitOK {
		t.Errorf("backup while serve runs: %d %s", code, errs)
	}
	if code, _, errs := runCLI(env, "deliveries", "list"); code != exitOK {
		t.Errorf("deliveries list while serve runs: %d %s", code, errs)
	}
	if code, _, errs := runCLI(env, "restore", filepath.Join(t.TempDir(), "none.db")); code != exitFailed || !strings.Contains(errs, "database in use") {
		t.Errorf("restore while serve runs: %d %s; want 1, database in use", code, errs)
	}
	release()
	// Once the first has stopped, a serve may start: the lock is free.
	again, err := db.LockServe(env["WARDEN_DATABASE"])
	if err != nil {
		t.Fatalf("the lock was not released: %v", err)
	}
	again()
}
