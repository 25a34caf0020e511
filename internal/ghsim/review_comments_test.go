package ghsim

import (
	"context"
	"strconv"
	"testing"

	"github.com/google/go-github/v66/github"
)

// TestReviewComments: a review comment and a reply, through the REST API
// and as an actor, each send pull_request_review_comment.created with the
// comment and the pull request; a reply joins its thread; bad input is
// refused and sends nothing.
func TestReviewComments(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	gh, _ := f.app.Installation(f.inst.ID)
	alice, bob := f.sim.As("alice"), f.sim.As("bob")
	if _, err := alice.Push(f.repo, "fix", "main", map[string]string{"fix.go": "package fix\n"}, "Fix it"); err != nil {
		t.Fatal(err)
	}
	pr, err := alice.OpenPR(f.repo, "fix", "main", "Fix the bug", "", false)
	if err != nil {
		t.Fatal(err)
	}
	n := pr.Issue.Number

	m := gitMark(t, f)
	c, err := bob.ReviewComment(f.repo, n, "fix.go", "Why a new package?")
	if err != nil {
		t.Fatal(err)
	}
	hs := gitHooksSince(t, f, m)
	gitExpect(t, hs, "pull_request_review_comment.created")
	p := hs[0].body
	if gitGet(p, "comment.user.login") != "bob" || gitGet(p, "comment.path") != "fix.go" || gitGet(p, "pull_request.number") != float64(n) ||
		gitGet(p, "pull_request.head.ref") != "fix" || gitGet(p, "sender.login") != "bob" || gitGet(p, "comment.body") != "Why a new package?" {
		t.Fatalf("review comment delivery %v", p)
	}

	// The PR's author replies through the REST API (as the App here).
	m = gitMark(t, f)
	reply, _, err := gh.PullRequests.CreateCommentInReplyTo(ctx, "acme", "app", n, "It keeps the fix apart.", c.ID)
	if err != nil {
		t.Fatal(err)
	}
	if reply.GetInReplyTo() != c.ID || reply.GetPath() != "fix.go" || reply.GetCommitID() != pr.HeadSHA {
		t.Fatalf("reply %+v", reply)
	}
	hs = gitHooksSince(t, f, m)
	gitExpect(t, hs, "pull_request_review_comment.created")
	if gitGet(hs[0].body, "comment.in_reply_to_id") != float64(c.ID) {
		t.Fatalf("reply delivery %v", hs[0].body)
	}
	// The replies route GitHub documents for the same.
	req, err := gh.NewRequest("POST", "repos/acme/app/pulls/"+itoa(n)+"/comments/"+itoa64(c.ID)+"/replies", map[string]string{"body": "And the tests?"})
	if err != nil {
		t.Fatal(err)
	}
	var viaReplies github.PullRequestComment
	if _, err := gh.Do(ctx, req, &viaReplies); err != nil || viaReplies.GetInReplyTo() != c.ID {
		t.Fatalf("POST .../replies: %+v %v", viaReplies, err)
	}
	// A reply to a reply joins the thread's first comment.
	r2, err := alice.ReplyToReviewComment(f.repo, n, reply.GetID(), "Agreed.")
	if err != nil || r2.InReplyTo != c.ID {
		t.Fatalf("reply to a reply: %+v %v", r2, err)
	}

	// Refusals send nothing.
	m = gitMark(t, f)
	if _, _, err := gh.PullRequests.CreateComment(ctx, "acme", "app", n, &github.PullRequestComment{Body: github.String(" "), Path: github.String("fix.go"), CommitID: github.String(pr.HeadSHA)}); err == nil {
		t.Fatal("an empty review comment was accepted")
	}
	if _, _, err := gh.PullRequests.CreateComment(ctx, "acme", "app", n, &github.PullRequestComment{Body: github.String("x"), Path: github.String("fix.go"), CommitID: github.String("0000000000000000000000000000000000000000")}); err == nil {
		t.Fatal("a review comment on a commit outside the PR was accepted")
	}
	if _, _, err := gh.PullRequests.CreateCommentInReplyTo(ctx, "acme", "app", n, "x", 987654321); err == nil {
		t.Fatal("a reply to a missing comment was accepted")
	}
	if hs := gitHooksSince(t, f, m); len(hs) != 0 {
		t.Fatalf("refused review comments sent %v", hs)
	}
}

func itoa64(n int64) string { return strconv.FormatInt(n, 10) }
