package ghsim

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-github/v66/github"
)

func TestChecksRunsSuitesAndStatuses(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	gh, _ := f.app.Installation(f.inst.ID)
	alice := f.sim.As("alice")
	head, _ := alice.Push(f.repo, "work", "main", map[string]string{"w.txt": "w\n"}, "Work")
	pr, err := alice.OpenPR(f.repo, "work", "main", "Work", "", false)
	if err != nil {
		t.Fatal(err)
	}
	n := pr.Issue.Number

	// The App's suite from the push, with the pull request.
	suites, _, err := gh.Checks.ListCheckSuitesForRef(ctx, "acme", "app", head, nil)
	if err != nil || suites.GetTotal() != 1 || suites.CheckSuites[0].GetApp().GetID() != f.sim.AppID() ||
		len(suites.CheckSuites[0].PullRequests) != 1 || suites.CheckSuites[0].PullRequests[0].GetNumber() != n ||
		suites.CheckSuites[0].GetHeadBranch() != "work" || suites.CheckSuites[0].GetStatus() != "queued" {
		t.Fatalf("suites %+v %v", suites, err)
	}
	suiteID := suites.CheckSuites[0].GetID()

	// Create in progress, then complete.
	m := gitMark(t, f)
	run, resp, err := gh.Checks.CreateCheckRun(ctx, "acme", "app", github.CreateCheckRunOptions{
		Name: "backlog", HeadSHA: head, Status: github.String("in_progress"), ExternalID: github.String("item-7"),
		Output: &github.CheckRunOutput{Title: github.String("Checking"), Summary: github.String("…")},
	})
	if err != nil || resp.StatusCode != 201 {
		t.Fatal(err)
	}
	if run.GetStatus() != "in_progress" || run.Conclusion != nil || run.GetCheckSuite().GetID() != suiteID ||
		len(run.PullRequests) != 1 || run.PullRequests[0].GetNumber() != n || run.PullRequests[0].GetHead().GetSHA() != head ||
		run.GetApp().GetID() != f.sim.AppID() || run.GetExternalID() != "item-7" || run.StartedAt == nil {
		t.Fatalf("created %+v", run)
	}
	upd, _, err := gh.Checks.UpdateCheckRun(ctx, "acme", "app", run.GetID(), github.UpdateCheckRunOptions{
		Name: "backlog", Conclusion: github.String("success"),
		Output: &github.CheckRunOutput{Title: github.String("issue-7 ok"), Summary: github.String("| item | ok |")},
	})
	if err != nil || upd.GetStatus() != "completed" || upd.GetConclusion() != "success" || upd.CompletedAt == nil ||
		upd.GetOutput().GetTitle() != "issue-7 ok" {
		t.Fatalf("updated %+v %v", upd, err)
	}
	hs := gitHooksSince(t, f, m)
	gitExpect(t, hs, "check_run.created", "check_run.completed", "check_suite.completed")
	if gitGet(hs[0].body, "sender.login") != f.sim.BotLogin() || gitGet(hs[0].body, "check_run.check_suite.head_sha") != head ||
		gitGet(hs[0].body, "check_run.pull_requests.0.number") != float64(n) ||
		gitGet(hs[2].body, "check_suite.conclusion") != "success" {
		t.Fatalf("check webhooks %v / %v", hs[0].body, hs[2].body)
	}
	again, _, err := gh.Checks.GetCheckRun(ctx, "acme", "app", run.GetID())
	if err != nil || again.GetConclusion() != "success" {
		t.Fatalf("get %v %v", again, err)
	}
	cs, _, err := gh.Checks.GetCheckSuite(ctx, "acme", "app", suiteID)
	if err != nil || cs.GetStatus() != "completed" || cs.GetConclusion() != "success" || cs.GetHeadSHA() != head {
		t.Fatalf("suite %+v %v", cs, err)
	}
	if _, resp, _ := gh.Checks.GetCheckRun(ctx, "acme", "app", 1); gitStatus(resp) != 404 {
		t.Fatalf("unknown run: %d", gitStatus(resp))
	}

	// Another CI: a failing run and a pending then green status.
	ci, err := alice.ExternalCheck(f.repo, head, "build", "failure")
	if err != nil {
		t.Fatal(err)
	}
	list, _, err := gh.Checks.ListCheckRunsForRef(ctx, "acme", "app", head, nil)
	if err != nil || list.GetTotal() != 2 || list.CheckRuns[0].GetName() != "build" || list.CheckRuns[0].GetApp().GetSlug() != "github-actions" {
		t.Fatalf("runs %+v %v", list, err)
	}
	for opt, want := range map[*github.ListCheckRunsOptions]int{
		{CheckName: github.String("backlog")}:                            1,
		{AppID: github.Int64(f.sim.AppID())}:                             1,
		{Status: github.String("in_progress")}:                           0,
		{Filter: github.String("all"), CheckName: github.String("nope")}: 0,
	} {
		if l, _, err := gh.Checks.ListCheckRunsForRef(ctx, "acme", "app", "work", opt); err != nil || l.GetTotal() != want {
			t.Fatalf("runs %+v: %v %v", opt, l, err)
		}
	}
	got, _, _ := gh.PullRequests.Get(ctx, "acme", "app", n)
	if got.GetMergeableState() != "unstable" {
		t.Fatalf("a failing check: mergeable_state %s", got.GetMergeableState())
	}
	if _, resp, _ := gh.Checks.UpdateCheckRun(ctx, "acme", "app", ci.ID, github.UpdateCheckRunOptions{Name: "x"}); gitStatus(resp) != 403 {
		t.Fatalf("updating another app's run: %d", gitStatus(resp))
	}
	suiteRuns, _, err := gh.Checks.ListCheckRunsCheckSuite(ctx, "acme", "app", suiteID, nil)
	if err != nil || suiteRuns.GetTotal() != 1 {
		t.Fatalf("suite runs %+v %v", suiteRuns, err)
	}
	ann, _, err := gh.Checks.ListCheckRunAnnotations(ctx, "acme", "app", run.GetID(), nil)
	if err != nil || len(ann) != 0 {
		t.Fatalf("annotations %v %v", ann, err)
	}

	st, _, err := gh.Repositories.GetCombinedStatus(ctx, "acme", "app", head, nil)
	if err != nil || st.GetState() != "pending" || st.GetTotalCount() != 0 {
		t.Fatalf("no statuses %+v %v", st, err)
	}
	alice.ExternalStatus(f.repo, head, "ci/legacy", "pending")
	alice.ExternalStatus(f.repo, head, "ci/legacy", "success")
	alice.ExternalStatus(f.repo, head, "ci/lint", "success")
	st, _, err = gh.Repositories.GetCombinedStatus(ctx, "acme", "app", "work", nil)
	if err != nil || st.GetState() != "success" || st.GetTotalCount() != 2 || st.GetSHA() != head {
		t.Fatalf("green %+v %v", st, err)
	}
	alice.ExternalStatus(f.repo, head, "ci/lint", "error")
	if st, _, _ = gh.Repositories.GetCombinedStatus(ctx, "acme", "app", head, nil); st.GetState() != "failure" {
		t.Fatalf("red %+v", st)
	}
	all, _, err := gh.Repositories.ListStatuses(ctx, "acme", "app", head, nil)
	if err != nil || len(all) != 4 || all[0].GetState() != "error" {
		t.Fatalf("statuses %v %v", all, err)
	}

	// Re-runs: by the App through REST, and by a person.
	m = gitMark(t, f)
	if _, err := gh.Checks.ReRequestCheckSuite(ctx, "acme", "app", suiteID); err != nil {
		t.Fatal(err)
	}
	if err := alice.RerequestCheckSuite(f.repo, suiteID); err != nil {
		t.Fatal(err)
	}
	if _, err := gh.Checks.ReRequestCheckRun(ctx, "acme", "app", run.GetID()); err != nil {
		t.Fatal(err)
	}
	if err := alice.RerequestCheckRun(f.repo, run.GetID()); err != nil {
		t.Fatal(err)
	}
	if err := alice.RerequestCheckRun(f.repo, ci.ID); err != nil { // another app's: not ours to hear
		t.Fatal(err)
	}
	hs = gitHooksSince(t, f, m)
	gitExpect(t, hs, "check_suite.rerequested", "check_suite.rerequested", "check_run.rerequested", "check_run.rerequested")
	if gitGet(hs[0].body, "sender.login") != f.sim.BotLogin() || gitGet(hs[1].body, "sender.login") != "alice" ||
		gitGet(hs[3].body, "sender.login") != "alice" || gitGet(hs[1].body, "check_suite.pull_requests.0.number") != float64(n) {
		t.Fatalf("rerequested senders %v %v", gitGet(hs[0].body, "sender.login"), gitGet(hs[1].body, "sender.login"))
	}
}

func TestChecksValidation(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	gh, _ := f.app.Installation(f.inst.ID)
	alice := f.sim.As("alice")
	head, _ := alice.Push(f.repo, "v", "main", map[string]string{"v": "v\n"}, "v")

	create := func(opt github.CreateCheckRunOptions) (*github.Response, *github.ErrorResponse) {
		t.Helper()
		_, resp, err := gh.Checks.CreateCheckRun(ctx, "acme", "app", opt)
		var er *github.ErrorResponse
		errors.As(err, &er)
		if er == nil {
			er = &github.ErrorResponse{}
		}
		return resp, er
	}
	long := strings.Repeat("x", 65536)
	resp, body := create(github.CreateCheckRunOptions{Name: "backlog", HeadSHA: head,
		Output: &github.CheckRunOutput{Title: github.String("t"), Summary: &long}})
	if resp.StatusCode != 422 || !strings.Contains(body.Message, "Only 65535 characters are allowed; 65536 were supplied.") {
		t.Fatalf("65536 characters: %d %v", resp.StatusCode, body)
	}
	wide := strings.Repeat("é", 40000) // 40000 characters, 80000 bytes
	resp, body = create(github.CreateCheckRunOptions{Name: "backlog", HeadSHA: head,
		Output: &github.CheckRunOutput{Title: github.String("t"), Summary: github.String("s"), Text: &wide}})
	if resp.StatusCode != 422 || len(body.Errors) != 1 || body.Errors[0].Field != "text" || body.Errors[0].Code != "custom" {
		t.Fatalf("80000 bytes: %d %v", resp.StatusCode, body)
	}
	ok := strings.Repeat("x", 65535)
	if resp, _ = create(github.CreateCheckRunOptions{Name: "backlog", HeadSHA: head,
		Output: &github.CheckRunOutput{Title: github.String("t"), Summary: &ok, Text: &ok}}); resp.StatusCode != 201 {
		t.Fatalf("65535 characters: %d", resp.StatusCode)
	}
	for name, opt := range map[string]github.CreateCheckRunOptions{
		"no name":              {HeadSHA: head},
		"no head_sha":          {Name: "x"},
		"unknown head_sha":     {Name: "x", HeadSHA: strings.Repeat("a", 40)},
		"bad status":           {Name: "x", HeadSHA: head, Status: github.String("done")},
		"bad conclusion":       {Name: "x", HeadSHA: head, Conclusion: github.String("great")},
		"completed, no result": {Name: "x", HeadSHA: head, Status: github.String("completed")},
		"output without title": {Name: "x", HeadSHA: head, Output: &github.CheckRunOutput{Summary: github.String("s")}},
	} {
		if resp, body := create(opt); resp.StatusCode != 422 {
			t.Errorf("%s: %d %v", name, resp.StatusCode, body)
		}
	}
	// A conclusion forces completed.
	run, _, err := gh.Checks.CreateCheckRun(ctx, "acme", "app", github.CreateCheckRunOptions{Name: "n", HeadSHA: head, Conclusion: github.String("neutral")})
	if err != nil || run.GetStatus() != "completed" || run.CompletedAt == nil {
		t.Fatalf("created with a conclusion %+v %v", run, err)
	}
	if _, resp, _ := gh.Checks.UpdateCheckRun(ctx, "acme", "app", run.GetID(), github.UpdateCheckRunOptions{Name: "n",
		Output: &github.CheckRunOutput{Title: github.String("t"), Summary: &long}}); gitStatus(resp) != 422 {
		t.Fatalf("update over the limit: %d", gitStatus(resp))
	}
	// Re-requesting a run that has not completed is refused.
	q, _, _ := gh.Checks.CreateCheckRun(ctx, "acme", "app", github.CreateCheckRunOptions{Name: "q", HeadSHA: head})
	if resp, _ := gh.Checks.ReRequestCheckRun(ctx, "acme", "app", q.GetID()); gitStatus(resp) != 422 {
		t.Fatalf("rerequest of a queued run: %d", gitStatus(resp))
	}
}

// Annotations as GitHub keeps them: at most 50 a request, each update
// appending to the run's, listed in pages; a malformed one is refused and
// changes nothing.
func TestCheckRunAnnotations(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	gh, _ := f.app.Installation(f.inst.ID)
	head, _ := f.sim.As("alice").Push(f.repo, "main", "", map[string]string{".github/backlog.yml": "a: 1\n"}, "Settings")
	ann := func(from, n int) []*github.CheckRunAnnotation {
		var out []*github.CheckRunAnnotation
		for i := from; i < from+n; i++ {
			out = append(out, &github.CheckRunAnnotation{Path: github.String(".github/backlog.yml"), StartLine: github.Int(i + 1),
				EndLine: github.Int(i + 1), AnnotationLevel: github.String("failure"), Message: github.String("problem"), Title: github.String("t")})
		}
		return out
	}
	out := func(a []*github.CheckRunAnnotation) *github.CheckRunOutput {
		return &github.CheckRunOutput{Title: github.String("T"), Summary: github.String("S"), Annotations: a}
	}
	if _, resp, _ := gh.Checks.CreateCheckRun(ctx, "acme", "app", github.CreateCheckRunOptions{Name: "s", HeadSHA: head,
		Output: out(ann(0, 51))}); gitStatus(resp) != 422 {
		t.Fatalf("51 annotations in one request: %d, want 422", gitStatus(resp))
	}
	run, _, err := gh.Checks.CreateCheckRun(ctx, "acme", "app", github.CreateCheckRunOptions{Name: "s", HeadSHA: head,
		Conclusion: github.String("failure"), Output: out(ann(0, 50))})
	if err != nil || run.GetOutput().GetAnnotationsCount() != 50 {
		t.Fatalf("create: %+v %v", run.GetOutput(), err)
	}
	if _, _, err := gh.Checks.UpdateCheckRun(ctx, "acme", "app", run.GetID(), github.UpdateCheckRunOptions{Name: "s", Output: out(ann(50, 20))}); err != nil {
		t.Fatal(err)
	}
	bad := []struct {
		name string
		a    *github.CheckRunAnnotation
	}{
		{"no message", &github.CheckRunAnnotation{Path: github.String("x"), StartLine: github.Int(1), EndLine: github.Int(1), AnnotationLevel: github.String("failure")}},
		{"a level GitHub does not have", &github.CheckRunAnnotation{Path: github.String("x"), StartLine: github.Int(1), EndLine: github.Int(1),
			AnnotationLevel: github.String("error"), Message: github.String("m")}},
		{"columns across lines", &github.CheckRunAnnotation{Path: github.String("x"), StartLine: github.Int(1), EndLine: github.Int(2),
			StartColumn: github.Int(1), AnnotationLevel: github.String("notice"), Message: github.String("m")}},
		{"a long title", &github.CheckRunAnnotation{Path: github.String("x"), StartLine: github.Int(1), EndLine: github.Int(1),
			AnnotationLevel: github.String("notice"), Message: github.String("m"), Title: github.String(strings.Repeat("t", 256))}},
	}
	for _, b := range bad {
		if _, resp, _ := gh.Checks.UpdateCheckRun(ctx, "acme", "app", run.GetID(), github.UpdateCheckRunOptions{Name: "s",
			Output: out([]*github.CheckRunAnnotation{b.a})}); gitStatus(resp) != 422 {
			t.Errorf("%s: %d, want 422", b.name, gitStatus(resp))
		}
	}
	got, _, err := gh.Checks.GetCheckRun(ctx, "acme", "app", run.GetID())
	if err != nil || got.GetOutput().GetAnnotationsCount() != 70 {
		t.Fatalf("after the update: %+v %v, want 70 annotations", got.GetOutput(), err)
	}
	var all []*github.CheckRunAnnotation
	opt := &github.ListOptions{PerPage: 30}
	for {
		page, resp, err := gh.Checks.ListCheckRunAnnotations(ctx, "acme", "app", run.GetID(), opt)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, page...)
		if resp.NextPage == 0 {
			break
		}
		opt.Page = resp.NextPage
	}
	if len(all) != 70 || all[0].GetStartLine() != 1 || all[69].GetStartLine() != 70 || all[5].GetPath() != ".github/backlog.yml" ||
		all[5].GetAnnotationLevel() != "failure" || all[5].GetMessage() != "problem" {
		t.Fatalf("annotations: %d, first %+v", len(all), all[0])
	}
}
