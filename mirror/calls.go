package mirror

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/google/go-github/v66/github"

	"github.com/wardenhq/warden/mirror/store"
)

// repoCalls are the GitHub calls the handlers make on one repository's
// behalf: the union of the narrow interfaces each file declares for what
// it calls (gateCalls, roleCalls, parkCalls, commandCalls, checkCalls,
// claimMarkerCalls, specCalls). githubCalls makes them over go-github; the tests give
// a fake (Mirror.calls).
type repoCalls interface {
	gateCalls
	roleCalls
	parkCalls
	commandCalls
	checkCalls
	claimMarkerCalls
	specCalls
}

// GitHub answers the callers tell apart. A call GitHub answered 404 or 422
// returns an error errors.Is finds one of these in; its text stays
// GitHub's own (see statusError).
var (
	errNotFound      = errors.New("github: 404 Not Found")
	errUnprocessable = errors.New("github: 422 Unprocessable Entity")
)

// statusError is go-github's error for a call, marked with what its status
// means (errNotFound, errUnprocessable). Its text is go-github's error's;
// errors.Is and errors.As find both.
type statusError struct {
	err  error
	mark error
}

func (e *statusError) Error() string   { return e.err.Error() }
func (e *statusError) Unwrap() []error { return []error{e.err, e.mark} }

// marked marks err by its response's status (404, 422); any other error is
// returned as it is.
func marked(resp *github.Response, err error) error {
	if err == nil || resp == nil {
		return err
	}
	switch resp.StatusCode {
	case http.StatusNotFound:
		return &statusError{err: err, mark: errNotFound}
	case http.StatusUnprocessableEntity:
		return &statusError{err: err, mark: errUnprocessable}
	}
	return err
}

// callsFor gives the GitHub calls on repo: the test hook's when it is set,
// else go-github's over the repository's installation client behind the
// dry-run guard (dryrun.go): while the repository is in dry run, every
// write they make is refused unsent (errDryRun).
func (m *Mirror) callsFor(repo store.Repo) (repoCalls, error) {
	if m.calls != nil {
		return m.calls(repo)
	}
	gh, err := m.repoClient(repo)
	if err != nil {
		return nil, err
	}
	return newGitHubCalls(gh, repo.FullName), nil
}

// githubCalls makes repoCalls over go-github on one repository (owner/name).
type githubCalls struct {
	gh          *github.Client
	owner, name string
}

var _ repoCalls = githubCalls{}

// newGitHubCalls is the calls on fullName ("owner/name") through gh.
func newGitHubCalls(gh *github.Client, fullName string) githubCalls {
	owner, name, _ := strings.Cut(fullName, "/")
	return githubCalls{gh: gh, owner: owner, name: name}
}

func (g githubCalls) issueEvents(ctx context.Context, n, page int) ([]*github.IssueEvent, int, error) {
	evs, resp, err := g.gh.Issues.ListIssueEvents(ctx, g.owner, g.name, n, &github.ListOptions{PerPage: 100, Page: page})
	if err != nil {
		return nil, 0, err
	}
	return evs, resp.LastPage, nil
}

func (g githubCalls) addLabels(ctx context.Context, n int, labels []string) error {
	_, _, err := g.gh.Issues.AddLabelsToIssue(ctx, g.owner, g.name, n, labels)
	return err
}

func (g githubCalls) removeLabel(ctx context.Context, n int, label string) error {
	resp, err := g.gh.Issues.RemoveLabelForIssue(ctx, g.owner, g.name, n, label)
	if err != nil && resp != nil && resp.StatusCode == http.StatusNotFound {
		return nil // the issue lacks it: already gone
	}
	return err
}

func (g githubCalls) createComment(ctx context.Context, n int, body string) (int64, error) {
	c, _, err := g.gh.Issues.CreateComment(ctx, g.owner, g.name, n, &github.IssueComment{Body: &body})
	if err != nil {
		return 0, err
	}
	return c.GetID(), nil
}

func (g githubCalls) issueComments(ctx context.Context, n int, since time.Time, page int) ([]*github.IssueComment, int, error) {
	opt := &github.IssueListCommentsOptions{ListOptions: github.ListOptions{PerPage: 100, Page: page}}
	if !since.IsZero() {
		opt.Since = &since
	}
	cs, resp, err := g.gh.Issues.ListComments(ctx, g.owner, g.name, n, opt)
	if err != nil {
		return nil, 0, err
	}
	return cs, resp.NextPage, nil
}

func (g githubCalls) react(ctx context.Context, commentID int64, content string) error {
	_, _, err := g.gh.Reactions.CreateIssueCommentReaction(ctx, g.owner, g.name, commentID, content)
	return err
}

func (g githubCalls) pull(ctx context.Context, n int) (*github.PullRequest, error) {
	pr, _, err := g.gh.PullRequests.Get(ctx, g.owner, g.name, n)
	return pr, err
}

func (g githubCalls) checkRunsFor(ctx context.Context, sha, name string) ([]*github.CheckRun, error) {
	runs, resp, err := g.gh.Checks.ListCheckRunsForRef(ctx, g.owner, g.name, sha, &github.ListCheckRunsOptions{
		CheckName: github.String(name), Filter: github.String("all"), ListOptions: github.ListOptions{PerPage: 100}})
	if resp != nil && (resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusUnprocessableEntity) {
		return nil, nil // the commit is unknown: it carries no run
	}
	if err != nil {
		return nil, err
	}
	return runs.CheckRuns, nil
}

func (g githubCalls) createCheckRun(ctx context.Context, opts github.CreateCheckRunOptions) (int64, error) {
	cr, resp, err := g.gh.Checks.CreateCheckRun(ctx, g.owner, g.name, opts)
	if err != nil {
		return 0, marked(resp, err)
	}
	return cr.GetID(), nil
}

func (g githubCalls) updateCheckRun(ctx context.Context, id int64, opts github.UpdateCheckRunOptions) error {
	_, resp, err := g.gh.Checks.UpdateCheckRun(ctx, g.owner, g.name, id, opts)
	return marked(resp, err)
}

func (g githubCalls) compare(ctx context.Context, base, head string) (*github.CommitsComparison, error) {
	c, resp, err := g.gh.Repositories.CompareCommits(ctx, g.owner, g.name, base, head, &github.ListOptions{PerPage: 1})
	return c, marked(resp, err)
}

func (g githubCalls) role(ctx context.Context, login string) (string, error) {
	perm, resp, err := g.gh.Repositories.GetPermissionLevel(ctx, g.owner, g.name, login)
	switch {
	case err == nil:
		if role := perm.GetRoleName(); role != "" {
			return role, nil
		}
		return perm.GetPermission(), nil
	case resp != nil && resp.StatusCode == http.StatusNotFound:
		return "none", nil
	}
	return "", err
}
