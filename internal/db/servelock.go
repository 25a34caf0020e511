package db

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
)

// ErrServeRunning: another warden serve holds the SQLite database's lock.
var ErrServeRunning = errors.New("another warden serve runs on this database")

// OpenExisting opens the database named by dsn as Open does, but never
// creates one: a SQLite file that does not exist is refused with
// ErrNoDatabase, naming the file and what creates it. Commands that only
// read or act on an existing ledger (ready, items, deliveries) use it, so a
// typo in WARDEN_DATABASE or a wrong directory leaves no empty database.
// A PostgreSQL database is opened as Open does.
func OpenExisting(ctx context.Context, dsn string) (*DB, error) {
	if p, ok := strings.CutPrefix(dsn, "sqlite:"); ok && p != "" && p != ":memory:" && !strings.HasPrefix(p, "file:") {
		st, err := os.Stat(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return nil, refuse(ErrNoDatabase, "no database at %s (warden serve or warden migrate creates it; or point WARDEN_DATABASE at the one warden serve uses)", p)
		case err != nil:
			return nil, fmt.Errorf("database %s: %w", p, err)
		case !st.Mode().IsRegular():
			return nil, fmt.Errorf("database %s is not a regular file", p)
		}
	}
	return Open(ctx, dsn)
}

// LockServe takes the lock that lets one warden serve at a time run on a
// SQLite database: an exclusive advisory lock (flock) on PATH.lock beside
// the database, released by the returned function or when the process
// ends, however it ends. A second serve on the same file is refused with
// ErrServeRunning, naming the process that holds it. Readers and warden
// backup never take it, so they keep working while serve runs. For
// PostgreSQL, which takes several replicas, it does nothing.
func LockServe(dsn string) (release func(), err error) {
	path, ok := strings.CutPrefix(dsn, "sqlite:")
	if !ok || path == "" || path == ":memory:" || strings.HasPrefix(path, "file:") {
		return func() {}, nil
	}
	lockPath := path + ".lock"
	f, err := os.OpenFile(lockPath, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", lockPath, err)
	}
	if err := flock(f); err != nil {
		holder := "another process"
		if b, rerr := os.ReadFile(lockPath); rerr == nil {
			if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); perr == nil && pid > 0 {
				holder = "process " + strconv.Itoa(pid)
			}
		}
		f.Close()
		if errors.Is(err, errLocked) {
			return nil, refuse(ErrServeRunning, "%s is in use by another warden serve (%s holds %s): one SQLite database serves one process; stop that one, or use PostgreSQL for several replicas",
				path, holder, lockPath)
		}
		return nil, fmt.Errorf("lock %s: %w", lockPath, err)
	}
	// Say who holds it, for the refusal above; the lock is the flock, not
	// the file's content.
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return func() {
		f.Truncate(0)
		unflock(f)
		f.Close()
	}, nil
}
