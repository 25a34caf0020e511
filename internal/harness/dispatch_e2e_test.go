package harness

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wardenhq/warden/internal/ghsim"
)

// End-to-end tests of dispatch by assignment (issue 20): assigning an item
// to GitHub's coding agent is a claim when the item is claimable, and is
// undone and reported when it is not. Each reads what the simulator's
// GitHub became and what the agent API says.

// assignees is issue n's assignees' logins on the simulated GitHub.
func (x *e2e) assignees(n int) []string {
	var out []string
	x.Sim.Locked(func() {
		if i := x.Repo.Issues[n]; i != nil {
			for _, u := range i.Assignees {
				out = append(out, u.Login)
			}
		}
	})
	return out
}

// allRequests counts every REST request warden makes while f runs, and
// lists them by "METHOD pattern".
func (x *e2e) allRequests(t *testing.T, f func()) (int, map[string]int) {
	t.Helper()
	var mu sync.Mutex
	by := map[string]int{}
	n := 0
	x.Sim.Observe(func(ex ghsim.Exchange) {
		mu.Lock()
		n++
		by[ex.Method+" "+ex.Pattern]++
		mu.Unlock()
	}, nil)
	defer x.Sim.Observe(nil, nil)
	f()
	mu.Lock()
	defer mu.Unlock()
	return n, by
}

// metric is the value of the sample line of /metrics that begins with
// series ("" when there is none).
func (x *e2e) metric(t *testing.T, series string) string {
	t.Helper()
	resp, err := http.Get(x.AdminURL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %d %v", resp.StatusCode, err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			return v
		}
	}
	return ""
}

// markersOn is the issue's comments whose first line begins with prefix.
func (x *e2e) markersOn(n int, prefix string) []comment {
	var out []comment
	for _, c := range x.comments(n) {
		if strings.HasPrefix(firstLine(c.Raw), prefix) {
			out = append(out, c)
		}
	}
	return out
}

// TestE2EDispatchRefusedUnadmitted: an item awaiting admission assigned to
// GitHub's coding agent is unassigned again, the item's report comment
// says why in one agent-dispatch-refused line, and the refusal is counted;
// handling the deliveries again neither counts nor reports it twice.
func TestE2EDispatchRefusedUnadmitted(t *testing.T) {
	t.Parallel()
	x := newE2E(t)
	n := x.openWithLabelsAs(t, "bob", "read", "Speed up the importer", lblItem)
	x.MustSettle(t)
	if !x.labels(n)[lblAdmission] {
		t.Fatalf("#%d is not gated: %v", n, x.labels(n))
	}
	maria := x.Person("maria", "maintain")
	reqs, by := x.allRequests(t, func() {
		if _, err := maria.Assign(x.Repo, n, ghsim.CodingAgentLogin); err != nil {
			t.Fatal(err)
		}
		x.MustSettle(t)
	})
	t.Logf("GitHub requests for a refused assignment (not claimable): %d %v", reqs, by)
	if got := by["DELETE /repos/{owner}/{repo}/issues/{issue_number}/assignees"]; got != 1 {
		t.Errorf("warden made %d DELETE …/assignees requests, want 1 (%v)", got, by)
	}
	if as := x.assignees(n); len(as) != 0 {
		t.Errorf("#%d is still assigned to %v; warden should have removed the agent", n, as)
	}
	x.flush(t)
	body := x.mustReportWith(t, n, []string{"agent-dispatch-refused"}, "awaiting-admission", "Copilot")
	line := findingLine(body, "agent-dispatch-refused")
	if !strings.Contains(line, "removed the assignee") || !strings.Contains(line, "/backlog admit") {
		t.Errorf("agent-dispatch-refused line %q does not say what was done and what makes the item claimable", line)
	}
	series := `warden_agent_dispatch_refused_total{reason="awaiting-admission"}`
	if v := x.metric(t, series); v != "1" {
		t.Errorf("%s = %q, want 1", series, v)
	}
	if st := x.status(t, idOf(n)); st.Claimed {
		t.Errorf("the refused dispatch left a claim: %+v", st)
	}

	// A redelivery: nothing twice.
	x.rehandle(t, n)
	x.flush(t)
	if v := x.metric(t, series); v != "1" {
		t.Errorf("after a redelivery %s = %q, want 1", series, v)
	}
	if strings.Count(x.report(t, n), "agent-dispatch-refused") != 1 {
		t.Errorf("after a redelivery the report lists the refusal more than once:\n%s", x.report(t, n))
	}
}

// TestE2EDispatchClaimAndRelease: an admitted item assigned to GitHub's
// coding agent gets a claim (held, owner copilot/issue-N, warden's claim
// marker on the issue); unassigning the agent releases it with the outcome
// marker result=released. Handling the deliveries again posts nothing twice.
func TestE2EDispatchClaimAndRelease(t *testing.T) {
	t.Parallel()
	x := newE2E(t)
	x.Sim.EnableCodingAgent(x.Repo)
	id := x.create(t, HumanToken, "Retry the webhook sender", []string{"priority:P1"})
	n := num(t, id)
	x.MustSettle(t)
	maria := x.Person("maria", "maintain")
	owner := fmt.Sprintf("copilot/issue-%d", n)
	reqs, by := x.allRequests(t, func() {
		if _, err := maria.Assign(x.Repo, n, ghsim.CodingAgentLogin); err != nil {
			t.Fatal(err)
		}
		x.MustSettle(t)
	})
	t.Logf("GitHub requests for a granted assignment (claimable; the agent's branch and draft pull request included): %d %v", reqs, by)
	st := x.status(t, id)
	if !st.IsHeld || st.State != "held" || st.Owner == nil || *st.Owner != owner || st.FencingToken == nil {
		t.Fatalf("after the assignment the claim is %+v, want held by %s", st, owner)
	}
	fence := *st.FencingToken
	if lease := mustTime(t, *st.LeaseExpiresAtUtc).Sub(x.clk.Now()); lease < 29*time.Minute {
		t.Errorf("the dispatch lease is %s; agent_lease (2h) clamped to WARDEN_LEASE_MAX (30m) is 30m", lease)
	}
	claimPrefix := fmt.Sprintf("<!-- backlog-worker: claim item=%s owner=%s region=local fence=%d ", id, owner, fence)
	if ms := x.markersOn(n, claimPrefix); len(ms) != 1 {
		t.Errorf("#%d has %d claim markers for %s fence %d, want 1: %+v", n, len(ms), owner, fence, x.comments(n))
	}
	if as := x.assignees(n); len(as) != 1 || as[0] != ghsim.CodingAgentLogin {
		t.Errorf("#%d assignees %v, want the agent kept", n, as)
	}
	if pr := x.Sim.CodingAgentPR(x.Repo, n); pr == nil {
		t.Errorf("the coding agent opened no pull request for #%d", n)
	} else {
		var sha string
		x.Sim.Locked(func() { sha = pr.HeadSHA })
		for _, r := range x.checkRuns(sha) {
			t.Logf("the agent's pull request's backlog check run: %s %s: %s", r.Status, r.Conclusion, r.Title)
		}
	}

	// Unassigned: released, with the outcome marker.
	reqs, by = x.allRequests(t, func() {
		if _, err := maria.Unassign(x.Repo, n, ghsim.CodingAgentLogin); err != nil {
			t.Fatal(err)
		}
		x.MustSettle(t)
	})
	t.Logf("GitHub requests for unassigning the agent (release and outcome marker): %d %v", reqs, by)
	st = x.status(t, id)
	if st.IsHeld || st.State != "released" {
		t.Errorf("after unassigning the claim is %+v, want released", st)
	}
	outcome := fmt.Sprintf("<!-- backlog-worker: outcome item=%s owner=%s fence=%d result=released -->", id, owner, fence)
	if ms := x.markersOn(n, outcome); len(ms) != 1 {
		t.Errorf("#%d has %d outcome markers %q, want 1", n, len(ms), outcome)
	}

	// Redelivered: no second marker of either kind.
	x.rehandle(t, n)
	if ms := x.markersOn(n, claimPrefix); len(ms) != 1 {
		t.Errorf("after a redelivery #%d has %d claim markers, want 1", n, len(ms))
	}
	if ms := x.markersOn(n, outcome); len(ms) != 1 {
		t.Errorf("after a redelivery #%d has %d outcome markers, want 1", n, len(ms))
	}
	x.flush(t)
	x.reportLacks(t, n, "agent-dispatch-refused", "duplicate-claim-marker")
}

// TestE2EDispatchPullClosedReleases: the coding agent's pull request closed
// without being merged ends its dispatch claim as an unassignment does:
// released, with the outcome marker.
func TestE2EDispatchPullClosedReleases(t *testing.T) {
	t.Parallel()
	x := newE2E(t)
	x.Sim.EnableCodingAgent(x.Repo)
	id := x.create(t, HumanToken, "Trim the log lines", []string{"priority:P2"})
	n := num(t, id)
	x.MustSettle(t)
	maria := x.Person("maria", "maintain")
	if _, err := maria.Assign(x.Repo, n, ghsim.CodingAgentLogin); err != nil {
		t.Fatal(err)
	}
	x.MustSettle(t)
	st := x.status(t, id)
	if !st.IsHeld || st.FencingToken == nil {
		t.Fatalf("after the assignment the claim is %+v, want held", st)
	}
	pr := x.Sim.CodingAgentPR(x.Repo, n)
	if pr == nil {
		t.Fatalf("the coding agent opened no pull request for #%d", n)
	}

	// The agent works (a commit on its pull request): its claim is renewed.
	before := mustTime(t, *st.LeaseExpiresAtUtc)
	x.clk.Advance(10 * time.Minute)
	reqs, by := x.allRequests(t, func() {
		if err := x.Sim.CodingAgentWork(x.Repo, n, map[string]string{"log.go": "package log\n"}); err != nil {
			t.Fatal(err)
		}
		x.MustSettle(t)
	})
	t.Logf("GitHub requests for the agent's work on its pull request (push, synchronize, edited, ready_for_review): %d %v", reqs, by)
	st = x.status(t, id)
	if after := mustTime(t, *st.LeaseExpiresAtUtc); !st.IsHeld || after.Sub(before) < 9*time.Minute {
		t.Errorf("after the agent's work ten minutes on, the lease ends %s (was %s), want renewed: %+v", after, before, st)
	}
	var prNum int
	x.Sim.Locked(func() { prNum = pr.Issue.Number })
	if err := maria.ClosePR(x.Repo, prNum); err != nil {
		t.Fatal(err)
	}
	x.MustSettle(t)
	if st := x.status(t, id); st.IsHeld || st.State != "released" {
		t.Errorf("after the agent's pull request was closed the claim is %+v, want released", st)
	}
	outcome := fmt.Sprintf("<!-- backlog-worker: outcome item=%s owner=copilot/issue-%d fence=%d result=released -->", id, n, *st.FencingToken)
	if ms := x.markersOn(n, outcome); len(ms) != 1 {
		t.Errorf("#%d has %d outcome markers %q, want 1: %+v", n, len(ms), outcome, x.comments(n))
	}
	// Unassigning the agent afterwards ends nothing more.
	if _, err := maria.Unassign(x.Repo, n, ghsim.CodingAgentLogin); err != nil {
		t.Fatal(err)
	}
	x.MustSettle(t)
	if ms := x.markersOn(n, "<!-- backlog-worker: outcome "); len(ms) != 1 {
		t.Errorf("#%d has %d outcome markers after the unassignment, want 1", n, len(ms))
	}
}

// TestE2EDispatchRefusedHeld: an item a worker holds through the API,
// assigned to the coding agent, stays the worker's: the assignee is removed
// and the line says the item is held.
func TestE2EDispatchRefusedHeld(t *testing.T) {
	t.Parallel()
	x := newE2E(t)
	id := x.create(t, HumanToken, "Cache the ready set", []string{"priority:P2"})
	n := num(t, id)
	x.MustSettle(t)
	fence := x.claimFor(t, WorkerToken, id, "worker-7/run-1", 600)
	x.MustSettle(t)
	if _, err := x.Person("maria", "maintain").Assign(x.Repo, n, ghsim.CodingAgentAccount); err != nil {
		t.Fatal(err)
	}
	x.MustSettle(t)
	if as := x.assignees(n); len(as) != 0 {
		t.Errorf("#%d is still assigned to %v", n, as)
	}
	if st := x.status(t, id); !st.IsHeld || st.Owner == nil || *st.Owner != "worker-7/run-1" || *st.FencingToken != fence {
		t.Errorf("the worker's claim changed: %+v", st)
	}
	x.flush(t)
	x.mustReportWith(t, n, []string{"agent-dispatch-refused"}, "(held")
	if v := x.metric(t, `warden_agent_dispatch_refused_total{reason="held"}`); v != "1" {
		t.Errorf("refusals counted as held: %q, want 1", v)
	}
}

// TestE2EDispatchMergedCompletes: the coding agent's pull request merged
// into the item's baseBranch completes the item under the dispatch claim
// (state:complete and pr:<n>, written as the agent), with the outcome marker
// result=complete, and the claim released: no agent ever called warden.
func TestE2EDispatchMergedCompletes(t *testing.T) {
	t.Parallel()
	x := newE2E(t)
	x.Sim.EnableCodingAgent(x.Repo)
	id := x.create(t, HumanToken, "Document the retry policy", []string{"priority:P2"})
	n := num(t, id)
	x.MustSettle(t)
	maria := x.Person("maria", "maintain")
	if _, err := maria.Assign(x.Repo, n, ghsim.CodingAgentLogin); err != nil {
		t.Fatal(err)
	}
	x.MustSettle(t)
	st := x.status(t, id)
	if !st.IsHeld || st.FencingToken == nil {
		t.Fatalf("after the assignment the claim is %+v, want held", st)
	}
	fence := *st.FencingToken
	if err := x.Sim.CodingAgentWork(x.Repo, n, map[string]string{"RETRY.md": "Retries back off.\n"}); err != nil {
		t.Fatal(err)
	}
	x.MustSettle(t)
	pr := x.Sim.CodingAgentPR(x.Repo, n)
	if pr == nil {
		t.Fatalf("the coding agent opened no pull request for #%d", n)
	}
	var prNum int
	x.Sim.Locked(func() { prNum = pr.Issue.Number })
	reqs, by := x.allRequests(t, func() {
		if _, err := maria.MergePR(x.Repo, prNum, "squash"); err != nil {
			t.Fatal(err)
		}
		x.MustSettle(t)
	})
	t.Logf("GitHub requests for the merge of the agent's pull request (completion, outcome marker, close): %d %v", reqs, by)
	it := x.mustItem(t, id)
	if !it.has("state:complete") || !it.has(fmt.Sprintf("pr:%d", prNum)) {
		t.Errorf("after the merge the item's tags are %v, want state:complete and pr:%d", it.Tags, prNum)
	}
	if st := x.status(t, id); st.IsHeld || st.State != "released" {
		t.Errorf("after the completion the claim is %+v, want released", st)
	}
	outcome := fmt.Sprintf("<!-- backlog-worker: outcome item=%s owner=copilot/issue-%d fence=%d result=complete -->", id, n, fence)
	if ms := x.markersOn(n, outcome); len(ms) != 1 {
		t.Errorf("#%d has %d outcome markers %q, want 1: %+v", n, len(ms), outcome, x.comments(n))
	}
	x.flush(t)
	x.reportLacks(t, n, "merged-not-complete", "agent-dispatch-refused")
}

// TestE2EDispatchLapsedReleased: a dispatch claim whose lease lapses with no
// evidence of work from the agent is released by the timer pass, with the
// outcome marker saying so.
func TestE2EDispatchLapsedReleased(t *testing.T) {
	t.Parallel()
	x := newE2E(t)
	id := x.create(t, HumanToken, "Prune old deliveries", []string{"priority:P3"})
	n := num(t, id)
	x.MustSettle(t)
	if _, err := x.Person("maria", "maintain").Assign(x.Repo, n, ghsim.CodingAgentLogin); err != nil {
		t.Fatal(err)
	}
	x.MustSettle(t)
	st := x.status(t, id)
	if !st.IsHeld || st.FencingToken == nil {
		t.Fatalf("after the assignment the claim is %+v, want held", st)
	}
	x.MustSweep(t)
	if st := x.status(t, id); !st.IsHeld {
		t.Fatalf("a timer pass within the lease ended the claim: %+v", st)
	}
	x.clk.Advance(31 * time.Minute)
	x.MustSweep(t)
	x.MustSettle(t)
	if st := x.status(t, id); st.State != "released" {
		t.Errorf("after the lease lapsed the claim is %+v, want released", st)
	}
	outcome := fmt.Sprintf("<!-- backlog-worker: outcome item=%s owner=copilot/issue-%d fence=%d result=released -->", id, n, *st.FencingToken)
	ms := x.markersOn(n, outcome)
	if len(ms) != 1 || !strings.Contains(ms[0].Raw, "lapsed with no evidence of work") {
		t.Errorf("#%d outcome markers %+v, want one saying the lease lapsed", n, ms)
	}
	x.MustSweep(t)
	if ms := x.markersOn(n, "<!-- backlog-worker: outcome "); len(ms) != 1 {
		t.Errorf("a second timer pass posted again: %d outcome markers", len(ms))
	}
}

// TestE2EDispatchDryRun: under dry_run an assignment is neither claimed nor
// undone: the agent stays assigned, no claim is taken, no marker or report
// is posted, whether the item is claimable, awaiting admission or held by a
// worker.
func TestE2EDispatchDryRun(t *testing.T) {
	t.Parallel()
	x := newE2E(t)
	free := x.create(t, HumanToken, "Cache the schema", []string{"priority:P1"})
	held := x.create(t, HumanToken, "Rotate the logs", []string{"priority:P1"})
	gated := x.openWithLabelsAs(t, "bob", "read", "Speed up the exporter", lblItem)
	x.MustSettle(t)
	x.claimFor(t, WorkerToken, held, "worker-7/a", 600)
	x.pushSettings(t, x.Person("hana", "write"), "main", "dry_run: true\n")
	x.MustSettle(t)
	maria := x.Person("maria", "maintain")
	for _, n := range []int{num(t, free), num(t, held), gated} {
		before := len(x.comments(n))
		reqs, by := x.allRequests(t, func() {
			if _, err := maria.Assign(x.Repo, n, ghsim.CodingAgentLogin); err != nil {
				t.Fatal(err)
			}
			x.MustSettle(t)
		})
		if as := x.assignees(n); len(as) != 1 {
			t.Errorf("#%d: assignees %v under dry run, want the agent left assigned", n, as)
		}
		if got := by["DELETE /repos/{owner}/{repo}/issues/{issue_number}/assignees"] + by["POST /repos/{owner}/{repo}/issues/{issue_number}/comments"]; got != 0 {
			t.Errorf("#%d: %d writes under dry run (%d requests: %v)", n, got, reqs, by)
		}
		if after := len(x.comments(n)); after != before {
			t.Errorf("#%d: %d comments posted under dry run", n, after-before)
		}
	}
	if st := x.status(t, free); st.Claimed {
		t.Errorf("%s claimed under dry run: %+v", free, st)
	}
	if st := x.status(t, held); st.Owner == nil || *st.Owner != "worker-7/a" {
		t.Errorf("%s's claim changed under dry run: %+v", held, st)
	}
}
