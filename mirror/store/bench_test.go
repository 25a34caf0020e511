package store

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/internal/db"
)

// The benchmarks print figures and assert nothing about time. They run on
// a file database with the production pragmas (WAL, synchronous=FULL), so a
// write's cost includes its fsync.

func benchLedger(b *testing.B) (*Ledger, context.Context) {
	b.Helper()
	ctx := context.Background()
	d, err := db.Open(ctx, "sqlite:"+filepath.Join(b.TempDir(), "bench.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { d.Close() })
	// Claims cycle on the same items: no poison threshold in the way.
	l, err := openLedger(ctx, d, Config{Region: "local", LeaseDefault: 30 * time.Second, LeaseMax: 30 * time.Minute,
		Settings: func(context.Context, Repo) gating.Settings {
			s := gating.DefaultSettings()
			s.PoisonThreshold = 1 << 30
			return s
		}})
	if err != nil {
		b.Fatal(err)
	}
	if err := l.PutRepo(ctx, Repo{ID: 1, FullName: "acme/widgets", DefaultBranch: "main"}); err != nil {
		b.Fatal(err)
	}
	return l, ctx
}

var benchTags = []string{"backlog", "priority:P2", "phase:implementation", "homeRegion:local", "baseBranch:feat/epic/bench"}

// BenchmarkClaimRenewReleaseOneItem: one claimant, one item, a full cycle
// (claim, renew, release: three write transactions) per op.
func BenchmarkClaimRenewReleaseOneItem(b *testing.B) {
	l, ctx := benchLedger(b)
	pm := Actor{Role: gating.RolePM, Name: "pm"}
	if _, err := l.Create(ctx, 1, NewItem{Number: 1, Tags: benchTags}, pm, WriteOptions{}); err != nil {
		b.Fatal(err)
	}
	if err := l.writeTx(ctx, func(tx *sql.Tx) error { return admitForBench(ctx, tx, l, 1) }); err != nil {
		b.Fatal(err)
	}
	lease := 60.0
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r, err := l.Claim(ctx, 1, "issue-1", ClaimRequest{Owner: "pm/bench", LeaseSeconds: &lease}, pm)
		if err != nil || !r.Granted {
			b.Fatalf("claim: %+v %v", r, err)
		}
		if rr, err := l.Renew(ctx, 1, "issue-1", *r.FencingToken, &lease, pm); err != nil || !rr.Granted {
			b.Fatalf("renew: %+v %v", rr, err)
		}
		if rel, err := l.Release(ctx, 1, "issue-1", *r.FencingToken, pm); err != nil || !rel.Released {
			b.Fatalf("release: %+v %v", rel, err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/3, "µs/write")
}

// BenchmarkClaimRenewReleaseAcross1000Items: parallel claimants over 1,000
// items; each op is a full cycle on the next item in turn. A claim that
// finds its item held by another goroutine counts as contended and moves on.
func BenchmarkClaimRenewReleaseAcross1000Items(b *testing.B) {
	l, ctx := benchLedger(b)
	pm := Actor{Role: gating.RolePM, Name: "pm"}
	const items = 1000
	if err := seedItems(ctx, l, items, false); err != nil {
		b.Fatal(err)
	}
	var next, contended atomic.Int64
	lease := 60.0
	b.SetParallelism(4) // 4 × GOMAXPROCS claimants
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			id := gating.IDFor(int(next.Add(1)%items) + 1)
			r, err := l.Claim(ctx, 1, id, ClaimRequest{Owner: "pm/bench", LeaseSeconds: &lease}, pm)
			if err != nil {
				b.Error(err)
				return
			}
			if !r.Granted {
				contended.Add(1)
				continue
			}
			if rr, err := l.Renew(ctx, 1, id, *r.FencingToken, &lease, pm); err != nil || !rr.Granted {
				b.Errorf("renew: %+v %v", rr, err)
				return
			}
			if rel, err := l.Release(ctx, 1, id, *r.FencingToken, pm); err != nil || !rel.Released {
				b.Errorf("release: %+v %v", rel, err)
				return
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(contended.Load()), "contended")
}

// BenchmarkScan10000Items: one op pages through 10,000 items (List, 1,000 a
// page), each with seven tags and three links.
func BenchmarkScan10000Items(b *testing.B) {
	l, ctx := benchLedger(b)
	const items = 10000
	if err := seedItems(ctx, l, items, true); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		after, seen := 0, 0
		for {
			page, err := l.List(ctx, 1, after, 1000)
			if err != nil {
				b.Fatal(err)
			}
			if len(page) == 0 {
				break
			}
			for _, it := range page {
				if len(it.Tags) != 7 {
					b.Fatalf("%s has %d tags", it.ID, len(it.Tags))
				}
			}
			seen += len(page)
			after = page[len(page)-1].ID.Number()
		}
		if seen != items {
			b.Fatalf("scanned %d items", seen)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/items, "ns/item")
}

// seedItems writes n items in one transaction, through the ledger's own
// writer (the rules are exercised by the conformance suite; this is data).
func seedItems(ctx context.Context, l *Ledger, n int, rich bool) error {
	return l.writeTx(ctx, func(tx *sql.Tx) error {
		now := l.nowMs()
		for i := 1; i <= n; i++ {
			if _, err := tx.ExecContext(ctx, `INSERT INTO ledger_items (repo_id, number, title, body, author, provenance, created_at, updated_at, fence, released)
				VALUES (1, $1, $2, $3, 'backlog-pm', 'bench', $4, $4, 0, 0)`, i, fmt.Sprintf("Item %d of the benchmark backlog", i),
				fmt.Sprintf("Spec: https://github.com/acme/widgets/issues/%d", i), now); err != nil {
				return err
			}
			tg := benchTags
			var links []gating.Link
			if rich {
				tg = append(append([]string{}, benchTags...), fmt.Sprintf("resource:box-%d", i%7), "pm-ruling-required")
				links = []gating.Link{{Rel: gating.AnchoredTo, Target: fmt.Sprintf("src/pkg%d/file.go", i%50)}, {Rel: gating.PartOf, Target: "issue-1"}}
				if i > 2 {
					links = append(links, gating.Link{Rel: gating.BlockedBy, Target: string(gating.IDFor(i - 1))})
				} else {
					links = append(links, gating.Link{Rel: gating.Related, Target: "issue-3"})
				}
			}
			if err := writeTagsLinks(ctx, tx, 1, i, tg, links, nil, nil); err != nil {
				return err
			}
			if err := admitForBench(ctx, tx, l, i); err != nil {
				return err
			}
		}
		return nil
	})
}

// admitForBench records item n of repository 1 admitted: a human's act and
// issue labels without the admission label.
func admitForBench(ctx context.Context, tx *sql.Tx, l *Ledger, n int) error {
	now := l.nowMs()
	if _, err := tx.ExecContext(ctx, `INSERT INTO admissions (repo_id, number, admitted_by, admitted_at, how) VALUES (1, $1, 'alice', $2, 'bench')`, n, now); err != nil {
		return err
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO issue_state (repo_id, number, state, labels, updated_at, recorded_at) VALUES (1, $1, 'open', '["backlog"]', $2, $2)`, n, now)
	return err
}

// BenchmarkSnapshot10000Items: one op loads the whole-repository snapshot of
// 10,000 items (seven tags, three links each) and computes its ready set.
func BenchmarkSnapshot10000Items(b *testing.B) {
	l, ctx := benchLedger(b)
	const items = 10000
	if err := seedItems(ctx, l, items, true); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rs, err := l.Snapshot(ctx, 1)
		if err != nil {
			b.Fatal(err)
		}
		if r := rs.Ready(); len(r.Ready)+len(r.Excluded) != items {
			b.Fatalf("%d ready, %d excluded", len(r.Ready), len(r.Excluded))
		}
	}
}

// BenchmarkClaimReadinessIn10000Items: one op is a claim's readiness check
// (the partial snapshot and gating.Claimable) on one of 10,000 items.
func BenchmarkClaimReadinessIn10000Items(b *testing.B) {
	l, ctx := benchLedger(b)
	const items = 10000
	if err := seedItems(ctx, l, items, true); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		id := gating.IDFor(2 + i%(items-1))
		rs, err := l.ClaimSnapshot(ctx, 1, id)
		if err != nil {
			b.Fatal(err)
		}
		gating.Claimable(rs.Snapshot, id, "pm/bench")
	}
}
