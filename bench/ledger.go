package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/internal/db"
	"github.com/wardenhq/warden/mirror/store"
)

// benchLedger measures claim + renew + release cycles on the SQLite ledger
// (WAL, synchronous=FULL: every write is an fsynced commit), one claimant on
// one admitted item.
func benchLedger(ctx context.Context, cycles int) ([]Figure, error) {
	dir, err := os.MkdirTemp("", "warden-bench-ledger-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	d, err := db.Open(ctx, "sqlite:"+filepath.Join(dir, "ledger.db"))
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return ledgerCycles(ctx, d, "ledger", "SQLite (WAL, synchronous=FULL)", cycles)
}

// ledgerCycles runs cycles claim + renew + release cycles on a ledger in
// the fresh database d and reports them under section; backend describes d.
func ledgerCycles(ctx context.Context, d *db.DB, section, backend string, cycles int) ([]Figure, error) {
	st, err := store.Open(ctx, d, store.Config{Region: "local", LeaseDefault: 30 * time.Second, LeaseMax: 30 * time.Minute,
		Quarantine: time.Hour, Settings: func(context.Context, store.Repo) gating.Settings {
			s := gating.DefaultSettings()
			s.PoisonThreshold = 1 << 30 // the same claimant cycles: no poison in the way
			return s
		}})
	if err != nil {
		return nil, err
	}
	l, acts := st.Ledger, st.Acts
	if err := l.PutRepo(ctx, store.Repo{ID: 1, FullName: "acme/bench", DefaultBranch: "main", Installation: 1}); err != nil {
		return nil, err
	}
	pm := store.Actor{Role: gating.RolePM, Name: "pm"}
	tags := []string{"backlog", "priority:P2", "phase:implementation", "homeRegion:local", "baseBranch:main"}
	if _, err := l.Create(ctx, 1, store.NewItem{Number: 1, Title: "bench", Tags: tags}, pm, store.WriteOptions{}); err != nil {
		return nil, err
	}
	if err := acts.RecordAdmission(ctx, 1, 1, store.Admission{By: "alice", At: time.Now(), How: "bench"}); err != nil {
		return nil, err
	}
	if _, err := l.RecordIssueState(ctx, 1, 1, store.IssueState{State: "open", Labels: []string{"backlog"}, UpdatedAt: time.Now()}); err != nil {
		return nil, err
	}
	lease := 60.0
	start := time.Now()
	for i := 0; i < cycles; i++ {
		r, err := l.Claim(ctx, 1, "issue-1", store.ClaimRequest{Owner: "pm/bench", LeaseSeconds: &lease}, pm)
		if err != nil || !r.Granted {
			return nil, fmt.Errorf("claim %d: %+v %v", i, r, err)
		}
		if rr, err := l.Renew(ctx, 1, "issue-1", *r.FencingToken, &lease, pm); err != nil || !rr.Granted {
			return nil, fmt.Errorf("renew %d: %+v %v", i, rr, err)
		}
		if rel, err := l.Release(ctx, 1, "issue-1", *r.FencingToken, pm); err != nil || !rel.Released {
			return nil, fmt.Errorf("release %d: %+v %v", i, rel, err)
		}
	}
	el := time.Since(start)
	work := fmt.Sprintf("%d cycles on one item, %s", cycles, backend)
	return []Figure{
		{section, "claim+renew+release cycles", float64(cycles) / el.Seconds(), "/s", work, "one fsynced commit per write"},
		{section, "time per write", el.Seconds() * 1e6 / float64(3*cycles), "µs", work, "—"},
	}, nil
}
