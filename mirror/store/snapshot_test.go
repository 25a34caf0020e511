package store

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/wardenhq/warden/gating"
)

// TestIssueStateOrdering: GitHub does not keep delivery order, so a payload
// older than the recorded state is not applied; one as new or newer is.
func TestIssueStateOrdering(t *testing.T) {
	e := newEnv(t, openSQLiteLedger)
	l, ctx := e.l, e.ctx
	t1 := time.Date(2030, 1, 1, 10, 0, 0, 0, time.UTC)
	rec := func(labels []string, at time.Time) bool {
		t.Helper()
		ok, err := l.RecordIssueState(ctx, e.repo, 7, IssueState{State: IssueOpen, Labels: labels, UpdatedAt: at})
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if st, err := l.IssueState(ctx, e.repo, 7); err != nil || st != nil {
		t.Fatalf("never recorded: %+v %v", st, err)
	}
	if !rec([]string{"backlog"}, t1.Add(2*time.Second)) {
		t.Fatal("the first state was not applied")
	}
	if rec([]string{"backlog", "needs-specification"}, t1) {
		t.Fatal("an older state was applied over a newer one")
	}
	st, _ := l.IssueState(ctx, e.repo, 7)
	if st == nil || !slices.Equal(st.Labels, []string{"backlog"}) || !st.UpdatedAt.Equal(t1.Add(2*time.Second)) {
		t.Fatalf("state %+v", st)
	}
	if !rec([]string{"backlog", "stale"}, t1.Add(2*time.Second)) {
		t.Fatal("a state as new as the recorded one was not applied")
	}
	if !rec(nil, t1.Add(3*time.Second)) {
		t.Fatal("a newer state was not applied")
	}
	if st, _ := l.IssueState(ctx, e.repo, 7); len(st.Labels) != 0 || st.Labels == nil {
		t.Fatalf("labels %#v, want empty", st.Labels)
	}
}

// TestSnapshotLoader: Snapshot loads a repository's items, with their tags,
// links, claims and evidence, admission, attempts, and the settings, and
// nothing of another repository.
func TestSnapshotLoader(t *testing.T) {
	e := newEnv(t, openSQLiteLedger)
	l, ctx := e.l, e.ctx
	if err := l.PutRepo(ctx, Repo{ID: 43, FullName: "acme/other", DefaultBranch: "trunk"}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Create(ctx, 43, NewItem{Number: 1, Tags: tags()}, pm, WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	t0 := e.clock.Now()
	e.create(1, tags("z:last", "a:first"), gating.Link{Rel: gating.Related, Target: "issue-9"}, gating.Link{Rel: gating.AnchoredTo, Target: "src/a.go"})
	e.create(2, tags(), blockedBy(1))
	e.createRaw(3, tags()) // never admitted, labels never seen
	// issue-1: claimed on a branch, lapsed, pushed to, re-claimed by its
	// holder (a clean re-claim); issue-2 never claimed.
	if r, err := l.Claim(ctx, e.repo, "issue-1", ClaimRequest{Owner: "pm/a", LeaseSeconds: f64(60), Branch: "feat/a"}, pm); err != nil || !r.Granted {
		t.Fatalf("%+v %v", r, err)
	}
	e.clock.Advance(2 * time.Minute)
	if _, err := l.RecordPushEvidence(ctx, e.repo, "feat/a", e.clock.Now(), ""); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Minute)
	if r, err := l.Claim(ctx, e.repo, "issue-1", ClaimRequest{Owner: "pm/a", LeaseSeconds: f64(600), Branch: "feat/a"}, pm); err != nil || !r.Granted || *r.FencingToken != 2 {
		t.Fatalf("%+v %v", r, err)
	}
	e.clock.Advance(time.Minute)
	if _, err := l.Renew(ctx, e.repo, "issue-1", 2, f64(600), pm); err != nil {
		t.Fatal(err)
	}

	rs, err := l.Snapshot(ctx, e.repo)
	if err != nil {
		t.Fatal(err)
	}
	s := rs.Snapshot
	if s.Region != testRegion || s.DefaultBranch != "main" || s.Quarantine != time.Hour || s.PoisonThreshold != 3 || !s.Now.Equal(e.clock.Now()) {
		t.Fatalf("snapshot settings %+v", s)
	}
	if len(s.Items) != 3 || s.Items[0].Item.ID != "issue-1" || s.Items[1].Item.ID != "issue-2" || s.Items[2].Item.ID != "issue-3" {
		t.Fatalf("items %+v", s.Items)
	}
	c1, c2, c3 := s.Items[0], s.Items[1], s.Items[2]
	if !slices.IsSorted(c1.Item.Tags) || !slices.Contains(c1.Item.Tags, "z:last") || len(c1.Item.Links) != 2 || c1.Item.Links[0].Rel != gating.AnchoredTo {
		t.Fatalf("issue-1 tags %v links %v", c1.Item.Tags, c1.Item.Links)
	}
	granted := t0.Add(3 * time.Minute).Truncate(time.Millisecond)
	renewed := t0.Add(4 * time.Minute).Truncate(time.Millisecond)
	if c1.Claim.Fence != 2 || c1.Claim.Released != 0 || c1.Claim.Owner != "pm/a" || c1.Claim.Branch != "feat/a" || c1.Claim.Region != testRegion ||
		!c1.Claim.GrantedAt.Equal(granted) || !c1.Claim.LastEvidence.Equal(renewed) || !c1.Claim.LeaseExpiresAt.Equal(renewed.Add(10*time.Minute)) {
		t.Fatalf("issue-1 claim %+v", c1.Claim)
	}
	if c1.Attempts != 1 || !c1.AdmissionRecorded || c1.AdmissionLabel {
		t.Fatalf("issue-1 %+v", c1)
	}
	if c2.Claim.Fence != 0 || c2.Attempts != 0 || len(c2.Item.Links) != 1 || c2.AdmissionLabel || !c2.AdmissionRecorded {
		t.Fatalf("issue-2 %+v", c2)
	}
	if !c3.AdmissionLabel || c3.AdmissionRecorded {
		t.Fatalf("issue-3: unseen labels must read as the admission label on (fail closed): %+v", c3)
	}
	if it := rs.Items["issue-1"]; it == nil || it.Grant == nil || it.Grant.Fence != 2 || len(rs.Grants["issue-1"]) != 2 || len(rs.Grants["issue-2"]) != 0 {
		t.Fatalf("items/grants %+v %+v", rs.Items, rs.Grants)
	}
	if rc := rs.CleanReclaims(); len(rc) != 1 || rc[0].Fence != 2 {
		t.Fatalf("clean re-claims %+v", rc)
	}
	r := rs.Ready()
	if len(r.Ready) != 0 {
		t.Fatalf("ready %+v (issue-1 held, issue-2 blocked by it, issue-3 awaiting admission)", r.Ready)
	}
	if _, err := l.Snapshot(ctx, 999); err == nil {
		t.Fatal("a repository not served has a snapshot")
	}

	// A settings function sets the admission label and the threshold.
	cfg := testConfig(e.clock, testRegion)
	cfg.Settings = func(context.Context, Repo) gating.Settings {
		s := gating.DefaultSettings()
		s.AdmissionLabel, s.PoisonThreshold = "backlog", 5
		return s
	}
	rs, err = reconfigure(t, l, cfg).Snapshot(ctx, e.repo)
	if err != nil {
		t.Fatal(err)
	}
	if rs.Snapshot.PoisonThreshold != 5 || !rs.Snapshot.Items[0].AdmissionLabel {
		t.Fatalf("settings not applied: %d %+v", rs.Snapshot.PoisonThreshold, rs.Snapshot.Items[0])
	}
}

// TestClaimSnapshotAgreesWithTheReadySet: for every item, Claimable over the
// partial snapshot Claim loads agrees with the ready set over the whole
// repository, and the partial snapshot holds only what bears on the item.
func TestClaimSnapshotAgreesWithTheReadySet(t *testing.T) {
	e := newEnv(t, openSQLiteLedger)
	l, ctx := e.l, e.ctx
	e.create(1, tags())                                                           // blocker, live
	e.create(2, tags(), blockedBy(1))                                             // blocked
	e.create(3, tags())                                                           // will be complete
	e.create(4, tags(), blockedBy(3))                                             // satisfied
	e.create(10, tags("threshold:2"))                                             // epic
	e.create(11, tags(), partOf(10))                                              // member
	e.create(12, tags(), partOf(10))                                              // member, in flight
	e.create(13, tags(), gating.Link{Rel: gating.Integrates, Target: "issue-10"}) // integration item
	e.create(20, tags("resource:db"))                                             // in flight
	e.create(21, tags("resource:db"))                                             // resource-busy
	e.create(22, tags("priority:P0"))                                             // ready
	e.createRaw(23, tags())                                                       // awaiting admission
	e.create(24, tags())                                                          // lapsed
	e.create(30, tags())                                                          // unrelated to everything
	e.complete(3)
	e.claim(12, "pm/m", 3600)
	e.claim(20, "pm/r", 3600)
	e.claim(24, "pm/l", 60)
	for _, o := range []string{"pm/x", "pm/y"} { // two attempts: poisoned under issue-10's threshold:2
		r := e.claim(11, o, 60)
		e.release(11, *r.FencingToken)
	}
	e.clock.Advance(2 * time.Minute)

	full, err := l.Snapshot(ctx, e.repo)
	if err != nil {
		t.Fatal(err)
	}
	res := full.Ready()
	inReady := map[gating.ItemID]bool{}
	for _, r := range res.Ready {
		inReady[r.Item] = true
	}
	why := map[gating.ItemID]string{}
	for _, x := range res.Excluded {
		why[x.Item] = x.Reason
	}
	want := map[gating.ItemID]string{"issue-1": "", "issue-2": gating.ExBlocked, "issue-3": gating.ExComplete, "issue-4": "",
		"issue-10": gating.ExGrouping, "issue-11": gating.ExPoisoned, "issue-12": gating.ExHeld, "issue-13": gating.ExIntegrationInFlight,
		"issue-20": gating.ExHeld, "issue-21": gating.ExResourceBusy, "issue-22": "", "issue-23": gating.ExAwaitingAdmission,
		"issue-24": gating.ExLapsed, "issue-30": ""}
	for id, w := range want {
		if why[id] != w || (w == "") != inReady[id] {
			t.Errorf("%s: excluded as %q (ready %v), want %q", id, why[id], inReady[id], w)
		}
	}
	for _, c := range full.Snapshot.Items {
		id := c.Item.ID
		part, err := l.ClaimSnapshot(ctx, e.repo, id)
		if err != nil {
			t.Fatal(err)
		}
		ok, ex := gating.Claimable(part.Snapshot, id, "pm/new")
		switch {
		case why[id] == gating.ExHeld: // Claim answers contended before asking
		case ok != inReady[id] || (!ok && ex.Reason != why[id]):
			t.Errorf("%s: Claimable on the partial snapshot %v %+v; the ready set says %v %q", id, ok, ex, inReady[id], why[id])
		}
		for _, pc := range part.Snapshot.Items {
			if pc.Item.ID == "issue-30" && id != "issue-30" {
				t.Errorf("the partial snapshot of %s holds unrelated issue-30", id)
			}
		}
	}
	part, _ := l.ClaimSnapshot(ctx, e.repo, "issue-13")
	var got []string
	for _, c := range part.Snapshot.Items {
		got = append(got, string(c.Item.ID))
	}
	// The candidate, the grouping it integrates and its members, and the
	// items in flight (12, 20, 24).
	if !slices.Equal(got, []string{"issue-10", "issue-11", "issue-12", "issue-13", "issue-20", "issue-24"}) {
		t.Fatalf("partial snapshot of issue-13: %v", got)
	}
	// The holder of the lapsed claim may re-claim it.
	part, _ = l.ClaimSnapshot(ctx, e.repo, "issue-24")
	if ok, ex := gating.Claimable(part.Snapshot, "issue-24", "pm/l"); !ok {
		t.Fatalf("the lapsed holder: %+v", ex)
	}
}

// TestSnapshotTenThousandItems: the whole-repository snapshot of 10,000
// items (1,000 under the race detector) takes a handful of queries (it is
// timed, not asserted); so does a claim's partial snapshot.
func TestSnapshotTenThousandItems(t *testing.T) {
	if testing.Short() {
		t.Skip("10,000 items")
	}
	e := newEnv(t, openSQLiteLedger)
	n := 10000
	if raceDetector {
		n = 1000
	}
	bulkItems(t, e.l, e.repo, n)
	start := time.Now()
	rs, err := e.l.Snapshot(e.ctx, e.repo)
	if err != nil {
		t.Fatal(err)
	}
	loaded := time.Since(start)
	start = time.Now()
	r := rs.Ready()
	computed := time.Since(start)
	if len(rs.Snapshot.Items) != n || len(r.Ready)+len(r.Excluded) != n {
		t.Fatalf("%d items, %d ready + %d excluded", len(rs.Snapshot.Items), len(r.Ready), len(r.Excluded))
	}
	t.Logf("snapshot of %d items loaded in %v, ready set computed in %v (%d ready)", n, loaded, computed, len(r.Ready))
	start = time.Now()
	if _, err := e.l.ClaimSnapshot(e.ctx, e.repo, gating.IDFor(n/2)); err != nil {
		t.Fatal(err)
	}
	t.Logf("partial snapshot for one claim loaded in %v", time.Since(start))
}

// inFlightEvery: bulkItems claims every this many items.
var inFlightEvery = 50

// bulkItems writes n admitted items straight into the tables, a statement a
// table (a recursive series): every third blockedBy the one before, every
// inFlightEvery-th claimed.
func bulkItems(tb testing.TB, l *Ledger, repo int64, n int) {
	tb.Helper()
	ctx := context.Background()
	now := l.nowMs()
	const seq = `WITH RECURSIVE seq(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM seq WHERE i < $1) `
	stmts := []struct {
		q    string
		args []any
	}{
		{seq + `INSERT INTO ledger_items (repo_id, number, title, body, author, provenance, created_at, updated_at, fence, released)
			SELECT $2, i, 'item ' || i, '', 'pm', '', $3 + i, $3 + i, CASE WHEN i % $4 = 0 THEN 1 ELSE 0 END, 0 FROM seq`, []any{n, repo, now, inFlightEvery}},
		{seq + `INSERT INTO ledger_tags (repo_id, number, tag)
			SELECT $2, i, t.tag FROM seq, (SELECT 'backlog' AS tag UNION ALL SELECT 'phase:implementation' UNION ALL SELECT $3 UNION ALL SELECT 'baseBranch:main') t`,
			[]any{n, repo, "homeRegion:" + testRegion}},
		{seq + `INSERT INTO ledger_tags (repo_id, number, tag) SELECT $2, i, 'priority:P' || (i % 4) FROM seq`, []any{n, repo}},
		{seq + `INSERT INTO ledger_links (repo_id, number, rel, target) SELECT $2, i, 'blockedBy', 'issue-' || (i - 1) FROM seq WHERE i % 3 = 0`, []any{n, repo}},
		{seq + `INSERT INTO ledger_grants (repo_id, number, fence, owner, region, branch, purpose, granted_at, lease_expires_at)
			SELECT $2, i, 1, 'pm/bulk', $3, '', '', $4, $5 FROM seq WHERE i % $6 = 0`, []any{n, repo, testRegion, now, now + 3600_000, inFlightEvery}},
		{seq + `INSERT INTO admissions (repo_id, number, admitted_by, admitted_at, how) SELECT $2, i, 'alice', $3, 'bulk' FROM seq`, []any{n, repo, now}},
		{seq + `INSERT INTO issue_state (repo_id, number, state, labels, updated_at, recorded_at) SELECT $2, i, 'open', '["backlog"]', $3, $3 FROM seq`, []any{n, repo, now}},
	}
	err := l.writeTx(ctx, func(tx *sql.Tx) error {
		for _, st := range stmts {
			if _, err := tx.ExecContext(ctx, st.q, st.args...); err != nil {
				return fmt.Errorf("%s: %w", st.q, err)
			}
		}
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
}
