// Package db opens warden's database (SQLite by default, PostgreSQL for
// several replicas) and applies each component's schema migrations.
//
// Every component that keeps state (the webhook inbox, the ledger) declares
// its own migrations and receives a *DB; nothing else in warden opens a
// database.
package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" driver
	_ "modernc.org/sqlite"             // registers the "sqlite" driver (pure Go, no cgo)
)

// Dialect names the SQL dialect behind a DB.
type Dialect string

// The dialects warden speaks.
const (
	SQLite   Dialect = "sqlite"
	Postgres Dialect = "postgres"
)

// DB is warden's handle on its database. Writes go through Write, which on
// SQLite is a single connection so that writers queue in Go instead of
// sleeping in SQLite's busy handler; reads go through Read, a pool.
type DB struct {
	Dialect Dialect
	// Write serialises writers (one connection on SQLite).
	Write *sql.DB
	// Read serves concurrent readers (WAL lets them run beside the writer).
	Read *sql.DB
	// Source is the database location with any password removed, for logs.
	Source string

	stopCheckpoint chan struct{}
	checkpointDone chan struct{}

	named Local // named locks held in this process (locks.go)
}

// ErrUnsupported is returned for a WARDEN_DATABASE value warden cannot use.
var ErrUnsupported = errors.New("unsupported database")

// Open opens the database named by dsn: "sqlite:PATH" (PATH may be
// ":memory:" only for tests that use one connection) or a postgres:// URL.
// It checks that the database answers before returning.
func Open(ctx context.Context, dsn string) (*DB, error) {
	switch {
	case strings.HasPrefix(dsn, "sqlite:"):
		return openSQLite(ctx, strings.TrimPrefix(dsn, "sqlite:"))
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
		return openPostgres(ctx, dsn)
	default:
		return nil, fmt.Errorf("%w: %q is neither sqlite:PATH nor a postgres:// URL", ErrUnsupported, redact(dsn))
	}
}

// sqlitePragmas are applied to every connection. synchronous=FULL makes a
// commit survive a power loss, not only a crash: the inbox acknowledges a
// delivery only after such a commit.
//
// Pages are 16 KiB so that a typical delivery (a few to tens of KiB) takes a
// frame or two of the WAL instead of a chain of 4 KiB overflow pages: SQLite
// writes each frame with its own system calls.
var sqlitePragmas = []string{
	"page_size(16384)",
	"journal_mode(WAL)",
	"synchronous(FULL)",
	"busy_timeout(10000)",
	"foreign_keys(1)",
	"temp_store(MEMORY)",
}

func openSQLite(ctx context.Context, path string) (*DB, error) {
	if path == "" {
		return nil, fmt.Errorf("%w: sqlite: needs a file path, as in sqlite:warden.db", ErrUnsupported)
	}
	if dir := filepath.Dir(path); dir != "." {
		if _, err := os.Stat(dir); err != nil {
			return nil, fmt.Errorf("open sqlite %s: directory %s: %w", path, dir, err)
		}
	}
	q := url.Values{}
	for _, p := range sqlitePragmas {
		q.Add("_pragma", p)
	}
	base := "file:" + path
	// The writer never checkpoints inside a commit (that would stall every
	// acknowledgement waiting on it); a background checkpointer does.
	wq := url.Values{}
	for k, v := range q {
		wq[k] = append([]string(nil), v...)
	}
	wq.Add("_pragma", "wal_autocheckpoint(0)")
	write, err := sql.Open("sqlite", base+"?"+wq.Encode()+"&_txlock=immediate")
	if err != nil {
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	write.SetMaxOpenConns(1)
	write.SetMaxIdleConns(1)
	write.SetConnMaxLifetime(0)
	read, err := sql.Open("sqlite", base+"?"+q.Encode())
	if err != nil {
		write.Close()
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	read.SetMaxOpenConns(8)
	read.SetMaxIdleConns(8)
	d := &DB{Dialect: SQLite, Write: write, Read: read, Source: "sqlite:" + path}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	// The first connection sets WAL mode; do it on the writer before readers.
	if err := write.PingContext(pctx); err != nil {
		d.Close()
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	var mode string
	if err := write.QueryRowContext(pctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		d.Close()
		return nil, fmt.Errorf("open sqlite %s: read journal mode: %w", path, err)
	}
	if mode != "wal" {
		d.Close()
		return nil, fmt.Errorf("open sqlite %s: journal mode is %q, want wal", path, mode)
	}
	if err := read.PingContext(pctx); err != nil {
		d.Close()
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	d.stopCheckpoint, d.checkpointDone = make(chan struct{}), make(chan struct{})
	go d.checkpointer()
	return d, nil
}

// openPostgres opens a pgx pool for a postgres:// or postgresql:// URL. On
// PostgreSQL, Write and Read are the same pool: the server arbitrates
// concurrent writers, and there is no WAL checkpointer to run.
func openPostgres(ctx context.Context, dsn string) (*DB, error) {
	src := redact(dsn)
	pool, err := sql.Open("pgx", dsn)
	if err != nil {
		// pgx's parse errors may quote the URL; do not repeat it.
		return nil, fmt.Errorf("open postgres %s: invalid URL", src)
	}
	// A replica holds a connection per delivery in flight (its row lock and
	// its issue's advisory lock: the dispatcher's 8 workers), one per named
	// lock held (locks.go), and needs more for the handlers' own queries and
	// the agent API: 32 leaves room for all of them, and three replicas stay
	// within PostgreSQL's default max_connections (100).
	pool.SetMaxOpenConns(32)
	pool.SetMaxIdleConns(12)
	pool.SetConnMaxIdleTime(5 * time.Minute)
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := pool.PingContext(pctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open postgres %s: %s", src, scrub(err.Error(), dsn))
	}
	return &DB{Dialect: Postgres, Write: pool, Read: pool, Source: src}, nil
}

// scrub removes the password of dsn from msg.
func scrub(msg, dsn string) string {
	if u, err := url.Parse(dsn); err == nil && u.User != nil {
		if pw, ok := u.User.Password(); ok && pw != "" {
			msg = strings.ReplaceAll(msg, pw, "xxxxx")
		}
	}
	return msg
}

// checkpointer copies the WAL back into the database file in the background
// (PASSIVE: it never blocks the writer or readers) once a second,
// and truncates it on close.
func (d *DB) checkpointer() {
	defer close(d.checkpointDone)
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-d.stopCheckpoint:
			d.Read.Exec("PRAGMA wal_checkpoint(TRUNCATE)")
			return
		case <-t.C:
			d.Read.Exec("PRAGMA wal_checkpoint(PASSIVE)")
		}
	}
}

// Ping reports whether the database answers.
func (d *DB) Ping(ctx context.Context) error {
	if err := d.Read.PingContext(ctx); err != nil {
		return fmt.Errorf("database %s: %w", d.Source, err)
	}
	return nil
}

// Close stops the checkpointer and closes both pools.
func (d *DB) Close() error {
	if d.stopCheckpoint != nil {
		select {
		case <-d.stopCheckpoint:
		default:
			close(d.stopCheckpoint)
		}
		<-d.checkpointDone
	}
	if d.Read == d.Write {
		return d.Write.Close()
	}
	return errors.Join(d.Write.Close(), d.Read.Close())
}

// redact removes a password from a database URL so it can be shown.
func redact(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil || u.User == nil {
		if err != nil {
			return "(unparseable database URL)"
		}
		return dsn
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	return u.String()
}
