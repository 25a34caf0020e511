package agentapi

import (
	"fmt"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/wardenhq/warden/gating"
)

// The field names of CONTRACT.md §9 (and §11: leaseDefaulted on a grant,
// grantedAt in the status), exactly.
var (
	claimFields   = []string{"key", "granted", "fencingToken", "owner", "region", "leaseExpiresAtUtc", "leaseSeconds", "previousLeaseExpiresAtUtc", "leaseShortened", "reason"}
	grantFields   = append(slices.Clone(claimFields), "leaseDefaulted")
	statusFields  = []string{"key", "exists", "claimed", "isHeld", "state", "fencingToken", "releasedFencingToken", "owner", "region", "leaseExpiresAtUtc", "grantedAt"}
	releaseFields = []string{"key", "released", "fencingToken", "reason"}
)

func sameKeys(t *testing.T, what string, r resp, want []string) {
	t.Helper()
	got := keys(r.body)
	sort.Strings(got)
	w := append([]string(nil), want...)
	sort.Strings(w)
	if !slices.Equal(got, w) {
		t.Fatalf("%s fields %v, want %v: %s", what, got, w, r.raw)
	}
}

func TestClaimRenewReleaseStatus(t *testing.T) {
	f := newFixture(t)
	f.seed(20, nil)
	f.seed(21, []string{"homeRegion:elsewhere"})

	// Never claimed.
	st := f.must(f.call("GET", "items/issue-20/claim", tokWorker1, nil), 200)
	sameKeys(t, "status", st, statusFields)
	if st.body["exists"] != true || st.body["claimed"] != false || st.body["fencingToken"] != nil {
		t.Fatalf("status %s", st.raw)
	}

	// Granted.
	c := f.must(f.call("POST", "items/issue-20/claim", tokWorker1, map[string]any{"owner": "w1/run-1", "leaseSeconds": 120, "branch": "feat/issue-20"}), 200)
	sameKeys(t, "claim", c, grantFields)
	if c.body["granted"] != true || c.str("owner") != "w1/run-1" || c.str("region") != "local" || c.num("leaseSeconds") != 120 ||
		c.str("key") != "issue-20" || c.body["reason"] != nil || c.str("leaseExpiresAtUtc") == "" {
		t.Fatalf("claim %s", c.raw)
	}
	tok := c.num("fencingToken")
	// A lease above the ceiling is clamped; callers act on what is returned.
	// (Contended for another owner, whatever it asks.)
	c2 := f.must(f.call("POST", "items/issue-20/claim", tokWorker2, map[string]any{"owner": "w2/run-1", "leaseSeconds": 99999}), 200)
	sameKeys(t, "contended claim", c2, claimFields)
	if c2.body["granted"] != false || c2.str("reason") != "contended" || c2.body["fencingToken"] != nil {
		t.Fatalf("contended %s", c2.raw)
	}
	st = f.must(f.call("GET", "items/issue-20/claim", tokWorker2, nil), 200)
	if st.str("state") != "held" || st.body["isHeld"] != true || st.body["claimed"] != true || st.num("fencingToken") != tok ||
		st.str("owner") != "w1/run-1" || st.str("leaseExpiresAtUtc") != c.str("leaseExpiresAtUtc") {
		t.Fatalf("held status %s", st.raw)
	}

	// Renew shorter: leaseShortened with the previous expiry.
	rn := f.must(f.call("POST", "items/issue-20/renew", tokWorker1, map[string]any{"fencingToken": tok, "leaseSeconds": 10}), 200)
	sameKeys(t, "renew", rn, grantFields)
	if rn.body["granted"] != true || rn.num("fencingToken") != tok || rn.body["leaseShortened"] != true ||
		rn.str("previousLeaseExpiresAtUtc") != c.str("leaseExpiresAtUtc") || rn.num("leaseSeconds") != 10 {
		t.Fatalf("renew %s", rn.raw)
	}
	// The item's body (resume block) is written under the claim only.
	f.problemIs(f.call("PATCH", "items/issue-20", tokPM, map[string]any{"body": "lastLocation: x"}), 409, string(gating.ClaimRequired))
	p := f.must(f.call("PATCH", "items/issue-20", tokWorker1, map[string]any{"body": "lastLocation: feat/issue-20\nresumeNote: half done", "fencingToken": tok}), 200)
	if p.str("body") != "lastLocation: feat/issue-20\nresumeNote: half done" {
		t.Fatalf("patch %s", p.raw)
	}
	stale := f.call("PATCH", "items/issue-20", tokPM, map[string]any{"title": "x", "fencingToken": tok - 1})
	if tok > 1 {
		f.problemIs(stale, 409, string(gating.StaleToken))
	}
	un := f.call("PATCH", "items/issue-20", tokPM, map[string]any{"title": "x", "fencingToken": tok + 5})
	f.problemIs(un, 409, string(gating.UnissuedToken))
	if un.num("currentFencingToken") != tok || un.num("presentedFencingToken") != tok+5 || un.str("item") != "issue-20" {
		t.Fatalf("fence problem %s", un.raw)
	}

	// Release on a wrong token is stale; on the right one, released.
	bad := f.must(f.call("POST", "items/issue-20/release", tokWorker1, map[string]any{"fencingToken": tok + 1}), 200)
	sameKeys(t, "release", bad, releaseFields)
	if bad.body["released"] != false || bad.str("reason") != "stale" {
		t.Fatalf("stale release %s", bad.raw)
	}
	rel := f.must(f.call("POST", "items/issue-20/release", tokWorker1, map[string]any{"fencingToken": tok}), 200)
	sameKeys(t, "release", rel, releaseFields)
	if rel.body["released"] != true || rel.num("fencingToken") != tok || rel.body["reason"] != nil {
		t.Fatalf("release %s", rel.raw)
	}
	st = f.must(f.call("GET", "items/issue-20/claim", tokWorker1, nil), 200)
	if st.str("state") != "released" || st.body["claimed"] != false || st.num("releasedFencingToken") != tok {
		t.Fatalf("released status %s", st.raw)
	}
	// A write on the released token: ClaimReleased.
	f.problemIs(f.call("PATCH", "items/issue-20", tokPM, map[string]any{"title": "x", "fencingToken": tok}), 409, string(gating.ClaimReleased))
	// A renew after the release is superseded.
	if r := f.must(f.call("POST", "items/issue-20/renew", tokWorker1, map[string]any{"fencingToken": tok}), 200); r.str("reason") != "superseded" {
		t.Fatalf("renew after release %s", r.raw)
	}
	// w2 now takes it over: a second attempt, and GET shows it.
	c3 := f.must(f.call("POST", "items/issue-20/claim", tokWorker2, map[string]any{"owner": "w2/run-1", "leaseSeconds": 99999}), 200)
	if c3.body["granted"] != true || c3.num("fencingToken") <= tok || c3.num("leaseSeconds") != (30*time.Minute).Seconds() {
		t.Fatalf("takeover %s", c3.raw)
	}
	g := f.must(f.call("GET", "items/issue-20", tokWorker2, nil), 200)
	if g.num("attempts") != 2 || g.body["claim"].(map[string]any)["owner"] != "w2/run-1" {
		t.Fatalf("detail %s", g.raw)
	}
	// A lapsed lease: renew is superseded, status says lapsed.
	f.clock.Advance(31 * time.Minute)
	if r := f.must(f.call("POST", "items/issue-20/renew", tokWorker2, map[string]any{"fencingToken": c3.num("fencingToken")}), 200); r.str("reason") != "superseded" {
		t.Fatalf("renew of a lapsed lease %s", r.raw)
	}
	if st := f.must(f.call("GET", "items/issue-20/claim", tokWorker2, nil), 200); st.str("state") != "lapsed" || st.body["isHeld"] != false {
		t.Fatalf("lapsed status %s", st.raw)
	}

	// Refusals are ordinary answers.
	if r := f.must(f.call("POST", "items/issue-21/claim", tokWorker1, map[string]any{"owner": "w1/a"}), 200); r.str("reason") != "ForeignRegion" || r.body["granted"] != false {
		t.Fatalf("foreign region %s", r.raw)
	}
	if r := f.must(f.call("POST", "items/issue-404/claim", tokWorker1, map[string]any{"owner": "w1/a"}), 200); r.str("reason") != "missing" {
		t.Fatalf("missing %s", r.raw)
	}
	if r := f.must(f.call("POST", "items/issue-404/release", tokWorker1, map[string]any{"fencingToken": 1}), 200); r.str("reason") != "missing" {
		t.Fatalf("release missing %s", r.raw)
	}
	if r := f.must(f.call("GET", "items/issue-404/claim", tokWorker1, nil), 200); r.body["exists"] != false {
		t.Fatalf("status of a missing item %s", r.raw)
	}
	// Maintenance claims: pm and human only, no attempt.
	f.seed(22, nil)
	m := f.must(f.call("POST", "items/issue-22/claim", tokPM, map[string]any{"owner": "pm/repair", "purpose": "maintenance"}), 200)
	if m.body["granted"] != true {
		t.Fatalf("maintenance %s", m.raw)
	}
	if g := f.must(f.call("GET", "items/issue-22", tokPM, nil), 200); g.num("attempts") != 0 {
		t.Fatalf("maintenance counted: %s", g.raw)
	}
}

func TestBoundedWaitThroughHTTP(t *testing.T) {
	f := newFixture(t)
	f.seed(30, nil)
	c := f.must(f.call("POST", "items/issue-30/claim", tokWorker1, map[string]any{"owner": "w1/a", "leaseSeconds": 60}), 200)
	done := make(chan resp, 1)
	go func() {
		done <- f.call("POST", "items/issue-30/claim", tokWorker2, map[string]any{"owner": "w2/a", "maxWaitSeconds": 5})
	}()
	time.Sleep(150 * time.Millisecond)
	f.must(f.call("POST", "items/issue-30/release", tokWorker1, map[string]any{"fencingToken": c.num("fencingToken")}), 200)
	select {
	case r := <-done:
		if r.status != 200 || r.body["granted"] != true || r.str("owner") != "w2/a" {
			t.Fatalf("waiter %s", r.raw)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting claim never returned")
	}
	r := f.must(f.call("POST", "items/issue-30/claim", tokWorker1, map[string]any{"owner": "w1/b", "maxWaitSeconds": 0.2}), 200)
	if r.str("reason") != "timeout" {
		t.Fatalf("bounded wait %s", r.raw)
	}
}

func TestCompletionThroughPatchNeedsTheMergedPR(t *testing.T) {
	f := newFixture(t)
	f.seed(40, nil)
	c := f.must(f.call("POST", "items/issue-40/claim", tokWorker1, map[string]any{"owner": "w1/a", "leaseSeconds": 600}), 200)
	tok := c.num("fencingToken")
	pr := mergedPR(t, f, "feat/issue-40", "main", false)
	complete := map[string]any{"addTags": []string{"state:complete", fmt.Sprintf("pr:%d", pr)}, "fencingToken": tok}
	f.problemIs(f.call("PATCH", "items/issue-40", tokWorker1, complete), 409, gating.ReasonCompleteWithOpenPR)
	if _, err := f.sim.As("alice").MergePR(f.repo, pr, "squash"); err != nil {
		t.Fatal(err)
	}
	r := f.must(f.call("PATCH", "items/issue-40", tokWorker1, complete), 200)
	if !slices.Contains(tagsOf(r), "state:complete") {
		t.Fatalf("completed %s", r.raw)
	}
	// Removing state:complete is a human act.
	f.problemIs(f.call("PATCH", "items/issue-40", tokPM, map[string]any{"removeTags": []string{"state:complete"}, "fencingToken": tok}), 403, ReasonHumanAct)
}

func TestResearchCompletesOnItsFindings(t *testing.T) {
	f := newFixture(t)
	alice := f.sim.As("alice")
	i, err := alice.OpenIssue(f.repo, "Research", "Find out.")
	if err != nil {
		t.Fatal(err)
	}
	var n int
	f.sim.Locked(func() { n = i.Number })
	f.seed(n, []string{"phase:research"})
	id := fmt.Sprintf("items/issue-%d", n)
	c := f.must(f.call("POST", id+"/claim", tokWorker1, map[string]any{"owner": "w1/a", "leaseSeconds": 600}), 200)
	complete := map[string]any{"addTags": []string{"state:complete"}, "fencingToken": c.num("fencingToken")}
	f.problemIs(f.call("PATCH", id, tokWorker1, complete), 409, reasonUnproven)
	if _, err := f.sim.As("worker-bot[bot]").Comment(f.repo, n, "Findings: it is the fsyncs."); err != nil {
		t.Fatal(err)
	}
	f.must(f.call("PATCH", id, tokWorker1, complete), 200)
}

func TestListPagesWithACursor(t *testing.T) {
	f := newFixture(t)
	for _, n := range []int{3, 5, 8, 13, 21} {
		f.seed(n, nil)
	}
	var got []string
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 5 {
			t.Fatal("paging does not end")
		}
		path := "items?limit=2"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		r := f.must(f.call("GET", path, tokWorker1, nil), 200)
		sameKeys(t, "page", r, []string{"items", "nextCursor"})
		for _, it := range r.body["items"].([]any) {
			m := it.(map[string]any)
			got = append(got, m["id"].(string))
			if m["tags"] == nil || m["links"] == nil {
				t.Fatalf("item without tags or links: %v", m)
			}
		}
		if r.body["nextCursor"] == nil {
			break
		}
		cursor = r.str("nextCursor")
	}
	want := []string{"issue-3", "issue-5", "issue-8", "issue-13", "issue-21"}
	if !slices.Equal(got, want) {
		t.Fatalf("paged %v, want %v", got, want)
	}
	all := f.must(f.call("GET", "items", tokWorker1, nil), 200)
	if len(all.body["items"].([]any)) != 5 || all.body["nextCursor"] != nil {
		t.Fatalf("one page %s", all.raw)
	}
}

func TestDeleteIsFenced(t *testing.T) {
	f := newFixture(t)
	f.seed(50, nil)
	f.seed(51, nil, gating.Link{Rel: gating.BlockedBy, Target: "issue-50"}, gating.Link{Rel: gating.Related, Target: "issue-77"})
	// Dangling links are reported.
	g := f.must(f.call("GET", "items/issue-51", tokPM, nil), 200)
	dl := g.body["danglingLinks"].([]any)
	if len(dl) != 1 || dl[0].(map[string]any)["target"] != "issue-77" {
		t.Fatalf("danglingLinks %s", g.raw)
	}
	// An item others depend on is not forgotten.
	r := f.call("DELETE", "items/issue-50", tokPM, nil)
	f.problemIs(r, 409, "has-dependents")
	if rj := r.body["rejected"].([]any); len(rj) != 1 || rj[0] != "issue-51" {
		t.Fatalf("rejected %s", r.raw)
	}
	// issue-51 waits on issue-50, so only a maintenance claim (which skips
	// readiness) is granted.
	if r := f.must(f.call("POST", "items/issue-51/claim", tokHuman, map[string]any{"owner": "alice/cli"}), 200); r.body["granted"] != false ||
		r.str("reason") != "not-ready" || r.str("exclusion") != "blocked" {
		t.Fatalf("claim of a blocked item %s", r.raw)
	}
	c := f.must(f.call("POST", "items/issue-51/claim", tokHuman, map[string]any{"owner": "alice/cli", "purpose": "maintenance"}), 200)
	tok := int64(c.num("fencingToken"))
	f.problemIs(f.call("DELETE", "items/issue-51", tokPM, nil), 409, string(gating.ClaimRequired))
	f.problemIs(f.call("DELETE", fmt.Sprintf("items/issue-51?fencingToken=%d", tok+1), tokPM, nil), 409, string(gating.UnissuedToken))
	d := f.call("DELETE", "items/issue-51", tokPM, map[string]any{"fencingToken": tok})
	if d.status != 204 || len(d.raw) != 0 {
		t.Fatalf("delete: %d %s", d.status, d.raw)
	}
	f.problemIs(f.call("GET", "items/issue-51", tokPM, nil), 404, ReasonMissing)
	// With its dependent gone, the blocker may go (never claimed: no token).
	if d := f.call("DELETE", "items/issue-50?fencingToken=", tokHuman, nil); d.status != 204 {
		t.Fatalf("delete: %d %s", d.status, d.raw)
	}
}
