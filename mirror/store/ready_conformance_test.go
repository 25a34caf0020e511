package store

import (
	"context"
	"testing"
	"time"

	"github.com/wardenhq/warden/gating"
)

// Readiness, quarantine and evidence of work: part of RunConformance.

// createRaw creates an item without admitting it.
func (e *env) createRaw(n int, tg []string, links ...gating.Link) {
	e.t.Helper()
	if _, err := e.l.Create(e.ctx, e.repo, NewItem{Number: n, Title: "raw", Tags: tg, Links: links}, pm, WriteOptions{}); err != nil {
		e.t.Fatalf("create issue-%d: %v", n, err)
	}
}

// claimAs asks for a claim and returns the answer, refusals included.
func (e *env) claimAs(n int, owner string, purpose string) ClaimResult {
	e.t.Helper()
	r, err := e.l.Claim(e.ctx, e.repo, gating.IDFor(n), ClaimRequest{Owner: owner, LeaseSeconds: f64(60), Purpose: purpose}, pm)
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

func (e *env) wantNotReady(n int, owner, exclusion string) {
	e.t.Helper()
	before := e.dump()
	r := e.claimAs(n, owner, "")
	if r.Granted || r.Reason == nil || *r.Reason != ReasonNotReady || r.Exclusion == nil || *r.Exclusion != exclusion {
		e.t.Fatalf("claim of issue-%d by %s: %+v (reason %v, exclusion %v), want not-ready %s", n, owner, r, deref(r.Reason), deref(r.Exclusion), exclusion)
	}
	if r.FencingToken != nil || r.Owner != nil || r.LeaseExpiresAtUtc != nil {
		e.t.Fatalf("a not-ready answer carries grant fields: %+v", r)
	}
	if after := e.dump(); after != before {
		e.t.Fatalf("a not-ready claim wrote:\n%s", after)
	}
}

func (e *env) complete(n int) {
	e.t.Helper()
	r := e.claim(n, "pm/merge", 60)
	if _, err := e.l.Update(e.ctx, e.repo, gating.IDFor(n), Patch{AddTags: []string{"state:complete"}, FencingToken: r.FencingToken}, pm,
		WriteOptions{CompletionProven: true}); err != nil {
		e.t.Fatal(err)
	}
	e.release(n, *r.FencingToken)
}

func testClaimReadiness(t *testing.T, setup func(t *testing.T) *env) {
	t.Run("admission fails closed", func(t *testing.T) {
		e := setup(t)
		e.createRaw(1, tags())
		e.wantNotReady(1, "pm/a", gating.ExAwaitingAdmission)
		// A recorded act with the issue's labels unknown: still not admitted.
		if err := (&Acts{db: e.l.db}).RecordAdmission(e.ctx, e.repo, 1, Admission{By: "alice", At: e.clock.Now(), How: "test"}); err != nil {
			t.Fatal(err)
		}
		e.wantNotReady(1, "pm/a", gating.ExAwaitingAdmission)
		// The label is on the issue: not admitted (the act does not outrank it).
		st := IssueState{State: IssueOpen, Labels: []string{"backlog", "Needs-Specification"}, UpdatedAt: e.clock.Now()}
		if _, err := e.l.RecordIssueState(e.ctx, e.repo, 1, st); err != nil {
			t.Fatal(err)
		}
		e.wantNotReady(1, "pm/a", gating.ExAwaitingAdmission)
		// A maintenance claim skips readiness.
		m := e.claimAs(1, "pm/repair", "maintenance")
		if !m.Granted {
			t.Fatalf("maintenance claim %+v", m)
		}
		e.release(1, *m.FencingToken)
		// The label removed (a later state): admitted, claimable.
		st.Labels, st.UpdatedAt = []string{"backlog"}, st.UpdatedAt.Add(time.Second)
		if _, err := e.l.RecordIssueState(e.ctx, e.repo, 1, st); err != nil {
			t.Fatal(err)
		}
		if r := e.claimAs(1, "pm/a", ""); !r.Granted || *r.FencingToken != 2 {
			t.Fatalf("admitted claim %+v", r)
		}
		// The label absent but no act recorded: admission-unrecorded, not admitted.
		e.createRaw(2, tags())
		if _, err := e.l.RecordIssueState(e.ctx, e.repo, 2, IssueState{State: IssueOpen, Labels: []string{"backlog"}, UpdatedAt: e.clock.Now()}); err != nil {
			t.Fatal(err)
		}
		e.wantNotReady(2, "pm/a", gating.ExAwaitingAdmission)
	})
	t.Run("blocked until the blocker is complete", func(t *testing.T) {
		e := setup(t)
		e.create(1, tags())
		e.create(2, tags(), blockedBy(1))
		e.wantNotReady(2, "pm/a", gating.ExBlocked)
		e.complete(1)
		if r := e.claimAs(2, "pm/a", ""); !r.Granted {
			t.Fatalf("claim after the blocker completed: %+v", r)
		}
		e.wantNotReady(1, "pm/a", gating.ExComplete)
	})
	t.Run("stalled by a parked blocker", func(t *testing.T) {
		e := setup(t)
		e.create(1, tags())
		e.create(2, tags(), blockedBy(1))
		r := e.claim(1, "pm/park", 60)
		if _, err := e.l.Update(e.ctx, e.repo, "issue-1", Patch{AddTags: []string{"state:parked", "ruling-owner:pm", "ruling-topic:scope"}, FencingToken: r.FencingToken}, pm, WriteOptions{}); err != nil {
			t.Fatal(err)
		}
		e.release(1, *r.FencingToken)
		e.wantNotReady(1, "pm/a", gating.ExParked)
		e.wantNotReady(2, "pm/a", gating.ExStalled)
	})
	t.Run("groupings and their integration item", func(t *testing.T) {
		e := setup(t)
		e.create(10, tags())
		e.create(11, tags(), partOf(10))
		e.create(12, tags(), partOf(10))
		e.create(13, tags(), gating.Link{Rel: gating.Integrates, Target: "issue-10"})
		e.create(20, tags()) // unrelated
		e.wantNotReady(10, "pm/a", gating.ExGrouping)
		e.wantNotReady(13, "pm/a", gating.ExBlocked) // its members are live
		e.complete(11)
		r := e.claim(12, "pm/b", 60)                             // in flight
		e.wantNotReady(13, "pm/a", gating.ExIntegrationInFlight) // a member is held
		if _, err := e.l.Update(e.ctx, e.repo, "issue-12", Patch{AddTags: []string{"state:complete"}, FencingToken: r.FencingToken}, pm,
			WriteOptions{CompletionProven: true}); err != nil {
			t.Fatal(err)
		}
		e.release(12, *r.FencingToken)
		if r := e.claimAs(13, "pm/a", ""); !r.Granted {
			t.Fatalf("the integration item after its members completed: %+v", r)
		}
	})
	t.Run("resources in flight", func(t *testing.T) {
		e := setup(t)
		e.create(1, tags("resource:db"))
		e.create(2, tags("resource:db"))
		e.claim(1, "pm/a", 60)
		e.wantNotReady(2, "pm/b", gating.ExResourceBusy)
	})
	t.Run("poisoned after three attempts", func(t *testing.T) {
		e := setup(t)
		e.create(1, tags())
		for _, owner := range []string{"pm/a", "pm/b", "pm/c"} {
			r := e.claim(1, owner, 60)
			e.release(1, *r.FencingToken)
		}
		e.wantNotReady(1, "pm/d", gating.ExPoisoned)
		// An epic's threshold:N sets its members' threshold.
		e.create(5, tags("threshold:9"))
		e.create(6, tags(), partOf(5))
		for _, owner := range []string{"pm/a", "pm/b", "pm/c"} {
			r := e.claim(6, owner, 60)
			e.release(6, *r.FencingToken)
		}
		if r := e.claimAs(6, "pm/d", ""); !r.Granted {
			t.Fatalf("a member under its epic's threshold:9: %+v", r)
		}
	})
	t.Run("repository settings set the threshold", func(t *testing.T) {
		e := setup(t)
		cfg := testConfig(e.clock, testRegion)
		cfg.Settings = func(context.Context, Repo) gating.Settings {
			s := gating.DefaultSettings()
			s.PoisonThreshold = 1
			return s
		}
		e.l = reconfigure(t, e.l, cfg)
		e.create(1, tags())
		r := e.claim(1, "pm/a", 60)
		e.release(1, *r.FencingToken)
		e.wantNotReady(1, "pm/b", gating.ExPoisoned)
	})
}

func testQuarantine(t *testing.T, setup func(t *testing.T) *env) {
	t.Run("a lapsed holder re-claims its own item: a new fence, no attempt", func(t *testing.T) {
		e := setup(t)
		e.create(1, tags())
		r := e.claim(1, "pm/a", 60)
		e.clock.Advance(61 * time.Second)
		e.wantNotReady(1, "pm/b", gating.ExLapsed)
		r2 := e.claim(1, "pm/a", 60)
		if *r2.FencingToken != *r.FencingToken+1 {
			t.Fatalf("re-claim fence %d, want %d", *r2.FencingToken, *r.FencingToken+1)
		}
		// The old token is stale now; the new one writes.
		if _, err := e.l.Update(e.ctx, e.repo, "issue-1", Patch{Title: str("x"), FencingToken: r.FencingToken}, pm, WriteOptions{}); err == nil {
			t.Fatal("the superseded token still writes")
		}
		gs, err := e.l.Grants(e.ctx, e.repo, "issue-1")
		if err != nil || len(gs) != 2 || gs[0].ReleasedAt != nil || gs[1].Owner != "pm/a" || Attempts(gs) != 1 {
			t.Fatalf("grant log %+v (%d attempts), %v", gs, Attempts(gs), err)
		}
		rs, err := e.l.Snapshot(e.ctx, e.repo)
		if err != nil {
			t.Fatal(err)
		}
		rc := rs.CleanReclaims()
		if len(rc) != 1 || rc[0].Item != "issue-1" || rc[0].Owner != "pm/a" || rc[0].PriorFence != 1 || rc[0].Fence != 2 ||
			!rc[0].AtUtc.Equal(e.clock.Now().Truncate(time.Millisecond)) {
			t.Fatalf("clean re-claims %+v", rc)
		}
		if rep := rs.Report(rs.Ready()); len(rep.CleanReclaims) != 1 || len(rep.InFlight) != 1 {
			t.Fatalf("report %+v", rep)
		}
		if st := e.status(1); st.State != "held" || *st.FencingToken != 2 {
			t.Fatalf("status %s", fmtStatus(st))
		}
	})
	t.Run("a renew is evidence of work", func(t *testing.T) {
		e := setup(t)
		e.create(1, tags())
		t0 := e.clock.Now()
		e.claim(1, "pm/a", 1800)
		e.clock.Advance(25 * time.Minute)
		if r, err := e.l.Renew(e.ctx, e.repo, "issue-1", 1, f64(60), pm); err != nil || !r.Granted {
			t.Fatalf("renew %+v %v", r, err)
		}
		// Lapsed at t0+26m; the grant alone would end the quarantine at
		// t0+1h, the renew ends it at t0+1h25m.
		e.clock.Set(t0.Add(time.Hour + time.Minute))
		if st := e.status(1); st.State != "lapsed" {
			t.Fatalf("after the grant's quarantine: %s", fmtStatus(st))
		}
		e.wantNotReady(1, "pm/b", gating.ExLapsed)
		e.clock.Set(t0.Add(time.Hour + 25*time.Minute))
		if st := e.status(1); st.State != "abandoned" || !st.Claimed {
			t.Fatalf("after the renew's quarantine: %s", fmtStatus(st))
		}
		if r := e.claimAs(1, "pm/b", ""); !r.Granted {
			t.Fatalf("takeover of an abandoned claim %+v", r)
		}
	})
	t.Run("a push to the claim's branch is evidence of work", func(t *testing.T) {
		e := setup(t)
		e.create(1, tags())
		e.create(2, tags())
		t0 := e.clock.Now()
		if r, err := e.l.Claim(e.ctx, e.repo, "issue-1", ClaimRequest{Owner: "pm/a", LeaseSeconds: f64(60), Branch: "feat/a"}, pm); err != nil || !r.Granted {
			t.Fatalf("%+v %v", r, err)
		}
		if r, err := e.l.Claim(e.ctx, e.repo, "issue-2", ClaimRequest{Owner: "pm/b", LeaseSeconds: f64(60), Branch: "feat/b"}, pm); err != nil || !r.Granted {
			t.Fatalf("%+v %v", r, err)
		}
		e.clock.Advance(30 * time.Minute)
		// Another branch, a push older than the grant: no evidence.
		for _, c := range []struct {
			branch string
			at     time.Time
		}{{"feat/other", e.clock.Now()}, {"feat/a", t0.Add(-time.Hour)}, {"", e.clock.Now()}} {
			got, err := e.l.RecordPushEvidence(e.ctx, e.repo, c.branch, c.at, "")
			if err != nil || len(got) != 0 {
				t.Fatalf("push to %q at %v counted: %+v %v", c.branch, c.at, got, err)
			}
		}
		got, err := e.l.RecordPushEvidence(e.ctx, e.repo, "feat/a", e.clock.Now(), "")
		if err != nil || len(got) != 1 || got[0] != (PushEvidence{Item: "issue-1", Fence: 1, Owner: "pm/a"}) {
			t.Fatalf("push evidence %+v %v", got, err)
		}
		// An older push after a newer one changes nothing.
		if _, err := e.l.RecordPushEvidence(e.ctx, e.repo, "feat/a", t0.Add(time.Minute), ""); err != nil {
			t.Fatal(err)
		}
		e.clock.Set(t0.Add(time.Hour + time.Minute))
		if st := e.status(1); st.State != "lapsed" {
			t.Fatalf("issue-1 after the grant's quarantine, pushed at +30m: %s", fmtStatus(st))
		}
		if st := e.status(2); st.State != "abandoned" {
			t.Fatalf("issue-2 (no push): %s", fmtStatus(st))
		}
		e.wantNotReady(1, "pm/c", gating.ExLapsed)
		// A push stamped in the future counts as now, not later.
		if _, err := e.l.RecordPushEvidence(e.ctx, e.repo, "feat/a", e.clock.Now().Add(24*time.Hour), ""); err != nil {
			t.Fatal(err)
		}
		e.clock.Set(t0.Add(2*time.Hour + 2*time.Minute))
		if st := e.status(1); st.State != "abandoned" {
			t.Fatalf("a future-stamped push extended the quarantine: %s", fmtStatus(st))
		}
		// A released claim takes no evidence.
		r := e.claim(2, "pm/c", 60)
		e.release(2, *r.FencingToken)
		if got, _ := e.l.RecordPushEvidence(e.ctx, e.repo, "feat/b", e.clock.Now(), ""); len(got) != 0 {
			t.Fatalf("a superseded claim's branch took evidence: %+v", got)
		}
		// The comment trail's seam: evidence for the current grant only.
		if ok, err := e.l.RecordEvidence(e.ctx, e.repo, "issue-1", 1, e.clock.Now(), EvidenceComment, "a comment"); err != nil || !ok {
			t.Fatalf("comment evidence: %v %v", ok, err)
		}
		if ok, err := e.l.RecordEvidence(e.ctx, e.repo, "issue-2", 1, e.clock.Now(), EvidenceComment, "a comment"); err != nil || ok {
			t.Fatalf("comment evidence for a superseded grant: %v %v", ok, err)
		}
		if st := e.status(1); st.State != "lapsed" {
			t.Fatalf("after a comment by the holder: %s", fmtStatus(st))
		}
	})
}
