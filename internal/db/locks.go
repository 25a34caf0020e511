package db

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"sync"
)

// Named locks coordinate replicas that share one database (CONTRACT.md
// §10): one reconcile pass at a time, one check run per head commit, one
// report comment per item. On PostgreSQL a lock is a session advisory lock
// held on a connection of its own, so a replica that dies (its connection
// drops) releases every lock it held at once and another replica takes
// over; on SQLite, which serves one process, it is a mutex in this process.
//
// Advisory locks are database-wide, so the key hashes the current schema
// with the name: two warden deployments in two schemas of one database (or
// two tests) never block each other.

// advisoryKey is the SQL expression for a lock name's 64-bit key.
const advisoryKey = `hashtextextended(current_schema() || '/' || $1, 0)`

// Lock waits for the lock called name, or until ctx ends, and returns its
// release. Holding it keeps one PostgreSQL connection out of the pool;
// release it promptly.
func (d *DB) Lock(ctx context.Context, name string) (release func(), err error) {
	local, err := d.locks().Lock(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("lock %q: %w", name, err)
	}
	if d.Dialect != Postgres {
		return local, nil
	}
	conn, err := d.Write.Conn(ctx)
	if err != nil {
		local()
		return nil, fmt.Errorf("lock %q: %w", name, err)
	}
	if _, err := conn.ExecContext(ctx, `SELECT pg_advisory_lock(`+advisoryKey+`)`, name); err != nil {
		discard(conn)
		local()
		return nil, fmt.Errorf("lock %q: %w", name, err)
	}
	return d.releaser(conn, name, local), nil
}

// TryLock takes the lock called name if nobody holds it; ok is false when
// another goroutine or replica does.
func (d *DB) TryLock(ctx context.Context, name string) (release func(), ok bool, err error) {
	local, ok := d.locks().TryLock(name)
	if !ok {
		return nil, false, nil
	}
	if d.Dialect != Postgres {
		return local, true, nil
	}
	conn, err := d.Write.Conn(ctx)
	if err != nil {
		local()
		return nil, false, fmt.Errorf("try lock %q: %w", name, err)
	}
	var got bool
	if err := conn.QueryRowContext(ctx, `SELECT pg_try_advisory_lock(`+advisoryKey+`)`, name).Scan(&got); err != nil {
		discard(conn)
		local()
		return nil, false, fmt.Errorf("try lock %q: %w", name, err)
	}
	if !got {
		conn.Close()
		local()
		return nil, false, nil
	}
	return d.releaser(conn, name, local), true, nil
}

// releaser unlocks on the connection that locked. If the unlock fails the
// connection is dropped instead, which ends its session and so releases
// every lock it held: a lock is never left behind on a pooled connection.
func (d *DB) releaser(conn *sql.Conn, name string, local func()) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			defer local()
			var ok bool
			err := conn.QueryRowContext(context.Background(), `SELECT pg_advisory_unlock(`+advisoryKey+`)`, name).Scan(&ok)
			if err != nil || !ok {
				discard(conn)
				return
			}
			conn.Close()
		})
	}
}

// discard closes conn's session instead of returning it to the pool.
func discard(conn *sql.Conn) {
	conn.Raw(func(any) error { return driver.ErrBadConn })
	conn.Close()
}

func (d *DB) locks() *Local { return &d.named }

// Local is a lock per name within this process (the zero value is ready);
// an entry lives while someone holds or waits for it. A lock is a channel
// of one slot, so a waiter can give up when its context ends. DB's locks
// use it on SQLite and in front of PostgreSQL's advisory locks.
type Local struct {
	mu sync.Mutex
	m  map[string]*keyedLock
}

type keyedLock struct {
	slot chan struct{}
	n    int // holders and waiters
}

func (k *Local) entry(name string) *keyedLock {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.m == nil {
		k.m = map[string]*keyedLock{}
	}
	l := k.m[name]
	if l == nil {
		l = &keyedLock{slot: make(chan struct{}, 1)}
		k.m[name] = l
	}
	l.n++
	return l
}

func (k *Local) drop(name string, l *keyedLock) {
	k.mu.Lock()
	if l.n--; l.n == 0 {
		delete(k.m, name)
	}
	k.mu.Unlock()
}

// release returns the unlock of a held entry (safe to call twice).
func (k *Local) release(name string, l *keyedLock) func() {
	var once sync.Once
	return func() { once.Do(func() { <-l.slot; k.drop(name, l) }) }
}

// Lock waits for the lock called name, or until ctx ends, and returns its
// release (safe to call twice).
func (k *Local) Lock(ctx context.Context, name string) (func(), error) {
	l := k.entry(name)
	select {
	case l.slot <- struct{}{}:
		return k.release(name, l), nil
	case <-ctx.Done():
		k.drop(name, l)
		return nil, ctx.Err()
	}
}

// TryLock takes the lock called name if nobody in this process holds it.
func (k *Local) TryLock(name string) (func(), bool) {
	l := k.entry(name)
	select {
	case l.slot <- struct{}{}:
		return k.release(name, l), true
	default:
		k.drop(name, l)
		return nil, false
	}
}
