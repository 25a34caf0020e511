package store

import (
	"database/sql"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/wardenhq/warden/gating"
)

// BenchmarkPushActivity: what a push delivery costs the ledger with 50 live
// claims, each announced by its own bot login and each with a branch: a
// push elsewhere by a holder's login through the new path (RecordActivity
// finds the claim it evidences and writes its evidence) as a ratio to the
// floor, a push to that claim's own branch through the path as it was
// before (its evidence found by branch). It prints the ratio's median and
// spread over interleaved rounds:
// go test -run '^$' -bench BenchmarkPushActivity -benchtime 15x ./mirror/store/
func BenchmarkPushActivity(b *testing.B) {
	l, ctx := benchLedger(b)
	pm := Actor{Role: gating.RolePM, Name: "pm"}
	const claims = 50
	t0 := l.cfg.Now()
	for n := 1; n <= claims; n++ {
		if _, err := l.Create(ctx, 1, NewItem{Number: n, Tags: benchTags}, pm, WriteOptions{}); err != nil {
			b.Fatal(err)
		}
		if err := l.writeTx(ctx, func(tx *sql.Tx) error { return admitForBench(ctx, tx, l, n) }); err != nil {
			b.Fatal(err)
		}
		r, err := l.Claim(ctx, 1, gating.IDFor(n), ClaimRequest{Owner: fmt.Sprintf("pm/w%d", n), LeaseSeconds: f64(600), Branch: fmt.Sprintf("feat/w%d", n)}, pm)
		if err != nil || !r.Granted {
			b.Fatalf("claim %d: %+v %v", n, r, err)
		}
		rec := TrailRecord{CommentID: int64(n), Author: fmt.Sprintf("bot-%d", n), AuthorType: "Bot", CreatedAt: t0, EarliestAt: t0, CurrentAt: t0, IsAgent: true,
			EarliestBody: gating.ClaimMarker(string(gating.IDFor(n)), fmt.Sprintf("pm/w%d", n), "local", *r.FencingToken, t0, nil)}
		rec.CurrentBody = rec.EarliestBody
		if _, err := l.RecordTrailComment(ctx, 1, n, rec); err != nil {
			b.Fatal(err)
		}
	}
	// One push to the pushed branch's own claim (the old path's real cost:
	// its evidence is a write) against a push elsewhere by a holder's login
	// through the whole new path (the same write, found by RecordActivity).
	k := 0
	floor := func() {
		k++
		at := t0.Add(time.Duration(k) * time.Millisecond)
		if _, err := l.RecordPushEvidence(ctx, 1, "feat/w7", at, "bot-7"); err != nil {
			b.Fatal(err)
		}
		if _, err := l.RecordBranchPush(ctx, 1, "feat/w7", at, "bot-7", ""); err != nil {
			b.Fatal(err)
		}
	}
	elsewhere := func() {
		k++
		at := t0.Add(time.Duration(k) * time.Millisecond)
		if _, err := l.RecordPushEvidence(ctx, 1, "scratch", at, "bot-7"); err != nil {
			b.Fatal(err)
		}
		if _, err := l.RecordActivity(ctx, 1, Activity{Kind: ActivityPush, Login: "bot-7", Branch: "scratch", At: at}); err != nil {
			b.Fatal(err)
		}
		if _, err := l.RecordBranchPush(ctx, 1, "scratch", at, "bot-7", ""); err != nil {
			b.Fatal(err)
		}
	}
	// Interleaved rounds: each round times a batch of each, so the
	// machine's noise falls on both alike; the ratio is reported with its
	// spread over the rounds.
	const batch = 40
	var ratios []float64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		for j := 0; j < batch; j++ {
			floor()
		}
		f := time.Since(start)
		start = time.Now()
		for j := 0; j < batch; j++ {
			elsewhere()
		}
		ratios = append(ratios, float64(time.Since(start))/float64(f))
	}
	b.StopTimer()
	slices.Sort(ratios)
	b.ReportMetric(ratios[len(ratios)/2], "ratio-median")
	b.ReportMetric(ratios[0], "ratio-min")
	b.ReportMetric(ratios[len(ratios)-1], "ratio-max")
}
