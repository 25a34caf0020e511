package db

import (
	"context"
	"database/sql"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// probeSchema is a component of the tests' own: rows, and a tally that
// every write bumps in the same transaction, so a consistent copy has as
// many rows as its tally says.
var probeSchema = []Migration{{Version: 1, SQL: `
CREATE TABLE probe_rows (id INTEGER PRIMARY KEY, pad BLOB NOT NULL);
CREATE TABLE probe_tally (n INTEGER NOT NULL);
INSERT INTO probe_tally (n) VALUES (0);`}}

// openProbe opens (creating) a database at path with the probe schema.
func openProbe(t *testing.T, path string) *DB {
	t.Helper()
	d, err := Open(context.Background(), "sqlite:"+path)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Migrate(context.Background(), "probe", probeSchema); err != nil {
		d.Close()
		t.Fatal(err)
	}
	return d
}

// insertRows writes n rows in one transaction and bumps the tally.
func insertRows(t *testing.T, d *DB, n int) {
	t.Helper()
	if err := insertTx(d, n, 1024); err != nil {
		t.Fatal(err)
	}
}

func insertTx(d *DB, n, pad int) error {
	tx, err := d.Write.Begin()
	if err != nil {
		return err
	}
	defer tx.Rollback()
	for i := 0; i < n; i++ {
		if _, err := tx.Exec(`INSERT INTO probe_rows (pad) VALUES (?)`, make([]byte, pad)); err != nil {
			return err
		}
	}
	if _, err := tx.Exec(`UPDATE probe_tally SET n = n + ?`, n); err != nil {
		return err
	}
	return tx.Commit()
}

// counts reads the rows and the tally of the SQLite file at path.
func counts(t *testing.T, path string) (rows, tally int) {
	t.Helper()
	c, err := sql.Open("sqlite", sqliteURI(path, "ro", time.Second, false))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.QueryRow(`SELECT (SELECT COUNT(*) FROM probe_rows), (SELECT n FROM probe_tally)`).Scan(&rows, &tally); err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return rows, tally
}

// leftovers lists the temporary files backup and restore make in dir.
func leftovers(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if strings.Contains(e.Name(), ".partial-") || strings.Contains(e.Name(), ".restore-") {
			out = append(out, e.Name())
		}
	}
	return out
}

// TestBackupUnderConcurrentWrites backs up a database another connection
// keeps writing (WAL mode, as under warden serve): the copy is sound, has
// warden's schema, and is one moment of the database (its rows match the
// tally written in the same transactions), between what was committed
// before the backup began and what was committed after it ended.
func TestBackupUnderConcurrentWrites(t *testing.T) {
	dir := t.TempDir()
	live := filepath.Join(dir, "w.db")
	d := openProbe(t, live)
	defer d.Close()
	insertRows(t, d, 3000) // a few MB, so the copy takes a while

	var commits atomic.Int64
	commits.Store(3000)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var werr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := insertTx(d, 3, 512); err != nil {
				werr = err
				return
			}
			commits.Add(3)
		}
	}()
	waitFor(t, func() bool { return commits.Load() >= 3030 })
	before := commits.Load()
	dest := filepath.Join(dir, "backup.db")
	info, err := Backup(context.Background(), "sqlite:"+live, dest)
	after := commits.Load()
	waitFor(t, func() bool { return commits.Load() >= after+30 })
	close(stop)
	wg.Wait()
	if werr != nil {
		t.Fatalf("the writer failed beside the backup: %v", werr)
	}
	if err != nil {
		t.Fatalf("backup: %v", err)
	}
	if info.Path != dest || info.Size <= 0 {
		t.Errorf("info = %+v", info)
	}
	if st, err := os.Stat(dest); err != nil || st.Size() != info.Size {
		t.Errorf("stat %s: %v (info says %d bytes)", dest, err, info.Size)
	}
	vs, err := Verify(context.Background(), dest)
	if err != nil {
		t.Fatalf("the copy: %v", err)
	}
	if len(vs) != 1 || vs[0] != (SchemaVersion{"probe", 1}) || len(info.Versions) != 1 {
		t.Errorf("versions = %v, info %v; want [probe v1]", vs, info.Versions)
	}
	rows, tally := counts(t, dest)
	if rows != tally {
		t.Fatalf("the copy is not one moment of the database: %d rows, tally %d", rows, tally)
	}
	if int64(rows) < before || int64(rows) > after {
		t.Errorf("the copy has %d rows; %d were committed when the backup began and %d when it ended", rows, before, after)
	}
	final, _ := counts(t, live)
	if int64(final) != commits.Load() || final <= rows {
		t.Errorf("live database: %d rows, %d committed, copy %d", final, commits.Load(), rows)
	}
	if l := leftovers(t, dir); len(l) > 0 {
		t.Errorf("temporary files left: %v", l)
	}
	t.Logf("copy holds %d rows (%d committed at start, %d at end), %d bytes", rows, before, after, info.Size)
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestBackupRefusals: an existing FILE is never overwritten, a missing
// database is never created, PostgreSQL is sent to its own tools, and a
// copy that fails its check leaves nothing under FILE's name.
func TestBackupRefusals(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	live := filepath.Join(dir, "w.db")
	openProbe(t, live).Close()

	exists := filepath.Join(dir, "exists.db")
	os.WriteFile(exists, []byte("keep me"), 0o600)
	if _, err := Backup(ctx, "sqlite:"+live, exists); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Errorf("existing FILE: %v", err)
	}
	if b, _ := os.ReadFile(exists); string(b) != "keep me" {
		t.Errorf("existing FILE changed: %q", b)
	}

	missing := filepath.Join(dir, "missing.db")
	_, err := Backup(ctx, "sqlite:"+missing, filepath.Join(dir, "b1.db"))
	if !errors.Is(err, ErrNoDatabase) || !strings.Contains(err.Error(), "no database at "+missing) {
		t.Errorf("missing database: %v", err)
	}
	if _, err := os.Stat(missing); err == nil {
		t.Errorf("backup created %s", missing)
	}

	_, err = Backup(ctx, "postgres://u:hunter2@db.example/warden", filepath.Join(dir, "b2.db"))
	if !errors.Is(err, ErrPostgresCopy) || !strings.Contains(err.Error(), "pg_dump") || !strings.Contains(err.Error(), "pg_basebackup") ||
		strings.Contains(err.Error(), "hunter2") {
		t.Errorf("postgres: %v", err)
	}
	_, err = Restore(ctx, "postgresql://u:hunter2@db.example/warden", exists, nil, time.Now())
	if !errors.Is(err, ErrPostgresCopy) || !strings.Contains(err.Error(), "pg_restore") || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("postgres restore: %v", err)
	}

	other := filepath.Join(dir, "other.db")
	c, _ := sql.Open("sqlite", "file:"+other)
	if _, err := c.Exec(`CREATE TABLE t (x)`); err != nil {
		t.Fatal(err)
	}
	c.Close()
	dest := filepath.Join(dir, "b3.db")
	if _, err := Backup(ctx, "sqlite:"+other, dest); !errors.Is(err, ErrBadCopy) || !strings.Contains(err.Error(), "not a warden database") {
		t.Errorf("a non-warden database: %v", err)
	}
	garbage := filepath.Join(dir, "garbage.db")
	os.WriteFile(garbage, []byte(strings.Repeat("not sqlite ", 1000)), 0o600)
	if _, err := Backup(ctx, "sqlite:"+garbage, dest); err == nil || !strings.Contains(err.Error(), "not a SQLite database") {
		t.Errorf("garbage: %v", err)
	}
	if _, err := os.Stat(dest); err == nil {
		t.Errorf("a failed backup left %s", dest)
	}
	if _, err := Backup(ctx, "sqlite:"+live, filepath.Join(dir, "no", "such", "b.db")); err == nil {
		t.Error("backup into a missing directory succeeded")
	}
	if l := leftovers(t, dir); len(l) > 0 {
		t.Errorf("temporary files left: %v", l)
	}
}

// TestRestoreRoundTrip restores a backup over a database that crashed with
// rows only in its write-ahead log: the restored database has the backup's
// rows, the previous one is kept aside with every row (the log folded in),
// and nothing of it stays beside the restored file.
func TestRestoreRoundTrip(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	live := filepath.Join(dir, "w.db")
	d := openProbe(t, live)
	insertRows(t, d, 10)
	backup := filepath.Join(dir, "backup.db")
	if _, err := Backup(ctx, "sqlite:"+live, backup); err != nil {
		t.Fatal(err)
	}
	insertRows(t, d, 5)
	// A crash: the files as they are while the process runs, the newest
	// rows in the -wal (serve never checkpoints inside a commit).
	crashed := filepath.Join(t.TempDir(), "w.db")
	for _, sfx := range []string{"", "-wal", "-shm"} {
		copyFile(t, live+sfx, crashed+sfx)
	}
	d.Close()
	if st, err := os.Stat(crashed + "-wal"); err != nil || st.Size() == 0 {
		t.Fatalf("the crashed database has no write-ahead log to fold in: %v", err)
	}
	now := time.Date(2026, 12, 1, 10, 15, 0, 0, time.UTC)
	info, err := Restore(ctx, "sqlite:"+crashed, backup, map[string]int{"probe": 1, "newer": 2}, now)
	if err != nil {
		t.Fatalf("restore: %v", err)
	}
	wantAside := crashed + ".before-restore-20261201T101500Z"
	if info.Aside != wantAside || info.Database != crashed {
		t.Errorf("info = %+v, want aside %s", info, wantAside)
	}
	if len(info.Older) != 1 || info.Older[0] != "newer (new)" {
		t.Errorf("older = %v", info.Older)
	}
	if rows, tally := counts(t, crashed); rows != 10 || tally != 10 {
		t.Errorf("restored: %d rows, tally %d; want the backup's 10", rows, tally)
	}
	if rows, tally := counts(t, wantAside); rows != 15 || tally != 15 {
		t.Errorf("kept aside: %d rows, tally %d; want all 15, the write-ahead log's too", rows, tally)
	}
	for _, sfx := range []string{"-wal", "-journal"} {
		if _, err := os.Stat(crashed + sfx); err == nil {
			t.Errorf("%s%s is beside the restored database", crashed, sfx)
		}
	}
	if l := leftovers(t, filepath.Dir(crashed)); len(l) > 0 {
		t.Errorf("temporary files left: %v", l)
	}
	// The restored database opens as warden opens it, and takes writes.
	r := openProbe(t, crashed)
	insertRows(t, r, 1)
	r.Close()
	if rows, _ := counts(t, crashed); rows != 11 {
		t.Errorf("after a write the restored database has %d rows", rows)
	}
	if b, err := os.ReadFile(backup); err != nil || len(b) == 0 {
		t.Errorf("the backup itself is gone: %v", err)
	}
}

// TestRestoreOntoNoDatabase: a restore on a new machine, where no database
// exists yet, puts the backup in place and moves nothing; a log left there
// without its database is refused.
func TestRestoreOntoNoDatabase(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	src := filepath.Join(dir, "src.db")
	d := openProbe(t, src)
	insertRows(t, d, 3)
	backup := filepath.Join(dir, "backup.db")
	if _, err := Backup(ctx, "sqlite:"+src, backup); err != nil {
		t.Fatal(err)
	}
	d.Close()
	target := filepath.Join(t.TempDir(), "w.db")
	// A log left without its database would be replayed into the restored one.
	os.WriteFile(target+"-wal", []byte("stale"), 0o600)
	if _, err := Restore(ctx, "sqlite:"+target, backup, map[string]int{"probe": 1}, time.Now()); err == nil ||
		!strings.Contains(err.Error(), "-wal exists without its database") {
		t.Errorf("restore beside a stale log: %v", err)
	}
	os.Remove(target + "-wal")
	info, err := Restore(ctx, "sqlite:"+target, backup, map[string]int{"probe": 1}, time.Now())
	if err != nil || info.Aside != "" {
		t.Fatalf("restore: %+v, %v", info, err)
	}
	if rows, _ := counts(t, target); rows != 3 {
		t.Errorf("restored %d rows, want 3", rows)
	}
}

// TestRestoreRefusesDatabaseInUse: an open database (even idle, as a
// serve between deliveries) is not replaced, and nothing is moved.
func TestRestoreRefusesDatabaseInUse(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	live := filepath.Join(dir, "w.db")
	d := openProbe(t, live)
	defer d.Close()
	insertRows(t, d, 2)
	backup := filepath.Join(dir, "backup.db")
	if _, err := Backup(ctx, "sqlite:"+live, backup); err != nil {
		t.Fatal(err)
	}
	_, err := Restore(ctx, "sqlite:"+live, backup, map[string]int{"probe": 1}, time.Now())
	if !errors.Is(err, ErrInUse) || !strings.Contains(err.Error(), "database in use: stop warden serve first") {
		t.Fatalf("restore over an open database: %v", err)
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.Contains(e.Name(), "before-restore") || strings.Contains(e.Name(), ".restore-") {
			t.Errorf("left %s", e.Name())
		}
	}
	insertRows(t, d, 1) // the running process is undisturbed
	if rows, _ := counts(t, live); rows != 3 {
		t.Errorf("live database has %d rows, want 3", rows)
	}
}

// TestRestoreRefusesBadBackups: a file that is not SQLite, an empty one, a
// damaged one, one without warden's schema, and one a newer warden made are
// refused before the database is touched.
func TestRestoreRefusesBadBackups(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	live := filepath.Join(dir, "w.db")
	d := openProbe(t, live)
	insertRows(t, d, 200)
	good := filepath.Join(dir, "good.db")
	if _, err := Backup(ctx, "sqlite:"+live, good); err != nil {
		t.Fatal(err)
	}
	d.Close()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	raw, _ := os.ReadFile(good)
	damaged := append([]byte(nil), raw...)
	for i := len(damaged) / 2; i < len(damaged)/2+20000 && i < len(damaged); i++ {
		damaged[i] ^= 0x5a
	}
	other := filepath.Join(dir, "other.db")
	c, _ := sql.Open("sqlite", "file:"+other)
	c.Exec(`CREATE TABLE t (x)`)
	c.Close()
	cases := []struct {
		name, file string
		known      map[string]int
		want       string
	}{
		{"garbage", write("garbage.db", []byte(strings.Repeat("x", 5000))), map[string]int{"probe": 1}, "not a SQLite database"},
		{"empty", write("empty.db", nil), map[string]int{"probe": 1}, "is empty"},
		{"damaged", write("flipped.db", damaged), map[string]int{"probe": 1}, "damaged (|fails integrity_check"},
		{"not warden", other, map[string]int{"probe": 1}, "not a warden database"},
		{"newer step", good, map[string]int{"probe": 0}, "holds probe v1, and this warden knows probe only up to v0"},
		{"unknown component", good, map[string]int{"inbox": 3}, "the schema of probe v1, which this warden does not have"},
		{"missing", filepath.Join(dir, "nope.db"), map[string]int{"probe": 1}, "no backup at"},
	}
	for _, tc := range cases {
		_, err := Restore(ctx, "sqlite:"+live, tc.file, tc.known, time.Now())
		t.Logf("%s: %v", tc.name, err)
		if err == nil || !containsAny(err.Error(), strings.Split(tc.want, "|")) {
			t.Errorf("%s: got %v, want an error naming %q", tc.name, err, tc.want)
		}
		if tc.name != "missing" && !errors.Is(err, ErrBadCopy) {
			t.Errorf("%s: %v is not ErrBadCopy", tc.name, err)
		}
		if rows, _ := counts(t, live); rows != 200 {
			t.Fatalf("%s: the database was touched (%d rows)", tc.name, rows)
		}
	}
	if l := leftovers(t, dir); len(l) > 0 {
		t.Errorf("temporary files left: %v", l)
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.Contains(e.Name(), "before-restore") {
			t.Errorf("a refused restore moved the database: %s", e.Name())
		}
	}
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.Create(to)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}
