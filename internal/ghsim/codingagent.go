package ghsim

import (
	"fmt"
	"maps"
	"strings"
)

// GitHub's coding agent (Copilot coding agent), as an actor of the
// simulator. What GitHub shows for it, and what the simulator uses:
//
//   - The assignee is the Bot user "Copilot" (CodingAgentLogin): that is the
//     login issues.assigned carries in `assignee` and the issue lists in
//     `assignees`. The REST API also accepts the bot account
//     "copilot-swe-agent[bot]" (CodingAgentAccount) as the login to assign,
//     which is what GitHub's docs tell API users to send; both name the same
//     assignee, and the simulator renders it as "Copilot" either way.
//   - The pull request it opens is authored by "Copilot" (a Bot), and its
//     deliveries (pull_request.opened, edited, ready_for_review) are sent by
//     it; the requester who assigned the issue and the agent are assigned to
//     the pull request, as GitHub assigns them.
//   - Its commits are authored and committed by, and its pushes made by, the
//     account it works as, "copilot-swe-agent[bot]" (a Bot): push.pusher.name
//     and the commits' author are that login.
//
// On GitHub the agent starts as soon as it is assigned: it pushes a branch
// copilot/fix-<n> from the default branch with an empty "Initial plan"
// commit and opens a draft pull request "[WIP] <issue title>" whose body
// ends "Fixes #<n>". Unassigning it stops it; its pull request stays open.
// Sim.CodingAgentWork plays the rest of its session: one more commit, the
// title without "[WIP] ", and the pull request marked ready for review.

// The coding agent's logins (see above).
const (
	// CodingAgentLogin is the assignee GitHub shows for its coding agent, and
	// the author of the pull requests it opens (type Bot).
	CodingAgentLogin = "Copilot"
	// CodingAgentAccount is the bot account the coding agent works as: its
	// pushes and commits, and a login the REST API accepts to assign it.
	CodingAgentAccount = "copilot-swe-agent[bot]"
)

// codingAgentRepo is the coding agent's state on one repository.
type codingAgentRepo struct {
	enabled bool
	// sessions are its sessions by issue number, the latest last.
	sessions map[int][]*codingAgentSession
}

// codingAgentSession is one run of the agent on an issue.
type codingAgentSession struct {
	issue  int
	branch string
	pull   int // the pull request it opened, 0 before
	active bool
	// requester is who assigned it.
	requester *User
}

// isCodingAgentLogin reports whether login names the coding agent.
func isCodingAgentLogin(login string) bool {
	return strings.EqualFold(login, CodingAgentLogin) || strings.EqualFold(login, CodingAgentAccount)
}

// codingAgentUserLocked is the "Copilot" Bot user (made a Bot even when a
// test made the account first).
func (s *Sim) codingAgentUserLocked() *User {
	u := s.addUserLocked(CodingAgentLogin, TypeBot)
	u.Type = TypeBot
	return u
}

// codingAgentAccountLocked is the bot account the agent pushes as.
func (s *Sim) codingAgentAccountLocked() *User {
	return s.addUserLocked(CodingAgentAccount, TypeBot)
}

// EnableCodingAgent turns GitHub's coding agent on for repo: from then on,
// assigning one of repo's issues to it (CodingAgentLogin or
// CodingAgentAccount) makes it start at once, and unassigning it stops it.
// Before this, the agent can still be assigned, but it does nothing.
func (s *Sim) EnableCodingAgent(repo *Repo) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if repo.agent == nil {
		repo.agent = &codingAgentRepo{sessions: map[int][]*codingAgentSession{}}
	}
	repo.agent.enabled = true
}

// codingAgentReactLocked starts the agent when it was just assigned to an
// issue of a repository it is enabled on, and stops it when it was just
// unassigned. Pull requests are not work items for it here.
func (s *Sim) codingAgentReactLocked(repo *Repo, i *Issue, by *User, removed, added []*User) {
	if repo.agent == nil || !repo.agent.enabled || i.IsPull {
		return
	}
	agent := s.codingAgentUserLocked()
	for _, u := range removed {
		if u == agent {
			for _, ss := range repo.agent.sessions[i.Number] {
				ss.active = false
			}
		}
	}
	for _, u := range added {
		if u == agent {
			if err := s.codingAgentStartLocked(repo, i, by); err != nil {
				// GitHub's agent reports a failure to start on the issue.
				_ = s.codingAgentSayLocked(repo, i, fmt.Sprintf("I couldn't start working on this issue: %v", err))
			}
		}
	}
}

// codingAgentSayLocked comments on an issue as the agent.
func (s *Sim) codingAgentSayLocked(repo *Repo, i *Issue, body string) error {
	_, e := s.createCommentLocked(repo, i, s.codingAgentUserLocked(), body)
	return asError(e)
}

// codingAgentStartLocked starts a session on issue i: an open pull request
// of an earlier session is resumed (GitHub keeps working on it); otherwise
// a new branch, an "Initial plan" commit, and a draft pull request.
func (s *Sim) codingAgentStartLocked(repo *Repo, i *Issue, requester *User) error {
	list := repo.agent.sessions[i.Number]
	if n := len(list); n > 0 {
		last := list[n-1]
		if p := repo.Pulls[last.pull]; p != nil && p.Issue.State == "open" {
			last.active, last.requester = true, requester
			return nil
		}
	}
	branch := fmt.Sprintf("copilot/fix-%d", i.Number)
	for k := 2; repo.Branches[branch] != ""; k++ {
		branch = fmt.Sprintf("copilot/fix-%d-%d", i.Number, k)
	}
	base := repo.Commits[repo.Branches[repo.DefaultBranch]]
	if base == nil {
		return fmt.Errorf("the default branch %s has no commit", repo.DefaultBranch)
	}
	pusher, author := s.codingAgentAccountLocked(), s.codingAgentUserLocked()
	c := s.newCommitLocked(repo, []string{base.SHA}, maps.Clone(base.Files), "Initial plan", pusher, pusher, s.now())
	s.pushLocked(repo, pusher, branch, "", c.SHA, false)
	body := "Thanks for assigning this issue to me. I'm starting to work on it and will keep this PR's " +
		"description up to date as I form a plan and make progress.\n\n" + fmt.Sprintf("Fixes #%d", i.Number)
	p, ge := s.openPullLocked(repo, author, branch, repo.DefaultBranch, "[WIP] "+i.Title, body, true, false)
	if ge != nil {
		return fmt.Errorf("open the pull request from %s: %w", branch, ge)
	}
	ss := &codingAgentSession{issue: i.Number, branch: branch, pull: p.Issue.Number, active: true, requester: requester}
	repo.agent.sessions[i.Number] = append(list, ss)
	logins := []string{CodingAgentLogin}
	if requester != nil && requester != author && s.assignableLocked(repo, requester.Login) != nil {
		logins = append(logins, requester.Login)
	}
	added := s.addAssigneesLocked(repo, p.Issue, author, logins)
	s.emitAssigneeChangesLocked(repo, p.Issue, author, nil, added)
	return nil
}

// codingAgentSessionLocked is the latest session on issue number, or nil.
func codingAgentSessionLocked(repo *Repo, number int) *codingAgentSession {
	if repo == nil || repo.agent == nil {
		return nil
	}
	list := repo.agent.sessions[number]
	if len(list) == 0 {
		return nil
	}
	return list[len(list)-1]
}

// CodingAgentPR is the pull request the coding agent opened for issue
// number in its latest session, or nil if it opened none. The Pull is the
// simulator's own: read it under Sim.Locked while requests may change it.
func (s *Sim) CodingAgentPR(repo *Repo, number int) *Pull {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := codingAgentSessionLocked(repo, number)
	if ss == nil || ss.pull == 0 {
		return nil
	}
	return repo.Pulls[ss.pull]
}

// CodingAgentWork plays the rest of the agent's session on issue number:
// it pushes one commit with files (path -> content; "" deletes the path) to
// its branch, drops "[WIP] " from the pull request's title, and marks the
// pull request ready for review (push, pull_request.synchronize, edited,
// ready_for_review). It refuses when the agent has no session on the issue,
// has been unassigned, or its pull request is no longer open.
func (s *Sim) CodingAgentWork(repo *Repo, number int, files map[string]string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := codingAgentSessionLocked(repo, number)
	switch {
	case repo == nil:
		return errNoRepo
	case len(files) == 0:
		return fmt.Errorf("ghsim: CodingAgentWork on #%d with no files", number)
	case ss == nil || ss.pull == 0:
		return fmt.Errorf("ghsim: the coding agent has no pull request for issue #%d in %s", number, repo.FullName)
	case !ss.active:
		return fmt.Errorf("ghsim: the coding agent is no longer assigned to issue #%d in %s: it does not push", number, repo.FullName)
	}
	p := repo.Pulls[ss.pull]
	if p == nil || p.Issue.State != "open" {
		return fmt.Errorf("ghsim: the coding agent's pull request #%d for issue #%d is not open", ss.pull, number)
	}
	before := repo.Branches[ss.branch]
	tip := repo.Commits[before]
	if tip == nil {
		return fmt.Errorf("ghsim: the coding agent's branch %s is gone", ss.branch)
	}
	tree := maps.Clone(tip.Files)
	for path, content := range files {
		path = strings.Trim(path, "/")
		if path == "" {
			return fmt.Errorf("ghsim: CodingAgentWork with an empty path")
		}
		if content == "" {
			delete(tree, path)
		} else {
			tree[path] = content
		}
	}
	iss := repo.Issues[number]
	title := fmt.Sprintf("issue #%d", number)
	if iss != nil {
		title = iss.Title
	}
	pusher := s.codingAgentAccountLocked()
	c := s.newCommitLocked(repo, []string{tip.SHA}, tree, "Implement "+title, pusher, pusher, s.now())
	s.pushLocked(repo, pusher, ss.branch, before, c.SHA, false)
	author := s.codingAgentUserLocked()
	if t, ok := strings.CutPrefix(p.Issue.Title, "[WIP] "); ok {
		if ge := s.editPullLocked(repo, author, p, &t, nil, nil, nil); ge != nil {
			return fmt.Errorf("ghsim: retitle the coding agent's pull request #%d: %w", ss.pull, ge)
		}
	}
	if ge := s.setDraftLocked(repo, p, author, false); ge != nil {
		return fmt.Errorf("ghsim: mark the coding agent's pull request #%d ready: %w", ss.pull, ge)
	}
	return nil
}
