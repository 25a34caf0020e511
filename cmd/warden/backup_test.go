package main

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/wardenhq/warden/internal/db"
)

// runCmd runs one warden command in-process with WARDEN_DATABASE set.
func runCmd(t *testing.T, database string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, mapEnv(map[string]string{"WARDEN_DATABASE": database}), &out, &errb)
	return code, out.String(), errb.String()
}

// probeRows adds n rows to a table of the test's own in the database at
// path (creating it) and returns how many it holds.
func probeRows(t *testing.T, path string, n int) int {
	t.Helper()
	d, err := db.Open(context.Background(), "sqlite:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, err := d.Write.Exec(`CREATE TABLE IF NOT EXISTS backup_probe (n INTEGER)`); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		if _, err := d.Write.Exec(`INSERT INTO backup_probe (n) VALUES (?)`, i); err != nil {
			t.Fatal(err)
		}
	}
	var c int
	if err := d.Read.QueryRow(`SELECT COUNT(*) FROM backup_probe`).Scan(&c); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestBackupRestoreRoundTrip: warden backup copies a migrated database,
// later writes are undone by warden restore, the previous database is kept
// aside, and warden can migrate (and so serve) the restored one.
func TestBackupRestoreRoundTrip(t *testing.T) {
	dir := t.TempDir()
	live := filepath.Join(dir, "warden.db")
	dsn := "sqlite:" + live
	if code, _, errs := runCmd(t, dsn, "migrate"); code != exitOK {
		t.Fatalf("migrate: %d %s", code, errs)
	}
	probeRows(t, live, 5)
	file := filepath.Join(dir, "backup.db")
	code, out, errs := runCmd(t, dsn, "backup", file)
	if code != exitOK {
		t.Fatalf("backup exited %d: %s", code, errs)
	}
	for _, want := range []string{"wrote " + file + ": ", "KiB (", "a copy of " + live, "inbox v", "ledger v", "coordination v"} {
		if !strings.Contains(out, want) {
			t.Errorf("backup said %q, want %q in it", out, want)
		}
	}
	if n := probeRows(t, live, 3); n != 8 {
		t.Fatalf("live database has %d rows", n)
	}
	code, out, errs = runCmd(t, dsn, "restore", file)
	if code != exitOK {
		t.Fatalf("restore exited %d: %s", code, errs)
	}
	for _, want := range []string{"restored " + live + " from " + file, "the previous database is at " + live + ".before-restore-",
		"next: start warden serve", "first reconcile pass re-reads"} {
		if !strings.Contains(out, want) {
			t.Errorf("restore said %q, want %q in it", out, want)
		}
	}
	if n := probeRows(t, live, 0); n != 5 {
		t.Errorf("restored database has %d rows, want the backup's 5", n)
	}
	asides, _ := filepath.Glob(live + ".before-restore-*")
	if len(asides) != 1 {
		t.Fatalf("kept aside: %v", asides)
	}
	if n := probeRows(t, asides[0], 0); n != 8 {
		t.Errorf("the database kept aside has %d rows, want 8", n)
	}
	if code, _, errs := runCmd(t, dsn, "migrate"); code != exitOK {
		t.Errorf("migrate on the restored database: %d %s", code, errs)
	}
}

// TestBackupRestoreRefusals: each refusal names its reason, with exit status
// 2 for a setting (no database there, PostgreSQL, usage) and 1 otherwise,
// and changes nothing.
func TestBackupRestoreRefusals(t *testing.T) {
	dir := t.TempDir()
	live := filepath.Join(dir, "warden.db")
	dsn := "sqlite:" + live
	if code, _, errs := runCmd(t, dsn, "migrate"); code != exitOK {
		t.Fatalf("migrate: %d %s", code, errs)
	}
	probeRows(t, live, 4)
	good := filepath.Join(dir, "good.db")
	if code, _, errs := runCmd(t, dsn, "backup", good); code != exitOK {
		t.Fatalf("backup: %s", errs)
	}
	// A backup a newer warden made: a step this binary does not have.
	newer := filepath.Join(dir, "newer.db")
	if code, _, errs := runCmd(t, dsn, "backup", newer); code != exitOK {
		t.Fatalf("backup: %s", errs)
	}
	nd, err := db.Open(context.Background(), "sqlite:"+newer)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := nd.Write.Exec(`INSERT INTO schema_migrations (component, version, applied_at) VALUES ('ledger', 999, 0)`); err != nil {
		t.Fatal(err)
	}
	nd.Close()
	garbage := filepath.Join(dir, "garbage.db")
	os.WriteFile(garbage, bytes.Repeat([]byte("not a database "), 500), 0o600)
	missing := filepath.Join(dir, "missing.db")

	cases := []struct {
		name, database string
		args           []string
		code           int
		want           []string
	}{
		{"backup without FILE", dsn, []string{"backup"}, exitSetting, []string{"name one FILE"}},
		{"backup over a file", dsn, []string{"backup", good}, exitFailed, []string{good + " already exists; refusing to overwrite it"}},
		{"backup of no database", "sqlite:" + missing, []string{"backup", filepath.Join(dir, "b.db")}, exitSetting,
			[]string{"WARDEN_DATABASE: no database at " + missing}},
		{"backup on postgres", "postgres://warden:hunter2@db.example/warden", []string{"backup", filepath.Join(dir, "b.db")}, exitSetting,
			[]string{"pg_dump", "pg_basebackup", "SQLite databases only"}},
		{"restore on postgres", "postgres://warden:hunter2@db.example/warden", []string{"restore", good}, exitSetting,
			[]string{"pg_restore", "SQLite databases only"}},
		{"restore without FILE", dsn, []string{"restore"}, exitSetting, []string{"name one FILE"}},
		{"restore of no file", dsn, []string{"restore", filepath.Join(dir, "nope.db")}, exitFailed, []string{"no backup at"}},
		{"restore of garbage", dsn, []string{"restore", garbage}, exitFailed, []string{garbage + ": not a SQLite database"}},
		{"restore of a newer warden's backup", dsn, []string{"restore", newer}, exitFailed, []string{"ledger v999", "a newer warden made it"}},
		{"restore of the database itself", dsn, []string{"restore", live}, exitFailed, []string{"the database itself"}},
	}
	for _, c := range cases {
		code, _, errs := runCmd(t, c.database, c.args...)
		if code != c.code {
			t.Errorf("%s: exit %d, want %d (%s)", c.name, code, c.code, errs)
		}
		for _, w := range c.want {
			if !strings.Contains(errs, w) {
				t.Errorf("%s: said %q, want %q in it", c.name, errs, w)
			}
		}
		if strings.Contains(errs, "hunter2") {
			t.Errorf("%s: the password leaked: %s", c.name, errs)
		}
	}
	if _, err := os.Stat(missing); err == nil {
		t.Errorf("backup created %s", missing)
	}

	// A running warden holds the database open (idle, between deliveries).
	held, err := db.Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	code, _, errs := runCmd(t, dsn, "restore", good)
	held.Close()
	if code != exitFailed || !strings.Contains(errs, "database in use: stop warden serve first") {
		t.Errorf("restore while in use: exit %d, %q", code, errs)
	}
	if n := probeRows(t, live, 0); n != 4 {
		t.Errorf("after the refusals the database has %d rows, want 4", n)
	}
	if asides, _ := filepath.Glob(live + ".before-restore-*"); len(asides) > 0 {
		t.Errorf("a refused restore moved the database: %v", asides)
	}
	if code, out, _ := runCmd(t, dsn, "backup", "-h"); code != exitOK || !strings.Contains(out, "warden backup FILE [flags]") {
		t.Errorf("backup -h: %d %q", code, out)
	}
	if code, out, _ := runCmd(t, dsn, "restore", "--help"); code != exitOK || !strings.Contains(out, "warden restore FILE [flags]") {
		t.Errorf("restore --help: %d %q", code, out)
	}
}

// TestBackupWhileServeRuns runs `warden serve` as a process on the
// database while this process keeps writing to it: warden backup copies it
// meanwhile, warden restore is refused while serve holds it, and succeeds
// once serve has stopped.
func TestBackupWhileServeRuns(t *testing.T) {
	var allowed atomic.Bool
	allowed.Store(true)
	var calls atomic.Int64
	gh := fakeGitHub(t, &allowed, &calls)
	_, env := testSettings(t, gh.URL)
	dsn := env["WARDEN_DATABASE"]
	live := strings.TrimPrefix(dsn, "sqlite:")
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "WARDEN_TEST_RUN_MAIN=1", "WARDEN_TEST_ARGS=serve --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0")
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	sc := bufio.NewScanner(stderr)
	ready := false
	for sc.Scan() {
		if strings.Contains(sc.Text(), `"msg":"dispatcher ready"`) {
			ready = true
			break
		}
	}
	if !ready {
		t.Fatal("serve did not become ready")
	}
	go func() {
		for sc.Scan() {
		}
	}()

	probeRows(t, live, 100)
	d, err := db.Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var written atomic.Int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := d.Write.Exec(`INSERT INTO backup_probe (n) VALUES (1)`); err != nil {
				t.Errorf("write beside the backup: %v", err)
				return
			}
			written.Add(1)
		}
	}()
	for written.Load() < 20 {
		time.Sleep(time.Millisecond)
	}
	file := filepath.Join(t.TempDir(), "backup.db")
	code, out, errs := runCmd(t, dsn, "backup", file)
	close(stop)
	wg.Wait()
	d.Close()
	if code != exitOK || !strings.Contains(out, "wrote "+file) {
		t.Fatalf("backup while serve runs: exit %d, %q %q", code, out, errs)
	}
	copied := probeRows(t, file, 0)
	if copied < 120 || int64(copied) > 100+written.Load() {
		t.Errorf("the copy holds %d rows; 100 and then %d were written", copied, written.Load())
	}

	code, _, errs = runCmd(t, dsn, "restore", file)
	if code != exitFailed || !strings.Contains(errs, "database in use: stop warden serve first") {
		t.Errorf("restore while serve runs: exit %d, %q", code, errs)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("serve: %v", err)
	}
	if code, out, errs := runCmd(t, dsn, "restore", file); code != exitOK {
		t.Fatalf("restore after serve stopped: exit %d, %q %q", code, out, errs)
	}
	if n := probeRows(t, live, 0); n != copied {
		t.Errorf("restored %d rows, the backup holds %d", n, copied)
	}
}
