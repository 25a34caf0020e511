package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/wardenhq/warden/internal/db"
	"github.com/wardenhq/warden/webhooks"
)

// postgresEnv names the variable -postgres defaults to (CI exports it).
const postgresEnv = "WARDEN_TEST_POSTGRES"

// benchPostgres runs the PostgreSQL sections on a fresh schema of the
// database at base, dropped at the end whatever happens: the ingress with
// one and with three replicas, then the ledger's claim cycles.
func benchPostgres(ctx context.Context, base string, cfg ingestConfig, cycles int) (figs []Figure, err error) {
	dsn, drop, err := pgSchema(ctx, base)
	if err != nil {
		return nil, err
	}
	defer func() {
		if derr := drop(); derr != nil && err == nil {
			err = derr
		}
	}()
	if figs, err = benchPostgresIngest(ctx, dsn, cfg); err != nil {
		return nil, fmt.Errorf("ingest: %w", err)
	}
	d, err := db.Open(ctx, dsn)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	lf, err := ledgerCycles(ctx, d, "ledger (PostgreSQL)", "PostgreSQL "+pgVersion(ctx, d), cycles)
	if err != nil {
		return nil, fmt.Errorf("ledger: %w", err)
	}
	figs = append(figs, lf...)
	n := 4000
	if cfg.Deliveries < 1000 { // quick
		n = 300
	}
	df, err := benchPostgresDispatch(ctx, base, n, 200, 5*time.Millisecond)
	if err != nil {
		return nil, fmt.Errorf("dispatch: %w", err)
	}
	return append(figs, df...), nil
}

// pgSchema creates a schema of its own (wb_<random>) in the database at base
// and returns a URL whose search_path is that schema, and a function that
// drops it (as internal/db/dbtest does for tests).
func pgSchema(ctx context.Context, base string) (string, func() error, error) {
	u, err := url.Parse(base)
	if err != nil {
		return "", nil, errors.New("-postgres: not a URL")
	}
	admin, err := db.Open(ctx, base)
	if err != nil {
		return "", nil, err
	}
	var b [6]byte
	rand.Read(b[:])
	schema := "wb_" + hex.EncodeToString(b[:])
	if _, err := admin.Write.ExecContext(ctx, "CREATE SCHEMA "+schema); err != nil {
		admin.Close()
		return "", nil, fmt.Errorf("create schema: %w", err)
	}
	drop := func() error {
		defer admin.Close()
		dctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := admin.Write.ExecContext(dctx, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			return fmt.Errorf("drop schema %s: %w", schema, err)
		}
		return nil
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String(), drop, nil
}

// pgDeadlocks reads the database's deadlock count (-1 when it cannot).
func pgDeadlocks(ctx context.Context, d *db.DB) int64 {
	var n int64
	if d.Read.QueryRowContext(ctx, "SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()").Scan(&n) != nil {
		return -1
	}
	return n
}

func pgVersion(ctx context.Context, d *db.DB) string {
	var v string
	if d.Read.QueryRowContext(ctx, "SHOW server_version").Scan(&v) != nil {
		return "?"
	}
	var sync string
	if d.Read.QueryRowContext(ctx, "SHOW synchronous_commit").Scan(&sync) == nil && sync != "on" {
		v += ", synchronous_commit=" + sync
	}
	var fsync string
	if d.Read.QueryRowContext(ctx, "SHOW fsync").Scan(&fsync) == nil && fsync != "on" {
		v += ", fsync=" + fsync
	}
	return v
}

// replica is one warden process's ingest path: its own pool, inbox,
// ingress and loopback HTTP server, on the shared schema.
type replica struct {
	d   *db.DB
	ib  *webhooks.Inbox
	srv *server
}

func (r *replica) close() {
	if r.srv != nil {
		r.srv.srv.Close()
	}
	if r.ib != nil {
		r.ib.Close()
	}
	if r.d != nil {
		r.d.Close()
	}
}

// openReplicas opens n replicas at once (migrations run under an advisory
// lock, so they may).
func openReplicas(ctx context.Context, dsn string, n int) ([]*replica, error) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	rs := make([]*replica, n)
	errs := make(chan error, n)
	for i := range rs {
		rs[i] = &replica{}
		go func(r *replica) {
			var err error
			if r.d, err = db.Open(ctx, dsn); err != nil {
				errs <- err
				return
			}
			if r.ib, err = webhooks.OpenInbox(ctx, r.d); err != nil {
				errs <- err
				return
			}
			ingress := webhooks.NewIngress(r.ib, nil, log, webhooks.IngressOptions{Secrets: [][]byte{benchSecret}, MaxConcurrentReads: 256})
			r.srv, err = startServer(ingress)
			errs <- err
		}(rs[i])
	}
	var first error
	for range rs {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	if first != nil {
		closeReplicas(rs)
		return nil, first
	}
	return rs, nil
}

func closeReplicas(rs []*replica) {
	for _, r := range rs {
		r.close()
	}
}

func urls(rs []*replica) []string {
	u := make([]string, len(rs))
	for i, r := range rs {
		u[i] = r.srv.url
	}
	return u
}

// benchPostgresIngest measures the ingress on PostgreSQL: the same load
// generator as the SQLite figures, spread round-robin over one replica and
// over three (best of cfg.Rounds each), then the same deliveries sent to all
// three replicas at once, as redeliveries behind a load balancer arrive.
// After each run the inbox must hold exactly the distinct deliveries sent.
func benchPostgresIngest(ctx context.Context, dsn string, cfg ingestConfig) ([]Figure, error) {
	rs, err := openReplicas(ctx, dsn, 3)
	if err != nil {
		return nil, err
	}
	defer closeReplicas(rs)
	one, three := urls(rs[:1]), urls(rs)
	sent := 0
	check := func(what string, n int) error {
		sent += n
		var stored int
		if err := rs[0].d.Read.QueryRowContext(ctx, `SELECT COUNT(*) FROM inbox`).Scan(&stored); err != nil {
			return err
		}
		if stored != sent {
			return fmt.Errorf("%s: %d distinct deliveries acknowledged in all but %d stored", what, sent, stored)
		}
		return nil
	}
	var r1, r3 run
	for round := 0; round < cfg.Rounds; round++ {
		r, err := load(one, false, cfg, fmt.Sprintf("pg1-%d", round), nil)
		if err != nil {
			return nil, fmt.Errorf("1 replica: %w", err)
		}
		if err := check("1 replica", r.n); err != nil {
			return nil, err
		}
		r1 = r1.best(r)
		if r, err = load(three, false, cfg, fmt.Sprintf("pg3-%d", round), nil); err != nil {
			return nil, fmt.Errorf("3 replicas: %w", err)
		}
		if err := check("3 replicas", r.n); err != nil {
			return nil, err
		}
		r3 = r3.best(r)
	}
	// Every replica stores the same ids: its batches insert them in id
	// order, so overlapping batches queue on the unique index rather than
	// deadlock (a refused post, or a deadlock, is reported below). One run.
	fcfg := cfg
	dl0 := pgDeadlocks(ctx, rs[0].d)
	rf, refused, err := fanout(three, fcfg, "pgall")
	if err != nil {
		return nil, fmt.Errorf("each delivery to all 3 replicas: %w", err)
	}
	if err := check("each delivery to all 3 replicas", rf.n); err != nil {
		return nil, err
	}
	p50one, p99one, err := paced(one, cfg, "pgpaced1")
	if err != nil {
		return nil, fmt.Errorf("1 replica, paced: %w", err)
	}
	p50three, p99three, err := paced(three, cfg, "pgpaced3")
	if err != nil {
		return nil, fmt.Errorf("3 replicas, paced: %w", err)
	}
	if err := check("paced", 2*int(float64(cfg.Rate)*cfg.RateFor.Seconds())); err != nil {
		return nil, err
	}
	deadlocks := pgDeadlocks(ctx, rs[0].d) - dl0 // read late: the statistics lag
	_, source := template()
	ver := pgVersion(ctx, rs[0].d)
	work := func(n string) string {
		return fmt.Sprintf("%d deliveries of %d KB (%s), %d clients, %s, best of %d; PostgreSQL %s", cfg.Deliveries, cfg.PayloadBytes>>10, source, cfg.Clients, n, cfg.Rounds, ver)
	}
	fwork := fmt.Sprintf("%d deliveries, each posted to all 3 replicas at once, %d clients, one run", fcfg.Deliveries, cfg.Clients)
	pacedWork := func(n string) string {
		return fmt.Sprintf("%d/s for %s, open loop, %s", cfg.Rate, cfg.RateFor, n)
	}
	const sec, gh = "ingest (PostgreSQL)", "GitHub gives up at 10,000 ms"
	return []Figure{
		{sec, "durable deliveries accepted, 1 replica", r1.rate, "/s", work("1 replica"), "reported (issue 8); GitHub sends far fewer"},
		{sec, "durable deliveries accepted, 3 replicas", r3.rate, "/s", work("round-robin over 3 replicas"), fmt.Sprintf("%.2f× 1 replica", r3.rate/r1.rate)},
		{sec, "each delivery to all 3 replicas", rf.rate, "distinct/s", fwork, "checked: each stored once, 1 stored + 2 duplicate answers"},
		{sec, "all 3 replicas: posts refused (503)", float64(refused), "posts", fwork, "0 (a refused post is sent again, as GitHub would redeliver)"},
		{sec, "all 3 replicas: deadlocks detected", float64(deadlocks), "deadlocks", fwork + " (pg_stat_database, whole database)", "0"},
		{sec, "CPU per durable delivery, 1 replica", r1.cpu.Seconds() * 1e6, "µs", "process CPU (user+sys, generator included; PostgreSQL not) / deliveries", "—"},
		{sec, "ack latency p50, 1 replica", p50one.Seconds() * 1000, "ms", pacedWork("1 replica"), gh},
		{sec, "ack latency p99, 1 replica", p99one.Seconds() * 1000, "ms", pacedWork("1 replica"), gh},
		{sec, "ack latency p50, 3 replicas", p50three.Seconds() * 1000, "ms", pacedWork("round-robin over 3 replicas"), gh},
		{sec, "ack latency p99, 3 replicas", p99three.Seconds() * 1000, "ms", pacedWork("round-robin over 3 replicas"), gh},
	}, nil
}

// fanout posts every delivery to every replica and checks the answers: per
// delivery exactly one "stored", the others "duplicate". A 503 (the batch
// did not commit) is redelivered, as GitHub would, and counted.
func fanout(urls []string, cfg ingestConfig, prefix string) (run, int64, error) {
	stored := make([]atomic.Int32, cfg.Deliveries)
	dups := make([]atomic.Int32, cfg.Deliveries)
	var refused atomic.Int64
	answer := func(i, code int, text string) error {
		switch {
		case code == http.StatusAccepted && text == "stored":
			stored[i].Add(1)
		case code == http.StatusOK && text == "duplicate":
			dups[i].Add(1)
		case code == http.StatusServiceUnavailable:
			refused.Add(1)
			return errRedeliver
		default:
			return fmt.Errorf("delivery %d: status %d %q", i, code, text)
		}
		return nil
	}
	r, err := load(urls, true, cfg, prefix, answer)
	if err != nil {
		return run{}, 0, err
	}
	for i := range stored {
		if s, d := stored[i].Load(), dups[i].Load(); s != 1 || int(d) != len(urls)-1 {
			return run{}, 0, fmt.Errorf("delivery %s: %d stored, %d duplicate answers, want 1 and %d", guid(prefix, i), s, d, len(urls)-1)
		}
	}
	return r, refused.Load(), nil
}
