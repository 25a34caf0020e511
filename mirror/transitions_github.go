package mirror

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-github/v66/github"
)

// transitionCalls are the GitHub calls of the transitions (transitions.go):
// one read of the issue (its id, state and native parent), the sub-issue
// writes of GitHub's sub-issues REST API, and the close. githubCalls makes
// them; a test's fake calls may not, and then the transition fails loudly.
type transitionCalls interface {
	// issueLink reads issue n: GET /repos/{o}/{r}/issues/{n}.
	issueLink(ctx context.Context, n int) (issueLink, error)
	// addSubIssue is POST /repos/{o}/{r}/issues/{parent}/sub_issues with
	// sub_issue_id (and replace_parent when replace).
	addSubIssue(ctx context.Context, parent int, childID int64, replace bool) error
	// removeSubIssue is DELETE /repos/{o}/{r}/issues/{parent}/sub_issue
	// with sub_issue_id; a child that is not (or no longer) a sub-issue of
	// parent (404) is success.
	removeSubIssue(ctx context.Context, parent int, childID int64) error
	// closeCompleted is PATCH /repos/{o}/{r}/issues/{n} with state closed
	// and state_reason completed; it returns the issue as GitHub answered.
	closeCompleted(ctx context.Context, n int) (issueLink, error)
}

// issueLink is the part of an issue the transitions read.
type issueLink struct {
	ID     int64
	Number int
	State  string
	Labels []string
	// Parent is the issue number of its native parent in this repository:
	// 0 for none, -1 for a parent in another repository (never warden's).
	Parent    int
	UpdatedAt time.Time
}

// issueLinkJSON is what issueLink decodes (go-github v66 lacks
// parent_issue_url).
type issueLinkJSON struct {
	ID     int64  `json:"id"`
	Number int    `json:"number"`
	State  string `json:"state"`
	Labels []struct {
		Name string `json:"name"`
	} `json:"labels"`
	ParentIssueURL *string   `json:"parent_issue_url"`
	UpdatedAt      time.Time `json:"updated_at"`
}

func (g githubCalls) toLink(j issueLinkJSON) issueLink {
	out := issueLink{ID: j.ID, Number: j.Number, State: j.State, UpdatedAt: j.UpdatedAt}
	for _, l := range j.Labels {
		out.Labels = append(out.Labels, l.Name)
	}
	if j.ParentIssueURL != nil && *j.ParentIssueURL != "" {
		out.Parent = parentNumber(*j.ParentIssueURL, g.owner, g.name)
	}
	return out
}

// parentNumber reads the issue number from a parent_issue_url
// (…/repos/{owner}/{name}/issues/{n}); -1 when it names another repository
// or cannot be read (fail closed: not a parent warden may touch).
func parentNumber(url, owner, name string) int {
	i := strings.LastIndex(url, "/repos/")
	if i < 0 {
		return -1
	}
	parts := strings.Split(url[i+len("/repos/"):], "/")
	if len(parts) != 4 || parts[2] != "issues" || !strings.EqualFold(parts[0], owner) || !strings.EqualFold(parts[1], name) {
		return -1
	}
	n, err := strconv.Atoi(parts[3])
	if err != nil || n <= 0 {
		return -1
	}
	return n
}

func (g githubCalls) issueLink(ctx context.Context, n int) (issueLink, error) {
	req, err := g.gh.NewRequest(http.MethodGet, fmt.Sprintf("repos/%s/%s/issues/%d", g.owner, g.name, n), nil)
	if err != nil {
		return issueLink{}, err
	}
	var j issueLinkJSON
	resp, err := g.gh.Do(ctx, req, &j)
	if err != nil {
		return issueLink{}, marked(resp, err)
	}
	return g.toLink(j), nil
}

func (g githubCalls) addSubIssue(ctx context.Context, parent int, childID int64, replace bool) error {
	body := map[string]any{"sub_issue_id": childID}
	if replace {
		body["replace_parent"] = true
	}
	req, err := g.gh.NewRequest(http.MethodPost, fmt.Sprintf("repos/%s/%s/issues/%d/sub_issues", g.owner, g.name, parent), body)
	if err != nil {
		return err
	}
	resp, err := g.gh.Do(ctx, req, nil)
	return marked(resp, err)
}

func (g githubCalls) removeSubIssue(ctx context.Context, parent int, childID int64) error {
	req, err := g.gh.NewRequest(http.MethodDelete, fmt.Sprintf("repos/%s/%s/issues/%d/sub_issue", g.owner, g.name, parent),
		map[string]any{"sub_issue_id": childID})
	if err != nil {
		return err
	}
	resp, err := g.gh.Do(ctx, req, nil)
	if resp != nil && resp.StatusCode == http.StatusNotFound {
		return nil // not (or no longer) a sub-issue of parent
	}
	return marked(resp, err)
}

func (g githubCalls) closeCompleted(ctx context.Context, n int) (issueLink, error) {
	req := &github.IssueRequest{State: github.String("closed"), StateReason: github.String("completed")}
	i, resp, err := g.gh.Issues.Edit(ctx, g.owner, g.name, n, req)
	if err != nil {
		return issueLink{}, marked(resp, err)
	}
	out := issueLink{ID: i.GetID(), Number: i.GetNumber(), State: i.GetState(), UpdatedAt: i.GetUpdatedAt().Time}
	for _, l := range i.Labels {
		out.Labels = append(out.Labels, l.GetName())
	}
	return out, nil
}

// transitionCallsFor is the repository's calls as transitionCalls.
func (m *Mirror) transitionCallsFor(c repoCalls) (transitionCalls, error) {
	tc, ok := c.(transitionCalls)
	if !ok {
		return nil, fmt.Errorf("the GitHub calls in use (%T) cannot read or write sub-issues and issue states", c)
	}
	return tc, nil
}
