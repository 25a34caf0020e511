package harness

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// End-to-end tests of two completion rules of issue 19 (CONTRACT.md §9,
// §11): a phase:research item completes only on findings commented by its
// claim holder's login, and a design-integration item may not complete
// while a grouping it informs lacks a mermaid DAG naming every member
// (dag-missing); and the claim route's nested-epic-branch refusal.

// refusedDetail completes id under fence and checks the refusal's reason
// and that its detail holds every string of subs; the item stays live.
func (x *e2e) refusedDetail(t *testing.T, token, id string, fence int64, reason string, subs []string, tags ...string) {
	t.Helper()
	code, out := x.complete(t, token, id, &fence, tags...)
	got, _ := out["reason"].(string)
	detail, _ := out["detail"].(string)
	if code != http.StatusUnprocessableEntity && code != http.StatusConflict || got != reason {
		t.Fatalf("completing %s answered %d reason %q, want a %s refusal; answer %v", id, code, got, reason, out)
	}
	for _, s := range subs {
		if !strings.Contains(detail, s) {
			t.Errorf("the refusal's detail %q lacks %q", detail, s)
		}
	}
	if it := x.mustItem(t, id); it.has("state:complete") {
		t.Errorf("%s is state:complete after a refused completion: %v", id, it.Tags)
	}
}

// TestE2EResearchFindingsByHolder: the findings must be commented by the
// login that posted the claim marker of the current fence; another agent's
// or a human's comment during the claim is not them. With post_markers
// (warden posts the marker, so the holder's login is unknown) a comment by
// an agent login counts, a human's does not.
func TestE2EResearchFindingsByHolder(t *testing.T) {
	t.Parallel()
	t.Run("the holder's login", func(t *testing.T) {
		t.Parallel()
		x := newE2E(t)
		holder := x.agent("worker-7[bot]", "write")
		other := x.agent("worker-8[bot]", "write")
		alice := x.Person("alice", "write")
		id := x.create(t, HumanToken, "Survey the queue libraries", []string{"priority:P1", "phase:research"})
		n := num(t, id)
		x.MustSettle(t)
		f := x.claimFor(t, WorkerToken, id, "worker-7/r", 600)
		x.clk.Advance(time.Second)
		x.say(t, holder, n, x.marker(id, "worker-7/r", f))
		x.MustSettle(t)

		x.clk.Advance(time.Second)
		x.say(t, other, n, "Findings: NATS fits, numbers attached.")
		x.say(t, alice, n, "I agree with the findings above.")
		x.MustSettle(t)
		x.refusedDetail(t, WorkerToken, id, f, "completion-unproven",
			[]string{"worker-8[bot]", "alice", "must be commented by worker-7[bot], the claim holder's login"})

		x.clk.Advance(time.Second)
		x.say(t, holder, n, "Findings: NATS fits; a well-evidenced yes. Benchmarks in the thread.")
		x.MustSettle(t)
		x.mustComplete(t, WorkerToken, id, f)
		// GitHub shows the trail the proof read: the holder's findings.
		found := false
		for _, c := range x.comments(n) {
			if c.Login == "worker-7[bot]" && strings.HasPrefix(c.Body, "Findings:") {
				found = true
			}
		}
		if !found {
			t.Errorf("the holder's findings are not on #%d: %+v", n, x.comments(n))
		}
	})
	t.Run("holder unknown (post_markers): an agent login", func(t *testing.T) {
		t.Parallel()
		x := newE2E(t)
		x.pushSettings(t, x.Person("hana", "write"), "main", "post_markers: true\n")
		agent := x.agent("worker-8[bot]", "write")
		alice := x.Person("alice", "write")
		id := x.create(t, HumanToken, "Survey the cache libraries", []string{"priority:P1", "phase:research"})
		n := num(t, id)
		x.MustSettle(t)
		f := x.claimFor(t, WorkerToken, id, "worker-7/r", 600)
		x.MustSettle(t)
		if len(x.wardenComments(n, "<!-- backlog-worker: claim")) != 1 {
			t.Fatalf("warden did not post the claim marker on #%d: %+v", n, x.comments(n))
		}
		x.clk.Advance(time.Second)
		x.say(t, alice, n, "Findings: ristretto fits.")
		x.MustSettle(t)
		x.refusedDetail(t, WorkerToken, id, f, "completion-unproven",
			[]string{"alice", "holder's login is unknown", "must be commented by an agent login"})

		x.clk.Advance(time.Second)
		x.say(t, agent, n, "Findings: ristretto fits; numbers attached.")
		x.MustSettle(t)
		x.mustComplete(t, WorkerToken, id, f)
	})
}

// TestE2EDAGMissing: a design-integration item (it integrates research
// grouping R, which informs implementation grouping I) may not complete
// while I's epic issue lacks a mermaid DAG naming every member of I,
// nested epic's members included; an unreadable body refuses too; the
// check costs one read of I's issue.
func TestE2EDAGMissing(t *testing.T) {
	t.Parallel()
	x := newE2E(t)
	impl, ms := x.epic(t, "epic/impl", "Seam", "Fan-out")
	nested := x.create(t, HumanToken, "Nested epic", []string{"priority:P1"}, map[string]string{"rel": "partOf", "target": impl})
	deep := x.create(t, HumanToken, "Nested member", []string{"priority:P1"}, map[string]string{"rel": "partOf", "target": nested})
	research, _ := x.epic(t, "epic/research")
	if code, out := x.patchItem(t, PMToken, research, map[string]any{"addLinks": []map[string]string{{"rel": "informs", "target": impl}}}); code != http.StatusOK {
		t.Fatalf("research informs impl: %d %v", code, out)
	}
	design := x.integration(t, research)
	x.MustSettle(t)

	fd, pd := x.deliver(t, design, "worker-7/d", "epic/research-design", "epic/research", "epic/research", fmt.Sprintf("Refs #%d", num(t, design)))
	tag := fmt.Sprintf("pr:%d", pd.N)
	ni := num(t, impl)

	t.Run("no DAG in the epic's body", func(t *testing.T) {
		x.MustSettle(t)
		before := x.Sim.Calls(x.Inst.ID)
		x.refusedDetail(t, WorkerToken, design, fd, "dag-missing",
			[]string{"grouping " + impl, "no mermaid dependency DAG", ms[0], ms[1], nested, deep}, tag)
		after := x.Sim.Calls(x.Inst.ID)
		// The proof read the pull request and the epic's issue; report the
		// figure measured.
		t.Logf("GitHub reads of one refused completion: %d (writes %d)", after.Reads-before.Reads, after.Writes-before.Writes)
		if after.Reads-before.Reads != 2 {
			t.Errorf("the completion made %d reads, want 2: the pull request and the epic issue", after.Reads-before.Reads)
		}
	})

	hana := x.Person("hana", "maintain")
	partial := fmt.Sprintf("Plan:\n\n```mermaid\nflowchart TB\n  S[\"#%d seam\"] --> F[\"#%d fan-out\"]\n  S --> N[\"#%d nested epic\"]\n```\n", num(t, ms[0]), num(t, ms[1]), num(t, nested))
	if _, err := hana.EditIssue(x.Repo, ni, nil, &partial); err != nil {
		t.Fatal(err)
	}
	x.MustSettle(t)
	t.Run("a DAG missing the nested epic's member", func(t *testing.T) {
		x.refusedDetail(t, WorkerToken, design, fd, "dag-missing", []string{"does not name its members " + deep}, tag)
	})

	t.Run("the body cannot be read", func(t *testing.T) {
		x.Sim.FailNext(1, http.StatusNotFound, http.MethodGet, fmt.Sprintf("/repos/%s/issues/%d", x.Repo.FullName, ni))
		x.refusedDetail(t, WorkerToken, design, fd, "dag-missing", []string{"could not be read", "grouping " + impl}, tag)
		x.Sim.ClearFaults()
	})

	full := partial[:strings.LastIndex(partial, "```")] + fmt.Sprintf("  N --> D[\"issue-%d\"]\n```\n", num(t, deep))
	if _, err := hana.EditIssue(x.Repo, ni, nil, &full); err != nil {
		t.Fatal(err)
	}
	x.MustSettle(t)
	t.Run("a DAG naming every member", func(t *testing.T) {
		x.mustComplete(t, WorkerToken, design, fd, tag)
	})
}

// TestE2EClaimNestedBranch: the claim route refuses a branch nested under
// the epic branch's name (git cannot hold both refs), writes nothing, and
// grants the conventional name beside it.
func TestE2EClaimNestedBranch(t *testing.T) {
	t.Parallel()
	x := newE2E(t)
	_, ms := x.epic(t, "epic/search", "Index the catalogue")
	var out map[string]any
	code, err := x.API(context.Background(), WorkerToken, http.MethodPost, "/items/"+ms[0]+"/claim",
		map[string]any{"owner": "worker-7/n", "leaseSeconds": 60, "branch": "epic/search/index"}, &out)
	if err != nil {
		t.Fatal(err)
	}
	if reason, _ := out["reason"].(string); code != http.StatusConflict || reason != "nested-epic-branch" {
		t.Fatalf("claim with a nested branch answered %d %v, want 409 nested-epic-branch", code, out)
	}
	if d, _ := out["detail"].(string); !strings.Contains(d, "epic/search") || !strings.Contains(d, "cannot coexist") {
		t.Errorf("the refusal's detail %q does not name the epic branch and git's rule", d)
	}
	if st := x.status(t, ms[0]); st.Claimed {
		t.Errorf("%s is claimed after a refused claim: %+v", ms[0], st)
	}
	x.claimBranch(t, WorkerToken, ms[0], "worker-7/n", "epic/search-index", 60)
}
