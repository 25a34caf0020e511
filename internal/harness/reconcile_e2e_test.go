package harness

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/wardenhq/warden/mirror"
)

// End-to-end tests of the reconcile pass (CONTRACT.md §2 `warden
// reconcile`, §3, §6 "The report comment", §8; the divergence table of
// lattice-source-extract.md §4.5): each divergence is made on GitHub, found
// by a pass, shown where a person sees it (the item's report comment; for a
// pull request linked to nothing, GET /ready's defects and the dashboard),
// and gone after the fix and the next pass (the report comment edited in
// place, never a second one). Then the pass's own properties: a pass with
// nothing changed writes nothing, a budget stops and resumes a pass, a dry
// run writes nothing, and the dashboard issue is created once and edited
// only when something changed.

// reportID is the id of the item's one report comment (0: none).
func (x *e2e) reportID(t *testing.T, n int) int64 {
	t.Helper()
	rs := x.reportComments(n)
	if len(rs) > 1 {
		t.Errorf("#%d has %d report comments, want one (edited in place)", n, len(rs))
	}
	if len(rs) == 0 {
		return 0
	}
	return rs[0].ID
}

// divergenceShown runs a pass and checks that the item's report comment
// lists code and mentions also; it returns the comment's id.
func (x *e2e) divergenceShown(t *testing.T, n int, code string, also ...string) int64 {
	t.Helper()
	x.passFlush(t)
	x.mustReportWith(t, n, []string{code}, also...)
	return x.reportID(t, n)
}

// divergenceGone runs a pass after the fix and checks that the item's
// report comment, the same one as before (edited, not a second), no longer
// lists code.
func (x *e2e) divergenceGone(t *testing.T, n int, code string, commentID int64) {
	t.Helper()
	x.passFlush(t)
	x.reportLacks(t, n, code)
	if id := x.reportID(t, n); commentID != 0 && id != commentID {
		t.Errorf("#%d: the report comment is %d after the fix, was %d: want the same comment edited in place", n, id, commentID)
	}
	if s := x.mustReady(t); len(s.defects(idOf(n), code)) != 0 {
		t.Errorf("GET /ready still reports %s for %s after the fix: %+v", code, idOf(n), s.defects(idOf(n), code))
	}
}

// TestE2EReconcileMergedNotComplete: a merged pull request delivering an
// item that is not complete is reported; the holder's completion resolves
// it.
func TestE2EReconcileMergedNotComplete(t *testing.T) {
	t.Parallel()
	x := newE2E(t)
	id := x.create(t, HumanToken, "Split the invoice renderer", []string{"priority:P1"})
	n := num(t, id)
	x.MustSettle(t)
	f, p := x.deliver(t, id, "worker-7/m", "feat/invoices", "", "main", fmt.Sprintf("Refs #%d", n))
	c := x.divergenceShown(t, n, "merged-not-complete", fmt.Sprintf("#%d", p.N))

	x.mustComplete(t, WorkerToken, id, f, fmt.Sprintf("pr:%d", p.N))
	x.release(t, WorkerToken, id, f)
	// GET /ready answers from the ledger as it is now: a complete item is
	// no merged-not-complete, pass or no pass.
	if ds := x.mustReady(t).defects(id, "merged-not-complete"); len(ds) != 0 {
		t.Errorf("GET /ready reports merged-not-complete for %s, which is state:complete: %+v", id, ds)
	}
	x.divergenceGone(t, n, "merged-not-complete", c)
}

// TestE2EReconcileCompleteWithOpenPR: an item completed by its merged pull
// request, then delivered again by a second pull request that is still
// open, is reported; closing that pull request resolves it.
func TestE2EReconcileCompleteWithOpenPR(t *testing.T) {
	t.Parallel()
	x := newE2E(t)
	id := x.create(t, HumanToken, "Retire the v1 webhooks", []string{"priority:P1"})
	n := num(t, id)
	x.MustSettle(t)
	f, p := x.deliver(t, id, "worker-7/c", "feat/retire-v1", "", "main", fmt.Sprintf("Closes #%d", n))
	x.mustComplete(t, WorkerToken, id, f, fmt.Sprintf("pr:%d", p.N))
	x.release(t, WorkerToken, id, f)
	again := x.branchPR(t, "feat/retire-v1-more", "", "main", fmt.Sprintf("Closes #%d (the rest)", n))
	c := x.divergenceShown(t, n, "complete-with-open-pr", fmt.Sprintf("#%d", again.N))

	if err := x.dev().ClosePR(x.Repo, again.N); err != nil {
		t.Fatal(err)
	}
	x.MustSettle(t)
	x.divergenceGone(t, n, "complete-with-open-pr", c)

	// The other form: a pr:<n> tag, added after the completion, naming a
	// pull request that is open. (The ledger may refuse that write: the
	// contract allows either; only an accepted one must be reported.)
	follow := x.branchPR(t, "feat/retire-v1-docs", "", "main", "Docs for the retirement.")
	code, out := x.patchItem(t, PMToken, id, map[string]any{"addTags": []string{fmt.Sprintf("pr:%d", follow.N)}})
	x.MustSettle(t)
	if code != http.StatusOK {
		t.Logf("the ledger refused a pr: tag naming an open pull request on a complete item: %d %v", code, out)
		return
	}
	x.divergenceShown(t, n, "complete-with-open-pr", fmt.Sprintf("#%d", follow.N))
	follow = x.merge(t, follow.N)
	x.divergenceGone(t, n, "complete-with-open-pr", c)
}

// TestE2EReconcileResumableGreenPR: an open pull request delivering an item
// whose claim was released, mergeable, with every other check passed, is
// the cheapest resume and is reported; while another CI's check fails it is
// not; a new claim resolves it.
func TestE2EReconcileResumableGreenPR(t *testing.T) {
	t.Parallel()
	x := newE2E(t)
	dev := x.dev()
	id := x.create(t, HumanToken, "Move sessions to Redis", []string{"priority:P1"})
	n := num(t, id)
	x.MustSettle(t)
	f := x.claimBranch(t, WorkerToken, id, "worker-7/g", "feat/sessions", 600)
	p := x.branchPR(t, "feat/sessions", "", "main", fmt.Sprintf("Refs #%d", n))
	if err := dev.SetMergeable(x.Repo, p.N, ptr(true)); err != nil {
		t.Fatal(err)
	}
	if _, err := dev.ExternalCheck(x.Repo, p.HeadSHA, "ci/test", "failure"); err != nil {
		t.Fatal(err)
	}
	x.release(t, WorkerToken, id, f)
	x.MustSettle(t)

	x.passFlush(t)
	x.reportLacks(t, n, "resumable-green-pr")

	if _, err := dev.ExternalCheck(x.Repo, p.HeadSHA, "ci/test", "success"); err != nil {
		t.Fatal(err)
	}
	x.MustSettle(t)
	c := x.divergenceShown(t, n, "resumable-green-pr", fmt.Sprintf("#%d", p.N))

	x.claimBranch(t, WorkerToken, id, "worker-7/g2", "feat/sessions", 600)
	x.divergenceGone(t, n, "resumable-green-pr", c)
}

// TestE2EReconcilePRWrongBase: an open pull request delivering an item into
// a base other than its baseBranch: is reported; retargeting it resolves it.
func TestE2EReconcilePRWrongBase(t *testing.T) {
	t.Parallel()
	x := newE2E(t)
	x.branch(t, "develop", "")
	id := x.create(t, HumanToken, "Shard the session table", []string{"priority:P1"})
	n := num(t, id)
	x.MustSettle(t)
	x.claimFor(t, WorkerToken, id, "worker-7/w", 600)
	p := x.branchPR(t, "feat/shard", "develop", "develop", fmt.Sprintf("Refs #%d", n))
	c := x.divergenceShown(t, n, "pr-wrong-base", fmt.Sprintf("#%d", p.N), "develop")

	if err := x.dev().RetargetPR(x.Repo, p.N, "main"); err != nil {
		t.Fatal(err)
	}
	x.MustSettle(t)
	x.divergenceGone(t, n, "pr-wrong-base", c)
	x.mustCheck(t, p.HeadSHA, success, id)
}

// TestE2EReconcileEpicChildOnMain: an open pull request delivering an
// epic's member into the default branch is reported; retargeting it to the
// epic branch resolves it.
func TestE2EReconcileEpicChildOnMain(t *testing.T) {
	t.Parallel()
	x := newE2E(t)
	_, ms := x.epic(t, "epic/search", "Index the catalogue")
	id := ms[0]
	n := num(t, id)
	x.claimFor(t, WorkerToken, id, "worker-7/e", 600)
	p := x.branchPR(t, "feat/index", "epic/search", "main", fmt.Sprintf("Refs #%d", n))
	c := x.divergenceShown(t, n, "epic-child-on-main", fmt.Sprintf("#%d", p.N))

	if err := x.dev().RetargetPR(x.Repo, p.N, "epic/search"); err != nil {
		t.Fatal(err)
	}
	x.MustSettle(t)
	x.divergenceGone(t, n, "epic-child-on-main", c)
	x.mustCheck(t, p.HeadSHA, success, id)
}

// TestE2EReconcileIssueClosedItemLive: a human closing the issue of a live
// item is reported (GitHub owns oversight: warden asks, it does not
// change the ledger); reopening it resolves it.
func TestE2EReconcileIssueClosedItemLive(t *testing.T) {
	t.Parallel()
	x := newE2E(t)
	maria := x.Person("maria", "maintain")
	id := x.create(t, HumanToken, "Archive old tenants", []string{"priority:P2"})
	n := num(t, id)
	x.MustSettle(t)
	if _, err := maria.CloseIssue(x.Repo, n, "not_planned"); err != nil {
		t.Fatal(err)
	}
	x.MustSettle(t)
	c := x.divergenceShown(t, n, "issue-closed-item-live")
	if it := x.mustItem(t, id); it.has("state:complete") || it.has("state:parked") {
		t.Errorf("warden changed the ledger for a closed issue: %v", it.Tags)
	}

	if _, err := maria.ReopenIssue(x.Repo, n); err != nil {
		t.Fatal(err)
	}
	x.MustSettle(t)
	x.divergenceGone(t, n, "issue-closed-item-live", c)
}

// TestE2EReconcileCompleteIssueOpen: a complete item whose issue stays
// open (its pull request said Refs, so GitHub did not close it, and
// close_on_complete is off) is reported; closing the issue resolves it.
func TestE2EReconcileCompleteIssueOpen(t *testing.T) {
	t.Parallel()
	x := newE2E(t)
	maria := x.Person("maria", "maintain")
	x.pushSettings(t, x.Person("hana", "write"), "main", "close_on_complete: false\n")
	id := x.create(t, HumanToken, "Drop the v0 importer", []string{"priority:P2"})
	n := num(t, id)
	x.MustSettle(t)
	f, p := x.deliver(t, id, "worker-7/o", "feat/drop-v0", "", "main", fmt.Sprintf("Refs #%d", n))
	x.mustComplete(t, WorkerToken, id, f, fmt.Sprintf("pr:%d", p.N))
	x.release(t, WorkerToken, id, f)
	c := x.divergenceShown(t, n, "complete-issue-open")
	if iss := x.issue(n); iss.State != "open" {
		t.Errorf("warden closed #%d itself (%s) with close_on_complete: false", n, iss.State)
	}

	if _, err := maria.CloseIssue(x.Repo, n, "completed"); err != nil {
		t.Fatal(err)
	}
	x.MustSettle(t)
	x.divergenceGone(t, n, "complete-issue-open", c)
}

// prWithoutItem is GET /ready's pr-without-item defects that name pull
// request n.
func (x *e2e) prWithoutItem(t *testing.T, n int) int {
	t.Helper()
	k := 0
	for _, d := range x.mustReady(t).withCode("pr-without-item") {
		if strings.Contains(plain(d.Detail), fmt.Sprintf("#%d", n)) {
			k++
		}
	}
	return k
}

// TestE2EReconcilePRWithoutItem: an open pull request linked to no item is
// reported in GET /ready's defects and on the dashboard (enabled by a
// human); linking it to an item resolves both.
func TestE2EReconcilePRWithoutItem(t *testing.T) {
	t.Parallel()
	x := newE2E(t)
	x.pushSettings(t, x.Person("hana", "maintain"), "main", "dashboard: true\n")
	p := x.branchPR(t, "chore/deps", "", "main", "Bumps the dependencies.")
	x.passFlush(t)
	if k := x.prWithoutItem(t, p.N); k != 1 {
		t.Errorf("GET /ready reports pr-without-item naming #%d %d times, want once: %+v", p.N, k, x.mustReady(t).Defects)
	}
	ds := x.dashboards()
	if len(ds) != 1 {
		t.Fatalf("%d dashboard issues, want one: %+v", len(ds), ds)
	}
	if body := plain(ds[0].Body); !strings.Contains(body, "pr-without-item") || !strings.Contains(body, fmt.Sprintf("#%d", p.N)) {
		t.Errorf("the dashboard does not list pr-without-item for #%d:\n%s", p.N, body)
	}

	id := x.create(t, HumanToken, "Keep the dependencies current", []string{"priority:P3"})
	x.MustSettle(t)
	x.editBody(t, p.N, fmt.Sprintf("Bumps the dependencies.\n\nRefs #%d", num(t, id)))
	x.passFlush(t)
	if k := x.prWithoutItem(t, p.N); k != 0 {
		t.Errorf("GET /ready still reports pr-without-item for #%d after it was linked", p.N)
	}
	ds2 := x.dashboards()
	if len(ds2) != 1 || ds2[0].N != ds[0].N {
		t.Fatalf("dashboard issues %+v after the fix, want the same one (#%d)", ds2, ds[0].N)
	}
	if body := plain(ds2[0].Body); strings.Contains(body, "pr-without-item") {
		t.Errorf("the dashboard still lists pr-without-item after #%d was linked:\n%s", p.N, body)
	}
}

// TestE2EReconcileIssueGone: an item's issue deleted while warden did not
// receive GitHub's deliveries is found by the next pass (issue-gone, in
// GET /ready: the issue, and with it the report comment, is gone);
// forgetting the item resolves it.
func TestE2EReconcileIssueGone(t *testing.T) {
	t.Parallel()
	x := newE2E(t)
	olive := x.Person("olive", "admin")
	id := x.create(t, HumanToken, "Deprecate the XML feed", []string{"priority:P3"})
	n := num(t, id)
	x.MustSettle(t)
	x.Sim.DropDeliveries(true)
	err := olive.DeleteIssue(x.Repo, n)
	x.MustSettle(t)
	x.Sim.DropDeliveries(false)
	if err != nil {
		t.Fatal(err)
	}
	x.passFlush(t)
	if ds := x.mustReady(t).defects(id, "issue-gone"); len(ds) != 1 {
		t.Fatalf("GET /ready reports issue-gone for %s %d times after the pass, want once: %+v", id, len(ds), x.mustReady(t).Defects)
	}

	code, err := x.API(context.Background(), HumanToken, http.MethodDelete, "/items/"+id, nil, nil)
	if err != nil || code >= 300 {
		t.Fatalf("DELETE /items/%s: %d %v", id, code, err)
	}
	x.MustSettle(t)
	x.passFlush(t)
	if ds := x.mustReady(t).defects(id, "issue-gone"); len(ds) != 0 {
		t.Errorf("GET /ready still reports issue-gone for the forgotten %s: %+v", id, ds)
	}
	if _, ok := x.item(t, id); ok {
		t.Errorf("%s is still an item after DELETE", id)
	}
}

// TestE2EReconcileHalfWrittenPark: a parked item whose parked label was
// removed by an agent while warden was not receiving deliveries (the tag
// has effect; the label follows) gets its label back from the pass, and
// stays parked.
func TestE2EReconcileHalfWrittenPark(t *testing.T) {
	t.Parallel()
	x := newE2E(t)
	bot := x.agent("tidy-bot[bot]", "write")
	id := x.create(t, HumanToken, "Replace the PDF engine", []string{"priority:P1"})
	n := num(t, id)
	x.MustSettle(t)
	if code, out := x.patchItem(t, PMToken, id, map[string]any{"addTags": []string{"state:parked", "ruling-owner:pm", "ruling-topic:engine-choice"}}); code != http.StatusOK {
		t.Fatalf("pm park answered %d %v", code, out)
	}
	x.MustSettle(t)
	if !x.labels(n)[lblParked] {
		t.Fatalf("setup: #%d lacks the parked label after the park: %v", n, x.labels(n))
	}
	x.Sim.DropDeliveries(true)
	_, err := bot.RemoveLabel(x.Repo, n, lblParked)
	x.MustSettle(t)
	x.Sim.DropDeliveries(false)
	if err != nil {
		t.Fatal(err)
	}
	if x.labels(n)[lblParked] {
		t.Fatal("setup: the label is still there")
	}
	x.passFlush(t)
	if !x.labels(n)[lblParked] {
		t.Errorf("#%d: the pass did not put the parked label back on the parked item: %v", n, x.labels(n))
	}
	parkedWith(t, x.mustItem(t, id), "pm", "engine-choice")
}

// TestE2EReconcilePoisonBackstop: an item whose third attempt's holder
// vanished (its claim abandoned, so no release parks it) is poison nobody
// parked: the pass parks it (tags, label, one park comment).
func TestE2EReconcilePoisonBackstop(t *testing.T) {
	t.Parallel()
	x := newE2E(t)
	worker := x.Sim.As("worker-7[bot]")
	id := x.create(t, HumanToken, "Rebuild the search index", []string{"priority:P1"})
	n := num(t, id)
	x.MustSettle(t)
	x.cycle(t, WorkerToken, "worker-7/b0", worker, id)
	x.cycle(t, PMToken, "pm/b1", x.Sim.As("pm-agent[bot]"), id)
	f := x.claimFor(t, WorkerToken, id, "worker-7/b2", 60)
	x.say(t, worker, n, x.marker(id, "worker-7/b2", f))
	x.MustSettle(t)
	if it := x.mustItem(t, id); it.has("state:parked") {
		t.Fatalf("setup: parked while the third claim is held: %v", it.Tags)
	}
	x.clk.Advance(pastQuarantine)

	r := x.pass(t, mirror.ReconcileOptions{})
	if !r.Complete {
		t.Errorf("pass did not complete: %q", r.Stopped)
	}
	x.mustParkAt(t, id, 3)
	x.flush(t)
	if pcs := x.parkComments(n); len(pcs) != 1 {
		t.Errorf("#%d has %d park comments after the pass and the sweep, want one", n, len(pcs))
	}
}

// TestE2EReconcileQuiet: a second pass with nothing changed on GitHub or in
// the ledger makes no write (as the pass counts them, and as GitHub counts
// them).
func TestE2EReconcileQuiet(t *testing.T) {
	t.Parallel()
	x := newE2E(t)
	x.pushSettings(t, x.Person("hana", "maintain"), "main", "dashboard: true\n")
	id := x.create(t, HumanToken, "Tune the connection pool", []string{"priority:P1"})
	n := num(t, id)
	x.MustSettle(t)
	f := x.claimBranch(t, WorkerToken, id, "worker-7/q", "feat/pool", 600)
	// The worker announces its claim (else claimed-unmarked appears, rightly,
	// once the marker's grace has passed: a change, not a quiet pass).
	x.say(t, x.agent("worker-7[bot]", "write"), n, x.marker(id, "worker-7/q", f))
	x.branchPR(t, "feat/pool", "", "main", fmt.Sprintf("Refs #%d", n))
	x.branchPR(t, "chore/lint", "", "main", "Lint fixes.")
	x.passFlush(t)
	x.passFlush(t)

	before := x.simWrites()
	r := x.pass(t, mirror.ReconcileOptions{})
	if !r.Complete {
		t.Errorf("quiet pass did not complete: %q", r.Stopped)
	}
	if r.Calls.Writes != 0 {
		t.Errorf("a pass with nothing changed made %d writes (actions %v)", r.Calls.Writes, r.Actions)
	}
	if after := x.simWrites(); after != before {
		t.Errorf("GitHub counted %d writes during a pass with nothing changed (actions %v)", after-before, r.Actions)
	}
}

// resumable makes k items, each with an open, green, mergeable pull request
// and a released claim (resume candidates, which only a pass's reads of
// the checks find). It returns their ids and pull requests.
func (x *e2e) resumable(t *testing.T, k int) ([]string, []pull) {
	t.Helper()
	var ids []string
	var prs []pull
	for i := range k {
		id := x.create(t, HumanToken, fmt.Sprintf("Resumable work %d", i), []string{"priority:P2"})
		x.MustSettle(t)
		f := x.claimBranch(t, WorkerToken, id, fmt.Sprintf("worker-7/r%d", i), fmt.Sprintf("feat/resume-%d", i), 600)
		p := x.branchPR(t, fmt.Sprintf("feat/resume-%d", i), "", "main", fmt.Sprintf("Refs #%d", num(t, id)))
		if err := x.dev().SetMergeable(x.Repo, p.N, ptr(true)); err != nil {
			t.Fatal(err)
		}
		if _, err := x.dev().ExternalCheck(x.Repo, p.HeadSHA, "ci/test", "success"); err != nil {
			t.Fatal(err)
		}
		x.release(t, WorkerToken, id, f)
		x.MustSettle(t)
		ids, prs = append(ids, id), append(prs, p)
	}
	return ids, prs
}

// TestE2EReconcileBudget: a pass whose request budget runs out stops, says
// so, and leaves the rest; the next pass resumes and completes, and then
// finds what the first could not.
func TestE2EReconcileBudget(t *testing.T) {
	t.Parallel()
	x := newE2E(t)
	ids, _ := x.resumable(t, 3)

	r := x.pass(t, mirror.ReconcileOptions{Budget: 2})
	if r.Complete || r.Stopped == "" {
		t.Errorf("a pass with a budget of 2 requests: complete %v, stopped %q; want incomplete and saying where it stopped", r.Complete, r.Stopped)
	}
	if got := r.Calls.Reads + r.Calls.Writes; got > 2 {
		t.Errorf("a pass with a budget of 2 made %d requests (%+v)", got, r.Calls)
	}

	r = x.pass(t, mirror.ReconcileOptions{})
	if !r.Complete || r.Stopped != "" {
		t.Errorf("the next pass: complete %v, stopped %q; want complete", r.Complete, r.Stopped)
	}
	x.flush(t)
	for _, id := range ids {
		x.mustReportWith(t, num(t, id), []string{"resumable-green-pr"})
	}
}

// TestE2EReconcileDryRun: a dry-run pass reports the divergences it finds
// and writes nothing to GitHub; a real pass then shows them.
func TestE2EReconcileDryRun(t *testing.T) {
	t.Parallel()
	x := newE2E(t)
	ids, _ := x.resumable(t, 1)
	id := ids[0]
	n := num(t, id)
	x.MustSettle(t)

	before := x.simWrites()
	r := x.pass(t, mirror.ReconcileOptions{DryRun: true})
	if !r.Complete {
		t.Errorf("dry-run pass did not complete: %q", r.Stopped)
	}
	if findings(r, "resumable-green-pr", id) == 0 {
		t.Errorf("the dry-run pass does not report resumable-green-pr for %s: %+v", id, r.Findings)
	}
	if r.Calls.Writes != 0 {
		t.Errorf("the dry-run pass made %d writes (actions %v)", r.Calls.Writes, r.Actions)
	}
	if after := x.simWrites(); after != before {
		t.Errorf("GitHub counted %d writes during the dry-run pass", after-before)
	}
	x.flush(t)
	x.reportLacks(t, n, "resumable-green-pr")

	x.passFlush(t)
	x.mustReportWith(t, n, []string{"resumable-green-pr"})
}

// TestE2EReconcileDashboard: with the dashboard enabled by a human, the
// pass keeps one issue titled "Backlog dashboard": created once, edited in
// place when something changed, untouched when nothing did.
func TestE2EReconcileDashboard(t *testing.T) {
	t.Parallel()
	x := newE2E(t)
	x.pushSettings(t, x.Person("hana", "maintain"), "main", "dashboard: true\n")
	id := x.create(t, HumanToken, "Trim the Docker image", []string{"priority:P2"})
	x.MustSettle(t)
	x.pass(t, mirror.ReconcileOptions{})
	ds := x.dashboards()
	if len(ds) != 1 {
		t.Fatalf("%d dashboard issues after the first pass, want one: %+v", len(ds), ds)
	}
	if ds[0].Login != x.Sim.BotLogin() {
		t.Errorf("the dashboard was opened by %s, want warden's bot %s", ds[0].Login, x.Sim.BotLogin())
	}
	first := ds[0]

	// Nothing changed: untouched.
	x.pass(t, mirror.ReconcileOptions{})
	if ds := x.dashboards(); len(ds) != 1 || ds[0] != first {
		t.Errorf("the dashboard changed on a pass with nothing changed: was %+v, now %+v", first, ds)
	}

	// Something changed: a pull request linked to nothing, a claim.
	p := x.branchPR(t, "chore/ci", "", "main", "CI tweaks.")
	x.claimFor(t, WorkerToken, id, "worker-7/d", 600)
	x.MustSettle(t)
	x.pass(t, mirror.ReconcileOptions{})
	ds = x.dashboards()
	if len(ds) != 1 || ds[0].N != first.N {
		t.Fatalf("dashboard issues %+v after a change, want #%d edited in place", ds, first.N)
	}
	second := ds[0]
	if second.Body == first.Body {
		t.Errorf("the dashboard was not updated after a change")
	}
	if body := plain(second.Body); !strings.Contains(body, fmt.Sprintf("#%d", p.N)) {
		t.Errorf("the dashboard does not name the pull request #%d linked to nothing:\n%s", p.N, body)
	}

	x.pass(t, mirror.ReconcileOptions{})
	if ds := x.dashboards(); len(ds) != 1 || ds[0] != second {
		t.Errorf("the dashboard changed on a pass with nothing changed: was %+v, now %+v", second, ds)
	}
}
