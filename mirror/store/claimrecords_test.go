package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/internal/db/dbtest"
)

// The claim records (requestId, leaseDefaulted, the per-owner cap,
// ClaimNext, grantedAt) on SQLite, and on PostgreSQL when
// WARDEN_TEST_POSTGRES is set.

func TestClaimRecordsSQLite(t *testing.T) { runClaimRecords(t, openSQLiteLedger) }

func TestClaimRecordsPostgres(t *testing.T) {
	if os.Getenv(dbtest.PostgresEnv) == "" {
		t.Skip("PostgreSQL claim records skipped: set " + dbtest.PostgresEnv + " to a postgres:// URL to run them")
	}
	runClaimRecords(t, openPostgresLedger)
}

func runClaimRecords(t *testing.T, open func(t *testing.T) *Ledger) {
	setup := func(t *testing.T) *env { return newEnv(t, open) }
	t.Run("RequestIDReplay", func(t *testing.T) { testRequestIDReplay(t, setup(t)) })
	t.Run("RequestIDRace", func(t *testing.T) { testRequestIDRace(t, setup(t)) })
	t.Run("RenewReleaseReplay", func(t *testing.T) { testRenewReleaseReplay(t, setup(t)) })
	t.Run("RequestIDPruned", func(t *testing.T) { testRequestIDPruned(t, setup(t)) })
	t.Run("LeaseDefaulted", func(t *testing.T) { testLeaseDefaulted(t, setup(t)) })
	t.Run("OwnerCap", func(t *testing.T) { testOwnerCap(t, setup(t)) })
	t.Run("OwnerCapRace", func(t *testing.T) { testOwnerCapRace(t, setup(t)) })
	t.Run("ClaimNext", func(t *testing.T) { testClaimNext(t, setup(t)) })
	t.Run("GrantedAt", func(t *testing.T) { testGrantedAt(t, setup(t)) })
}

func keyReused(t *testing.T, err error) {
	t.Helper()
	var ref *gating.Refusal
	if !errors.As(err, &ref) || ref.Reason != ReasonKeyReused {
		t.Fatalf("got %v, want a %s refusal", err, ReasonKeyReused)
	}
}

func testRequestIDReplay(t *testing.T, e *env) {
	ctx, l := e.ctx, e.l
	e.create(1, tags())
	e.create(2, tags())
	req := ClaimRequest{Owner: "w1/run-1", LeaseSeconds: f64(60), RequestID: "c-1"}
	first, err := l.Claim(ctx, e.repo, "issue-1", req, worker)
	if err != nil || !first.Granted || first.Replayed {
		t.Fatalf("first send %+v %v", first, err)
	}
	// The resend (the first answer was lost): the same grant, not contended.
	e.clock.Advance(5 * time.Second)
	again, err := l.Claim(ctx, e.repo, "issue-1", req, worker)
	if err != nil || !again.Granted || !again.Replayed || *again.FencingToken != *first.FencingToken ||
		*again.LeaseExpiresAtUtc != *first.LeaseExpiresAtUtc {
		t.Fatalf("resend %+v %v, want the first grant %+v", again, err, first)
	}
	if gs, _ := l.Grants(ctx, e.repo, "issue-1"); len(gs) != 1 {
		t.Fatalf("a resend made a second grant: %+v", gs)
	}
	// Without the id, the same body is a new claim: contended.
	plain := req
	plain.RequestID = ""
	if r, err := l.Claim(ctx, e.repo, "issue-1", plain, worker); err != nil || r.Granted || *r.Reason != ReasonContended {
		t.Fatalf("a claim without the id %+v %v, want contended", r, err)
	}
	// The id with another body: another item, another lease, another owner.
	for _, other := range []struct {
		id  gating.ItemID
		req ClaimRequest
	}{
		{"issue-2", req},
		{"issue-1", ClaimRequest{Owner: "w1/run-1", LeaseSeconds: f64(61), RequestID: "c-1"}},
		{"issue-1", ClaimRequest{Owner: "w1/run-2", LeaseSeconds: f64(60), RequestID: "c-1"}},
		{"issue-1", ClaimRequest{Owner: "w1/run-1", RequestID: "c-1"}},
	} {
		_, err := l.Claim(ctx, e.repo, other.id, other.req, worker)
		keyReused(t, err)
	}
	// Another token's id of the same name is its own.
	w2 := Actor{Role: gating.RoleWorker, Name: "w2"}
	if r, err := l.Claim(ctx, e.repo, "issue-2", ClaimRequest{Owner: "w2/run-1", LeaseSeconds: f64(60), RequestID: "c-1"}, w2); err != nil || !r.Granted || r.Replayed {
		t.Fatalf("w2's c-1 %+v %v", r, err)
	}
	// Expired: once the lease is over the old grant is not handed out
	// again; the resend runs anew (here the holder's own re-claim).
	e.clock.Advance(2 * time.Minute)
	late, err := l.Claim(ctx, e.repo, "issue-1", req, worker)
	if err != nil || !late.Granted || late.Replayed || *late.FencingToken != *first.FencingToken+1 {
		t.Fatalf("resend after the lease %+v %v, want a new grant at fence %d", late, err, *first.FencingToken+1)
	}
	// ... and that new grant is what a further resend replays.
	if r, err := l.Claim(ctx, e.repo, "issue-1", req, worker); err != nil || !r.Replayed || *r.FencingToken != *late.FencingToken {
		t.Fatalf("resend of the re-run %+v %v", r, err)
	}
	// A refusal is not replayed: the resend runs again and may be granted.
	e.create(3, tags())
	hold := e.claim(3, "pm/holder", 30)
	rq := ClaimRequest{Owner: "w1/run-9", LeaseSeconds: f64(60), RequestID: "c-9"}
	if r, err := l.Claim(ctx, e.repo, "issue-3", rq, worker); err != nil || r.Granted || *r.Reason != ReasonContended {
		t.Fatalf("claim of a held item %+v %v", r, err)
	}
	e.release(3, *hold.FencingToken)
	if r, err := l.Claim(ctx, e.repo, "issue-3", rq, worker); err != nil || !r.Granted || r.Replayed {
		t.Fatalf("resend of a refused claim %+v %v, want granted", r, err)
	}
	// Hostile ids are refused before anything is read.
	for _, bad := range []string{"a b", "-x", "ü", string(make([]byte, 200)), "x\n", "x%y"} {
		_, err := l.Claim(ctx, e.repo, "issue-2", ClaimRequest{Owner: "w1/run-1", LeaseSeconds: f64(60), RequestID: bad}, worker)
		var ref *gating.Refusal
		if !errors.As(err, &ref) || ref.Reason != ReasonInvalidRequest {
			t.Fatalf("requestId %q: %v, want invalid-request", bad, err)
		}
	}
}

// testRequestIDRace: sends of one request racing each other all answer
// the one grant (on PostgreSQL the record's row makes them take turns).
func testRequestIDRace(t *testing.T, e *env) {
	e.create(1, tags())
	req := ClaimRequest{Owner: "w1/run-1", LeaseSeconds: f64(60), RequestID: "race-1"}
	const sends = 8
	var wg sync.WaitGroup
	out := make([]ClaimResult, sends)
	errs := make([]error, sends)
	for i := range sends {
		wg.Go(func() { out[i], errs[i] = e.l.Claim(context.Background(), e.repo, "issue-1", req, worker) })
	}
	wg.Wait()
	replays := 0
	for i := range sends {
		if errs[i] != nil || !out[i].Granted || *out[i].FencingToken != 1 {
			t.Fatalf("send %d: %+v %v, want the one grant (fence 1)", i, out[i], errs[i])
		}
		if out[i].Replayed {
			replays++
		}
	}
	if replays != sends-1 {
		t.Fatalf("%d replays of %d sends, want %d", replays, sends, sends-1)
	}
}

func testRenewReleaseReplay(t *testing.T, e *env) {
	ctx, l := e.ctx, e.l
	e.create(1, tags())
	c := e.claim(1, "pm/a", 60)
	tok := *c.FencingToken
	e.clock.Advance(10 * time.Second)
	rn := RenewRequest{FencingToken: tok, LeaseSeconds: f64(600), RequestID: "r-1"}
	first, err := l.RenewWith(ctx, e.repo, "issue-1", rn, pm)
	if err != nil || !first.Granted || first.Replayed {
		t.Fatalf("renew %+v %v", first, err)
	}
	e.clock.Advance(10 * time.Second)
	again, err := l.RenewWith(ctx, e.repo, "issue-1", rn, pm)
	if err != nil || !again.Replayed || *again.LeaseExpiresAtUtc != *first.LeaseExpiresAtUtc {
		t.Fatalf("renew resend %+v %v, want the first answer (the lease not moved again)", again, err)
	}
	if st := e.status(1); *st.LeaseExpiresAtUtc != *first.LeaseExpiresAtUtc {
		t.Fatalf("the resend moved the lease: %s", fmtStatus(st))
	}
	_, err = l.RenewWith(ctx, e.repo, "issue-1", RenewRequest{FencingToken: tok, LeaseSeconds: f64(300), RequestID: "r-1"}, pm)
	keyReused(t, err)
	// A claim's id may not name a renew.
	_, err = l.Claim(ctx, e.repo, "issue-1", ClaimRequest{Owner: "pm/a", LeaseSeconds: f64(600), RequestID: "r-1"}, pm)
	keyReused(t, err)

	rel := ReleaseRequest{FencingToken: tok, RequestID: "x-1"}
	r1, err := l.ReleaseWith(ctx, e.repo, "issue-1", rel, pm)
	if err != nil || !r1.Released || r1.Replayed {
		t.Fatalf("release %+v %v", r1, err)
	}
	r2, err := l.ReleaseWith(ctx, e.repo, "issue-1", rel, pm)
	if err != nil || !r2.Released || !r2.Replayed || r2.Reason != nil {
		t.Fatalf("release resend %+v %v, want released again (not stale)", r2, err)
	}
	if r3, err := l.Release(ctx, e.repo, "issue-1", tok, pm); err != nil || r3.Released || *r3.Reason != ReasonStale {
		t.Fatalf("a second release without the id %+v %v, want stale", r3, err)
	}
	_, err = l.ReleaseWith(ctx, e.repo, "issue-1", ReleaseRequest{FencingToken: tok + 1, RequestID: "x-1"}, pm)
	keyReused(t, err)
}

func testRequestIDPruned(t *testing.T, e *env) {
	ctx, l := e.ctx, e.l
	e.create(1, tags())
	e.create(2, tags())
	if r, err := l.Claim(ctx, e.repo, "issue-1", ClaimRequest{Owner: "pm/a", LeaseSeconds: f64(60), RequestID: "p-1"}, pm); err != nil || !r.Granted {
		t.Fatalf("claim %+v %v", r, err)
	}
	count := func() int {
		var n int
		if err := l.db.Read.QueryRowContext(ctx, `SELECT COUNT(*) FROM claim_requests`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if count() != 1 {
		t.Fatalf("%d records, want 1", count())
	}
	// A day later the id is free again (whatever the pruning did), and the
	// next keyed request prunes the old record.
	e.clock.Advance(requestRetention + time.Minute)
	if r, err := l.Claim(ctx, e.repo, "issue-2", ClaimRequest{Owner: "pm/b", LeaseSeconds: f64(60), RequestID: "p-1"}, pm); err != nil || !r.Granted || r.Replayed {
		t.Fatalf("the id reused after the retention %+v %v", r, err)
	}
	if r, err := l.Claim(ctx, e.repo, "issue-2", ClaimRequest{Owner: "pm/c", LeaseSeconds: f64(60), RequestID: "p-2"}, pm); err != nil {
		t.Fatalf("claim %+v %v", r, err)
	}
	var old int
	if err := l.db.Read.QueryRowContext(ctx, `SELECT COUNT(*) FROM claim_requests WHERE created_at < $1`,
		e.clock.Now().Add(-requestRetention).UnixMilli()).Scan(&old); err != nil || old != 0 {
		t.Fatalf("%d records older than the retention remain (%v)", old, err)
	}
}

func testLeaseDefaulted(t *testing.T, e *env) {
	ctx, l := e.ctx, e.l
	for n := 1; n <= 3; n++ {
		e.create(n, tags())
	}
	d, err := l.Claim(ctx, e.repo, "issue-1", ClaimRequest{Owner: "pm/a"}, pm)
	if err != nil || !d.Granted || d.LeaseDefaulted == nil || !*d.LeaseDefaulted || *d.LeaseSeconds != 30 {
		t.Fatalf("claim without a lease %+v %v, want leaseDefaulted true and the 30 s default", d, err)
	}
	x := e.claim(2, "pm/b", 600)
	if x.LeaseDefaulted == nil || *x.LeaseDefaulted {
		t.Fatalf("claim with a lease: leaseDefaulted %v, want false", x.LeaseDefaulted)
	}
	y := e.claim(3, "pm/c", 600)
	defaults := func() map[gating.ItemID]string {
		rs, err := l.Snapshot(ctx, e.repo)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := l.Report(ctx, rs, rs.Ready())
		if err != nil {
			t.Fatal(err)
		}
		out := map[gating.ItemID]string{}
		for _, f := range rep.InFlight {
			if f.LeaseDefaulted {
				out[f.Item] = "in flight"
			}
		}
		for _, ln := range rep.Lines {
			if ln.Code == gating.CodeLeaseDefaulted {
				out[ln.Item] += ", line"
			}
		}
		return out
	}
	if got := defaults(); len(got) != 1 || got["issue-1"] != "in flight, line" {
		t.Fatalf("lease-defaulted in the report: %v, want issue-1 only", got)
	}
	// A renew without a lease defaults it too; one with a lease clears it.
	r, err := l.Renew(ctx, e.repo, "issue-3", *y.FencingToken, nil, pm)
	if err != nil || r.LeaseDefaulted == nil || !*r.LeaseDefaulted || !*r.LeaseShortened {
		t.Fatalf("renew without a lease %+v %v", r, err)
	}
	if _, err := l.Renew(ctx, e.repo, "issue-1", *d.FencingToken, f64(600), pm); err != nil {
		t.Fatal(err)
	}
	if got := defaults(); len(got) != 1 || got["issue-3"] != "in flight, line" {
		t.Fatalf("lease-defaulted after the renews: %v, want issue-3 only", got)
	}
	// Released: no longer in flight, no longer reported.
	e.release(3, *y.FencingToken)
	if got := defaults(); len(got) != 0 {
		t.Fatalf("lease-defaulted after the release: %v", got)
	}
	_ = x
}

func testOwnerCap(t *testing.T, e *env) {
	cfg := testConfig(e.clock, testRegion)
	cfg.Settings = func(context.Context, Repo) gating.Settings {
		s := gating.DefaultSettings()
		s.MaxClaimsPerOwner = 2
		return s
	}
	l := reconfigure(t, e.l, cfg)
	ctx := e.ctx
	for n := 1; n <= 5; n++ {
		e.create(n, tags())
	}
	claim := func(n int, owner, purpose string, a Actor) ClaimResult {
		t.Helper()
		r, err := l.Claim(ctx, e.repo, gating.IDFor(n), ClaimRequest{Owner: owner, LeaseSeconds: f64(60), Purpose: purpose}, a)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	capped := func(r ClaimResult) bool {
		return !r.Granted && r.Reason != nil && *r.Reason == ReasonNotReady && r.Exclusion != nil && *r.Exclusion == gating.ExOwnerCap
	}
	a := claim(1, "w1/run-1", "", worker)
	b := claim(2, "w1/run-2", "", worker) // another run of the same agent counts
	if !a.Granted || !b.Granted {
		t.Fatalf("two claims under the cap: %+v %+v", a, b)
	}
	if r := claim(3, "w1/run-3", "", worker); !capped(r) {
		t.Fatalf("a third claim by w1: %+v, want not-ready owner-cap", r)
	}
	// Other owners are not capped by w1's claims; maintenance claims are
	// neither capped nor counted.
	if r := claim(3, "pm/run-1", "", pm); !r.Granted {
		t.Fatalf("pm's claim %+v", r)
	}
	if r := claim(4, "w1/maint", "maintenance", pm); !r.Granted {
		t.Fatalf("a maintenance claim under w1's name %+v", r)
	}
	// A released claim, and a lapsed one, count for nothing.
	if _, err := l.Release(ctx, e.repo, "issue-1", *a.FencingToken, worker); err != nil {
		t.Fatal(err)
	}
	if r := claim(5, "w1/run-5", "", worker); !r.Granted {
		t.Fatalf("a claim after a release %+v", r)
	}
	if r := claim(1, "w1/run-6", "", worker); !capped(r) {
		t.Fatalf("back at the cap: %+v", r)
	}
	e.clock.Advance(61 * time.Second)
	if r := claim(1, "w1/run-7", "", worker); !r.Granted {
		t.Fatalf("a claim once w1's leases lapsed %+v", r)
	}
}

// testOwnerCapRace: one agent's runs claiming different items at once
// never pass the cap together (on PostgreSQL the claims of one principal
// take turns while a cap is set).
func testOwnerCapRace(t *testing.T, e *env) {
	cfg := testConfig(e.clock, testRegion)
	cfg.Settings = func(context.Context, Repo) gating.Settings {
		s := gating.DefaultSettings()
		s.MaxClaimsPerOwner = 2
		return s
	}
	l := reconfigure(t, e.l, cfg)
	const n = 8
	for i := 1; i <= n; i++ {
		e.create(i, tags())
	}
	for round := range 3 {
		var wg sync.WaitGroup
		out := make([]ClaimResult, n)
		errs := make([]error, n)
		for i := range n {
			wg.Go(func() {
				out[i], errs[i] = l.Claim(context.Background(), e.repo, gating.IDFor(i+1),
					ClaimRequest{Owner: fmt.Sprintf("w1/r%d-%d", round, i), LeaseSeconds: f64(60)}, worker)
			})
		}
		wg.Wait()
		granted := 0
		for i := range n {
			if errs[i] != nil {
				t.Fatal(errs[i])
			}
			if out[i].Granted {
				granted++
			} else if *out[i].Exclusion != gating.ExOwnerCap {
				t.Fatalf("round %d claim %d: %+v", round, i, out[i])
			}
		}
		if granted != 2 {
			t.Fatalf("round %d: %d claims granted under a cap of 2", round, granted)
		}
		e.clock.Advance(2 * time.Hour) // every lease over, every quarantine too
	}
}

func testClaimNext(t *testing.T, e *env) {
	ctx, l := e.ctx, e.l
	for n := 1; n <= 6; n++ {
		e.create(n, tags())
	}
	// Concurrent claimants all asking for the same candidates in the same
	// order: each gets its own item.
	ids := []gating.ItemID{"issue-1", "issue-2", "issue-3", "issue-4", "issue-5"}
	const claimants = 5
	var wg sync.WaitGroup
	got := make([]NextResult, claimants)
	errs := make([]error, claimants)
	for i := range claimants {
		wg.Go(func() {
			got[i], errs[i] = l.ClaimNext(context.Background(), e.repo, ids,
				ClaimRequest{Owner: "pm/run-" + string(rune('a'+i)), LeaseSeconds: f64(60)}, pm)
		})
	}
	wg.Wait()
	seen := map[string]bool{}
	for i := range claimants {
		if errs[i] != nil || !got[i].Granted || seen[got[i].Key] {
			t.Fatalf("claimant %d: %+v %v (items so far %v)", i, got[i], errs[i], seen)
		}
		seen[got[i].Key] = true
	}
	// Every candidate taken: contended, each tried.
	r, err := l.ClaimNext(ctx, e.repo, ids, ClaimRequest{Owner: "pm/late", LeaseSeconds: f64(60)}, pm)
	if err != nil || r.Granted || *r.Reason != ReasonContended || len(r.Tried) != len(ids) || r.Key != "" {
		t.Fatalf("all taken: %+v %v", r, err)
	}
	// No candidates: not-ready without an exclusion.
	r, err = l.ClaimNext(ctx, e.repo, nil, ClaimRequest{Owner: "pm/late", LeaseSeconds: f64(60)}, pm)
	if err != nil || r.Granted || *r.Reason != ReasonNotReady || r.Exclusion != nil {
		t.Fatalf("no candidates: %+v %v", r, err)
	}
	// A requestId: the resend answers the first grant, whatever is ready.
	req := ClaimRequest{Owner: "pm/keyed", LeaseSeconds: f64(60), RequestID: "n-1"}
	first, err := l.ClaimNext(ctx, e.repo, []gating.ItemID{"issue-5", "issue-6"}, req, pm)
	if err != nil || !first.Granted || first.Key != "issue-6" || len(first.Tried) != 1 {
		t.Fatalf("keyed next %+v %v", first, err)
	}
	again, err := l.ClaimNext(ctx, e.repo, nil, req, pm)
	if err != nil || !again.Replayed || again.Key != "issue-6" || *again.FencingToken != *first.FencingToken {
		t.Fatalf("keyed next resend %+v %v", again, err)
	}
	_, err = l.ClaimNext(ctx, e.repo, nil, ClaimRequest{Owner: "pm/keyed", LeaseSeconds: f64(90), RequestID: "n-1"}, pm)
	keyReused(t, err)
	// Only an owner, a lease and an id.
	if _, err := l.ClaimNext(ctx, e.repo, ids, ClaimRequest{Owner: "pm/x", Branch: "b"}, pm); err == nil {
		t.Fatal("ClaimNext took a branch")
	}
}

func testGrantedAt(t *testing.T, e *env) {
	e.create(1, tags())
	if st := e.status(1); st.GrantedAt != nil {
		t.Fatalf("never claimed: grantedAt %v", *st.GrantedAt)
	}
	at := e.clock.Now()
	c := e.claim(1, "pm/a", 60)
	e.clock.Advance(20 * time.Second)
	if _, err := e.l.Renew(e.ctx, e.repo, "issue-1", *c.FencingToken, f64(60), pm); err != nil {
		t.Fatal(err)
	}
	st := e.status(1)
	if st.GrantedAt == nil || *st.GrantedAt != Timestamp(at.Truncate(time.Millisecond)) {
		t.Fatalf("grantedAt %v, want %s (the grant's time, not the renew's)", st.GrantedAt, Timestamp(at))
	}
	e.release(1, *c.FencingToken)
	if st := e.status(1); st.GrantedAt == nil || *st.GrantedAt != Timestamp(at.Truncate(time.Millisecond)) {
		t.Fatalf("released: grantedAt %v, want the released grant's", st.GrantedAt)
	}
}
