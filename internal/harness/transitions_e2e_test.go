package harness

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/internal/ghsim"
	"github.com/wardenhq/warden/mirror/store"
)

// End-to-end tests of the transitions warden mirrors after an API write
// (issue 19, "Mirroring transitions"; CONTRACT.md §2 close_on_complete, §9):
// partOf written by PATCH as native sub-issues, the close of a completed
// item's issue, and a pm's edge removal in the report comment. Each reads
// what the simulator's GitHub became.

// parentOf is issue n's native parent on the simulated GitHub (0: none),
// and subIssues the numbers of issue n's sub-issues.
func (x *e2e) parentOf(n int) int {
	p := 0
	x.Sim.Locked(func() {
		if i := x.Repo.Issues[n]; i != nil && i.Parent != nil {
			p = i.Parent.Number
		}
	})
	return p
}

func (x *e2e) subIssues(n int) []int {
	var out []int
	x.Sim.Locked(func() {
		if i := x.Repo.Issues[n]; i != nil {
			for _, c := range i.SubIssues {
				out = append(out, c.Number)
			}
		}
	})
	return out
}

// issueState is issue n's state and state_reason on the simulated GitHub.
func (x *e2e) issueState(n int) (string, string) {
	var st, reason string
	x.Sim.Locked(func() {
		if i := x.Repo.Issues[n]; i != nil {
			st, reason = i.State, i.StateReason
		}
	})
	return st, reason
}

// countRequests counts the REST requests warden makes while f runs whose
// "METHOD pattern" satisfies match.
func (x *e2e) countRequests(t *testing.T, match func(method, pattern string) bool, f func()) int {
	t.Helper()
	var mu sync.Mutex
	n := 0
	x.Sim.Observe(func(ex ghsim.Exchange) {
		if match(ex.Method, ex.Pattern) {
			mu.Lock()
			n++
			mu.Unlock()
		}
	}, nil)
	defer x.Sim.Observe(nil, nil)
	f()
	mu.Lock()
	defer mu.Unlock()
	return n
}

// partOfLinks is the item's partOf targets as the API shows them.
func (x *e2e) partOfLinks(t *testing.T, id string) []string {
	t.Helper()
	var it struct {
		Links []struct {
			Rel    string `json:"rel"`
			Target string `json:"target"`
		} `json:"links"`
	}
	if code, err := x.API(context.Background(), HumanToken, http.MethodGet, "/items/"+id, nil, &it); err != nil || code != http.StatusOK {
		t.Fatalf("GET /items/%s: %d %v", id, code, err)
	}
	var out []string
	for _, l := range it.Links {
		if l.Rel == "partOf" {
			out = append(out, l.Target)
		}
	}
	return out
}

// moveBody is the PATCH body that puts an item under epic (on branch)
// from the default branch, or (epic "") out of from's epic back to main.
func moveBody(addEpic, removeEpic, addBase, removeBase string) map[string]any {
	b := map[string]any{}
	if addEpic != "" {
		b["addLinks"] = []map[string]string{{"rel": "partOf", "target": addEpic}}
	}
	if removeEpic != "" {
		b["removeLinks"] = []map[string]string{{"rel": "partOf", "target": removeEpic}}
	}
	if addBase != "" {
		b["addTags"] = []string{"baseBranch:" + addBase}
		b["removeTags"] = []string{"baseBranch:" + removeBase}
	}
	return b
}

// TestE2ETransitionsPartOfByPatch: a partOf added by PATCH makes the item's
// issue a native sub-issue of the epic's issue, a move between epics moves
// it, a removal detaches it; a parent a person set on GitHub is not
// replaced (409 sub-issue-refused, nothing written), and a failing GitHub
// answers 502 with nothing written in the ledger either.
func TestE2ETransitionsPartOfByPatch(t *testing.T) {
	t.Parallel()
	x := newE2E(t)
	x.branch(t, "epic/e", "")
	x.branch(t, "epic/f", "")
	e := x.create(t, HumanToken, "Epic E", []string{"priority:P1", "baseBranch:epic/e"})
	f := x.create(t, HumanToken, "Epic F", []string{"priority:P1", "baseBranch:epic/f"})
	a := x.create(t, HumanToken, "Member A", []string{"priority:P2"})
	ne, nf, na := num(t, e), num(t, f), num(t, a)
	x.MustSettle(t)
	if p := x.parentOf(na); p != 0 {
		t.Fatalf("#%d has parent #%d before any partOf", na, p)
	}

	// Added: a sub-issue of E, with one read and one write.
	var code int
	var out map[string]any
	calls := x.countRequests(t, func(m, p string) bool { return strings.Contains(p, "/issues/{issue_number}") }, func() {
		code, out = x.patchItem(t, PMToken, a, moveBody(e, "", "epic/e", "main"))
	})
	if code != http.StatusOK {
		t.Fatalf("PATCH partOf %s answered %d %v", e, code, out)
	}
	x.MustSettle(t)
	if p := x.parentOf(na); p != ne {
		t.Errorf("after partOf %s by PATCH, #%d's parent is #%d, want #%d", e, na, p, ne)
	}
	if s := x.subIssues(ne); !slices.Equal(s, []int{na}) {
		t.Errorf("epic #%d's sub-issues %v, want [%d]", ne, s, na)
	}
	t.Logf("GitHub requests on issues made by the PATCH that added partOf: %d", calls)
	if calls != 2 {
		t.Errorf("adding partOf made %d issue requests, want 2 (read the issue, add the sub-issue)", calls)
	}

	// Moved: from E to F in one PATCH (replace_parent).
	if code, out = x.patchItem(t, PMToken, a, moveBody(f, e, "epic/f", "epic/e")); code != http.StatusOK {
		t.Fatalf("PATCH moving %s to %s answered %d %v", a, f, code, out)
	}
	x.MustSettle(t)
	if p := x.parentOf(na); p != nf {
		t.Errorf("after the move, #%d's parent is #%d, want #%d", na, p, nf)
	}
	if s := x.subIssues(ne); len(s) != 0 {
		t.Errorf("epic #%d still lists sub-issues %v after the move", ne, s)
	}

	// Removed: detached from F.
	if code, out = x.patchItem(t, PMToken, a, moveBody("", f, "main", "epic/f")); code != http.StatusOK {
		t.Fatalf("PATCH removing partOf answered %d %v", code, out)
	}
	x.MustSettle(t)
	if p := x.parentOf(na); p != 0 {
		t.Errorf("after partOf was removed, #%d's parent is #%d, want none", na, p)
	}
	if s := x.subIssues(nf); len(s) != 0 {
		t.Errorf("epic #%d still lists sub-issues %v", nf, s)
	}

	// A parent a person set on GitHub is not warden's to replace.
	maria := x.Person("maria", "maintain")
	other, err := maria.OpenIssue(x.Repo, "Tracking issue", "not an item")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := maria.AddSubIssue(x.Repo, other.Number, na); err != nil {
		t.Fatal(err)
	}
	x.MustSettle(t)
	code, out = x.patchItem(t, PMToken, a, moveBody(e, "", "epic/e", "main"))
	if code != http.StatusConflict || out["reason"] != "sub-issue-refused" {
		t.Errorf("PATCH partOf onto a foreign parent answered %d %v, want 409 sub-issue-refused", code, out)
	} else if d, _ := out["detail"].(string); !strings.Contains(d, fmt.Sprintf("#%d", other.Number)) {
		t.Errorf("refusal %q does not name the parent #%d", d, other.Number)
	}
	if ls := x.partOfLinks(t, a); len(ls) != 0 {
		t.Errorf("a refused partOf was written to the ledger: %v", ls)
	}
	if p := x.parentOf(na); p != other.Number {
		t.Errorf("#%d's parent is #%d after the refusal, want the person's #%d kept", na, p, other.Number)
	}
	if _, err := maria.RemoveSubIssue(x.Repo, other.Number, na); err != nil {
		t.Fatal(err)
	}
	x.MustSettle(t)

	// GitHub failing: 502, nothing written; the retry succeeds.
	x.Sim.FailNext(1, http.StatusBadGateway, http.MethodPost, fmt.Sprintf("/repos/%s/issues/%d/sub_issues", x.Repo.FullName, ne))
	code, out = x.patchItem(t, PMToken, a, moveBody(e, "", "epic/e", "main"))
	if code != http.StatusBadGateway {
		t.Errorf("PATCH partOf while GitHub fails answered %d %v, want 502", code, out)
	}
	if ls := x.partOfLinks(t, a); len(ls) != 0 {
		t.Errorf("partOf was written though GitHub failed: %v", ls)
	}
	if code, out = x.patchItem(t, PMToken, a, moveBody(e, "", "epic/e", "main")); code != http.StatusOK {
		t.Fatalf("the retried PATCH answered %d %v", code, out)
	}
	x.MustSettle(t)
	if p := x.parentOf(na); p != ne {
		t.Errorf("after the retry, #%d's parent is #%d, want #%d", na, p, ne)
	}
}

// TestE2ETransitionsPartOfDryRun: under dry_run a partOf written by PATCH
// is in the ledger and nothing is written to GitHub; once dry_run is off,
// the timer pass brings the sub-issue in step.
func TestE2ETransitionsPartOfDryRun(t *testing.T) {
	t.Parallel()
	x := newE2E(t)
	hana := x.Person("hana", "write")
	x.branch(t, "epic/e", "")
	e := x.create(t, HumanToken, "Epic E", []string{"priority:P1", "baseBranch:epic/e"})
	a := x.create(t, HumanToken, "Member A", []string{"priority:P2"})
	ne, na := num(t, e), num(t, a)
	x.MustSettle(t)
	x.pushSettings(t, hana, "main", "dry_run: true\n")
	x.MustSettle(t)

	writes := x.simWrites()
	if code, out := x.patchItem(t, PMToken, a, moveBody(e, "", "epic/e", "main")); code != http.StatusOK {
		t.Fatalf("PATCH partOf under dry_run answered %d %v", code, out)
	}
	x.MustSettle(t)
	x.flush(t)
	if p := x.parentOf(na); p != 0 {
		t.Errorf("dry_run: #%d got parent #%d on GitHub", na, p)
	}
	if w := x.simWrites() - writes; w != 0 {
		t.Errorf("dry_run: warden made %d GitHub writes after the PATCH, want 0", w)
	}

	x.pushSettings(t, hana, "main", "dry_run: false\n")
	x.MustSettle(t)
	x.flush(t)
	x.clk.Advance(3 * 60e9)
	x.MustSweep(t)
	if p := x.parentOf(na); p != ne {
		t.Errorf("after dry_run ended, #%d's parent is #%d, want #%d", na, p, ne)
	}
}

// TestE2ETransitionsCloseOnComplete: recording state:complete closes the
// item's open issue as completed (a PR that said Refs did not), with one
// write; a person's reopening is reported (reopened-after-complete, naming
// them) and never fought; closing it again ends the report. A close GitHub
// failed is retried by the timer pass.
func TestE2ETransitionsCloseOnComplete(t *testing.T) {
	t.Parallel()
	x := newE2E(t)
	maria := x.Person("maria", "maintain")
	id := x.create(t, HumanToken, "Drop the v0 importer", []string{"priority:P2"})
	n := num(t, id)
	x.MustSettle(t)
	fence, p := x.deliver(t, id, "worker-7/o", "feat/drop-v0", "", "main", fmt.Sprintf("Refs #%d", n))
	if st, _ := x.issueState(n); st != "open" {
		t.Fatalf("#%d is %s before the completion; a Refs PR must not close it", n, st)
	}
	closes := x.countRequests(t, func(m, pat string) bool {
		return m == http.MethodPatch && pat == "/repos/{owner}/{repo}/issues/{issue_number}"
	}, func() {
		x.mustComplete(t, WorkerToken, id, fence, fmt.Sprintf("pr:%d", p.N))
	})
	if st, reason := x.issueState(n); st != "closed" || reason != "completed" {
		t.Errorf("after state:complete, #%d is %s (%s), want closed (completed)", n, st, reason)
	}
	t.Logf("issue PATCH requests made by the completion: %d", closes)
	if closes != 1 {
		t.Errorf("the completion made %d issue PATCH requests, want 1", closes)
	}
	x.release(t, WorkerToken, id, fence)
	x.MustSettle(t)

	// A person reopens it: reported, not closed again.
	if _, err := maria.ReopenIssue(x.Repo, n); err != nil {
		t.Fatal(err)
	}
	x.MustSettle(t)
	x.flush(t)
	x.clk.Advance(3 * 60e9)
	x.MustSweep(t)
	x.flush(t)
	if st, _ := x.issueState(n); st != "open" {
		t.Errorf("warden closed #%d again after maria reopened it (%s)", n, st)
	}
	body := x.mustReportWith(t, n, []string{"reopened-after-complete"}, "maria")
	if line := findingLine(body, "reopened-after-complete"); !strings.Contains(line, "does not close it again") {
		t.Errorf("reopened-after-complete line %q does not say warden leaves it open", line)
	}

	// Closed again: the report line leaves.
	if _, err := maria.CloseIssue(x.Repo, n, "completed"); err != nil {
		t.Fatal(err)
	}
	x.MustSettle(t)
	x.flush(t)
	x.reportLacks(t, n, "reopened-after-complete")

	// A close GitHub failed is finished by the timer pass.
	id2 := x.create(t, HumanToken, "Drop the v1 importer", []string{"priority:P2"})
	n2 := num(t, id2)
	x.MustSettle(t)
	f2, p2 := x.deliver(t, id2, "worker-7/q", "feat/drop-v1", "", "main", fmt.Sprintf("Refs #%d", n2))
	x.Sim.FailNext(1, http.StatusBadGateway, http.MethodPatch, fmt.Sprintf("/repos/%s/issues/%d", x.Repo.FullName, n2))
	x.mustComplete(t, WorkerToken, id2, f2, fmt.Sprintf("pr:%d", p2.N))
	if st, _ := x.issueState(n2); st != "open" {
		t.Fatalf("#%d is %s though its close failed", n2, st)
	}
	x.clk.Advance(3 * 60e9)
	x.MustSweep(t)
	if st, reason := x.issueState(n2); st != "closed" || reason != "completed" {
		t.Errorf("after the timer pass, #%d is %s (%s), want closed (completed)", n2, st, reason)
	}
}

// TestE2ETransitionsCloseOnCompleteOff: with close_on_complete: false the
// issue stays open after the completion.
func TestE2ETransitionsCloseOnCompleteOff(t *testing.T) {
	t.Parallel()
	x := newE2E(t)
	x.pushSettings(t, x.Person("hana", "write"), "main", "close_on_complete: false\n")
	id := x.create(t, HumanToken, "Drop the v2 importer", []string{"priority:P2"})
	n := num(t, id)
	x.MustSettle(t)
	fence, p := x.deliver(t, id, "worker-7/o", "feat/drop-v2", "", "main", fmt.Sprintf("Refs #%d", n))
	x.mustComplete(t, WorkerToken, id, fence, fmt.Sprintf("pr:%d", p.N))
	x.clk.Advance(3 * 60e9)
	x.MustSweep(t)
	if st, _ := x.issueState(n); st != "open" {
		t.Errorf("close_on_complete: false, yet #%d is %s", n, st)
	}
}

// TestE2ETransitionsEdgeRemoved: a pm token's removal of a blockedBy edge
// is listed on the item's report comment (edge-removed: the edge, the
// token's name and role, the time) until a human runs /backlog resolve; a
// removal the pm undoes leaves the list; a human token's removal is never
// listed.
func TestE2ETransitionsEdgeRemoved(t *testing.T) {
	t.Parallel()
	x := newE2E(t)
	maria := x.Person("maria", "maintain")
	b := x.create(t, HumanToken, "Blocker", []string{"priority:P1"})
	c := x.create(t, HumanToken, "Other blocker", []string{"priority:P1"})
	a := x.create(t, HumanToken, "Dependent", []string{"priority:P1"},
		map[string]string{"rel": "blockedBy", "target": b}, map[string]string{"rel": "blockedBy", "target": c})
	na := num(t, a)
	x.MustSettle(t)
	edge := func(target string) map[string]string { return map[string]string{"rel": "blockedBy", "target": target} }

	if code, out := x.patchItem(t, PMToken, a, map[string]any{"removeLinks": []map[string]string{edge(b)}}); code != http.StatusOK {
		t.Fatalf("pm removing blockedBy %s answered %d %v", b, code, out)
	}
	x.MustSettle(t)
	x.flush(t)
	body := x.mustReportWith(t, na, []string{"edge-removed"}, "blockedBy "+b, "pm (pm token)")
	if line := findingLine(body, "edge-removed"); !strings.Contains(line, x.clk.Now().UTC().Format("2006-01-02T")) {
		t.Errorf("edge-removed line %q does not say when", line)
	}

	// Restored by the pm: the line leaves.
	if code, out := x.patchItem(t, PMToken, a, map[string]any{"addLinks": []map[string]string{edge(b)}}); code != http.StatusOK {
		t.Fatalf("pm restoring blockedBy %s answered %d %v", b, code, out)
	}
	x.MustSettle(t)
	x.flush(t)
	x.reportLacks(t, na, "edge-removed")

	// Removed again, then acknowledged with /backlog resolve.
	if code, out := x.patchItem(t, PMToken, a, map[string]any{"removeLinks": []map[string]string{edge(b)}}); code != http.StatusOK {
		t.Fatalf("pm removing blockedBy %s again answered %d %v", b, code, out)
	}
	x.MustSettle(t)
	x.flush(t)
	x.mustReportWith(t, na, []string{"edge-removed"}, "blockedBy "+b)
	cm := x.say(t, maria, na, "/backlog resolve")
	x.MustSettle(t)
	x.mustReact(t, na, cm, "+1")
	x.flush(t)
	x.reportLacks(t, na, "edge-removed")

	// A human token's removal is the human's judgement: not listed.
	if code, out := x.patchItem(t, HumanToken, a, map[string]any{"removeLinks": []map[string]string{edge(c)}}); code != http.StatusOK {
		t.Fatalf("human removing blockedBy %s answered %d %v", c, code, out)
	}
	x.MustSettle(t)
	x.flush(t)
	x.reportLacks(t, na, "edge-removed")
}

// TestE2ETransitionsRecordsWithoutTheirWrite: the records written before a
// ledger write are what a crash leaves behind. A completion and a partOf
// recorded for a write the ledger never made (the request stopped between
// the two) are dropped by the timer pass once their grace is over: the
// issue is not closed, and its sub-issue is brought back to what the
// ledger says. Before the grace is over the pass leaves them to the
// request.
func TestE2ETransitionsRecordsWithoutTheirWrite(t *testing.T) {
	t.Parallel()
	x := newE2E(t)
	ctx := context.Background()
	x.branch(t, "epic/e", "")
	e := x.create(t, HumanToken, "Epic E", []string{"priority:P1", "baseBranch:epic/e"})
	id := x.create(t, HumanToken, "Member", []string{"priority:P2"})
	ne, n := num(t, e), num(t, id)
	x.MustSettle(t)
	repo, err := x.Service.Ledger.RepoByID(ctx, x.Repo.ID)
	if err != nil {
		t.Fatal(err)
	}
	before, err := x.Service.Ledger.Get(ctx, repo.ID, gating.ItemID(id))
	if err != nil {
		t.Fatal(err)
	}
	p := store.Patch{AddTags: []string{"state:complete", "baseBranch:epic/e"}, RemoveTags: []string{"baseBranch:main"},
		AddLinks: []gating.Link{{Rel: gating.PartOf, Target: e}}}
	if _, err := x.Service.Mirror.BeforeUpdate(ctx, repo, before, p, store.Actor{Role: gating.RolePM, Name: "pm"}); err != nil {
		t.Fatalf("BeforeUpdate: %v", err)
	}
	// The request stops here: GitHub has the sub-issue, the ledger nothing.
	if got := x.parentOf(n); got != ne {
		t.Fatalf("BeforeUpdate did not attach #%d under #%d first (parent #%d)", n, ne, got)
	}
	x.MustSweep(t)
	if c, err := x.Service.Acts.CompleteCloseOf(ctx, repo.ID, n); err != nil || c == nil {
		t.Errorf("the timer pass took up the completion record inside its grace: %+v %v", c, err)
	}
	x.clk.Advance(3 * 60e9)
	x.MustSweep(t)
	if st, _ := x.issueState(n); st != "open" {
		t.Errorf("#%d was closed for a completion the ledger never recorded (%s)", n, st)
	}
	if c, err := x.Service.Acts.CompleteCloseOf(ctx, repo.ID, n); err != nil || c != nil {
		t.Errorf("the completion record of a write never made was kept: %+v %v", c, err)
	}
	if got := x.parentOf(n); got != 0 {
		t.Errorf("#%d still has parent #%d, which the ledger does not name", n, got)
	}
	if s, err := x.Service.Acts.SubIssueSyncs(ctx, repo.ID, time.Time{}, 10); err != nil || len(s) != 0 {
		t.Errorf("sub-issue records left after the pass: %+v %v", s, err)
	}
}
