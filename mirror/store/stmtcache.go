package store

import (
	"context"
	"database/sql"
	"sync"
)

// On SQLite every statement is parsed and planned when it is run (the
// driver keeps no prepared statements), and on the claim path that is
// most of a write's CPU: a claim runs some twenty small statements. The
// hot writers (writeTxQ) therefore run their statements prepared once on
// the write pool (database/sql re-prepares one on a new connection by
// itself). The pool's one connection is the transaction's while it runs,
// so a statement not yet prepared runs unprepared, and is prepared after
// the commit, when the connection is free (writebatch.go). PostgreSQL's driver keeps its own
// statement cache: there the transaction is used as it is.

// maxCachedStmts bounds the cache: the statements are the code's own, but
// the chunked IN lists (eachChunk) vary with the number of items named.
const maxCachedStmts = 256

// stmtCache holds the write pool's prepared statements, by text.
type stmtCache struct {
	mu      sync.Mutex
	stmts   map[string]*sql.Stmt
	pending map[string]bool // run unprepared; to prepare after the commit
}

func (c *stmtCache) get(query string) *sql.Stmt {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.stmts[query]
	if st == nil && len(c.stmts)+len(c.pending) < maxCachedStmts {
		if c.pending == nil {
			c.pending = map[string]bool{}
		}
		c.pending[query] = true
	}
	return st
}

// prepare prepares the statements run unprepared so far, on pool (whose
// connection the caller does not hold). A statement that fails to prepare
// is simply not cached.
func (c *stmtCache) prepare(ctx context.Context, pool *sql.DB) {
	c.mu.Lock()
	var todo []string
	for q := range c.pending {
		todo = append(todo, q)
	}
	c.pending = nil
	c.mu.Unlock()
	for _, q := range todo {
		st, err := pool.PrepareContext(ctx, q)
		if err != nil {
			continue
		}
		c.mu.Lock()
		if c.stmts == nil {
			c.stmts = map[string]*sql.Stmt{}
		}
		if c.stmts[q] == nil {
			c.stmts[q], st = st, nil
		}
		c.mu.Unlock()
		if st != nil {
			st.Close()
		}
	}
}

// cachedTx is a write transaction that runs its statements prepared when
// they are in the cache.
type cachedTx struct {
	tx *sql.Tx
	c  *stmtCache
}

func (q cachedTx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if st := q.c.get(query); st != nil {
		return q.tx.StmtContext(ctx, st).ExecContext(ctx, args...)
	}
	return q.tx.ExecContext(ctx, query, args...)
}

func (q cachedTx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if st := q.c.get(query); st != nil {
		return q.tx.StmtContext(ctx, st).QueryContext(ctx, args...)
	}
	return q.tx.QueryContext(ctx, query, args...)
}

func (q cachedTx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if st := q.c.get(query); st != nil {
		return q.tx.StmtContext(ctx, st).QueryRowContext(ctx, args...)
	}
	return q.tx.QueryRowContext(ctx, query, args...)
}
