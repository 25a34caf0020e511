package ghsim

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/google/go-github/v66/github"
)

func TestPullsLifecycleAndMerge(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	gh, _ := f.app.Installation(f.inst.ID)
	alice, bob := f.sim.As("alice"), f.sim.As("bob")
	fixed := gitIssue(f, "the bug")
	refd := gitIssue(f, "only referenced")

	if _, err := alice.Push(f.repo, "fix", "main", map[string]string{"fix.go": "package fix\n"}, "Fix it"); err != nil {
		t.Fatal(err)
	}
	m := gitMark(t, f)
	body := "Fixes #" + itoa(fixed) + "\n\nRefs #" + itoa(refd) + "\n\n`Closes #" + itoa(refd) + "`"
	pr, err := alice.OpenPR(f.repo, "fix", "main", "Fix the bug", body, false)
	if err != nil {
		t.Fatal(err)
	}
	n := pr.Issue.Number
	if n != refd+1 {
		t.Fatalf("pull request number %d: issues and pulls share numbers", n)
	}
	hs := gitHooksSince(t, f, m)
	gitExpect(t, hs, "pull_request.opened")
	p := hs[0].body
	if p["number"] != float64(n) || gitGet(p, "pull_request.head.ref") != "fix" || gitGet(p, "pull_request.base.ref") != "main" ||
		gitGet(p, "pull_request.user.login") != "alice" || gitGet(p, "pull_request.merged") != false ||
		gitGet(p, "pull_request.head.repo.full_name") != "acme/app" || gitGet(p, "sender.login") != "alice" ||
		gitGet(p, "pull_request.draft") != false || gitGet(p, "pull_request.state") != "open" {
		t.Fatalf("opened %v", p)
	}

	// REST: get, list with filters.
	got, _, err := gh.PullRequests.Get(ctx, "acme", "app", n)
	if err != nil {
		t.Fatal(err)
	}
	if got.GetNumber() != n || got.GetID() == pr.Issue.ID || !got.GetMergeable() || got.GetMergeableState() != "clean" ||
		got.GetHead().GetSHA() != pr.HeadSHA || got.GetBase().GetRef() != "main" || got.GetCommits() != 1 ||
		got.GetChangedFiles() != 1 || got.GetAdditions() != 1 || got.GetBody() != body || got.GetMerged() || got.MergedAt != nil {
		t.Fatalf("pull %+v", got)
	}
	for _, opt := range []*github.PullRequestListOptions{
		{}, {State: "open", Head: "acme:fix"}, {Base: "main"}, {State: "all", Sort: "updated", Direction: "asc"},
	} {
		list, _, err := gh.PullRequests.List(ctx, "acme", "app", opt)
		if err != nil || len(list) != 1 || list[0].GetNumber() != n {
			t.Fatalf("list %+v: %v %v", opt, list, err)
		}
	}
	for _, opt := range []*github.PullRequestListOptions{{State: "closed"}, {Head: "acme:other"}, {Head: "someone:fix"}, {Base: "dev"}} {
		if list, _, err := gh.PullRequests.List(ctx, "acme", "app", opt); err != nil || len(list) != 0 {
			t.Fatalf("list %+v: %v %v", opt, list, err)
		}
	}
	if _, resp, _ := gh.PullRequests.Get(ctx, "acme", "app", 999); gitStatus(resp) != 404 {
		t.Fatalf("unknown pull: %d", gitStatus(resp))
	}
	if merged, _, err := gh.PullRequests.IsMerged(ctx, "acme", "app", n); err != nil || merged {
		t.Fatalf("is merged before merge: %v %v", merged, err)
	}

	// A push to the head: push, the suite, synchronize.
	head1 := pr.HeadSHA
	m = gitMark(t, f)
	head2, _ := alice.Push(f.repo, "fix", "", map[string]string{"fix_test.go": "package fix\n"}, "Test it")
	hs = gitHooksSince(t, f, m)
	gitExpect(t, hs, "push", "check_suite.requested", "pull_request.synchronize")
	if gitGet(hs[1].body, "check_suite.pull_requests.0.number") != float64(n) {
		t.Fatalf("suite without its pull request: %v", hs[1].body["check_suite"])
	}
	if s := hs[2].body; s["before"] != head1 || s["after"] != head2 || gitGet(s, "pull_request.head.sha") != head2 {
		t.Fatalf("synchronize before %v after %v head %v", s["before"], s["after"], gitGet(s, "pull_request.head.sha"))
	}
	commits, _, err := gh.PullRequests.ListCommits(ctx, "acme", "app", n, nil)
	if err != nil || len(commits) != 2 || commits[1].GetSHA() != head2 {
		t.Fatalf("pull commits %v %v", commits, err)
	}
	files, _, err := gh.PullRequests.ListFiles(ctx, "acme", "app", n, nil)
	if err != nil || len(files) != 2 || files[0].GetFilename() != "fix.go" || files[0].GetStatus() != "added" {
		t.Fatalf("pull files %v %v", files, err)
	}

	// The App edits through REST: edited, with what changed; sender the bot.
	m = gitMark(t, f)
	newTitle := "Fix the bug properly"
	if _, _, err := gh.PullRequests.Edit(ctx, "acme", "app", n, &github.PullRequest{Title: &newTitle}); err != nil {
		t.Fatal(err)
	}
	hs = gitHooksSince(t, f, m)
	gitExpect(t, hs, "pull_request.edited")
	if gitGet(hs[0].body, "changes.title.from") != "Fix the bug" || gitGet(hs[0].body, "sender.login") != f.sim.BotLogin() {
		t.Fatalf("edited %v", hs[0].body)
	}

	// A stale head SHA is 409; an unknown method 422.
	if _, resp, _ := gh.PullRequests.Merge(ctx, "acme", "app", n, "", &github.PullRequestOptions{SHA: head1}); gitStatus(resp) != http.StatusConflict {
		t.Fatalf("merge with a stale sha: %d", gitStatus(resp))
	}
	if _, resp, _ := gh.PullRequests.Merge(ctx, "acme", "app", n, "", &github.PullRequestOptions{MergeMethod: "octopus"}); gitStatus(resp) != 422 {
		t.Fatalf("merge with an unknown method: %d", gitStatus(resp))
	}

	// Bob merges: closed (merged), push to main, its suite, the issue closed.
	m = gitMark(t, f)
	sha, err := bob.MergePR(f.repo, n, "merge")
	if err != nil {
		t.Fatal(err)
	}
	hs = gitHooksSince(t, f, m)
	gitExpect(t, hs, "pull_request.closed", "push", "check_suite.requested", "issues.closed")
	c := hs[0].body
	if gitGet(c, "pull_request.merged") != true || gitGet(c, "pull_request.merge_commit_sha") != sha ||
		gitGet(c, "pull_request.merged_by.login") != "bob" || gitGet(c, "pull_request.state") != "closed" || gitGet(c, "sender.login") != "bob" {
		t.Fatalf("closed %v", c)
	}
	if hs[1].body["ref"] != "refs/heads/main" || hs[1].body["after"] != sha || gitGet(hs[1].body, "pusher.name") != "bob" {
		t.Fatalf("push to main %v", hs[1].body)
	}
	if gitGet(hs[3].body, "issue.number") != float64(fixed) || gitGet(hs[3].body, "issue.state") != "closed" ||
		gitGet(hs[3].body, "issue.state_reason") != "completed" || gitGet(hs[3].body, "sender.login") != "bob" {
		t.Fatalf("issues.closed %v", hs[3].body)
	}
	f.sim.Locked(func() {
		iss := f.repo.Issues[fixed]
		if iss.State != "closed" || len(iss.Events) != 1 || iss.Events[0].Event != "closed" || iss.Events[0].CommitID != sha {
			t.Errorf("closed issue %+v", iss)
		}
		if f.repo.Issues[refd].State != "open" {
			t.Error("Refs #N (and a keyword in code) closed an issue")
		}
		if mc := f.repo.Commits[sha]; len(mc.Parents) != 2 || mc.Parents[1] != head2 || mc.Files["fix_test.go"] == "" {
			t.Errorf("merge commit %+v", mc)
		}
	})
	got, _, _ = gh.PullRequests.Get(ctx, "acme", "app", n)
	if !got.GetMerged() || got.GetMergeCommitSHA() != sha || got.GetMergedBy().GetLogin() != "bob" || got.MergedAt == nil ||
		got.GetState() != "closed" || got.Mergeable != nil || got.GetCommits() != 2 {
		t.Fatalf("merged pull %+v", got)
	}
	if merged, _, err := gh.PullRequests.IsMerged(ctx, "acme", "app", n); err != nil || !merged {
		t.Fatalf("is merged: %v %v", merged, err)
	}
	prs, _, err := gh.PullRequests.ListPullRequestsWithCommit(ctx, "acme", "app", sha, nil)
	if err != nil || len(prs) != 1 || prs[0].GetNumber() != n {
		t.Fatalf("pulls of the merge commit %v %v", prs, err)
	}
	if _, err := bob.MergePR(f.repo, n, "merge"); !gitIsStatus(err, 405) {
		t.Fatalf("merging twice: %v", err)
	}
}

func gitIsStatus(err error, status int) bool {
	var ge *GitError
	return errors.As(err, &ge) && ge.Status == status
}

func itoa(n int) string {
	b := []byte{}
	for {
		b = append([]byte{byte('0' + n%10)}, b...)
		n /= 10
		if n == 0 {
			return string(b)
		}
	}
}

func TestPullsIntoOtherBranchesCloseNothing(t *testing.T) {
	f := newFixture(t)
	alice := f.sim.As("alice")
	epicIssue, childIssue := gitIssue(f, "epic"), gitIssue(f, "child")
	alice.CreateBranch(f.repo, "epic", "main")
	alice.Push(f.repo, "child", "epic", map[string]string{"c.txt": "c\n"}, "Child work, fixes #"+itoa(childIssue))
	pr, err := alice.OpenPR(f.repo, "acme:child", "epic", "Child", "Fixes #"+itoa(childIssue), false)
	if err != nil {
		t.Fatal(err)
	}
	m := gitMark(t, f)
	sha, err := alice.MergePR(f.repo, pr.Issue.Number, "squash")
	if err != nil {
		t.Fatal(err)
	}
	hs := gitHooksSince(t, f, m)
	gitExpect(t, hs, "pull_request.closed", "push", "check_suite.requested")
	f.sim.Locked(func() {
		if f.repo.Issues[childIssue].State != "open" {
			t.Error("a merge into a non-default branch closed an issue")
		}
		c := f.repo.Commits[sha]
		if len(c.Parents) != 1 || c.Message != "Child (#"+itoa(pr.Issue.Number)+")\n\n* Child work, fixes #"+itoa(childIssue) {
			t.Errorf("squash commit %q parents %v", c.Message, c.Parents)
		}
	})
	// The epic reaches main by a rebase merge: the commit message's keyword
	// closes the child issue now; the epic PR's body closes the epic.
	epr, err := alice.OpenPR(f.repo, "epic", "main", "Epic", "Closes #"+itoa(epicIssue), false)
	if err != nil {
		t.Fatal(err)
	}
	m = gitMark(t, f)
	if _, err := alice.MergePR(f.repo, epr.Issue.Number, "rebase"); err != nil {
		t.Fatal(err)
	}
	hs = gitHooksSince(t, f, m)
	gitExpect(t, hs, "pull_request.closed", "push", "check_suite.requested", "issues.closed", "issues.closed")
	if gitGet(hs[3].body, "issue.number") != float64(childIssue) || gitGet(hs[4].body, "issue.number") != float64(epicIssue) {
		t.Fatalf("closed %v then %v", gitGet(hs[3].body, "issue.number"), gitGet(hs[4].body, "issue.number"))
	}
}

func TestPullsStatesDraftsAndConflicts(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	gh, _ := f.app.Installation(f.inst.ID)
	alice := f.sim.As("alice")
	alice.Push(f.repo, "a", "main", map[string]string{"README.md": "# a\n"}, "a")
	alice.Push(f.repo, "b", "main", map[string]string{"README.md": "# b\n"}, "b")

	// Opened through REST by the App; refusals are GitHub's 422s.
	draft := true
	pr, resp, err := gh.PullRequests.Create(ctx, "acme", "app", &github.NewPullRequest{Title: github.String("A"), Head: github.String("a"),
		Base: github.String("main"), Draft: &draft})
	if err != nil || resp.StatusCode != 201 || !pr.GetDraft() || pr.GetUser().GetLogin() != f.sim.BotLogin() {
		t.Fatalf("create: %v %v", pr, err)
	}
	na := pr.GetNumber()
	for _, np := range []*github.NewPullRequest{
		{Title: github.String("again"), Head: github.String("a"), Base: github.String("main")},
		{Title: github.String("none"), Head: github.String("main"), Base: github.String("main")},
		{Title: github.String("nohead"), Head: github.String("nope"), Base: github.String("main")},
	} {
		if _, resp, _ := gh.PullRequests.Create(ctx, "acme", "app", np); gitStatus(resp) != 422 {
			t.Fatalf("create %s: %d", np.GetTitle(), gitStatus(resp))
		}
	}
	if _, err := alice.MergePR(f.repo, na, ""); !gitIsStatus(err, 405) {
		t.Fatalf("merging a draft: %v", err)
	}
	if _, resp, _ := gh.PullRequests.Merge(ctx, "acme", "app", na, "", nil); gitStatus(resp) != 405 {
		t.Fatalf("merging a draft through REST: %d", gitStatus(resp))
	}
	m := gitMark(t, f)
	if err := alice.MarkReady(f.repo, na); err != nil {
		t.Fatal(err)
	}
	if err := alice.ConvertToDraft(f.repo, na); err != nil {
		t.Fatal(err)
	}
	alice.MarkReady(f.repo, na)
	// Close and reopen through REST; through the actor.
	closed := "closed"
	if _, _, err := gh.PullRequests.Edit(ctx, "acme", "app", na, &github.PullRequest{State: &closed}); err != nil {
		t.Fatal(err)
	}
	if err := alice.ReopenPR(f.repo, na); err != nil {
		t.Fatal(err)
	}
	if err := alice.ClosePR(f.repo, na); err != nil {
		t.Fatal(err)
	}
	hs := gitHooksSince(t, f, m)
	gitExpect(t, hs, "pull_request.ready_for_review", "pull_request.converted_to_draft", "pull_request.ready_for_review",
		"pull_request.closed", "pull_request.reopened", "pull_request.closed")
	if gitGet(hs[3].body, "pull_request.merged") != false || gitGet(hs[3].body, "sender.login") != f.sim.BotLogin() {
		t.Fatalf("closed by the App %v", hs[3].body)
	}
	if err := alice.ReopenPR(f.repo, na); err != nil {
		t.Fatal(err)
	}

	// Both branches change README.md: once a is merged, b conflicts.
	pb, err := alice.OpenPR(f.repo, "b", "main", "B", "", false)
	if err != nil {
		t.Fatal(err)
	}
	nb := pb.Issue.Number
	// The App merges a through REST (squash, with its own title).
	res, _, err := gh.PullRequests.Merge(ctx, "acme", "app", na, "", &github.PullRequestOptions{MergeMethod: "squash", CommitTitle: "A, squashed"})
	if err != nil || !res.GetMerged() || len(res.GetSHA()) != 40 {
		t.Fatalf("merge through REST: %+v %v", res, err)
	}
	f.sim.Locked(func() {
		if c := f.repo.Commits[res.GetSHA()]; c == nil || c.Message != "A, squashed\n\n* a" || f.repo.Branches["main"] != c.SHA {
			t.Errorf("squash commit %+v", c)
		}
	})
	got, _, _ := gh.PullRequests.Get(ctx, "acme", "app", nb)
	if got.GetMergeable() || got.GetMergeableState() != "dirty" {
		t.Fatalf("conflicting pull: mergeable %v %s", got.Mergeable, got.GetMergeableState())
	}
	if _, err := alice.MergePR(f.repo, nb, "merge"); !gitIsStatus(err, 405) {
		t.Fatalf("merging a conflict: %v", err)
	}
	// A test may pin mergeable: null while "computing", or false.
	yes := true
	alice.SetMergeable(f.repo, nb, nil)
	got, _, _ = gh.PullRequests.Get(ctx, "acme", "app", nb)
	if got.Mergeable != nil || got.GetMergeableState() != "unknown" {
		t.Fatalf("pinned null: %v %s", got.Mergeable, got.GetMergeableState())
	}
	alice.SetMergeable(f.repo, nb, &yes)
	if got, _, _ = gh.PullRequests.Get(ctx, "acme", "app", nb); !got.GetMergeable() {
		t.Fatal("pinned true")
	}

	// Retarget through REST: edited with changes.base.
	alice.CreateBranch(f.repo, "dev", "main")
	m = gitMark(t, f)
	dev := "dev"
	upd, _, err := gh.PullRequests.Edit(ctx, "acme", "app", nb, &github.PullRequest{Base: &github.PullRequestBranch{Ref: &dev}})
	if err != nil || upd.GetBase().GetRef() != "dev" {
		t.Fatalf("retarget %v %v", upd, err)
	}
	hs = gitHooksSince(t, f, m)
	gitExpect(t, hs, "pull_request.edited")
	if gitGet(hs[0].body, "changes.base.ref.from") != "main" {
		t.Fatalf("retarget changes %v", hs[0].body["changes"])
	}
	// Deleting the head branch closes the pull request.
	m = gitMark(t, f)
	if err := alice.DeleteBranch(f.repo, "b"); err != nil {
		t.Fatal(err)
	}
	hs = gitHooksSince(t, f, m)
	gitExpect(t, hs, "push", "pull_request.closed")
	if err := alice.ReopenPR(f.repo, nb); !gitIsStatus(err, 422) {
		t.Fatalf("reopening without a head branch: %v", err)
	}
}
