package harness

import (
	"strings"
	"testing"
	"time"

	"github.com/wardenhq/warden/gating"
)

// End-to-end tests of a takeover's evidence (CONTRACT.md §6, §9): what
// keeps a lapsed claim's holder live beyond a push to its own branch and a
// comment under its own marker, what shows a prior owner still active after
// a takeover, and a prior attempt's branch rewritten.

// lapsedEntry is the report's lapsed entry for id, if any.
func lapsedEntry(rep gating.Report, id string) *gating.LapsedEntry {
	for i := range rep.Lapsed {
		if string(rep.Lapsed[i].Item) == id {
			return &rep.Lapsed[i]
		}
	}
	return nil
}

// TestE2EEvidencePushElsewhereByHolder: a holder whose lease lapsed pushes
// another branch under the login that posted its claim marker. Past the
// quarantine counted from its grant it is still a live holder (another
// owner's claim is refused), the claim status and the report name the
// evidence; an item whose holder did nothing is abandoned at the same time.
func TestE2EEvidencePushElsewhereByHolder(t *testing.T) {
	t.Parallel()
	x := newE2E(t)
	worker := x.Sim.As("worker-7[bot]")
	idle := x.Sim.As("idle-agent[bot]")
	id := x.create(t, HumanToken, "Move the scheduler to the new queue", []string{"priority:P1"})
	quiet := x.create(t, HumanToken, "Drop the old queue", []string{"priority:P1"})
	n, nq := num(t, id), num(t, quiet)
	x.MustSettle(t)

	f := granted(t, x.claim(t, WorkerToken, id, map[string]any{"owner": "worker-7/a", "leaseSeconds": 60, "branch": "work/scheduler"}))
	x.say(t, worker, n, x.marker(id, "worker-7/a", f))
	fq := granted(t, x.claim(t, WorkerToken, quiet, map[string]any{"owner": "worker-7/q", "leaseSeconds": 60, "branch": "work/queue"}))
	x.say(t, idle, nq, x.marker(quiet, "worker-7/q", fq))
	x.MustSettle(t)

	x.clk.Advance(e2eQuarantine - time.Minute) // lapsed, a minute of quarantine left
	if _, err := worker.Push(x.Repo, "scratch/bench", "", map[string]string{"bench.txt": "p99 12ms"}, "bench notes"); err != nil {
		t.Fatal(err)
	}
	x.MustSettle(t)
	x.clk.Advance(3 * time.Minute) // past the grant's quarantine, inside the push's

	st := x.status(t, id)
	if st.State != string(gating.StateLapsed) || st.LastEvidence == nil || st.LastEvidence.Kind != gating.EvidencePushByHolder ||
		!strings.Contains(st.LastEvidence.Detail, "scratch/bench") {
		t.Fatalf("%s claim status %+v (evidence %+v), want lapsed on a push-by-holder to scratch/bench", id, st, st.LastEvidence)
	}
	if qs := x.status(t, quiet); qs.State != string(gating.StateAbandoned) {
		t.Fatalf("%s (no evidence) is %q, want abandoned: the control", quiet, qs.State)
	}
	if r := x.claim(t, WorkerToken, id, map[string]any{"owner": "worker-7/b", "leaseSeconds": 60}); r.Granted {
		t.Fatalf("another owner took over a live holder's item: %+v", r)
	}
	le := lapsedEntry(x.mustReport(t), id)
	if le == nil || le.LastEvidence == nil || le.LastEvidence.Kind != gating.EvidencePushByHolder {
		t.Fatalf("report's lapsed entry for %s: %+v, want its evidence named push-by-holder", id, le)
	}
}

// TestE2EEvidencePullRequest: a pull request opened from the claim's branch
// is evidence of work, and the claim status says which.
func TestE2EEvidencePullRequest(t *testing.T) {
	t.Parallel()
	x := newE2E(t)
	worker := x.Sim.As("worker-7[bot]")
	id := x.create(t, HumanToken, "Batch the audit writes", []string{"priority:P1"})
	n := num(t, id)
	x.MustSettle(t)
	f := granted(t, x.claim(t, WorkerToken, id, map[string]any{"owner": "worker-7/a", "leaseSeconds": 60, "branch": "work/audit"}))
	x.say(t, worker, n, x.marker(id, "worker-7/a", f))
	x.clk.Advance(time.Minute)
	if _, err := worker.Push(x.Repo, "work/audit", "", map[string]string{"audit.go": "package audit\n"}, "batch"); err != nil {
		t.Fatal(err)
	}
	x.MustSettle(t)
	if st := x.status(t, id); st.LastEvidence == nil || st.LastEvidence.Kind != gating.EvidencePush {
		t.Fatalf("after a push to its branch: evidence %+v, want push", st.LastEvidence)
	}
	x.clk.Advance(2 * time.Minute)
	pr, err := worker.OpenPR(x.Repo, "work/audit", "main", "Batch the audit writes", "Delivers "+id+".", false)
	if err != nil {
		t.Fatal(err)
	}
	x.MustSettle(t)
	st := x.status(t, id)
	if st.LastEvidence == nil || st.LastEvidence.Kind != gating.EvidencePullRequest || !strings.Contains(st.LastEvidence.Detail, "opened") {
		t.Fatalf("after the PR: evidence %+v, want pull-request (opened)", st.LastEvidence)
	}

	// A reviewer comments; the holder replies to the review comment.
	x.clk.Advance(2 * time.Minute)
	rc, err := x.Person("hana", "write").ReviewComment(x.Repo, pr.Issue.Number, "audit.go", "Flush on shutdown too?")
	if err != nil {
		t.Fatal(err)
	}
	x.MustSettle(t)
	if st := x.status(t, id); st.LastEvidence == nil || st.LastEvidence.Kind != gating.EvidencePullRequest || !strings.Contains(st.LastEvidence.Detail, "opened") {
		t.Fatalf("a reviewer's comment is no evidence of the holder's work: %+v", st.LastEvidence)
	}
	x.clk.Advance(time.Minute)
	if _, err := worker.ReplyToReviewComment(x.Repo, pr.Issue.Number, rc.ID, "Yes, added."); err != nil {
		t.Fatal(err)
	}
	x.MustSettle(t)
	st = x.status(t, id)
	if st.LastEvidence == nil || st.LastEvidence.Kind != gating.EvidencePullRequest || !strings.Contains(st.LastEvidence.Detail, "a comment on pull request") {
		t.Fatalf("after the holder's review reply: evidence %+v, want pull-request (a comment on it)", st.LastEvidence)
	}
}

// takeOver makes worker-7/a's claim on a new item lapse past its quarantine
// and pm/b take it over with the takeover marker (pm-agent[bot] posting);
// worker-7[bot] posted worker-7/a's marker and pushed its branch work/a.
func (x *e2e) takeOver(t *testing.T, title string) (id string, n int) {
	t.Helper()
	worker := x.Sim.As("worker-7[bot]")
	pmBot := x.Sim.As("pm-agent[bot]")
	id = x.create(t, HumanToken, title, []string{"priority:P1"})
	n = num(t, id)
	x.MustSettle(t)
	f1 := granted(t, x.claim(t, WorkerToken, id, map[string]any{"owner": "worker-7/a", "leaseSeconds": 60, "branch": "work/a-" + id}))
	x.say(t, worker, n, x.marker(id, "worker-7/a", f1))
	if _, err := worker.Push(x.Repo, "work/a-"+id, "", map[string]string{"a.txt": "half done"}, "wip"); err != nil {
		t.Fatal(err)
	}
	x.MustSettle(t)
	x.clk.Advance(pastQuarantine)
	f2 := granted(t, x.claim(t, PMToken, id, map[string]any{"owner": "pm/b", "leaseSeconds": 600, "branch": "work/b-" + id}))
	x.say(t, pmBot, n, x.takeoverMarker(id, "pm/b", f2, "worker-7/a", f1))
	x.MustSettle(t)
	x.clk.Advance(time.Minute)
	return id, n
}

// TestE2ETakeoverCollisionByProse: after a takeover, a plain comment by the
// login that posted the prior owner's marker shows it alive: a collision,
// and the item is held.
func TestE2ETakeoverCollisionByProse(t *testing.T) {
	t.Parallel()
	x := newE2E(t)
	id, n := x.takeOver(t, "Rebuild the search index")
	if s := x.mustReady(t); s.codes(id)[gating.CodeTakeoverCollision] > 0 {
		t.Fatalf("a collision before any activity: %+v", s.Defects)
	}
	x.say(t, x.Sim.As("worker-7[bot]"), n, "Tests pass locally, pushing the rest in a minute.")
	x.MustSettle(t)
	x.flush(t)
	s := x.mustReady(t)
	if s.codes(id)[gating.CodeTakeoverCollision] == 0 {
		t.Fatalf("%s: the prior owner's comment after the takeover is no collision: %+v", id, s.Defects)
	}
	x.mustReportWith(t, n, []string{gating.CodeTakeoverCollision}, "worker-7[bot]")
}

// TestE2ETakeoverCollisionByPushElsewhere: a push to any branch by the
// login that posted the prior owner's marker, after the takeover, is a
// collision.
func TestE2ETakeoverCollisionByPushElsewhere(t *testing.T) {
	t.Parallel()
	x := newE2E(t)
	id, n := x.takeOver(t, "Shard the metrics store")
	if _, err := x.Sim.As("worker-7[bot]").Push(x.Repo, "elsewhere/x", "", map[string]string{"x.txt": "x"}, "x"); err != nil {
		t.Fatal(err)
	}
	x.MustSettle(t)
	x.flush(t)
	if s := x.mustReady(t); s.codes(id)[gating.CodeTakeoverCollision] == 0 {
		t.Fatalf("%s: the prior owner's push elsewhere after the takeover is no collision: %+v", id, s.Defects)
	}
	x.mustReportWith(t, n, []string{gating.CodeTakeoverCollision}, "elsewhere/x")
}

// TestE2EPriorBranchRewritten: the new holder force-pushes the prior
// attempt's branch back to main: prior-branch-rewritten on the item, and no
// collision (it was not the prior owner's act).
func TestE2EPriorBranchRewritten(t *testing.T) {
	t.Parallel()
	x := newE2E(t)
	id, n := x.takeOver(t, "Split the billing worker")
	base := x.Repo.Branches["main"]
	if err := x.Sim.As("pm-agent[bot]").ForcePush(x.Repo, "work/a-"+id, base); err != nil {
		t.Fatal(err)
	}
	x.MustSettle(t)
	x.flush(t)
	s := x.mustReady(t)
	if s.codes(id)[gating.CodePriorBranchRewritten] == 0 || s.codes(id)[gating.CodeTakeoverCollision] > 0 {
		t.Fatalf("%s: defects %v, want prior-branch-rewritten and no collision", id, s.codes(id))
	}
	x.mustReportWith(t, n, []string{gating.CodePriorBranchRewritten}, "pm-agent[bot]")

	// A human acknowledges it with /backlog resolve: the finding leaves.
	x.clk.Advance(time.Minute)
	x.say(t, x.Person("tom", "triage"), n, "/backlog resolve")
	x.MustSettle(t)
	x.flush(t)
	if s := x.mustReady(t); s.codes(id)[gating.CodePriorBranchRewritten] > 0 {
		t.Fatalf("%s: prior-branch-rewritten after /backlog resolve: %v; comments %+v", id, s.codes(id), x.comments(n))
	}
	x.reportLacks(t, n, gating.CodePriorBranchRewritten)
}
