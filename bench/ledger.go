package main

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/internal/db"
	"github.com/wardenhq/warden/mirror/store"
)

// ledgerRounds is how many interleaved rounds the ledger section runs:
// floor, warden on the short history, floor, warden on the long one, again.
const ledgerRounds = 3

// ledgerHistories are the item histories (grants before the measured
// cycles) the section compares: a claim's cost must not grow with them.
var ledgerHistories = []int{10, 3000}

// ledgerSlice is how many cycles a round runs of one side before it
// switches to the other: floor, warden, floor, warden..., a few
// milliseconds each, so that the shared machine's slow and fast moments
// fall on both alike.
const ledgerSlice = 10

// benchLedger measures claim + renew + release cycles on the SQLite ledger
// (WAL, synchronous=FULL: every write is an fsynced commit), one claimant
// on one admitted item whose history already holds 10 or 3,000 grants,
// each as a ratio to a floor measured in the same run, interleaved with it:
// a minimal modernc.org/sqlite program with the same pragmas doing three
// single-row fsynced write transactions per cycle. Each round alternates
// slices of the floor and of warden; the machine is shared and noisy, so
// each figure is the best round's with the spread of the rounds.
func benchLedger(ctx context.Context, cycles int) ([]Figure, error) {
	dir, err := os.MkdirTemp("", "warden-bench-ledger-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	ratios := make([][]float64, len(ledgerHistories))
	var floors, together []float64
	var backfill []time.Duration
	for round := range ledgerRounds {
		g, err := groupCommitRound(ctx, filepath.Join(dir, fmt.Sprintf("g%d", round)), cycles)
		if err != nil {
			return nil, fmt.Errorf("claimants at once: %w", err)
		}
		together = append(together, g)
		for k, h := range ledgerHistories {
			r, err := ledgerRound(ctx, filepath.Join(dir, fmt.Sprintf("r%d-%d", round, h)), h, cycles)
			if err != nil {
				return nil, fmt.Errorf("%d grants: %w", h, err)
			}
			floors = append(floors, r.floor)
			ratios[k] = append(ratios[k], r.ratio)
			if k == len(ledgerHistories)-1 {
				backfill = append(backfill, r.first)
			}
		}
	}
	work := func(h int) string {
		return fmt.Sprintf("%d rounds × %d cycles, alternating with the floor's every %d (a round: the median pair); one item from %d grants (claim+outcome markers each)",
			ledgerRounds, cycles, ledgerSlice, h)
	}
	var figs []Figure
	best := make([]float64, len(ledgerHistories))
	for k, h := range ledgerHistories {
		best[k] = slices.Max(ratios[k])
		figs = append(figs, Figure{"ledger", fmt.Sprintf("claim+renew+release ÷ floor, %d grants", h), best[k], "×", work(h) + spread(ratios[k], ""), "aim ≥ 0.5"})
	}
	figs = append(figs,
		Figure{"ledger", fmt.Sprintf("%d-grant ÷ %d-grant ratio", ledgerHistories[1], ledgerHistories[0]), best[1] / best[0], "×", "best ratios above", "aim within 20% (0.8–1.2)"},
		Figure{"ledger", "floor: 3 fsynced single-row writes", slices.Max(floors), "cycles/s", fmt.Sprintf("%d rounds, modernc.org/sqlite, same pragmas", len(floors)) + spread(floors, "/s"), "the ratios' denominator"},
		Figure{"ledger", fmt.Sprintf("%d claimants at once ÷ 1 (group commit)", ledgerClaimants), slices.Max(together), "×",
			fmt.Sprintf("%d rounds × %d cycles, on %d items, against one claimant doing them all", ledgerRounds, cycles, ledgerClaimants) + spread(together, ""),
			"> 1: concurrent claims share fsyncs"},
		Figure{"ledger", fmt.Sprintf("first claim on %d grants (summary back-fill)", ledgerHistories[1]), float64(slices.Min(backfill).Microseconds()) / 1000, "ms",
			"reads the whole history once" + spread(durMs(backfill), "ms"), "once per item"})
	return figs, nil
}

// ledgerClaimants is how many claimants the group-commit figure runs at
// once, each on an item of its own.
const ledgerClaimants = 8

// groupCommitRound is the throughput of ledgerClaimants claimants cycling
// at once on items of their own, over one claimant doing the same cycles
// in turn, on a fresh ledger at path (each measured twice, alternating).
func groupCommitRound(ctx context.Context, path string, cycles int) (float64, error) {
	d, err := db.Open(ctx, "sqlite:"+path+".db")
	if err != nil {
		return 0, err
	}
	defer d.Close()
	l, err := benchStore(ctx, d, ledgerClaimants)
	if err != nil {
		return 0, err
	}
	per := max(cycles/ledgerClaimants/2, 1)
	var alone, together time.Duration
	for range 2 {
		start := time.Now()
		for n := 1; n <= ledgerClaimants; n++ {
			if err := itemCycles(ctx, l, n, per); err != nil {
				return 0, err
			}
		}
		alone += time.Since(start)
		start = time.Now()
		errs := make(chan error, ledgerClaimants)
		for n := 1; n <= ledgerClaimants; n++ {
			go func() { errs <- itemCycles(ctx, l, n, per) }()
		}
		for range ledgerClaimants {
			if err := <-errs; err != nil {
				return 0, err
			}
		}
		together += time.Since(start)
	}
	return alone.Seconds() / together.Seconds(), nil
}

// roundResult is one round: the floor's cycles/s over its slices, warden's
// ratio to it (the median over the round's pairs of slices: a stall of the
// shared disk in one slice moves one pair, not the round), and warden's
// first claim (the summary back-fill).
type roundResult struct {
	floor, ratio float64
	first        time.Duration
}

// ledgerRound runs one round at path (a prefix for its two databases): a
// fresh floor database and a fresh ledger whose item has grants grants of
// history, then cycles cycles of each in alternating slices.
func ledgerRound(ctx context.Context, path string, grants, cycles int) (roundResult, error) {
	var r roundResult
	floor, err := openFloor(ctx, path+"-floor.db")
	if err != nil {
		return r, fmt.Errorf("floor: %w", err)
	}
	defer floor.Close()
	d, err := db.Open(ctx, "sqlite:"+path+"-warden.db")
	if err != nil {
		return r, err
	}
	defer d.Close()
	l, err := benchStore(ctx, d, 1)
	if err != nil {
		return r, err
	}
	if err := seedHistory(ctx, d, grants); err != nil {
		return r, fmt.Errorf("seed %d grants: %w", grants, err)
	}
	start := time.Now()
	if err := claimCycles(ctx, l, 1); err != nil {
		return r, err
	}
	r.first = time.Since(start)
	var floorTime time.Duration
	var pairs []float64
	for next := 0; next < cycles; next += ledgerSlice {
		n := min(ledgerSlice, cycles-next)
		start := time.Now()
		if err := floorCycles(ctx, floor, next, n); err != nil {
			return r, fmt.Errorf("floor: %w", err)
		}
		ft := time.Since(start)
		floorTime += ft
		start = time.Now()
		if err := claimCycles(ctx, l, n); err != nil {
			return r, err
		}
		pairs = append(pairs, ft.Seconds()/time.Since(start).Seconds())
	}
	slices.Sort(pairs)
	r.floor, r.ratio = float64(cycles)/floorTime.Seconds(), pairs[len(pairs)/2]
	return r, nil
}

// spread is " (spread lo–hi)" over vs.
func spread(vs []float64, unit string) string {
	return fmt.Sprintf("; spread %s–%s%s", formatValue(slices.Min(vs)), formatValue(slices.Max(vs)), unit)
}

func durMs(ds []time.Duration) []float64 {
	out := make([]float64, len(ds))
	for i, d := range ds {
		out[i] = float64(d.Microseconds()) / 1000
	}
	return out
}

// openFloor opens the floor's database: a minimal modernc.org/sqlite
// program with internal/db's SQLite pragmas and one table.
func openFloor(ctx context.Context, path string) (*sql.DB, error) {
	q := url.Values{}
	for _, p := range []string{"page_size(16384)", "journal_mode(WAL)", "synchronous(FULL)", "busy_timeout(10000)",
		"foreign_keys(1)", "temp_store(MEMORY)", "wal_autocheckpoint(0)"} {
		q.Add("_pragma", p)
	}
	d, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode()+"&_txlock=immediate")
	if err != nil {
		return nil, err
	}
	d.SetMaxOpenConns(1)
	if _, err := d.ExecContext(ctx, `CREATE TABLE t (k INTEGER PRIMARY KEY, v INTEGER NOT NULL)`); err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

// floorCycles runs the floor's cycles from key first: three single-row
// write transactions each (an insert and two updates of it, as a claim, a
// renew and a release are), each committed and fsynced.
func floorCycles(ctx context.Context, d *sql.DB, first, cycles int) error {
	write := func(query string, args ...any) error {
		tx, err := d.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		if _, err := tx.ExecContext(ctx, query, args...); err != nil {
			return err
		}
		return tx.Commit()
	}
	for i := first; i < first+cycles; i++ {
		if err := write(`INSERT INTO t (k, v) VALUES ($1, 0)`, i); err != nil {
			return err
		}
		if err := write(`UPDATE t SET v = v + 1 WHERE k = $1`, i); err != nil {
			return err
		}
		if err := write(`UPDATE t SET v = v + 2 WHERE k = $1`, i); err != nil {
			return err
		}
	}
	return nil
}

var benchPM = store.Actor{Role: gating.RolePM, Name: "pm"}

const benchOwner = "pm/bench"

// benchStore opens the store over the fresh database d with repository 1
// and its items issue-1 to issue-<items>, admitted (through the ledger's
// own API).
func benchStore(ctx context.Context, d *db.DB, items int) (*store.Ledger, error) {
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
	tags := []string{"backlog", "priority:P2", "phase:implementation", "homeRegion:local", "baseBranch:main"}
	for n := 1; n <= items; n++ {
		if _, err := l.Create(ctx, 1, store.NewItem{Number: n, Title: "bench", Tags: tags}, benchPM, store.WriteOptions{}); err != nil {
			return nil, err
		}
		if err := acts.RecordAdmission(ctx, 1, n, store.Admission{By: "alice", At: time.Now(), How: "bench"}); err != nil {
			return nil, err
		}
		if _, err := l.RecordIssueState(ctx, 1, n, store.IssueState{State: "open", Labels: []string{"backlog"}, UpdatedAt: time.Now()}); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// seedHistory writes, in one transaction, what grants past cycles of the
// claimant would have left on issue-1: each a grant (renewed, so with
// evidence of work, and released), its claim marker and its outcome marker
// in the trail, and the fence and released marks at the last grant. The
// rows are the ones Claim, Renew, Release and RecordTrailComment write.
func seedHistory(ctx context.Context, d *db.DB, grants int) error {
	tx, err := d.Write.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	grant, err := tx.PrepareContext(ctx, `INSERT INTO ledger_grants (repo_id, number, fence, owner, region, branch, purpose, granted_at, lease_expires_at, released_at)
		VALUES (1, 1, $1, $2, 'local', '', '', $3, $4, $5)`)
	if err != nil {
		return err
	}
	evidence, err := tx.PrepareContext(ctx, `INSERT INTO ledger_evidence (repo_id, number, fence, last_at, kind) VALUES (1, 1, $1, $2, 'renew')`)
	if err != nil {
		return err
	}
	comment, err := tx.PrepareContext(ctx, `INSERT INTO trail_comments (repo_id, number, comment_id, author, author_type, created_at,
		earliest_body, earliest_at, current_body, current_at, edited, deleted, is_agent, is_warden, has_write, recorded_at)
		VALUES (1, 1, $1, 'bench-bot', 'Bot', $2, $3, $2, $3, $2, 0, 0, 1, 0, 0, $2)`)
	if err != nil {
		return err
	}
	base := time.Now().Add(-time.Duration(grants)*3*time.Second - time.Minute).UnixMilli()
	for f := int64(1); f <= int64(grants); f++ {
		at := base + f*3000
		if _, err := grant.ExecContext(ctx, f, benchOwner, at, at+60_000, at+2500); err != nil {
			return err
		}
		if _, err := evidence.ExecContext(ctx, f, at+1500); err != nil {
			return err
		}
		claimAt := time.UnixMilli(at + 1000).UTC().Truncate(time.Second)
		body := gating.ClaimMarker("issue-1", benchOwner, "local", f, claimAt, nil) + "\nClaimed."
		if _, err := comment.ExecContext(ctx, 2*f-1, claimAt.UnixMilli(), body); err != nil {
			return err
		}
		body = fmt.Sprintf("<!-- backlog-worker: outcome item=issue-1 owner=%s fence=%d result=released -->\nReleased.", benchOwner, f)
		if _, err := comment.ExecContext(ctx, 2*f, time.UnixMilli(at+2000).UTC().Truncate(time.Second).UnixMilli(), body); err != nil {
			return err
		}
	}
	if _, err := tx.ExecContext(ctx, `UPDATE ledger_items SET fence = $1, released = $1 WHERE repo_id = 1 AND number = 1`, grants); err != nil {
		return err
	}
	return tx.Commit()
}

// claimCycles runs cycles claim + renew + release cycles on issue-1.
func claimCycles(ctx context.Context, l *store.Ledger, cycles int) error {
	return itemCycles(ctx, l, 1, cycles)
}

// itemCycles runs cycles claim + renew + release cycles on issue-n.
func itemCycles(ctx context.Context, l *store.Ledger, n, cycles int) error {
	lease := 60.0
	id := gating.IDFor(n)
	for i := range cycles {
		r, err := l.Claim(ctx, 1, id, store.ClaimRequest{Owner: benchOwner, LeaseSeconds: &lease}, benchPM)
		if err != nil || !r.Granted {
			return fmt.Errorf("claim %d: %+v %v", i, r, err)
		}
		if rr, err := l.Renew(ctx, 1, id, *r.FencingToken, &lease, benchPM); err != nil || !rr.Granted {
			return fmt.Errorf("renew %d: %+v %v", i, rr, err)
		}
		if rel, err := l.Release(ctx, 1, id, *r.FencingToken, benchPM); err != nil || !rel.Released {
			return fmt.Errorf("release %d: %+v %v", i, rel, err)
		}
	}
	return nil
}

// ledgerCycles runs cycles claim + renew + release cycles on a ledger in
// the fresh database d and reports them under section; backend describes d.
func ledgerCycles(ctx context.Context, d *db.DB, section, backend string, cycles int) ([]Figure, error) {
	l, err := benchStore(ctx, d, 1)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	if err := claimCycles(ctx, l, cycles); err != nil {
		return nil, err
	}
	el := time.Since(start)
	work := fmt.Sprintf("%d cycles on one item, %s", cycles, backend)
	return []Figure{
		{section, "claim+renew+release cycles", float64(cycles) / el.Seconds(), "/s", work, "one fsynced commit per write"},
		{section, "time per write", el.Seconds() * 1e6 / float64(3*cycles), "µs", work, "—"},
	}, nil
}
