package agentapi

import (
	"context"
	"testing"
	"time"

	"github.com/wardenhq/warden/gating"
)

// TestCreateRecordsIssueState: the API records the labels of the issues it
// opens or adopts, so the ready set knows about the admission label before
// any delivery arrives.
func TestCreateRecordsIssueState(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	pmItem := f.must(f.call("POST", "items", tokPM, map[string]any{"title": "By the pm", "specification": "Do it."}), 201)
	humanItem := f.must(f.call("POST", "items", tokHuman, map[string]any{"title": "By alice", "specification": "Do it."}), 201)
	i, err := f.sim.As("bob").OpenIssue(f.repo, "Filed by bob", "spec")
	if err != nil {
		t.Fatal(err)
	}
	var n int
	f.sim.Locked(func() { n = i.Number })
	adopted := f.must(f.call("POST", "items/adopt", tokPM, map[string]any{"number": n}), 201)
	for _, c := range []struct {
		item  resp
		gated bool
	}{{pmItem, true}, {humanItem, false}, {adopted, true}} {
		num := int(c.item.num("number"))
		st, err := f.ledger.IssueState(ctx, f.mrepo.ID, num)
		if err != nil || st == nil || st.State != "open" || !st.HasLabel("backlog") || st.HasLabel("needs-specification") != c.gated || st.UpdatedAt.IsZero() {
			t.Fatalf("#%d: recorded %+v %v, want gated %v", num, st, err, c.gated)
		}
	}
	r := f.must(f.call("GET", "ready", tokWorker1, nil), 200)
	sameKeys(t, "ready", r, []string{"ready", "excluded", "defects", "alarms", "readyCount"})
	ready := r.body["ready"].([]any)
	if len(ready) != 1 || ready[0].(map[string]any)["item"] != humanItem.str("id") || ready[0].(map[string]any)["title"] != "By alice" {
		t.Fatalf("ready %s", r.raw)
	}
	if ex := r.body["excluded"].([]any); len(ex) != 2 || ex[0].(map[string]any)["reason"] != gating.ExAwaitingAdmission {
		t.Fatalf("excluded %s", r.raw)
	}
	c := f.must(f.call("POST", "items/"+pmItem.str("id")+"/claim", tokWorker1, map[string]any{"owner": "w1/a"}), 200)
	if c.body["granted"] != false || c.str("reason") != "not-ready" || c.str("exclusion") != gating.ExAwaitingAdmission {
		t.Fatalf("claim %s", c.raw)
	}
	f.problemIs(f.call("GET", "ready?limit=x", tokWorker1, nil), 422, ReasonInvalidRequest, "limit")
	f.problemIs(f.call("GET", "ready?limit=1001", tokWorker1, nil), 422, ReasonInvalidRequest, "limit")
}

// TestReportListsCleanReclaims: a holder that lapsed and re-claimed its own
// item is in the report's cleanReclaims; the item shows one attempt.
func TestReportListsCleanReclaims(t *testing.T) {
	f := newFixture(t)
	f.seed(5, nil)
	c := f.must(f.call("POST", "items/issue-5/claim", tokWorker1, map[string]any{"owner": "w1/a", "leaseSeconds": 60}), 200)
	f.clock.Advance(2 * time.Minute)
	if r := f.must(f.call("POST", "items/issue-5/claim", tokWorker2, map[string]any{"owner": "w2/a"}), 200); r.str("exclusion") != gating.ExLapsed {
		t.Fatalf("another owner during the quarantine %s", r.raw)
	}
	if st := f.must(f.call("GET", "items/issue-5/claim", tokWorker1, nil), 200); st.str("state") != "lapsed" {
		t.Fatalf("status %s", st.raw)
	}
	r := f.must(f.call("POST", "items/issue-5/claim", tokWorker1, map[string]any{"owner": "w1/a", "leaseSeconds": 60}), 200)
	if r.body["granted"] != true || r.num("fencingToken") != c.num("fencingToken")+1 {
		t.Fatalf("re-claim %s", r.raw)
	}
	rep := f.must(f.call("GET", "report", tokPM, nil), 200)
	rc := rep.body["cleanReclaims"].([]any)
	if len(rc) != 1 {
		t.Fatalf("report %s", rep.raw)
	}
	e := rc[0].(map[string]any)
	if e["item"] != "issue-5" || e["owner"] != "w1/a" || e["priorFence"] != c.num("fencingToken") || e["fence"] != r.num("fencingToken") {
		t.Fatalf("clean re-claim %v", e)
	}
	if g := f.must(f.call("GET", "items/issue-5", tokPM, nil), 200); g.num("attempts") != 1 || g.body["claim"].(map[string]any)["state"] != "held" {
		t.Fatalf("detail %s", g.raw)
	}
}
