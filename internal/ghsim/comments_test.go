package ghsim

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-github/v66/github"
)

func TestCommentsPaginateAcrossPagesWithLink(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	gh, _ := f.app.Installation(f.inst.ID)
	alice := f.sim.As("alice")
	if _, err := alice.OpenIssue(f.repo, "busy", ""); err != nil {
		t.Fatal(err)
	}
	for k := 0; k < 75; k++ {
		if _, err := alice.Comment(f.repo, 1, fmt.Sprintf("comment %d", k)); err != nil {
			t.Fatal(err)
		}
	}
	var bodies []string
	opts := &github.IssueListCommentsOptions{ListOptions: github.ListOptions{PerPage: 30}}
	pages := 0
	for {
		cs, resp, err := gh.Issues.ListComments(ctx, "acme", "app", 1, opts)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		link := resp.Header.Get("Link")
		switch pages {
		case 1:
			if !strings.Contains(link, `rel="next"`) || !strings.Contains(link, `rel="last"`) || strings.Contains(link, `rel="prev"`) ||
				!strings.Contains(link, "page=3") || resp.LastPage != 3 {
				t.Fatalf("page 1 Link %q", link)
			}
		case 3:
			if strings.Contains(link, `rel="next"`) || !strings.Contains(link, `rel="prev"`) || len(cs) != 15 {
				t.Fatalf("page 3: %d comments, Link %q", len(cs), link)
			}
		}
		for _, c := range cs {
			bodies = append(bodies, c.GetBody())
		}
		if resp.NextPage == 0 {
			break
		}
		opts.Page = resp.NextPage
	}
	if pages != 3 || len(bodies) != 75 || bodies[0] != "comment 0" || bodies[74] != "comment 74" {
		t.Fatalf("%d pages, %d comments", pages, len(bodies))
	}
	iss, _, _ := gh.Issues.Get(ctx, "acme", "app", 1)
	if iss.GetComments() != 75 {
		t.Fatalf("comments count %d", iss.GetComments())
	}
}

func TestCommentsCreateEditDelete(t *testing.T) {
	f := newFixture(t)
	clock := f.manualClock(t)
	ctx := context.Background()
	gh, _ := f.app.Installation(f.inst.ID)
	alice := f.sim.As("alice")
	if _, err := alice.OpenIssue(f.repo, "talk", ""); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Minute)
	m := f.mark(t)
	c, resp, err := gh.Issues.CreateComment(ctx, "acme", "app", 1, &github.IssueComment{Body: github.String("<!-- marker -->\nhi")})
	if err != nil || resp.StatusCode != 201 || c.GetUser().GetLogin() != f.sim.BotLogin() || c.GetAuthorAssociation() != "NONE" {
		t.Fatalf("create: %+v %v", c, err)
	}
	if !strings.HasSuffix(resp.Header.Get("Location"), fmt.Sprintf("/issues/comments/%d", c.GetID())) ||
		c.GetHTMLURL() != fmt.Sprintf("https://github.com/acme/app/issues/1#issuecomment-%d", c.GetID()) {
		t.Fatalf("Location %q html %q", resp.Header.Get("Location"), c.GetHTMLURL())
	}
	iss, _, _ := gh.Issues.Get(ctx, "acme", "app", 1)
	if !iss.GetUpdatedAt().Time.Equal(clock.Now()) || !iss.GetUpdatedAt().After(iss.GetCreatedAt().Time) {
		t.Fatalf("a comment bumps the issue's updated_at: %v", iss.GetUpdatedAt())
	}
	hs := f.hooksSince(t, m)
	if len(hs) != 1 || hs[0].String() != "issue_comment.created" || dig(hs[0].body, "comment.performed_via_github_app.id") != float64(f.sim.AppID()) ||
		dig(hs[0].body, "issue.comments") != 1.0 || digS(hs[0].body, "comment.body") != "<!-- marker -->\nhi" {
		t.Fatalf("created delivery %s %v", hookNames(hs), hs)
	}

	// Validation: no body, empty body, too long (GitHub's older shape).
	code, _, _, err := call(t, gh, "POST", "repos/acme/app/issues/1/comments", map[string]any{})
	if er := errResp(t, err, 422); code != 422 || !strings.Contains(er.Message, `"body" wasn't supplied`) {
		t.Fatalf("no body: %v", er)
	}
	_, _, err = gh.Issues.CreateComment(ctx, "acme", "app", 1, &github.IssueComment{Body: github.String("")})
	if err == nil {
		t.Fatal("an empty comment was accepted")
	}
	_, _, err = gh.Issues.CreateComment(ctx, "acme", "app", 1, &github.IssueComment{Body: github.String(strings.Repeat("x", 65537))})
	er := wantValidation(t, err, "IssueComment", "body", "custom")
	if er.Errors[0].Message != "body is too long (maximum is 65536 characters)" {
		t.Fatalf("too long: %+v", er.Errors[0])
	}
	if _, _, err := gh.Issues.CreateComment(ctx, "acme", "app", 7, &github.IssueComment{Body: github.String("x")}); err == nil {
		t.Fatal("commented on a missing issue")
	}

	// A human edits the App's comment? Not without write access.
	if _, err := alice.EditComment(f.repo, c.GetID(), "hijack"); err == nil {
		t.Fatal("alice edited the App's comment")
	}
	ac, err := alice.Comment(f.repo, 1, "<!-- backlog-worker: claim item=issue-1 -->")
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Minute)
	m = f.mark(t)
	if _, err := alice.EditComment(f.repo, ac.ID, "edited text"); err != nil {
		t.Fatal(err)
	}
	hs = f.hooksSince(t, m)
	if len(hs) != 1 || hs[0].String() != "issue_comment.edited" || digS(hs[0].body, "changes.body.from") != "<!-- backlog-worker: claim item=issue-1 -->" ||
		digS(hs[0].body, "comment.body") != "edited text" || digS(hs[0].body, "sender.login") != "alice" || dig(hs[0].body, "comment.performed_via_github_app") != nil {
		t.Fatalf("edited delivery %v", hs)
	}
	got, _, err := gh.Issues.GetComment(ctx, "acme", "app", ac.ID)
	if err != nil || got.GetBody() != "edited text" || !got.GetUpdatedAt().After(got.GetCreatedAt().Time) {
		t.Fatalf("get after edit: %+v %v", got, err)
	}
	// The App edits its own comment through the API.
	m = f.mark(t)
	ec, _, err := gh.Issues.EditComment(ctx, "acme", "app", c.GetID(), &github.IssueComment{Body: github.String("v2")})
	if err != nil || ec.GetBody() != "v2" {
		t.Fatalf("edit: %v", err)
	}
	if hs := f.hooksSince(t, m); len(hs) != 1 || digS(hs[0].body, "changes.body.from") != "<!-- marker -->\nhi" {
		t.Fatalf("edited by the App: %s", hookNames(hs))
	}
	// since: comments updated at or after it.
	cs, _, err := gh.Issues.ListComments(ctx, "acme", "app", 1, &github.IssueListCommentsOptions{Since: timePtr(clock.Now())})
	if err != nil || len(cs) != 2 {
		t.Fatalf("since: %d %v", len(cs), err)
	}
	cs, _, _ = gh.Issues.ListComments(ctx, "acme", "app", 1, &github.IssueListCommentsOptions{Since: timePtr(clock.Now().Add(time.Second))})
	if len(cs) != 0 {
		t.Fatalf("since later: %d", len(cs))
	}

	// Repository-wide, with sort and direction.
	if _, err := alice.OpenIssue(f.repo, "other", ""); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Minute)
	oc, _ := alice.Comment(f.repo, 2, "elsewhere")
	all, _, err := gh.Issues.ListComments(ctx, "acme", "app", 0, nil)
	if err != nil || len(all) != 3 || all[0].GetID() != c.GetID() || all[2].GetID() != oc.ID {
		t.Fatalf("repo-wide by id: %v %v", all, err)
	}
	all, _, _ = gh.Issues.ListComments(ctx, "acme", "app", 0, &github.IssueListCommentsOptions{Sort: github.String("updated"), Direction: github.String("desc")})
	if len(all) != 3 || all[0].GetID() != oc.ID {
		t.Fatalf("repo-wide by updated desc: %v", all)
	}
	all, _, _ = gh.Issues.ListComments(ctx, "acme", "app", 0, &github.IssueListCommentsOptions{Sort: github.String("created"), Direction: github.String("asc"),
		Since: timePtr(clock.Now())})
	if len(all) != 1 || all[0].GetID() != oc.ID {
		t.Fatalf("repo-wide since: %v", all)
	}

	// Delete: 204, issue_comment.deleted, then 404.
	m = f.mark(t)
	resp, err = gh.Issues.DeleteComment(ctx, "acme", "app", c.GetID())
	if err != nil || resp.StatusCode != 204 {
		t.Fatalf("delete: %v", err)
	}
	if err := alice.DeleteComment(f.repo, ac.ID); err != nil {
		t.Fatal(err)
	}
	hs = f.hooksSince(t, m)
	if hookNames(hs) != "issue_comment.deleted issue_comment.deleted" || digS(hs[1].body, "sender.login") != "alice" ||
		dig(hs[1].body, "issue.comments") != 0.0 {
		t.Fatalf("deleted deliveries %s", hookNames(hs))
	}
	_, _, err = gh.Issues.GetComment(ctx, "acme", "app", c.GetID())
	errResp(t, err, 404)
	_, err = gh.Issues.DeleteComment(ctx, "acme", "app", c.GetID())
	errResp(t, err, 404)
}

func timePtr(t time.Time) *time.Time { return &t }
