package mirror

import "context"

var _ dispatchCalls = githubCalls{}

// removeAssignees is DELETE /repos/{owner}/{repo}/issues/{n}/assignees.
func (g githubCalls) removeAssignees(ctx context.Context, n int, logins []string) error {
	_, resp, err := g.gh.Issues.RemoveAssignees(ctx, g.owner, g.name, n, logins)
	return marked(resp, err)
}

var _ addAssigneeCalls = githubCalls{}

// addAssignees is POST /repos/{owner}/{repo}/issues/{n}/assignees.
func (g githubCalls) addAssignees(ctx context.Context, n int, logins []string) error {
	_, resp, err := g.gh.Issues.AddAssignees(ctx, g.owner, g.name, n, logins)
	return marked(resp, err)
}
