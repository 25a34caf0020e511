package harness

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/wardenhq/warden/internal/ghsim"
)

// End-to-end tests of the rest of dispatch by assignment (issue 20): a
// human forcing a dispatch with /backlog dispatch, custody changes between
// agents (attempts, with warden's takeover markers, that park the item at
// three), a lapsed dispatch taken over by a worker through the API, and
// mentions that summon an agent.

// builderAgent is a second dispatched agent: an app's [bot] account with
// write access (a Bot assignee counts as an agent).
const builderAgent = "builder[bot]"

// TestE2EDispatchForced: /backlog dispatch @Copilot by a human maintainer
// on an item awaiting admission takes a maintenance claim for the agent
// (readiness skipped, no marker, no attempt) and assigns it; the command is
// refused, with a reason, to someone without triage, to a bot, and for a
// login that is no agent.
func TestE2EDispatchForced(t *testing.T) {
	t.Parallel()
	x := newE2E(t)
	n := x.openWithLabelsAs(t, "bob", "read", "Port the exporter", lblItem)
	x.MustSettle(t)
	id := idOf(n)
	if !x.labels(n)[lblAdmission] {
		t.Fatalf("#%d is not gated: %v", n, x.labels(n))
	}

	// Refused: a reader, a bot with write, a login that is no agent.
	reader := x.say(t, x.Person("bob", "read"), n, "/backlog dispatch @Copilot")
	x.MustSettle(t)
	x.mustReact(t, n, reader, "confused")
	botCmd := x.say(t, x.agent("helper[bot]", "write"), n, "/backlog dispatch @Copilot")
	x.MustSettle(t)
	x.mustReact(t, n, botCmd, "") // bots' commands are ignored
	maria := x.Person("maria", "maintain")
	notAgent := x.say(t, maria, n, "/backlog dispatch @bob")
	x.MustSettle(t)
	x.mustReact(t, n, notAgent, "confused")
	x.flush(t)
	x.mustReportWith(t, n, nil, "@bob is not a dispatched agent")
	if st := x.status(t, id); st.Claimed {
		t.Fatalf("a refused /backlog dispatch left a claim: %+v", st)
	}

	// Forced by a human with triage or more.
	x.clk.Advance(time.Minute)
	owner := fmt.Sprintf("copilot/issue-%d", n)
	var cmd *ghsim.Comment
	// The first POST …/assignees fails: the command's retry goes on from
	// its recorded dispatch (the same claim, no second grant).
	x.Sim.FailNext(1, http.StatusBadGateway, http.MethodPost, fmt.Sprintf("/repos/%s/issues/%d/assignees", x.Repo.FullName, n))
	reqs, by := x.allRequests(t, func() {
		cmd = x.say(t, maria, n, "/backlog dispatch @Copilot")
		x.MustSettle(t)
	})
	t.Logf("GitHub requests for a forced dispatch (/backlog dispatch), the first assignment failing once: %d %v", reqs, by)
	x.mustReact(t, n, cmd, "+1")
	st := x.status(t, id)
	if !st.IsHeld || st.Owner == nil || *st.Owner != owner || st.FencingToken == nil {
		t.Fatalf("after /backlog dispatch the claim is %+v, want held by %s", st, owner)
	}
	if as := x.assignees(n); len(as) != 1 || as[0] != ghsim.CodingAgentLogin {
		t.Errorf("#%d assignees %v, want the agent assigned by warden", n, as)
	}
	if got := by["POST /repos/{owner}/{repo}/issues/{issue_number}/assignees"]; got != 1 {
		t.Errorf("warden made %d POST …/assignees requests that GitHub answered, want 1, the retry (%v)", got, by)
	}
	if *st.FencingToken != 1 {
		t.Errorf("the retry granted a second claim: fence %d, want 1", *st.FencingToken)
	}
	if ms := x.markersOn(n, "<!-- backlog-worker: claim "); len(ms) != 0 {
		t.Errorf("a maintenance claim posts no marker, yet #%d has %+v", n, ms)
	}
	if it := x.mustItem(t, id); it.Attempts != 0 {
		t.Errorf("a forced dispatch is a maintenance claim and no attempt; attempts = %d", it.Attempts)
	}
	x.flush(t)
	x.reportLacks(t, n, "agent-dispatch-refused", "unbacked-marker", "claimed-unmarked")

	// Forcing it again is refused: the agent already holds it.
	x.clk.Advance(time.Minute)
	again := x.say(t, maria, n, "/backlog dispatch @copilot-swe-agent[bot]")
	x.MustSettle(t)
	x.mustReact(t, n, again, "confused")

	// Unassigned: released, with no marker of warden's.
	if _, err := maria.Unassign(x.Repo, n, ghsim.CodingAgentLogin); err != nil {
		t.Fatal(err)
	}
	x.MustSettle(t)
	if st := x.status(t, id); st.IsHeld || st.State != "released" {
		t.Errorf("after unassigning the forced agent the claim is %+v, want released", st)
	}
	if ms := x.markersOn(n, "<!-- backlog-worker: outcome "); len(ms) != 0 {
		t.Errorf("a maintenance claim's end posts no outcome marker, yet #%d has %+v", n, ms)
	}
}

// TestE2EDispatchCustodyChangesPark: reassigning an item between agents is
// a custody change each time, whichever delivery comes first: warden
// releases the first agent's claim and posts the second's claim marker in
// the takeover form naming it. The third custody change's release parks
// the item (poison threshold), with no trail defect on the way.
func TestE2EDispatchCustodyChangesPark(t *testing.T) {
	t.Parallel()
	x := newE2E(t)
	x.agent(builderAgent, "write")
	id := x.create(t, HumanToken, "Shard the event log", []string{"priority:P1"})
	n := num(t, id)
	x.MustSettle(t)
	maria := x.Person("maria", "maintain")
	copilot, builder := fmt.Sprintf("copilot/issue-%d", n), fmt.Sprintf("builder/issue-%d", n)

	held := func(owner string) int64 {
		t.Helper()
		st := x.status(t, id)
		if !st.IsHeld || st.Owner == nil || *st.Owner != owner || st.FencingToken == nil {
			t.Fatalf("the claim is %+v, want held by %s", st, owner)
		}
		return *st.FencingToken
	}
	takeover := func(owner string, fence int64, prior string, priorFence int64) {
		t.Helper()
		p := fmt.Sprintf("<!-- backlog-worker: claim item=%s owner=%s region=local fence=%d ", id, owner, fence)
		ms := x.markersOn(n, p)
		want := fmt.Sprintf(" prior-owner=%s prior-fence=%d -->", prior, priorFence)
		if len(ms) != 1 || !strings.HasSuffix(firstLine(ms[0].Raw), want) {
			t.Errorf("#%d claim markers for %s fence %d: %+v, want one in the takeover form ending %q", n, owner, fence, ms, want)
		}
	}
	released := func(owner string, fence int64) {
		t.Helper()
		o := fmt.Sprintf("<!-- backlog-worker: outcome item=%s owner=%s fence=%d result=released -->", id, owner, fence)
		if ms := x.markersOn(n, o); len(ms) != 1 {
			t.Errorf("#%d has %d outcome markers %q, want 1", n, len(ms), o)
		}
	}

	// 1: Copilot.
	if _, err := maria.Assign(x.Repo, n, ghsim.CodingAgentLogin); err != nil {
		t.Fatal(err)
	}
	x.MustSettle(t)
	f1 := held(copilot)

	// 2: to builder, the unassignment delivered first.
	if _, err := maria.Unassign(x.Repo, n, ghsim.CodingAgentLogin); err != nil {
		t.Fatal(err)
	}
	x.MustSettle(t)
	if _, err := maria.Assign(x.Repo, n, builderAgent); err != nil {
		t.Fatal(err)
	}
	x.MustSettle(t)
	f2 := held(builder)
	released(copilot, f1)
	takeover(builder, f2, copilot, f1)
	if it := x.mustItem(t, id); it.Attempts != 2 {
		t.Errorf("after one custody change attempts = %d, want 2", it.Attempts)
	}

	// 3: back to Copilot, the assignment delivered first (both assigned for
	// a moment, as when a person adds one before removing the other).
	reqs, by := x.allRequests(t, func() {
		if _, err := maria.Assign(x.Repo, n, ghsim.CodingAgentLogin); err != nil {
			t.Fatal(err)
		}
		x.MustSettle(t)
	})
	t.Logf("GitHub requests for a reassignment to another agent (release, outcome and takeover markers): %d %v", reqs, by)
	f3 := held(copilot)
	released(builder, f2)
	takeover(copilot, f3, builder, f2)
	if _, err := maria.Unassign(x.Repo, n, builderAgent); err != nil {
		t.Fatal(err)
	}
	x.MustSettle(t)
	if held(copilot) != f3 {
		t.Fatal("unassigning the prior agent moved the claim")
	}
	if it := x.mustItem(t, id); it.Attempts != 3 || it.has("state:parked") {
		t.Errorf("after two custody changes attempts = %d (want 3), tags %v (want not yet parked: the claim is held)", it.Attempts, it.Tags)
	}

	// The third attempt ends: the item is parked.
	if _, err := maria.Unassign(x.Repo, n, ghsim.CodingAgentLogin); err != nil {
		t.Fatal(err)
	}
	x.MustSettle(t)
	x.MustSweep(t)
	released(copilot, f3)
	parkedWith(t, x.mustItem(t, id), "pm", "poison-threshold")
	x.flush(t)
	x.reportLacks(t, n, "unannounced-takeover", "takeover-mismatch", "claimed-unmarked", "unbacked-marker",
		"duplicate-claim-marker", "takeover-collision", "agent-dispatch-refused")
}

// TestE2EDispatchLapsedTakenOver: a dispatch claim that lapsed is taken over
// by a worker through the API in the ordinary way (the worker's takeover
// marker names it); unassigning the agent afterwards posts nothing that
// would be the prior owner's activity, and the trail counts two attempts
// with no defect.
func TestE2EDispatchLapsedTakenOver(t *testing.T) {
	t.Parallel()
	x := newE2E(t)
	id := x.create(t, HumanToken, "Index the audit table", []string{"priority:P2"})
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
	f1 := *st.FencingToken
	owner := fmt.Sprintf("copilot/issue-%d", n)

	// The lease (30m, the ceiling) lapses and the quarantine passes, with no
	// timer pass in between; a worker takes it over.
	x.clk.Advance(30*time.Minute + pastQuarantine)
	f2 := x.claimFor(t, WorkerToken, id, "worker-7/run-2", 600)
	x.say(t, x.agent("worker-7[bot]", "write"), n, x.takeoverMarker(id, "worker-7/run-2", f2, owner, f1))
	x.MustSettle(t)

	if _, err := maria.Unassign(x.Repo, n, ghsim.CodingAgentLogin); err != nil {
		t.Fatal(err)
	}
	x.MustSettle(t)
	x.MustSweep(t)
	if ms := x.markersOn(n, "<!-- backlog-worker: outcome "); len(ms) != 0 {
		t.Errorf("warden posted an outcome marker for the taken-over dispatch claim: %+v", ms)
	}
	if st := x.status(t, id); !st.IsHeld || *st.Owner != "worker-7/run-2" || *st.FencingToken != f2 {
		t.Errorf("the worker's claim changed: %+v", st)
	}
	if it := x.mustItem(t, id); it.Attempts != 2 {
		t.Errorf("attempts = %d, want 2 (the dispatch, the worker's takeover)", it.Attempts)
	}
	x.flush(t)
	x.reportLacks(t, n, "unannounced-takeover", "takeover-mismatch", "takeover-collision", "unbacked-marker")
}

// TestE2EDispatchMention: "@Copilot" in a comment on an item awaiting
// admission puts one agent-dispatch-refused line in its report (nothing is
// unassigned); inside a code span it is no mention; on a claimable item a
// mention does nothing. The coding agent's pull request for the unadmitted
// item fails its backlog check run, saying why.
func TestE2EDispatchMention(t *testing.T) {
	t.Parallel()
	x := newE2E(t)
	n := x.openWithLabelsAs(t, "bob", "read", "Rotate the signing keys", lblItem)
	x.MustSettle(t)
	maria := x.Person("maria", "maintain")

	x.say(t, maria, n, "Try `@Copilot` later, once this is specified.")
	x.MustSettle(t)
	x.flush(t)
	x.reportLacks(t, n, "agent-dispatch-refused")

	reqs, by := x.allRequests(t, func() {
		x.say(t, maria, n, "@copilot can you take this one?")
		x.MustSettle(t)
	})
	t.Logf("GitHub requests for a mention of an agent on an item that is not claimable: %d %v", reqs, by)
	if by["DELETE /repos/{owner}/{repo}/issues/{issue_number}/assignees"] != 0 {
		t.Errorf("a mention removed assignees: %v", by)
	}
	x.flush(t)
	body := x.mustReportWith(t, n, []string{"agent-dispatch-refused"}, "awaiting-admission")
	line := findingLine(body, "agent-dispatch-refused")
	if !strings.Contains(line, `mentioned \"copilot\"`) && !strings.Contains(line, `mentioned "copilot"`) {
		t.Errorf("agent-dispatch-refused line %q does not name the mention", line)
	}
	if !strings.Contains(line, "check run fails") || strings.Contains(line, "removed the assignee") {
		t.Errorf("agent-dispatch-refused line %q should say the check run fails its pull request and remove nothing", line)
	}

	// The agent starts anyway (as a mention-reading agent would): its pull
	// request fails the backlog check run, which says the item awaits
	// admission.
	ca := x.agent(ghsim.CodingAgentAccount, "write")
	head := fmt.Sprintf("copilot/fix-%d", n)
	if _, err := ca.Push(x.Repo, head, "", map[string]string{"keys.go": "package keys\n"}, "Rotate the signing keys"); err != nil {
		t.Fatal(err)
	}
	x.MustSettle(t)
	opened, err := ca.OpenPR(x.Repo, head, "main", "Rotate the signing keys", fmt.Sprintf("Fixes #%d", n), false)
	if err != nil {
		t.Fatal(err)
	}
	x.MustSettle(t)
	pr := x.pr(t, opened.Issue.Number)
	sha := pr.HeadSHA
	runs := x.checkRuns(sha)
	if len(runs) == 0 {
		t.Fatalf("no backlog check run on the agent's head %s", sha)
	}
	r := runs[len(runs)-1]
	if r.Conclusion != "failure" || !strings.Contains(r.Title+r.Summary+r.Text, "awaits human admission") {
		t.Errorf("the agent's pull request's check run is %s %q (%s), want a failure saying the item awaits admission", r.Conclusion, r.Title, r.Summary)
	}

	// On a claimable item a mention is nothing.
	id2 := x.create(t, HumanToken, "Trim the changelog", []string{"priority:P3"})
	n2 := num(t, id2)
	x.MustSettle(t)
	x.say(t, maria, n2, "@Copilot this one is ready")
	x.MustSettle(t)
	x.flush(t)
	x.reportLacks(t, n2, "agent-dispatch-refused")
	if st := x.status(t, id2); st.Claimed {
		t.Errorf("a mention took a claim: %+v", st)
	}
}
