package agentapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/google/go-github/v66/github"

	"github.com/wardenhq/warden/app"
	"github.com/wardenhq/warden/mirror/store"
)

// GitHub is the handful of GitHub calls the agent API makes, each as the
// App's installation on the repository (store.Repo.Installation). AppGitHub
// implements it over *app.App; tests may wrap that adapter.
//
// Errors that carry an HTTP status from GitHub are *GitHubError; a rate limit
// is an error for which app.IsRateLimited reports true.
type GitHub interface {
	// BotLogin is the App's bot account ("<slug>[bot]"), the author of the
	// issues the API opens.
	BotLogin(ctx context.Context) (string, error)
	// CreateIssue opens an issue with labels and returns it as GitHub
	// answered (labels GitHub silently dropped are absent).
	CreateIssue(ctx context.Context, r store.Repo, title, body string, labels []string) (Issue, error)
	// AddLabels adds labels to an issue and returns its labels afterwards.
	AddLabels(ctx context.Context, r store.Repo, number int, labels []string) ([]string, error)
	// RecentIssuesBy lists, in one call, the newest 100 issues (open or
	// closed) opened by creator.
	RecentIssuesBy(ctx context.Context, r store.Repo, creator string) ([]Issue, error)
	// Issue reads one issue (or pull request's issue half).
	Issue(ctx context.Context, r store.Repo, number int) (Issue, error)
	// PullRequest reads one pull request.
	PullRequest(ctx context.Context, r store.Repo, number int) (PullRequest, error)
	// AddSubIssue makes child a native sub-issue of issue parent; it
	// succeeds when child already is one.
	AddSubIssue(ctx context.Context, r store.Repo, parent int, child Issue) error
	// CommentsSince lists the issue's comments updated at or after since
	// (up to 100, oldest first).
	CommentsSince(ctx context.Context, r store.Repo, number int, since time.Time) ([]Comment, error)
}

// Issue is the part of a GitHub issue the API reads.
type Issue struct {
	ID     int64 // the issue's numeric id (sub-issue calls take it), not its number
	Number int
	Title  string
	Body   string
	State  string // open, closed
	URL    string // html_url
	Author string
	Labels []string
	IsPull bool
	// UpdatedAt is GitHub's updated_at (zero when unknown): the order of
	// recorded issue states.
	UpdatedAt time.Time
}

// PullRequest is the part of a pull request the API reads.
type PullRequest struct {
	Number int
	State  string // open, closed
	Merged bool
	Base   string
	Head   string
	// HeadRepo is the head's repository (OWNER/REPO): a fork's differs.
	HeadRepo string
	// Body is the pull request's description (its links to items).
	Body string
}

// Comment is an issue comment as the completion proof of a research item
// reads it.
type Comment struct {
	ID         int64
	Author     string
	AuthorType string // GitHub's user type: "User", "Bot", …
	CreatedAt  time.Time
	Body       string
}

// GitHubError is an answer from GitHub with an error status.
type GitHubError struct {
	Op      string // what warden was doing, e.g. "open the issue"
	Status  int
	Message string
}

func (e *GitHubError) Error() string {
	return fmt.Sprintf("GitHub: %s: %d %s", e.Op, e.Status, e.Message)
}

// githubStatus returns the HTTP status of a GitHub answer carried by err, or 0.
func githubStatus(err error) int {
	var ge *GitHubError
	if errors.As(err, &ge) {
		return ge.Status
	}
	return 0
}

// AppGitHub is the GitHub adapter over warden's App client.
func AppGitHub(a *app.App) GitHub { return &appGitHub{a: a} }

type appGitHub struct{ a *app.App }

func (g *appGitHub) client(r store.Repo) (*github.Client, string, string, error) {
	owner, name, ok := strings.Cut(r.FullName, "/")
	if !ok {
		return nil, "", "", fmt.Errorf("repository %q is not owner/name", r.FullName)
	}
	c, err := g.a.Installation(r.Installation)
	if err != nil {
		return nil, "", "", err
	}
	return c, owner, name, nil
}

// wrap turns a go-github error into a *GitHubError when GitHub answered,
// leaving rate limits and transport errors as they are.
func wrap(op string, resp *github.Response, err error) error {
	if err == nil {
		return nil
	}
	if _, ok := app.IsRateLimited(err); ok {
		return err
	}
	if _, ok := app.IsUnavailable(err); ok {
		return err
	}
	var er *github.ErrorResponse
	if errors.As(err, &er) && er.Response != nil {
		msg := er.Message
		for _, e := range er.Errors {
			if e.Message != "" {
				msg += "; " + e.Message
			} else if e.Field != "" {
				msg += fmt.Sprintf("; %s %s", e.Field, e.Code)
			}
		}
		return &GitHubError{Op: op, Status: er.Response.StatusCode, Message: msg}
	}
	if resp != nil && resp.StatusCode >= 400 {
		return &GitHubError{Op: op, Status: resp.StatusCode, Message: http.StatusText(resp.StatusCode)}
	}
	return fmt.Errorf("GitHub: %s: %w", op, err)
}

func (g *appGitHub) BotLogin(ctx context.Context) (string, error) {
	id, err := g.a.Identity(ctx)
	if err != nil {
		return "", err
	}
	return id.BotLogin, nil
}

func fromIssue(i *github.Issue) Issue {
	out := Issue{ID: i.GetID(), Number: i.GetNumber(), Title: i.GetTitle(), Body: i.GetBody(), State: i.GetState(),
		URL: i.GetHTMLURL(), Author: i.GetUser().GetLogin(), IsPull: i.IsPullRequest(), UpdatedAt: i.GetUpdatedAt().Time}
	for _, l := range i.Labels {
		out.Labels = append(out.Labels, l.GetName())
	}
	return out
}

func (g *appGitHub) CreateIssue(ctx context.Context, r store.Repo, title, body string, labels []string) (Issue, error) {
	c, owner, name, err := g.client(r)
	if err != nil {
		return Issue{}, err
	}
	req := &github.IssueRequest{Title: &title, Body: &body, Labels: &labels}
	i, resp, err := c.Issues.Create(ctx, owner, name, req)
	if err != nil {
		return Issue{}, wrap("open the issue", resp, err)
	}
	return fromIssue(i), nil
}

func (g *appGitHub) AddLabels(ctx context.Context, r store.Repo, number int, labels []string) ([]string, error) {
	c, owner, name, err := g.client(r)
	if err != nil {
		return nil, err
	}
	ls, resp, err := c.Issues.AddLabelsToIssue(ctx, owner, name, number, labels)
	if err != nil {
		return nil, wrap(fmt.Sprintf("label issue #%d", number), resp, err)
	}
	out := make([]string, 0, len(ls))
	for _, l := range ls {
		out = append(out, l.GetName())
	}
	return out, nil
}

func (g *appGitHub) RecentIssuesBy(ctx context.Context, r store.Repo, creator string) ([]Issue, error) {
	c, owner, name, err := g.client(r)
	if err != nil {
		return nil, err
	}
	is, resp, err := c.Issues.ListByRepo(ctx, owner, name, &github.IssueListByRepoOptions{
		Creator: creator, State: "all", Sort: "created", Direction: "desc",
		ListOptions: github.ListOptions{PerPage: 100},
	})
	if err != nil {
		return nil, wrap("list the App's issues", resp, err)
	}
	out := make([]Issue, 0, len(is))
	for _, i := range is {
		out = append(out, fromIssue(i))
	}
	return out, nil
}

func (g *appGitHub) Issue(ctx context.Context, r store.Repo, number int) (Issue, error) {
	c, owner, name, err := g.client(r)
	if err != nil {
		return Issue{}, err
	}
	i, resp, err := c.Issues.Get(ctx, owner, name, number)
	if err != nil {
		return Issue{}, wrap(fmt.Sprintf("read issue #%d", number), resp, err)
	}
	return fromIssue(i), nil
}

func (g *appGitHub) PullRequest(ctx context.Context, r store.Repo, number int) (PullRequest, error) {
	c, owner, name, err := g.client(r)
	if err != nil {
		return PullRequest{}, err
	}
	p, resp, err := c.PullRequests.Get(ctx, owner, name, number)
	if err != nil {
		return PullRequest{}, wrap(fmt.Sprintf("read pull request #%d", number), resp, err)
	}
	return PullRequest{Number: p.GetNumber(), State: p.GetState(), Merged: p.GetMerged() || p.MergedAt != nil,
		Base: p.GetBase().GetRef(), Head: p.GetHead().GetRef(), HeadRepo: p.GetHead().GetRepo().GetFullName(), Body: p.GetBody()}, nil
}

// AddSubIssue uses POST …/issues/{parent}/sub_issues, which go-github v66
// lacks. GitHub answers 422 when the child already has a parent; then the
// child's parent is read back and, if it is parent, the call succeeds.
func (g *appGitHub) AddSubIssue(ctx context.Context, r store.Repo, parent int, child Issue) error {
	c, owner, name, err := g.client(r)
	if err != nil {
		return err
	}
	req, err := c.NewRequest(http.MethodPost, fmt.Sprintf("repos/%s/%s/issues/%d/sub_issues", owner, name, parent),
		map[string]any{"sub_issue_id": child.ID})
	if err != nil {
		return err
	}
	resp, err := c.Do(ctx, req, nil)
	if err == nil {
		return nil
	}
	werr := wrap(fmt.Sprintf("attach #%d as a sub-issue of #%d", child.Number, parent), resp, err)
	if githubStatus(werr) != http.StatusUnprocessableEntity {
		return werr
	}
	preq, perr := c.NewRequest(http.MethodGet, fmt.Sprintf("repos/%s/%s/issues/%d/parent", owner, name, child.Number), nil)
	if perr != nil {
		return werr
	}
	var p github.Issue
	if _, perr := c.Do(ctx, preq, &p); perr == nil && p.GetNumber() == parent {
		return nil
	}
	return werr
}

func (g *appGitHub) CommentsSince(ctx context.Context, r store.Repo, number int, since time.Time) ([]Comment, error) {
	c, owner, name, err := g.client(r)
	if err != nil {
		return nil, err
	}
	cs, resp, err := c.Issues.ListComments(ctx, owner, name, number, &github.IssueListCommentsOptions{
		Since: &since, ListOptions: github.ListOptions{PerPage: 100},
	})
	if err != nil {
		return nil, wrap(fmt.Sprintf("read the comments of #%d", number), resp, err)
	}
	out := make([]Comment, 0, len(cs))
	for _, x := range cs {
		out = append(out, Comment{ID: x.GetID(), Author: x.GetUser().GetLogin(), AuthorType: x.GetUser().GetType(), CreatedAt: x.GetCreatedAt().Time, Body: x.GetBody()})
	}
	return out, nil
}
