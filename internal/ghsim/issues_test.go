package ghsim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/go-github/v66/github"
	"github.com/wardenhq/warden/internal/clock"
)

// --- helpers shared by the issue-side tests ---

// hook is one delivery the fixture received, decoded.
type hook struct {
	event, action string
	body          map[string]any
	sigOK         bool
}

func (h hook) String() string { return h.event + "." + h.action }

// mark is the number of deliveries received so far (after a flush).
func (f *fixture) mark(t *testing.T) int {
	t.Helper()
	f.flush(t)
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.got)
}

// hooksSince flushes and returns the deliveries received after mark.
func (f *fixture) hooksSince(t *testing.T, mark int) []hook {
	t.Helper()
	f.flush(t)
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []hook
	for _, g := range f.got[mark:] {
		var m map[string]any
		if err := json.Unmarshal(g.body, &m); err != nil {
			t.Fatalf("delivery %s: %v", g.id, err)
		}
		a, _ := m["action"].(string)
		out = append(out, hook{g.event, a, m, g.sigOK})
	}
	return out
}

func hookNames(hs []hook) string {
	var s []string
	for _, h := range hs {
		s = append(s, h.String())
	}
	return strings.Join(s, " ")
}

// dig walks a decoded JSON value along a dotted path ("issue.user.login").
func dig(v any, path string) any {
	for _, k := range strings.Split(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

func digS(v any, path string) string {
	s, _ := dig(v, path).(string)
	return s
}

// call sends a raw request with the installation client (for what go-github
// v66 lacks, and to see exact JSON) and decodes the answer.
func call(t *testing.T, gh *github.Client, method, path string, body any) (int, any, *github.Response, error) {
	t.Helper()
	req, err := gh.NewRequest(method, path, body)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	resp, err := gh.Do(context.Background(), req, &out)
	if resp == nil {
		t.Fatalf("%s %s: no response: %v", method, path, err)
	}
	return resp.StatusCode, out, resp, err
}

// errResp asserts err is GitHub's error answer with that status.
func errResp(t *testing.T, err error, status int) *github.ErrorResponse {
	t.Helper()
	var er *github.ErrorResponse
	if !errors.As(err, &er) {
		t.Fatalf("want a %d error answer, got %T %v", status, err, err)
	}
	if er.Response.StatusCode != status {
		t.Fatalf("status %d, want %d: %v", er.Response.StatusCode, status, err)
	}
	return er
}

func wantValidation(t *testing.T, err error, resource, field, code string) *github.ErrorResponse {
	t.Helper()
	er := errResp(t, err, 422)
	if er.Message != "Validation Failed" || len(er.Errors) != 1 || er.Errors[0].Resource != resource ||
		er.Errors[0].Field != field || er.Errors[0].Code != code {
		t.Fatalf("422 body %+v, want %s/%s/%s", er, resource, field, code)
	}
	return er
}

func labelNames(ls []*github.Label) string {
	var s []string
	for _, l := range ls {
		s = append(s, l.GetName())
	}
	return strings.Join(s, ",")
}

// manualClock installs it. The installation token is fetched first: the
// App's JWTs live 90 s of real time, which a clock moved ahead would expire.
func (f *fixture) manualClock(t *testing.T) *clock.Manual {
	t.Helper()
	gh, _ := f.app.Installation(f.inst.ID)
	if _, _, err := gh.Issues.ListLabels(context.Background(), "acme", "app", nil); err != nil {
		t.Fatal(err)
	}
	c := clock.New(time.Now().Truncate(time.Second))
	f.sim.Locked(func() { f.sim.opt.Now = c.Now })
	return c
}

// --- issues ---

func TestIssuesCreateWithLabelsSendsOpenedThenLabeled(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	gh, _ := f.app.Installation(f.inst.ID)
	m := f.mark(t)
	iss, resp, err := gh.Issues.Create(ctx, "acme", "app", &github.IssueRequest{
		Title: github.String("First"), Body: github.String("hello"), Labels: &[]string{"item", "good first issue"}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 201 || iss.GetNumber() != 1 || labelNames(iss.Labels) != "good first issue,item" ||
		iss.GetUser().GetLogin() != f.sim.BotLogin() || iss.GetState() != "open" {
		t.Fatalf("created %d %+v", resp.StatusCode, iss)
	}
	if loc := resp.Header.Get("Location"); !strings.HasSuffix(loc, "/repos/acme/app/issues/1") {
		t.Fatalf("Location %q", loc)
	}
	hs := f.hooksSince(t, m)
	if got := hookNames(hs); got != "label.created label.created issues.opened issues.labeled issues.labeled" {
		t.Fatalf("deliveries %s", got)
	}
	for _, h := range hs {
		if !h.sigOK || digS(h.body, "sender.login") != f.sim.BotLogin() || digS(h.body, "sender.type") != "Bot" {
			t.Fatalf("%s: sig %v sender %v", h, h.sigOK, h.body["sender"])
		}
	}
	if digS(hs[3].body, "label.name") != "item" || digS(hs[4].body, "label.name") != "good first issue" {
		t.Fatalf("labeled deliveries name %v, %v", dig(hs[3].body, "label.name"), dig(hs[4].body, "label.name"))
	}
	if n := len(dig(hs[2].body, "issue.labels").([]any)); n != 2 {
		t.Fatalf("opened carries %d labels", n)
	}
	if dig(hs[2].body, "issue.performed_via_github_app.slug") != "warden-sim" {
		t.Fatalf("issue written by the App: performed_via_github_app %v", dig(hs[2].body, "issue.performed_via_github_app"))
	}
	// The labels were created on the fly with GitHub's default color.
	l, _, err := gh.Issues.GetLabel(ctx, "acme", "app", "ITEM")
	if err != nil || l.GetColor() != "ededed" || l.GetName() != "item" {
		t.Fatalf("label created on the fly: %+v %v", l, err)
	}
	// The issue's label events name the App's bot and the App.
	evs, _, err := gh.Issues.ListIssueEvents(ctx, "acme", "app", 1, nil)
	if err != nil || len(evs) != 2 || evs[0].GetEvent() != "labeled" || evs[0].GetActor().GetLogin() != f.sim.BotLogin() ||
		evs[0].GetPerformedViaGithubApp().GetID() != f.sim.AppID() || evs[0].GetLabel().GetColor() != "ededed" {
		t.Fatalf("events %v %v", evs, err)
	}

	// Full JSON: every required field, null where GitHub has nothing.
	_, raw, _, err := call(t, gh, "GET", "repos/acme/app/issues/1", nil)
	if err != nil {
		t.Fatal(err)
	}
	obj := raw.(map[string]any)
	for _, k := range []string{"assignee", "closed_at", "milestone", "closed_by", "state_reason", "active_lock_reason", "parent_issue_url"} {
		if v, ok := obj[k]; !ok || v != nil {
			t.Fatalf("%s: %v (present %v), want null", k, v, ok)
		}
	}
	if dig(obj, "sub_issues_summary.total") != 0.0 || dig(obj, "reactions.total_count") != 0.0 || obj["comments"] != 0.0 ||
		obj["author_association"] != "NONE" || obj["html_url"] != "https://github.com/acme/app/issues/1" {
		t.Fatalf("issue JSON %v", obj)
	}
	if _, isPR := obj["pull_request"]; isPR {
		t.Fatal("an issue carries pull_request")
	}
}

func TestIssuesCreateValidation(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	gh, _ := f.app.Installation(f.inst.ID)
	// No title at all: the request does not match the operation's schema.
	code, _, _, err := call(t, gh, "POST", "repos/acme/app/issues", map[string]any{"body": "x"})
	if er := errResp(t, err, 422); code != 422 || !strings.Contains(er.Message, `"title" wasn't supplied`) {
		t.Fatalf("no title: %v", er)
	}
	_, _, err = gh.Issues.Create(ctx, "acme", "app", &github.IssueRequest{Title: github.String("  ")})
	wantValidation(t, err, "Issue", "title", "missing_field")
	_, _, err = gh.Issues.Create(ctx, "acme", "app", &github.IssueRequest{Title: github.String("t"), Body: github.String(strings.Repeat("é", 65537))})
	if er := wantValidation(t, err, "Issue", "body", "custom"); er.Errors[0].Message != "body is too long (maximum is 65536 characters)" {
		t.Fatalf("too long: %+v", er.Errors[0])
	}
	// Exactly at the limit (in characters, not bytes) is fine; a numeric title too.
	code, raw, _, err := call(t, gh, "POST", "repos/acme/app/issues", map[string]any{"title": 42, "body": strings.Repeat("é", 65536)})
	if err != nil || code != 201 || dig(raw, "title") != "42" {
		t.Fatalf("at the limit: %d %v", code, err)
	}
	req, _ := gh.NewRequest("POST", "repos/acme/app/issues", nil)
	req.Body = io.NopCloser(strings.NewReader(`{"title":`))
	if _, err := gh.Do(ctx, req, nil); errResp(t, err, 400).Message != "Problems parsing JSON" {
		t.Fatalf("bad JSON: %v", err)
	}
	if _, _, err := gh.Issues.Get(ctx, "acme", "app", 99); errResp(t, err, 404).Message != "Not Found" {
		t.Fatal(err)
	}
}

func TestIssuesListFiltersSortsAndPaginates(t *testing.T) {
	f := newFixture(t)
	clock := f.manualClock(t)
	ctx := context.Background()
	gh, _ := f.app.Installation(f.inst.ID)
	bob := f.sim.As("bob")
	f.sim.SetRole(f.repo, "bob", "write")
	for k := 1; k <= 7; k++ {
		var labels []string
		if k%2 == 0 {
			labels = []string{"Item"}
		}
		if _, err := bob.OpenIssue(f.repo, fmt.Sprintf("issue %d", k), "", labels...); err != nil {
			t.Fatal(err)
		}
		clock.Advance(time.Second)
	}
	if _, err := bob.CloseIssue(f.repo, 3, "not_planned"); err != nil {
		t.Fatal(err)
	}
	// A pull request shares the number space and is listed with a pull_request key.
	if _, err := bob.Push(f.repo, "feature", "", map[string]string{"f.txt": "x"}, "work"); err != nil {
		t.Fatal(err)
	}
	if _, err := bob.OpenPR(f.repo, "feature", "main", "a PR", "", false); err != nil {
		t.Fatal(err)
	}
	list, _, err := gh.Issues.ListByRepo(ctx, "acme", "app", nil)
	if err != nil {
		t.Fatal(err)
	}
	var nums []int
	for _, i := range list {
		nums = append(nums, i.GetNumber())
	}
	if fmt.Sprint(nums) != "[8 7 6 5 4 2 1]" || !list[0].IsPullRequest() || list[1].IsPullRequest() {
		t.Fatalf("open issues, newest first: %v", nums)
	}
	pr, _, err := gh.Issues.Get(ctx, "acme", "app", 8)
	if err != nil || !pr.IsPullRequest() || pr.GetPullRequestLinks().GetHTMLURL() != "https://github.com/acme/app/pull/8" {
		t.Fatalf("a pull request's issue form: %+v %v", pr, err)
	}
	list, _, err = gh.Issues.ListByRepo(ctx, "acme", "app", &github.IssueListByRepoOptions{State: "all", Labels: []string{"ITEM"}, Direction: "asc"})
	nums = nil
	for _, i := range list {
		nums = append(nums, i.GetNumber())
	}
	if err != nil || fmt.Sprint(nums) != "[2 4 6]" {
		t.Fatalf("labels filter (any case): %v %v", nums, err)
	}
	list, _, _ = gh.Issues.ListByRepo(ctx, "acme", "app", &github.IssueListByRepoOptions{State: "closed"})
	if len(list) != 1 || list[0].GetNumber() != 3 || list[0].GetStateReason() != "not_planned" {
		t.Fatalf("closed: %v", list)
	}
	// since: only what was updated at or after it; sort=updated puts #3 first.
	since := clock.Now().Add(-2 * time.Second)
	list, _, _ = gh.Issues.ListByRepo(ctx, "acme", "app", &github.IssueListByRepoOptions{State: "all", Since: since, Sort: "updated"})
	nums = nil
	for _, i := range list {
		nums = append(nums, i.GetNumber())
	}
	if fmt.Sprint(nums) != "[8 3 7 6]" {
		t.Fatalf("since + sort=updated: %v", nums)
	}
	// Pages of 3 with Link.
	list, resp, err := gh.Issues.ListByRepo(ctx, "acme", "app", &github.IssueListByRepoOptions{State: "all", ListOptions: github.ListOptions{PerPage: 3, Page: 2}})
	if err != nil || len(list) != 3 || resp.NextPage != 3 || resp.PrevPage != 1 || resp.LastPage != 3 || resp.FirstPage != 1 {
		t.Fatalf("page 2: %d items, links %+v", len(list), resp)
	}
	if code, _, _, err := call(t, gh, "GET", "repos/acme/app/issues?state=nope", nil); code != 422 || err == nil {
		t.Fatalf("bad state: %d", code)
	}
}

func TestIssuesPatchEditsClosesReopensAndRelabels(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	gh, _ := f.app.Installation(f.inst.ID)
	alice := f.sim.As("alice")
	iss, err := alice.OpenIssue(f.repo, "Old title", "old body", "dropped") // no push access: labels dropped
	if err != nil {
		t.Fatal(err)
	}
	if len(iss.Labels) != 0 {
		t.Fatal("labels kept for a user without push access")
	}
	m := f.mark(t)
	updated, _, err := gh.Issues.Edit(ctx, "acme", "app", 1, &github.IssueRequest{
		Title: github.String("New title"), Body: github.String("new body"), State: github.String("closed"),
		StateReason: github.String("not_planned"), Labels: &[]string{"a", "b"}})
	if err != nil {
		t.Fatal(err)
	}
	if updated.GetState() != "closed" || updated.GetStateReason() != "not_planned" || updated.GetClosedBy().GetLogin() != f.sim.BotLogin() ||
		updated.ClosedAt == nil || labelNames(updated.Labels) != "a,b" || updated.GetTitle() != "New title" {
		t.Fatalf("patched %+v", updated)
	}
	hs := f.hooksSince(t, m)
	if got := hookNames(hs); got != "label.created label.created issues.edited issues.closed issues.labeled issues.labeled" {
		t.Fatalf("deliveries %s", got)
	}
	if digS(hs[2].body, "changes.title.from") != "Old title" || digS(hs[2].body, "changes.body.from") != "old body" {
		t.Fatalf("edited changes %v", hs[2].body["changes"])
	}
	if digS(hs[3].body, "issue.state") != "closed" || digS(hs[3].body, "issue.state_reason") != "not_planned" {
		t.Fatalf("closed payload %v", hs[3].body["issue"])
	}
	// The same values again change nothing and send nothing.
	m = f.mark(t)
	if _, _, err := gh.Issues.Edit(ctx, "acme", "app", 1, &github.IssueRequest{Title: github.String("New title"), State: github.String("closed")}); err != nil {
		t.Fatal(err)
	}
	if hs := f.hooksSince(t, m); len(hs) != 0 {
		t.Fatalf("no-op patch sent %s", hookNames(hs))
	}
	// Reopen, and replace the labels: unlabeled a, then labeled c.
	m = f.mark(t)
	reopened, _, err := gh.Issues.Edit(ctx, "acme", "app", 1, &github.IssueRequest{State: github.String("open"), Labels: &[]string{"B", "c"}})
	if err != nil || reopened.GetStateReason() != "reopened" || reopened.ClosedAt != nil || labelNames(reopened.Labels) != "b,c" {
		t.Fatalf("reopened %+v %v", reopened, err)
	}
	if got := hookNames(f.hooksSince(t, m)); got != "label.created issues.reopened issues.unlabeled issues.labeled" {
		t.Fatalf("deliveries %s", got)
	}
	evs, _, err := gh.Issues.ListIssueEvents(ctx, "acme", "app", 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, e := range evs {
		kinds = append(kinds, e.GetEvent())
	}
	if strings.Join(kinds, " ") != "renamed closed labeled labeled reopened unlabeled labeled" {
		t.Fatalf("events %v", kinds)
	}
	if evs[0].GetRename().GetFrom() != "Old title" || evs[0].GetRename().GetTo() != "New title" {
		t.Fatalf("renamed %+v", evs[0].Rename)
	}
	// Validation.
	_, _, err = gh.Issues.Edit(ctx, "acme", "app", 1, &github.IssueRequest{State: github.String("done")})
	wantValidation(t, err, "Issue", "state", "invalid")
	_, _, err = gh.Issues.Edit(ctx, "acme", "app", 1, &github.IssueRequest{Title: github.String("")})
	if err == nil {
		// go-github drops an empty title (omitempty); send it raw.
		_, _, _, err = call(t, gh, "PATCH", "repos/acme/app/issues/1", map[string]any{"title": ""})
	}
	wantValidation(t, err, "Issue", "title", "missing_field")
	// The author may close their own issue; a stranger may not.
	if _, err := alice.CloseIssue(f.repo, 1, ""); err != nil {
		t.Fatalf("author closes: %v", err)
	}
	if _, err := f.sim.As("mallory").ReopenIssue(f.repo, 1); err == nil {
		t.Fatal("a stranger reopened someone's issue")
	}
	got, _, _ := gh.Issues.Get(ctx, "acme", "app", 1)
	if got.GetStateReason() != "completed" || got.GetClosedBy().GetLogin() != "alice" {
		t.Fatalf("closed by alice: %+v", got)
	}
	// Title edit by the author through the Actor.
	m = f.mark(t)
	title := "Alice's title"
	if _, err := alice.EditIssue(f.repo, 1, &title, nil); err != nil {
		t.Fatal(err)
	}
	hs = f.hooksSince(t, m)
	if len(hs) != 1 || hs[0].String() != "issues.edited" || digS(hs[0].body, "sender.login") != "alice" ||
		digS(hs[0].body, "sender.type") != "User" || dig(hs[0].body, "changes.body") != nil {
		t.Fatalf("edited by alice: %s %v", hookNames(hs), hs)
	}
}

func TestIssuesDeletedIsGone(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	gh, _ := f.app.Installation(f.inst.ID)
	bob := f.sim.As("bob")
	if _, err := bob.OpenIssue(f.repo, "doomed", ""); err != nil {
		t.Fatal(err)
	}
	c, _ := bob.Comment(f.repo, 1, "a comment")
	if err := bob.DeleteIssue(f.repo, 1); err == nil {
		t.Fatal("a non-admin deleted an issue")
	}
	f.sim.SetRole(f.repo, "bob", "admin")
	m := f.mark(t)
	if err := bob.DeleteIssue(f.repo, 1); err != nil {
		t.Fatal(err)
	}
	hs := f.hooksSince(t, m)
	if len(hs) != 1 || hs[0].String() != "issues.deleted" || digS(hs[0].body, "issue.title") != "doomed" {
		t.Fatalf("deliveries %s", hookNames(hs))
	}
	_, _, err := gh.Issues.Get(ctx, "acme", "app", 1)
	if er := errResp(t, err, 410); er.Message != "This issue was deleted" {
		t.Fatalf("deleted: %v", er)
	}
	if _, _, err := gh.Issues.ListComments(ctx, "acme", "app", 1, nil); err == nil {
		t.Fatal("comments of a deleted issue listed")
	}
	if _, _, err := gh.Issues.GetComment(ctx, "acme", "app", c.ID); err == nil {
		t.Fatal("a deleted issue's comment is still there")
	}
	if list, _, _ := gh.Issues.ListByRepo(ctx, "acme", "app", &github.IssueListByRepoOptions{State: "all"}); len(list) != 0 {
		t.Fatalf("deleted issue listed: %v", list)
	}
}

func TestIssuesTimelineAndRepositoryEvents(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	gh, _ := f.app.Installation(f.inst.ID)
	bob := f.sim.As("bob")
	f.sim.SetRole(f.repo, "bob", "triage")
	if _, err := bob.OpenIssue(f.repo, "t", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := bob.AddLabels(f.repo, 1, "x"); err != nil {
		t.Fatal(err)
	}
	if _, err := bob.Comment(f.repo, 1, "hello"); err != nil {
		t.Fatal(err)
	}
	if _, err := gh.Issues.RemoveLabelForIssue(ctx, "acme", "app", 1, "x"); err != nil {
		t.Fatal(err)
	}
	tl, _, err := gh.Issues.ListIssueTimeline(ctx, "acme", "app", 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, e := range tl {
		kinds = append(kinds, e.GetEvent())
	}
	if strings.Join(kinds, " ") != "labeled commented unlabeled" || tl[1].GetBody() != "hello" || tl[1].GetActor().GetLogin() != "bob" {
		t.Fatalf("timeline %v", kinds)
	}
	evs, _, err := gh.Issues.ListRepositoryEvents(ctx, "acme", "app", nil)
	if err != nil || len(evs) != 2 || evs[0].GetEvent() != "unlabeled" || evs[0].GetIssue().GetNumber() != 1 {
		t.Fatalf("repository events %v %v", evs, err)
	}
	one, _, err := gh.Issues.GetEvent(ctx, "acme", "app", evs[1].GetID())
	if err != nil || one.GetEvent() != "labeled" || one.GetActor().GetLogin() != "bob" || one.PerformedViaGithubApp != nil {
		t.Fatalf("event %+v %v", one, err)
	}
	if _, _, err := gh.Issues.GetEvent(ctx, "acme", "app", 1); err == nil {
		t.Fatal("unknown event found")
	}
}

func TestIssuesAPIOnPullRequests(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	gh, _ := f.app.Installation(f.inst.ID)
	dev := f.sim.As("dev")
	f.sim.SetRole(f.repo, "dev", "write")
	if _, err := dev.Push(f.repo, "feature", "", map[string]string{"f.txt": "x"}, "work"); err != nil {
		t.Fatal(err)
	}
	if _, err := dev.OpenPR(f.repo, "feature", "main", "the PR", "closes nothing", false); err != nil {
		t.Fatal(err)
	}
	iss, _, err := gh.Issues.Get(ctx, "acme", "app", 1)
	if err != nil || !iss.IsPullRequest() || iss.GetHTMLURL() != "https://github.com/acme/app/pull/1" {
		t.Fatalf("issue form of a PR: %+v %v", iss, err)
	}
	m := f.mark(t)
	if _, _, err := gh.Issues.AddLabelsToIssue(ctx, "acme", "app", 1, []string{"needs-review"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := gh.Issues.CreateComment(ctx, "acme", "app", 1, &github.IssueComment{Body: github.String("/backlog recheck")}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := gh.Issues.Edit(ctx, "acme", "app", 1, &github.IssueRequest{State: github.String("closed")}); err != nil {
		t.Fatal(err)
	}
	hs := f.hooksSince(t, m)
	if got := hookNames(hs); got != "label.created pull_request.labeled issue_comment.created pull_request.closed" {
		t.Fatalf("deliveries %s", got)
	}
	if digS(hs[1].body, "label.name") != "needs-review" || dig(hs[1].body, "number") != 1.0 ||
		digS(hs[1].body, "pull_request.head.ref") != "feature" || len(dig(hs[1].body, "pull_request.labels").([]any)) != 1 {
		t.Fatalf("pull_request.labeled %v", hs[1].body)
	}
	if dig(hs[2].body, "issue.pull_request") == nil || dig(hs[2].body, "issue.pull_request.merged_at") != nil {
		t.Fatalf("comment on a PR: issue.pull_request %v", dig(hs[2].body, "issue.pull_request"))
	}
	if dig(hs[3].body, "pull_request.merged") != false || digS(hs[3].body, "pull_request.state") != "closed" {
		t.Fatalf("closed %v", hs[3].body["pull_request"])
	}
	// A pull request is no sub-issue.
	pm := f.sim.As("pm")
	f.sim.SetRole(f.repo, "pm", "triage")
	if _, err := pm.OpenIssue(f.repo, "epic", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := pm.AddSubIssue(f.repo, 2, 1); err == nil {
		t.Fatal("a pull request became a sub-issue")
	}
	if err := f.sim.As("acme").DeleteIssue(f.repo, 1); err == nil {
		t.Fatal("a pull request was deleted")
	}
}
