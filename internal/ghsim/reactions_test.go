package ghsim

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/go-github/v66/github"
)

func TestReactionsOnIssuesAndComments(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	gh, _ := f.app.Installation(f.inst.ID)
	alice := f.sim.As("alice")
	alice.OpenIssue(f.repo, "react to me", "")
	c, _ := alice.Comment(f.repo, 1, "/backlog status")
	m := f.mark(t)

	r1, resp, err := gh.Reactions.CreateIssueReaction(ctx, "acme", "app", 1, "+1")
	if err != nil || resp.StatusCode != 201 || r1.GetContent() != "+1" || r1.GetUser().GetLogin() != f.sim.BotLogin() {
		t.Fatalf("first: %d %+v %v", resp.StatusCode, r1, err)
	}
	r2, resp, err := gh.Reactions.CreateIssueReaction(ctx, "acme", "app", 1, "+1")
	if err != nil || resp.StatusCode != 200 || r2.GetID() != r1.GetID() {
		t.Fatalf("again: %d %+v %v", resp.StatusCode, r2, err)
	}
	if _, _, err := gh.Reactions.CreateIssueReaction(ctx, "acme", "app", 1, "thumbsup"); err == nil {
		t.Fatal("an unknown reaction was accepted")
	} else {
		wantValidation(t, err, "Reaction", "content", "invalid")
	}
	if _, err := alice.React(f.repo, 1, "heart"); err != nil {
		t.Fatal(err)
	}
	rs, _, err := gh.Reactions.ListIssueReactions(ctx, "acme", "app", 1, nil)
	if err != nil || len(rs) != 2 {
		t.Fatalf("list: %v %v", rs, err)
	}
	iss, _, _ := gh.Issues.Get(ctx, "acme", "app", 1)
	if iss.GetReactions().GetTotalCount() != 2 || iss.GetReactions().GetPlusOne() != 1 || iss.GetReactions().GetHeart() != 1 {
		t.Fatalf("rollup %+v", iss.GetReactions())
	}
	resp, err = gh.Reactions.DeleteIssueReaction(ctx, "acme", "app", 1, r1.GetID())
	if err != nil || resp.StatusCode != 204 {
		t.Fatalf("delete: %v", err)
	}
	_, err = gh.Reactions.DeleteIssueReaction(ctx, "acme", "app", 1, r1.GetID())
	errResp(t, err, 404)

	// On a comment: warden's command answers.
	cr, resp, err := gh.Reactions.CreateIssueCommentReaction(ctx, "acme", "app", c.ID, "confused")
	if err != nil || resp.StatusCode != 201 {
		t.Fatalf("comment reaction: %v", err)
	}
	if _, err := alice.ReactToComment(f.repo, c.ID, "eyes"); err != nil {
		t.Fatal(err)
	}
	crs, _, err := gh.Reactions.ListIssueCommentReactions(ctx, "acme", "app", c.ID, &github.ListOptions{PerPage: 1})
	if err != nil || len(crs) != 1 || crs[0].GetID() != cr.GetID() {
		t.Fatalf("list: %v %v", crs, err)
	}
	_, obj, _, err := call(t, gh, "GET", fmt.Sprintf("repos/acme/app/issues/comments/%d/reactions?content=eyes", c.ID), nil)
	if err != nil || len(obj.([]any)) != 1 || digS(obj.([]any)[0], "user.login") != "alice" {
		t.Fatalf("filtered list: %v %v", obj, err)
	}
	got, _, _ := gh.Issues.GetComment(ctx, "acme", "app", c.ID)
	if got.GetReactions().GetConfused() != 1 || got.GetReactions().GetEyes() != 1 {
		t.Fatalf("comment rollup %+v", got.GetReactions())
	}
	resp, err = gh.Reactions.DeleteIssueCommentReaction(ctx, "acme", "app", c.ID, cr.GetID())
	if err != nil || resp.StatusCode != 204 {
		t.Fatalf("delete comment reaction: %v", err)
	}
	if _, _, err := gh.Reactions.CreateIssueCommentReaction(ctx, "acme", "app", 424242, "+1"); err == nil {
		t.Fatal("reacted to a missing comment")
	}
	// Reactions send no webhook.
	if hs := f.hooksSince(t, m); len(hs) != 0 {
		t.Fatalf("reactions sent %s", hookNames(hs))
	}
}
