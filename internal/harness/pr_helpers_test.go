package harness

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wardenhq/warden/internal/ghsim"
	"github.com/wardenhq/warden/mirror"
)

// Shared helpers of the end-to-end tests written from CONTRACT.md §8 (the
// `backlog` check run), §9 (completion, groupings) and the reconcile pass
// (lattice-source-extract.md §4.5): git acts in the simulator, the check
// runs GitHub shows on a head commit, completion through the agent API, and
// one reconcile pass.

// checkName is warden's check run's name (CONTRACT.md §8).
const checkName = "backlog"

// fileSeq makes every pushed file unique, so each push is a new commit.
var fileSeq atomic.Int64

// dev is a developer: a human with write access who pushes branches and
// opens, edits and merges pull requests.
func (x *e2e) dev() *ghsim.Actor { return x.Person("dev", "write") }

// branch creates branch from from (a branch or SHA; "" = the default
// branch) with one new commit, as dev, settles, and returns its head.
func (x *e2e) branch(t *testing.T, name, from string) string {
	t.Helper()
	x.MustSettle(t)
	sha, err := x.dev().Push(x.Repo, name, from, map[string]string{
		fmt.Sprintf("work/%s/%d.txt", strings.ReplaceAll(name, "/", "-"), fileSeq.Add(1)): "work on " + name,
	}, "work on "+name)
	if err != nil {
		t.Fatalf("push %s from %q: %v", name, from, err)
	}
	x.MustSettle(t)
	return sha
}

// commit pushes one more commit onto an existing branch as dev, settles,
// and returns the new head.
func (x *e2e) commit(t *testing.T, name string) string {
	t.Helper()
	return x.branch(t, name, "")
}

// pull is a copy of a simulator pull request's state.
type pull struct {
	N                    int
	Head, Base, HeadSHA  string
	State                string
	Merged               bool
	MergeCommitSHA, Body string
}

// pr reads pull request n from the simulator.
func (x *e2e) pr(t *testing.T, n int) pull {
	t.Helper()
	var out pull
	x.Sim.Locked(func() {
		p := x.Repo.Pulls[n]
		if p == nil {
			return
		}
		out = pull{N: n, Head: p.Head, Base: p.Base, HeadSHA: p.HeadSHA, State: p.Issue.State, Merged: p.Merged,
			MergeCommitSHA: p.MergeCommitSHA, Body: p.Issue.Body}
	})
	if out.N == 0 {
		t.Fatalf("no pull request #%d in the simulator", n)
	}
	return out
}

// openPR opens a pull request from head into base with body as dev (the
// branch must exist), settles, and returns it.
func (x *e2e) openPR(t *testing.T, head, base, body string) pull {
	t.Helper()
	x.MustSettle(t)
	p, err := x.dev().OpenPR(x.Repo, head, base, "Change on "+head, body, false)
	if err != nil {
		t.Fatalf("open a pull request %s -> %s: %v", head, base, err)
	}
	x.MustSettle(t)
	return x.pr(t, p.Issue.Number)
}

// branchPR pushes a new branch head from from ("" = the default branch)
// and opens a pull request from it into base with body.
func (x *e2e) branchPR(t *testing.T, head, from, base, body string) pull {
	t.Helper()
	x.branch(t, head, from)
	return x.openPR(t, head, base, body)
}

// merge merges pull request n (merge commit) as dev and settles.
func (x *e2e) merge(t *testing.T, n int) pull {
	t.Helper()
	x.MustSettle(t)
	if _, err := x.dev().MergePR(x.Repo, n, "merge"); err != nil {
		t.Fatalf("merge #%d: %v", n, err)
	}
	x.MustSettle(t)
	return x.pr(t, n)
}

// editBody replaces pull request n's body as dev and settles.
func (x *e2e) editBody(t *testing.T, n int, body string) {
	t.Helper()
	x.MustSettle(t)
	if err := x.dev().EditPR(x.Repo, n, nil, &body); err != nil {
		t.Fatalf("edit #%d: %v", n, err)
	}
	x.MustSettle(t)
}

// checkRun is a copy of one of the App's check runs.
type checkRun struct {
	ID                               int64
	Name, HeadSHA, Status            string
	Conclusion, Title, Summary, Text string
	CompletedAt                      time.Time
}

// text is what a person reads of the run: its title and summary, without
// zero-width characters and Markdown escapes.
func (c checkRun) text() string { return plain(c.Title + "\n" + c.Summary) }

// checkRuns is the App's `backlog` check runs on sha, oldest first (other
// CIs' runs are left out).
func (x *e2e) checkRuns(sha string) []checkRun {
	var out []checkRun
	x.Sim.Locked(func() {
		for _, r := range x.Repo.CheckRuns {
			if r.App != nil || r.Name != checkName || r.HeadSHA != sha {
				continue
			}
			c := checkRun{ID: r.ID, Name: r.Name, HeadSHA: r.HeadSHA, Status: r.Status, Conclusion: r.Conclusion,
				Title: r.Title, Summary: r.Summary, Text: r.Text}
			if r.CompletedAt != nil {
				c.CompletedAt = *r.CompletedAt
			}
			out = append(out, c)
		}
	})
	slices.SortFunc(out, func(a, b checkRun) int { return int(a.ID - b.ID) })
	return out
}

// allBacklogRuns counts the App's `backlog` check runs by head commit.
func (x *e2e) allBacklogRuns() map[string]int {
	out := map[string]int{}
	x.Sim.Locked(func() {
		for _, r := range x.Repo.CheckRuns {
			if r.App == nil && r.Name == checkName {
				out[r.HeadSHA]++
			}
		}
	})
	return out
}

// mustCheck checks that sha carries exactly one `backlog` check run,
// completed with conclusion, whose title and summary mention each of
// wants; it returns the run.
func (x *e2e) mustCheck(t *testing.T, sha, conclusion string, wants ...string) checkRun {
	t.Helper()
	runs := x.checkRuns(sha)
	if len(runs) != 1 {
		t.Errorf("head %.10s has %d `backlog` check runs, want exactly one: %+v", sha, len(runs), runs)
		if len(runs) == 0 {
			return checkRun{}
		}
	}
	run := runs[len(runs)-1]
	if run.Status != "completed" || run.Conclusion != conclusion {
		t.Errorf("head %.10s: `backlog` check run %s/%s, want completed/%s\ntitle: %s\nsummary:\n%s",
			sha, run.Status, run.Conclusion, conclusion, run.Title, plain(run.Summary))
	}
	txt := run.text()
	for _, w := range wants {
		if !strings.Contains(txt, w) {
			t.Errorf("head %.10s: `backlog` check run (%s) does not mention %q\ntitle: %s\nsummary:\n%s",
				sha, run.Conclusion, w, run.Title, plain(run.Summary))
		}
	}
	return run
}

// mustNoCheck checks that sha carries no `backlog` check run.
func (x *e2e) mustNoCheck(t *testing.T, sha string) {
	t.Helper()
	if runs := x.checkRuns(sha); len(runs) != 0 {
		t.Errorf("head %.10s has %d `backlog` check runs, want none: %+v", sha, len(runs), runs)
	}
}

// attemptsLike matches a mention of "1 attempt" or "attempts 1" (and the
// like) in a check run's text.
func attemptsLike(k int) *regexp.Regexp {
	return regexp.MustCompile(fmt.Sprintf(`(?i)\battempts?\b[^0-9\n]{0,24}\b%d\b|\b%d\b[^0-9\n]{0,8}\battempts?\b`, k, k))
}

// claimBranch claims id for owner with a lease, recording branch (may be
// ""), and returns the fence.
func (x *e2e) claimBranch(t *testing.T, token, id, owner, branch string, lease int) int64 {
	t.Helper()
	body := map[string]any{"owner": owner, "leaseSeconds": lease}
	if branch != "" {
		body["branch"] = branch
	}
	f := granted(t, x.claim(t, token, id, body))
	x.MustSettle(t)
	return f
}

// maintenanceClaim takes a maintenance claim for owner with token (pm or
// human) and returns the fence.
func (x *e2e) maintenanceClaim(t *testing.T, token, id, owner string) int64 {
	t.Helper()
	f := granted(t, x.claim(t, token, id, map[string]any{"owner": owner, "leaseSeconds": 600, "purpose": "maintenance"}))
	x.MustSettle(t)
	return f
}

// complete sends PATCH /items/{id} adding state:complete and the tags
// (pr:<n>, …) under fence (nil: no fencingToken), and returns the status
// and answer.
func (x *e2e) complete(t *testing.T, token, id string, fence *int64, tags ...string) (int, map[string]any) {
	t.Helper()
	body := map[string]any{"addTags": append([]string{"state:complete"}, tags...)}
	if fence != nil {
		body["fencingToken"] = *fence
	}
	code, out := x.patchItem(t, token, id, body)
	x.MustSettle(t)
	return code, out
}

// mustComplete completes id and fails the test when refused.
func (x *e2e) mustComplete(t *testing.T, token, id string, fence int64, tags ...string) {
	t.Helper()
	if code, out := x.complete(t, token, id, &fence, tags...); code != http.StatusOK {
		t.Fatalf("completing %s with %v under fence %d answered %d %v, want 200", id, tags, fence, code, out)
	}
	if it := x.mustItem(t, id); !it.has("state:complete") {
		t.Fatalf("%s accepted the completion but carries %v", id, it.Tags)
	}
}

// mustRefuseCompletion checks that completing id is refused with one of
// reasons (any 4xx when none is given), and that the item stays live.
func (x *e2e) mustRefuseCompletion(t *testing.T, token, id string, fence *int64, reasons []string, tags ...string) {
	t.Helper()
	code, out := x.complete(t, token, id, fence, tags...)
	reason, _ := out["reason"].(string)
	if code < 400 || code >= 500 || (len(reasons) > 0 && !slices.Contains(reasons, reason)) {
		fs := "none"
		if fence != nil {
			fs = fmt.Sprint(*fence)
		}
		t.Errorf("completing %s with %v (fence %s) answered %d reason %q, want a refusal with reason in %v; answer: %v",
			id, tags, fs, code, reason, reasons, out)
	}
	if it := x.mustItem(t, id); it.has("state:complete") {
		t.Errorf("%s is state:complete after a refused completion: %v", id, it.Tags)
	}
}

func ptr[T any](v T) *T { return &v }

// deliver takes id through the happy path of one attempt: a claim by owner
// recording branch, a branch cut from from with a pull request into base
// whose body links the item, and the merge. It returns the fence and the
// merged pull request.
func (x *e2e) deliver(t *testing.T, id, owner, branch, from, base, body string) (int64, pull) {
	t.Helper()
	f := x.claimBranch(t, WorkerToken, id, owner, branch, 600)
	p := x.branchPR(t, branch, from, base, body)
	return f, x.merge(t, p.N)
}

// pass runs one reconcile pass with o and returns the result for this
// repository; an error fails the test.
func (x *e2e) pass(t *testing.T, o mirror.ReconcileOptions) mirror.PassResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := x.Reconcile(ctx, o)
	if err != nil {
		t.Fatalf("reconcile pass %+v: %v (results %+v)", o, err, res)
	}
	for _, r := range res {
		if strings.EqualFold(r.Repo, x.Repo.FullName) {
			return r
		}
	}
	t.Fatalf("reconcile pass returned no result for %s: %+v", x.Repo.FullName, res)
	return mirror.PassResult{}
}

// passFlush runs a full reconcile pass, then crosses the coalescing window
// of report-comment edits so that every edit the pass made due is on
// GitHub.
func (x *e2e) passFlush(t *testing.T) mirror.PassResult {
	t.Helper()
	r := x.pass(t, mirror.ReconcileOptions{})
	if !r.Complete {
		t.Errorf("reconcile pass did not complete: stopped %q", r.Stopped)
	}
	x.flush(t)
	return r
}

// simWrites is how many writes warden's installation has made on GitHub.
func (x *e2e) simWrites() int { return x.Sim.Calls(x.Inst.ID).Writes }

// findings counts a pass's findings of code about id ("" = the repository's
// or a pull request's own).
func findings(r mirror.PassResult, code, id string) int {
	k := 0
	for _, d := range r.Findings {
		if d.Code == code && string(d.Item) == id {
			k++
		}
	}
	return k
}

// issueInfo is a copy of an issue's state in the simulator.
type issueInfo struct {
	N                int
	Title, Body      string
	State            string
	Login            string
	UpdatedAt        time.Time
	Deleted, Present bool
}

// issue reads issue n from the simulator.
func (x *e2e) issue(n int) issueInfo {
	var out issueInfo
	x.Sim.Locked(func() {
		if i := x.Repo.Issues[n]; i != nil {
			out = issueInfo{N: n, Title: i.Title, Body: i.Body, State: i.State, Login: i.User.Login, UpdatedAt: i.UpdatedAt,
				Deleted: i.Deleted, Present: true}
		}
	})
	return out
}

// dashboards is the issues titled "Backlog dashboard" (not pull requests,
// not deleted), by number.
func (x *e2e) dashboards() []issueInfo {
	var nums []int
	x.Sim.Locked(func() {
		for n, i := range x.Repo.Issues {
			if !i.IsPull && !i.Deleted && i.Title == "Backlog dashboard" {
				nums = append(nums, n)
			}
		}
	})
	slices.Sort(nums)
	var out []issueInfo
	for _, n := range nums {
		out = append(out, x.issue(n))
	}
	return out
}

// suiteOf is the id of the App's check suite on sha (0 when none).
func (x *e2e) suiteOf(sha string) int64 {
	var id int64
	x.Sim.Locked(func() {
		for _, cs := range x.Repo.CheckSuites {
			if cs.App == nil && cs.HeadSHA == sha && cs.ID > id {
				id = cs.ID
			}
		}
	})
	return id
}

// restoreTags edits the ledger's tags of item n directly in the database,
// as a restored backup or an import from a repository that used the
// protocol before warden would (CONTRACT.md §9: "items can arrive by other
// paths"): the ledger refuses these writes through its API. It skips the
// test when the database cannot be edited this way.
func (x *e2e) restoreTags(t *testing.T, n int, add []string, removePrefix string) {
	t.Helper()
	ctx := context.Background()
	w := x.Service.DB.Write
	for _, tag := range add {
		if _, err := w.ExecContext(ctx, `INSERT INTO ledger_tags (repo_id, number, tag) VALUES ($1, $2, $3)`, x.Repo.ID, n, tag); err != nil {
			t.Skipf("cannot model a restored backup (direct ledger edit): %v", err)
		}
	}
	if removePrefix != "" {
		res, err := w.ExecContext(ctx, `DELETE FROM ledger_tags WHERE repo_id = $1 AND number = $2 AND tag LIKE $3`, x.Repo.ID, n, removePrefix+"%")
		if err != nil {
			t.Skipf("cannot model a restored backup (direct ledger edit): %v", err)
		}
		if k, _ := res.RowsAffected(); k == 0 {
			t.Skipf("cannot model a restored backup: no %s tag on #%d in the ledger table", removePrefix, n)
		}
	}
	it := x.mustItem(t, idOf(n))
	for _, tag := range add {
		if !it.has(tag) {
			t.Skipf("the direct ledger edit is not visible through the API (cached?): %s lacks %s: %v", it.ID, tag, it.Tags)
		}
	}
	if removePrefix != "" && len(it.withPrefix(removePrefix)) != 0 {
		t.Skipf("the direct ledger edit is not visible through the API (cached?): %s still has %v", it.ID, it.withPrefix(removePrefix))
	}
}
