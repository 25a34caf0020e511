package ghsim

import (
	"context"
	"strings"
	"testing"
)

// agentFixture: the coding agent enabled on acme/app (when enabled), mia a
// maintainer, and issue #1 "Fix the login button" open.
func agentFixture(t *testing.T, enabled bool) *fixture {
	t.Helper()
	f := newFixture(t)
	f.sim.As("mia")
	f.sim.SetRole(f.repo, "mia", "maintain")
	if _, err := f.sim.As("mia").OpenIssue(f.repo, "Fix the login button", "It does nothing."); err != nil {
		t.Fatal(err)
	}
	if enabled {
		f.sim.EnableCodingAgent(f.repo)
	}
	return f
}

// pullSnapshot reads a pull request's state under the lock.
type pullSnapshot struct {
	number               int
	title, body, head    string
	draft                bool
	state, author, atype string
	assignees            string
	files                map[string]string
}

func (f *fixture) agentPull(t *testing.T, issue int) *pullSnapshot {
	t.Helper()
	p := f.sim.CodingAgentPR(f.repo, issue)
	if p == nil {
		return nil
	}
	var out pullSnapshot
	f.sim.Locked(func() {
		var as []string
		for _, u := range p.Issue.Assignees {
			as = append(as, u.Login)
		}
		out = pullSnapshot{number: p.Issue.Number, title: p.Issue.Title, body: p.Issue.Body, head: p.Head, draft: p.Draft,
			state: p.Issue.State, author: p.Issue.User.Login, atype: string(p.Issue.User.Type),
			assignees: strings.Join(as, ","), files: f.repo.Commits[f.repo.Branches[p.Head]].Files}
	})
	return &out
}

func TestCodingAgentStartsOnAssignment(t *testing.T) {
	for _, c := range []struct {
		name   string
		assign func(f *fixture) error
		sender string
		// prAssignees: the App's bot cannot be assigned, so only the agent is.
		prAssignees string
	}{
		{"a person assigns Copilot", func(f *fixture) error {
			_, err := f.sim.As("mia").Assign(f.repo, 1, CodingAgentLogin)
			return err
		}, "mia", "Copilot,mia"},
		{"the App assigns the bot account over REST", func(f *fixture) error {
			gh, err := f.app.Installation(f.inst.ID)
			if err != nil {
				return err
			}
			_, _, err = gh.Issues.AddAssignees(context.Background(), "acme", "app", 1, []string{CodingAgentAccount})
			return err
		}, "", "Copilot"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := agentFixture(t, true)
			sender := c.sender
			if sender == "" {
				sender = f.sim.BotLogin()
			}
			m := f.mark(t)
			if err := c.assign(f); err != nil {
				t.Fatal(err)
			}
			hs := f.hooksSince(t, m)
			want := "issues.assigned push. check_suite.requested pull_request.opened" +
				strings.Repeat(" pull_request.assigned", len(strings.Split(c.prAssignees, ",")))
			if got := hookNames(hs); got != want {
				t.Fatalf("deliveries %s, want %s", got, want)
			}
			if digS(hs[0].body, "assignee.login") != CodingAgentLogin || digS(hs[0].body, "assignee.type") != "Bot" ||
				digS(hs[0].body, "sender.login") != sender || assigneeLogins(dig(hs[0].body, "issue.assignees")) != CodingAgentLogin {
				t.Fatalf("assigned: assignee %v sender %v", hs[0].body["assignee"], dig(hs[0].body, "sender.login"))
			}
			if digS(hs[1].body, "ref") != "refs/heads/copilot/fix-1" || digS(hs[1].body, "pusher.name") != CodingAgentAccount ||
				digS(hs[1].body, "sender.login") != CodingAgentAccount || digS(hs[1].body, "head_commit.message") != "Initial plan" {
				t.Fatalf("push: ref %v pusher %v sender %v head %v", hs[1].body["ref"], hs[1].body["pusher"],
					dig(hs[1].body, "sender.login"), dig(hs[1].body, "head_commit.message"))
			}
			op := hs[3].body
			if digS(op, "pull_request.title") != "[WIP] Fix the login button" || dig(op, "pull_request.draft") != true ||
				!strings.HasSuffix(digS(op, "pull_request.body"), "Fixes #1") || digS(op, "pull_request.user.login") != CodingAgentLogin ||
				digS(op, "pull_request.user.type") != "Bot" || digS(op, "sender.login") != CodingAgentLogin ||
				digS(op, "pull_request.head.ref") != "copilot/fix-1" || digS(op, "pull_request.base.ref") != "main" {
				t.Fatalf("opened: %v", op["pull_request"])
			}
			// The agent and its requester are assigned to the pull request.
			var prAssigned []string
			for _, h := range hs[4:] {
				if digS(h.body, "sender.login") != CodingAgentLogin || assigneeLogins(dig(h.body, "pull_request.assignees")) != c.prAssignees {
					t.Fatalf("%s: sender %v assignees %v", h, dig(h.body, "sender.login"), dig(h.body, "pull_request.assignees"))
				}
				prAssigned = append(prAssigned, digS(h.body, "assignee.login"))
			}
			if strings.Join(prAssigned, ",") != c.prAssignees {
				t.Fatalf("PR assigned %v, want %s", prAssigned, c.prAssignees)
			}
			p := f.agentPull(t, 1)
			if p == nil || p.number != 2 || !p.draft || p.state != "open" || p.author != CodingAgentLogin || p.atype != "Bot" ||
				p.assignees != c.prAssignees {
				t.Fatalf("CodingAgentPR: %+v", p)
			}
		})
	}
}

func TestCodingAgentNotEnabledDoesNothing(t *testing.T) {
	f := agentFixture(t, false)
	// Its logins are Bot accounts, whoever makes them first.
	for _, l := range []string{CodingAgentLogin, CodingAgentAccount} {
		if typ := f.sim.As(l).User().Type; typ != TypeBot {
			t.Fatalf("%s is a %s", l, typ)
		}
	}
	m := f.mark(t)
	if _, err := f.sim.As("mia").Assign(f.repo, 1, CodingAgentLogin); err != nil {
		t.Fatal(err)
	}
	if got := hookNames(f.hooksSince(t, m)); got != "issues.assigned" {
		t.Fatalf("deliveries %s", got)
	}
	if p := f.sim.CodingAgentPR(f.repo, 1); p != nil {
		t.Fatalf("a PR without the agent enabled: #%d", p.Issue.Number)
	}
	if err := f.sim.CodingAgentWork(f.repo, 1, map[string]string{"a": "b"}); err == nil || !strings.Contains(err.Error(), "no pull request") {
		t.Fatalf("work without a session: %v", err)
	}
}

func TestCodingAgentWorksStopsAndResumes(t *testing.T) {
	f := agentFixture(t, true)
	mia := f.sim.As("mia")
	if _, err := mia.Assign(f.repo, 1, CodingAgentLogin); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		files map[string]string
		err   string
	}{
		{"no files", nil, "no files"},
		{"an empty path", map[string]string{"/": "x"}, "empty path"},
	} {
		if err := f.sim.CodingAgentWork(f.repo, 1, c.files); err == nil || !strings.Contains(err.Error(), c.err) {
			t.Fatalf("%s: %v, want %q", c.name, err, c.err)
		}
	}
	m := f.mark(t)
	if err := f.sim.CodingAgentWork(f.repo, 1, map[string]string{"login.go": "package login\n"}); err != nil {
		t.Fatal(err)
	}
	hs := f.hooksSince(t, m)
	if got := hookNames(hs); got != "push. check_suite.requested pull_request.synchronize pull_request.edited pull_request.ready_for_review" {
		t.Fatalf("work deliveries %s", got)
	}
	// The push (and the synchronize it causes) is the bot account's; the
	// edits to the pull request are its author's.
	for k, want := range []string{CodingAgentAccount, CodingAgentAccount, CodingAgentAccount, CodingAgentLogin, CodingAgentLogin} {
		if got := digS(hs[k].body, "sender.login"); got != want {
			t.Fatalf("%s sender %v, want %s", hs[k], got, want)
		}
	}
	p := f.agentPull(t, 1)
	if p.draft || p.title != "Fix the login button" || p.files["login.go"] != "package login\n" || p.assignees != "Copilot,mia" {
		t.Fatalf("after work: %+v", p)
	}

	// Unassigned, it stops: nothing more is pushed, the PR stays open.
	m = f.mark(t)
	if _, err := mia.Unassign(f.repo, 1, CodingAgentLogin); err != nil {
		t.Fatal(err)
	}
	if got := hookNames(f.hooksSince(t, m)); got != "issues.unassigned" {
		t.Fatalf("unassign deliveries %s", got)
	}
	if err := f.sim.CodingAgentWork(f.repo, 1, map[string]string{"more.go": "x"}); err == nil || !strings.Contains(err.Error(), "no longer assigned") {
		t.Fatalf("work after unassignment: %v", err)
	}
	if p := f.agentPull(t, 1); p.state != "open" || p.files["more.go"] != "" {
		t.Fatalf("after unassignment: %+v", p)
	}

	// Assigned again while its PR is open, it resumes that PR.
	m = f.mark(t)
	if _, err := mia.Assign(f.repo, 1, CodingAgentLogin); err != nil {
		t.Fatal(err)
	}
	if got := hookNames(f.hooksSince(t, m)); got != "issues.assigned" {
		t.Fatalf("resume deliveries %s", got)
	}
	if err := f.sim.CodingAgentWork(f.repo, 1, map[string]string{"more.go": "x"}); err != nil {
		t.Fatalf("work after resuming: %v", err)
	}

	// Its PR closed, a new assignment starts a new branch and PR.
	if err := mia.ClosePR(f.repo, p.number); err != nil {
		t.Fatal(err)
	}
	if err := f.sim.CodingAgentWork(f.repo, 1, map[string]string{"x.go": "x"}); err == nil || !strings.Contains(err.Error(), "not open") {
		t.Fatalf("work on a closed PR: %v", err)
	}
	if _, err := mia.Unassign(f.repo, 1, CodingAgentLogin); err != nil {
		t.Fatal(err)
	}
	if _, err := mia.Assign(f.repo, 1, CodingAgentLogin); err != nil {
		t.Fatal(err)
	}
	q := f.agentPull(t, 1)
	if q == nil || q.number == p.number || q.head != "copilot/fix-1-2" || !q.draft {
		t.Fatalf("second session: %+v", q)
	}
}

func TestCodingAgentPRMergesAndClosesTheIssue(t *testing.T) {
	f := agentFixture(t, true)
	mia := f.sim.As("mia")
	if _, err := mia.Assign(f.repo, 1, CodingAgentLogin); err != nil {
		t.Fatal(err)
	}
	if err := f.sim.CodingAgentWork(f.repo, 1, map[string]string{"login.go": "package login\n"}); err != nil {
		t.Fatal(err)
	}
	p := f.agentPull(t, 1)
	m := f.mark(t)
	if _, err := mia.MergePR(f.repo, p.number, "squash"); err != nil {
		t.Fatal(err)
	}
	hs := f.hooksSince(t, m)
	var closed bool
	for _, h := range hs {
		if h.String() == "issues.closed" && dig(h.body, "issue.number") == 1.0 {
			closed = true
		}
	}
	if !closed {
		t.Fatalf("merging the agent's PR did not close #1: %s", hookNames(hs))
	}
	// Other repositories are untouched by EnableCodingAgent.
	other := f.sim.AddRepo(f.inst, "acme/other", "main")
	f.sim.SetRole(other, "mia", "maintain")
	if _, err := mia.OpenIssue(other, "Elsewhere", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := mia.Assign(other, 1, CodingAgentLogin); err != nil {
		t.Fatal(err)
	}
	if f.sim.CodingAgentPR(other, 1) != nil {
		t.Fatal("the agent acted on a repository it is not enabled on")
	}
}
