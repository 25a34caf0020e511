package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// Refusals of Backup and Restore, for callers that map them to exit
// statuses (errors.Is). Their errors carry their own words, not these.
var (
	// ErrNoDatabase: the SQLite file named by the setting does not exist.
	ErrNoDatabase = errors.New("no database")
	// ErrPostgresCopy: the database is PostgreSQL, which has its own tools.
	ErrPostgresCopy = errors.New("a PostgreSQL database")
	// ErrInUse: another process has the database open.
	ErrInUse = errors.New("database in use: stop warden serve first")
	// ErrBadCopy: a file is not a sound copy of a warden database.
	ErrBadCopy = errors.New("not a sound copy of a warden database")
)

// refusal is one of the errors above (kind) in its own words.
type refusal struct {
	kind error
	msg  string
}

func (e *refusal) Error() string        { return e.msg }
func (e *refusal) Is(target error) bool { return target == e.kind }

func refuse(kind error, format string, a ...any) error {
	return &refusal{kind, fmt.Sprintf(format, a...)}
}

func badCopy(format string, a ...any) error { return refuse(ErrBadCopy, format, a...) }

// SchemaVersion is the newest migration step of one component recorded in
// a database's schema_migrations.
type SchemaVersion struct {
	Component string
	Version   int
}

func (v SchemaVersion) String() string { return fmt.Sprintf("%s v%d", v.Component, v.Version) }

// BackupInfo describes a copy Backup wrote.
type BackupInfo struct {
	Path     string
	Size     int64
	Versions []SchemaVersion
}

// RestoreInfo describes what Restore did.
type RestoreInfo struct {
	Database string // the restored database's file
	Aside    string // where the previous database went ("" if there was none)
	Versions []SchemaVersion
	Older    []string // components this binary will upgrade at start ("ledger v5 → v7")
}

// SQLiteFile returns the file of a "sqlite:PATH" setting. A PostgreSQL URL
// is refused with ErrPostgresCopy and a message naming PostgreSQL's own
// tools for what (backup or restore).
func SQLiteFile(dsn, what string) (string, error) {
	switch {
	case strings.HasPrefix(dsn, "sqlite:"):
		p := strings.TrimPrefix(dsn, "sqlite:")
		if p == "" || p == ":memory:" || strings.HasPrefix(p, "file::memory:") {
			return "", fmt.Errorf("%w: sqlite: needs a file path, as in sqlite:warden.db", ErrUnsupported)
		}
		return p, nil
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
		tools := "pg_dump (a logical copy) or pg_basebackup (a physical one)"
		if what == "restore" {
			tools = "pg_restore or psql for a pg_dump archive, or start PostgreSQL on a pg_basebackup copy"
		}
		return "", refuse(ErrPostgresCopy, "warden %s copies SQLite databases only, and %s is PostgreSQL: use %s instead",
			what, redact(dsn), tools)
	default:
		return "", fmt.Errorf("%w: %q is neither sqlite:PATH nor a postgres:// URL", ErrUnsupported, redact(dsn))
	}
}

// Backup writes a consistent copy of the SQLite database named by dsn to
// dest with VACUUM INTO, while other processes (warden serve) keep reading
// and writing it: the copy is the database as of one moment, taken in one
// read transaction, which in WAL mode neither waits for the writer nor
// makes it wait. It refuses when dest exists and when the database file
// does not (it never creates one). The copy is written to a temporary file
// beside dest, synced, and checked (integrity_check, warden's
// schema_migrations) before it takes dest's name, so a failed backup leaves
// no file under that name.
func Backup(ctx context.Context, dsn, dest string) (BackupInfo, error) {
	src, err := SQLiteFile(dsn, "backup")
	if err != nil {
		return BackupInfo{}, err
	}
	if _, err := os.Stat(src); errors.Is(err, fs.ErrNotExist) {
		return BackupInfo{}, refuse(ErrNoDatabase, "no database at %s", src)
	} else if err != nil {
		return BackupInfo{}, fmt.Errorf("database %s: %w", src, err)
	}
	if _, err := os.Lstat(dest); err == nil {
		return BackupInfo{}, fmt.Errorf("%s already exists; refusing to overwrite it (choose a new name)", dest)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return BackupInfo{}, fmt.Errorf("backup file %s: %w", dest, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(dest), "."+filepath.Base(dest)+".partial-*")
	if err != nil {
		return BackupInfo{}, fmt.Errorf("create a temporary file beside %s: %w", dest, err)
	}
	tmpName := tmp.Name()
	tmp.Close()
	done := false
	defer func() {
		if !done {
			os.Remove(tmpName)
		}
	}()
	conn, err := sql.Open("sqlite", sqliteURI(src, "rw", 10*time.Second, false))
	if err != nil {
		return BackupInfo{}, fmt.Errorf("open %s: %w", src, err)
	}
	defer conn.Close()
	conn.SetMaxOpenConns(1)
	// VACUUM INTO accepts the empty file CreateTemp made (it must be empty
	// or absent), and writes a self-contained database (no WAL) into it.
	if _, err := conn.ExecContext(ctx, `VACUUM INTO ?`, tmpName); err != nil {
		return BackupInfo{}, fmt.Errorf("copy %s: %w", src, describe(err))
	}
	conn.Close()
	if err := syncFile(tmpName); err != nil {
		return BackupInfo{}, err
	}
	versions, err := verify(ctx, tmpName, "the copy of "+src)
	if err != nil {
		return BackupInfo{}, err
	}
	if err := placeNoClobber(tmpName, dest); err != nil {
		return BackupInfo{}, err
	}
	done = true
	st, err := os.Stat(dest)
	if err != nil {
		return BackupInfo{}, err
	}
	return BackupInfo{Path: dest, Size: st.Size(), Versions: versions}, nil
}

// Verify checks that the SQLite file at path is a sound warden database:
// PRAGMA integrity_check answers ok, and schema_migrations records at
// least one step. It returns the newest step of each component. The file
// is opened read-write (path must be a file the caller owns, such as a
// temporary copy) so that a copy still marked WAL can be read; nothing is
// written to it.
func Verify(ctx context.Context, path string) ([]SchemaVersion, error) {
	return verify(ctx, path, path)
}

// verify is Verify naming the file shown in its errors (the backup, not
// the temporary copy being checked).
func verify(ctx context.Context, path, shown string) ([]SchemaVersion, error) {
	if st, err := os.Stat(path); err != nil {
		return nil, err
	} else if st.Size() == 0 {
		return nil, badCopy("%s is empty", shown)
	}
	conn, err := sql.Open("sqlite", sqliteURI(path, "rw", 5*time.Second, false))
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", shown, err)
	}
	defer conn.Close()
	conn.SetMaxOpenConns(1)
	rows, err := conn.QueryContext(ctx, `PRAGMA integrity_check(20)`)
	if err != nil {
		return nil, badCopy("%s: %v", shown, describe(err))
	}
	var problems []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			rows.Close()
			return nil, badCopy("%s: %v", shown, describe(err))
		}
		problems = append(problems, s)
	}
	if err := rows.Err(); err != nil {
		return nil, badCopy("%s: %v", shown, describe(err))
	}
	rows.Close()
	if len(problems) != 1 || problems[0] != "ok" {
		return nil, badCopy("%s fails integrity_check: %s", shown, strings.Join(problems, "; "))
	}
	var n int
	if err := conn.QueryRowContext(ctx, `SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'`).Scan(&n); err != nil {
		return nil, badCopy("%s: %v", shown, describe(err))
	}
	if n == 0 {
		return nil, badCopy("%s is not a warden database (a SQLite database without warden's schema_migrations table)", shown)
	}
	vrows, err := conn.QueryContext(ctx, `SELECT component, MAX(version) FROM schema_migrations GROUP BY component ORDER BY component`)
	if err != nil {
		return nil, badCopy("%s: read schema_migrations: %v", shown, err)
	}
	defer vrows.Close()
	var vs []SchemaVersion
	for vrows.Next() {
		var v SchemaVersion
		if err := vrows.Scan(&v.Component, &v.Version); err != nil {
			return nil, badCopy("%s: read schema_migrations: %v", shown, err)
		}
		vs = append(vs, v)
	}
	if err := vrows.Err(); err != nil {
		return nil, badCopy("%s: read schema_migrations: %v", shown, err)
	}
	if len(vs) == 0 {
		return nil, badCopy("%s records no migration (was it ever migrated?)", shown)
	}
	return vs, nil
}

// Restore puts the backup at src in place of the SQLite database named by
// dsn. known is the newest migration step of each component this binary
// has; a backup with a component or a step it does not know was made by a
// newer warden and is refused. Restore copies src to a temporary file beside
// the database and verifies the copy (Verify) before touching anything. It
// refuses when another process has the database open (ErrInUse). The current
// database, with its write-ahead log folded in first, is renamed to
// "<db>.before-restore-<UTC time>" (a -shm or an emptied -wal left beside it
// go with it, so nothing of it stays beside the restored file); then the copy
// takes the database's name. src itself is only read.
func Restore(ctx context.Context, dsn, src string, known map[string]int, now time.Time) (RestoreInfo, error) {
	live, err := SQLiteFile(dsn, "restore")
	if err != nil {
		return RestoreInfo{}, err
	}
	sst, err := os.Stat(src)
	if errors.Is(err, fs.ErrNotExist) {
		return RestoreInfo{}, fmt.Errorf("no backup at %s", src)
	} else if err != nil {
		return RestoreInfo{}, fmt.Errorf("backup %s: %w", src, err)
	}
	if !sst.Mode().IsRegular() {
		return RestoreInfo{}, badCopy("%s is not a regular file", src)
	}
	if st, err := os.Stat(src + "-wal"); err == nil && st.Size() > 0 {
		return RestoreInfo{}, badCopy("%s has a write-ahead log beside it (%s-wal): it is a live database, not a backup; copy it with warden backup", src, src)
	}
	lst, err := os.Stat(live)
	exists := err == nil
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return RestoreInfo{}, fmt.Errorf("database %s: %w", live, err)
	}
	if exists && os.SameFile(sst, lst) {
		return RestoreInfo{}, fmt.Errorf("%s is the database itself, not a backup", src)
	}
	if !exists {
		// A log without its database would be replayed into the restored one.
		for _, sfx := range []string{"-wal", "-journal"} {
			if _, err := os.Lstat(live + sfx); err == nil {
				return RestoreInfo{}, fmt.Errorf("%s%s exists without its database %s; move it away, then run restore again", live, sfx, live)
			}
		}
	}
	dir := filepath.Dir(live)
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return RestoreInfo{}, fmt.Errorf("the database's directory %s does not exist", dir)
	}
	tmpName, err := copyBeside(src, live)
	if err != nil {
		return RestoreInfo{}, err
	}
	done := false
	defer func() {
		if !done {
			os.Remove(tmpName)
		}
	}()
	versions, err := verify(ctx, tmpName, src)
	if err != nil {
		return RestoreInfo{}, err
	}
	info := RestoreInfo{Database: live, Versions: versions}
	for _, v := range versions {
		k, ok := known[v.Component]
		if !ok {
			return RestoreInfo{}, badCopy("%s holds the schema of %s, which this warden does not have (a newer warden made it): restore it with that version or a newer one", src, v)
		}
		if v.Version > k {
			return RestoreInfo{}, badCopy("%s holds %s, and this warden knows %s only up to v%d (a newer warden made it): restore it with that version or a newer one", src, v, v.Component, k)
		}
		if v.Version < k {
			info.Older = append(info.Older, fmt.Sprintf("%s v%d → v%d", v.Component, v.Version, k))
		}
	}
	for c := range known {
		if !hasComponent(versions, c) {
			info.Older = append(info.Older, fmt.Sprintf("%s (new)", c))
		}
	}
	sort.Strings(info.Older)
	if exists {
		aside := fmt.Sprintf("%s.before-restore-%s", live, now.UTC().Format("20060102T150405Z"))
		if _, err := os.Lstat(aside); err == nil {
			return RestoreInfo{}, fmt.Errorf("%s already exists (a restore in this second?); run restore again", aside)
		}
		if err := quiesce(ctx, live); err != nil {
			return RestoreInfo{}, err
		}
		// From here to the rename below nothing holds the database: a
		// warden starting in between would create a new file, which
		// placeNoClobber then refuses to replace.
		if err := os.Rename(live, aside); err != nil {
			return RestoreInfo{}, fmt.Errorf("move %s aside: %w", live, err)
		}
		for _, sfx := range []string{"-wal", "-shm", "-journal"} {
			if _, err := os.Lstat(live + sfx); err == nil {
				if err := os.Rename(live+sfx, aside+sfx); err != nil {
					return RestoreInfo{}, fmt.Errorf("move %s aside (the database is already at %s): %w", live+sfx, aside, err)
				}
			}
		}
		info.Aside = aside
	}
	if err := placeNoClobber(tmpName, live); err != nil {
		if info.Aside != "" {
			return RestoreInfo{}, fmt.Errorf("%w (the previous database is at %s)", err, info.Aside)
		}
		return RestoreInfo{}, err
	}
	done = true
	return info, nil
}

// quiesce makes sure no other process has the database at path open, and
// folds its write-ahead log into the file so that the file alone is the
// database. In WAL mode BEGIN EXCLUSIVE waits only for a writer, not for an
// idle warden serve; every connection to a WAL database holds a shared lock
// on the file for as long as it is open, so a connection in EXCLUSIVE
// locking mode, which needs an exclusive lock on the file itself, gets one
// only when no other connection is open.
func quiesce(ctx context.Context, path string) error {
	conn, err := sql.Open("sqlite", sqliteURI(path, "rw", 2*time.Second, true))
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	defer conn.Close()
	conn.SetMaxOpenConns(1)
	if _, err := conn.ExecContext(ctx, `BEGIN EXCLUSIVE`); err != nil {
		if isBusy(err) {
			return fmt.Errorf("%w (%s is open in another process)", ErrInUse, path)
		}
		return fmt.Errorf("the current database %s cannot be opened (%w); if warden is stopped, move it (and any %s-wal, %s-shm) away yourself and run restore again",
			path, describe(err), path, path)
	}
	if _, err := conn.ExecContext(ctx, `COMMIT`); err != nil {
		return fmt.Errorf("lock %s: %w", path, err)
	}
	var mode string
	if err := conn.QueryRowContext(ctx, `PRAGMA journal_mode=DELETE`).Scan(&mode); err != nil {
		if isBusy(err) {
			return fmt.Errorf("%w (%s is open in another process)", ErrInUse, path)
		}
		return fmt.Errorf("fold %s-wal into %s: %w", path, path, describe(err))
	}
	if mode != "delete" {
		return fmt.Errorf("fold %s-wal into %s: journal mode stayed %q", path, path, mode)
	}
	if err := conn.Close(); err != nil {
		return fmt.Errorf("close %s: %w", path, err)
	}
	if st, err := os.Stat(path + "-wal"); err == nil && st.Size() > 0 {
		return fmt.Errorf("%s-wal still holds %d bytes after the checkpoint; nothing was moved", path, st.Size())
	}
	return nil
}

// sqliteURI is the driver's name for the file at path, opened in mode (rw:
// never created; the URI's mode, which SQLite enforces), with a busy timeout,
// and optionally in EXCLUSIVE locking mode. db.Open names files the same way.
func sqliteURI(path, mode string, busy time.Duration, exclusive bool) string {
	q := url.Values{}
	q.Add("mode", mode)
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busy.Milliseconds()))
	if exclusive {
		q.Add("_pragma", "locking_mode(EXCLUSIVE)")
	}
	return "file:" + path + "?" + q.Encode()
}

// isBusy reports SQLite's SQLITE_BUSY or SQLITE_LOCKED (any extended code).
func isBusy(err error) bool {
	var se *sqlite.Error
	if errors.As(err, &se) {
		c := se.Code() & 0xff
		return c == sqlite3.SQLITE_BUSY || c == sqlite3.SQLITE_LOCKED
	}
	return false
}

// describe turns the driver's "file is not a database (26)" into words an
// operator acts on; other errors pass through.
func describe(err error) error {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return err
	}
	switch se.Code() & 0xff {
	case sqlite3.SQLITE_NOTADB:
		return errors.New("not a SQLite database")
	case sqlite3.SQLITE_CORRUPT:
		return fmt.Errorf("damaged (%w)", err)
	}
	return err
}

func hasComponent(vs []SchemaVersion, c string) bool {
	for _, v := range vs {
		if v.Component == c {
			return true
		}
	}
	return false
}

// copyBeside copies src to a new temporary file in the directory of target
// and syncs it, returning its name.
func copyBeside(src, target string) (string, error) {
	in, err := os.Open(src)
	if err != nil {
		return "", err
	}
	defer in.Close()
	out, err := os.CreateTemp(filepath.Dir(target), "."+filepath.Base(target)+".restore-*")
	if err != nil {
		return "", fmt.Errorf("create a temporary file beside %s: %w", target, err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		os.Remove(out.Name())
		return "", fmt.Errorf("copy %s: %w", src, err)
	}
	if err := out.Sync(); err != nil {
		out.Close()
		os.Remove(out.Name())
		return "", fmt.Errorf("sync the copy of %s: %w", src, err)
	}
	if err := out.Close(); err != nil {
		os.Remove(out.Name())
		return "", fmt.Errorf("copy %s: %w", src, err)
	}
	return out.Name(), nil
}

// syncFile flushes the file at path to disk.
func syncFile(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("sync %s: %w", path, err)
	}
	return f.Close()
}

// placeNoClobber gives the file tmp the name dest, atomically, and fails if
// dest exists by then (a hard link does not replace; a rename would). Where
// the file system has no hard links it renames after checking. The
// directory is synced so the new name survives a crash.
func placeNoClobber(tmp, dest string) error {
	err := os.Link(tmp, dest)
	switch {
	case err == nil:
		os.Remove(tmp)
	case errors.Is(err, fs.ErrExist):
		return fmt.Errorf("%s appeared while the copy was made; refusing to overwrite it (the copy was removed)", dest)
	default:
		if _, serr := os.Lstat(dest); serr == nil {
			return fmt.Errorf("%s appeared while the copy was made; refusing to overwrite it (the copy was removed)", dest)
		}
		if err := os.Rename(tmp, dest); err != nil {
			return fmt.Errorf("rename the copy to %s: %w", dest, err)
		}
	}
	if d, err := os.Open(filepath.Dir(dest)); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}
