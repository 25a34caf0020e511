package ghsim

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-github/v66/github"
)

// assigneeLogins lists the logins of a decoded assignees array.
func assigneeLogins(v any) string {
	list, _ := v.([]any)
	var out []string
	for _, u := range list {
		out = append(out, digS(u, "login"))
	}
	return strings.Join(out, ",")
}

func ghLogins(us []*github.User) string {
	var out []string
	for _, u := range us {
		out = append(out, u.GetLogin())
	}
	return strings.Join(out, ",")
}

// assigneeFixture: bob and erin can write, carol can read, dave can triage
// (none of the last two is assignable), and issue #1 is open.
func assigneeFixture(t *testing.T) (*fixture, *github.Client) {
	t.Helper()
	f := newFixture(t)
	for login, role := range map[string]string{"bob": "write", "erin": "maintain", "carol": "read", "dave": "triage"} {
		f.sim.As(login)
		f.sim.SetRole(f.repo, login, role)
	}
	if _, err := f.sim.As("acme").OpenIssue(f.repo, "Item one", "body"); err != nil {
		t.Fatal(err)
	}
	gh, err := f.app.Installation(f.inst.ID)
	if err != nil {
		t.Fatal(err)
	}
	return f, gh
}

func TestAssigneesAddAndRemoveOverREST(t *testing.T) {
	f, gh := assigneeFixture(t)
	ctx := context.Background()
	bot := f.sim.BotLogin()
	steps := []struct {
		name      string
		method    string
		body      any
		status    int
		want      string   // the issue's assignees after the call
		hooks     []string // action:assignee per delivery
		assignees string   // the issue's assignees in every delivery
	}{
		{"adds the assignable, ignores the rest", "POST",
			map[string]any{"assignees": []string{"bob", "carol", "dave", "ghost", "Copilot", "acme", bot}}, 201,
			"bob,Copilot", []string{"assigned:bob", "assigned:Copilot"}, "bob,Copilot"},
		{"already assigned: nothing happens", "POST", map[string]any{"assignees": []string{"BOB"}}, 201,
			"bob,Copilot", nil, ""},
		{"the object form", "POST", map[string]any{"assignees": []any{map[string]any{"login": "erin"}}}, 201,
			"bob,Copilot,erin", []string{"assigned:erin"}, "bob,Copilot,erin"},
		{"no assignees: the issue as it is", "POST", map[string]any{}, 201, "bob,Copilot,erin", nil, ""},
		{"removes the assigned, ignores the rest", "DELETE",
			map[string]any{"assignees": []string{"bob", "carol", "ghost", "copilot-swe-agent[bot]"}}, 200,
			"erin", []string{"unassigned:bob", "unassigned:Copilot"}, "erin"},
		{"DELETE needs assignees", "DELETE", map[string]any{}, 422, "erin", nil, ""},
		{"not an array", "POST", map[string]any{"assignees": "bob"}, 422, "erin", nil, ""},
		{"not strings", "DELETE", map[string]any{"assignees": []any{1}}, 422, "erin", nil, ""},
	}
	for _, st := range steps {
		m := f.mark(t)
		status, raw, _, err := call(t, gh, st.method, "repos/acme/app/issues/1/assignees", st.body)
		if status != st.status {
			t.Fatalf("%s: status %d, want %d (%v)", st.name, status, st.status, err)
		}
		if status < 300 {
			if got := assigneeLogins(dig(raw, "assignees")); got != st.want {
				t.Fatalf("%s: assignees %q, want %q", st.name, got, st.want)
			}
			first, _, _ := strings.Cut(st.want, ",")
			if digS(raw, "assignee.login") != first {
				t.Fatalf("%s: assignee %v, want %q", st.name, dig(raw, "assignee"), first)
			}
		} else if er := errResp(t, err, st.status); er.Message == "" {
			t.Fatalf("%s: a refusal without a message: %v", st.name, er)
		}
		hs := f.hooksSince(t, m)
		if len(hs) != len(st.hooks) {
			t.Fatalf("%s: deliveries %s, want %v", st.name, hookNames(hs), st.hooks)
		}
		for k, h := range hs {
			action, login, _ := strings.Cut(st.hooks[k], ":")
			if h.event != "issues" || h.action != action || digS(h.body, "assignee.login") != login ||
				digS(h.body, "sender.login") != bot || assigneeLogins(dig(h.body, "issue.assignees")) != st.assignees {
				t.Fatalf("%s: delivery %d %s assignee %v sender %v assignees %q, want %s:%s with %q", st.name, k, h,
					dig(h.body, "assignee.login"), dig(h.body, "sender.login"), assigneeLogins(dig(h.body, "issue.assignees")),
					action, login, st.assignees)
			}
			if login == CodingAgentLogin && digS(h.body, "assignee.type") != "Bot" {
				t.Fatalf("%s: the coding agent's type %v", st.name, dig(h.body, "assignee.type"))
			}
		}
	}
	// go-github reads what the routes answer.
	iss, _, err := gh.Issues.AddAssignees(ctx, "acme", "app", 1, []string{"bob"})
	if err != nil || ghLogins(iss.Assignees) != "erin,bob" || iss.GetAssignee().GetLogin() != "erin" {
		t.Fatalf("AddAssignees: %v %v", iss, err)
	}
	iss, _, err = gh.Issues.RemoveAssignees(ctx, "acme", "app", 1, []string{"erin", "bob"})
	if err != nil || len(iss.Assignees) != 0 || iss.Assignee != nil {
		t.Fatalf("RemoveAssignees: %v %v", iss, err)
	}
	if _, _, err := gh.Issues.AddAssignees(ctx, "acme", "app", 99, []string{"bob"}); err == nil {
		t.Fatal("assignees on a missing issue: no error")
	} else {
		errResp(t, err, 404)
	}
}

func TestAssigneesOnCreate(t *testing.T) {
	f, gh := assigneeFixture(t)
	m := f.mark(t)
	iss, _, err := gh.Issues.Create(context.Background(), "acme", "app", &github.IssueRequest{
		Title: github.String("Two"), Assignees: &[]string{"bob", "carol", "Copilot"}})
	if err != nil || ghLogins(iss.Assignees) != "bob,Copilot" {
		t.Fatalf("create: %v %v", iss, err)
	}
	if got := hookNames(f.hooksSince(t, m)); got != "issues.opened issues.assigned issues.assigned" {
		t.Fatalf("deliveries %s", got)
	}
}

func TestAssigneesAtMostTen(t *testing.T) {
	f, gh := assigneeFixture(t)
	var logins []string
	for k := 1; k <= 12; k++ {
		l := fmt.Sprintf("dev%02d", k)
		f.sim.As(l)
		f.sim.SetRole(f.repo, l, "write")
		logins = append(logins, l)
	}
	m := f.mark(t)
	_, raw, _, err := call(t, gh, "POST", "repos/acme/app/issues/1/assignees", map[string]any{"assignees": logins})
	if err != nil {
		t.Fatal(err)
	}
	if got := assigneeLogins(dig(raw, "assignees")); got != strings.Join(logins[:maxAssignees], ",") {
		t.Fatalf("assignees %q", got)
	}
	if hs := f.hooksSince(t, m); len(hs) != maxAssignees {
		t.Fatalf("%d deliveries, want %d", len(hs), maxAssignees)
	}
	// A full issue takes no more.
	_, raw, _, _ = call(t, gh, "POST", "repos/acme/app/issues/1/assignees", map[string]any{"assignees": []string{"bob"}})
	if n := len(dig(raw, "assignees").([]any)); n != maxAssignees {
		t.Fatalf("%d assignees after adding to a full issue", n)
	}
}

func TestAssigneesPatchReplacesTheSet(t *testing.T) {
	f, gh := assigneeFixture(t)
	ctx := context.Background()
	if _, _, err := gh.Issues.AddAssignees(ctx, "acme", "app", 1, []string{"bob", "erin"}); err != nil {
		t.Fatal(err)
	}
	m := f.mark(t)
	iss, _, err := gh.Issues.Edit(ctx, "acme", "app", 1, &github.IssueRequest{Assignees: &[]string{"erin", "Copilot", "carol"}})
	if err != nil || ghLogins(iss.Assignees) != "erin,Copilot" {
		t.Fatalf("edit: %v %v", iss, err)
	}
	if got := hookNames(f.hooksSince(t, m)); got != "issues.unassigned issues.assigned" {
		t.Fatalf("deliveries %s", got)
	}
	// An empty list clears it; the list filter sees who is assigned.
	if list, _, err := gh.Issues.ListByRepo(ctx, "acme", "app", &github.IssueListByRepoOptions{Assignee: "copilot"}); err != nil || len(list) != 1 {
		t.Fatalf("?assignee=copilot: %d %v", len(list), err)
	}
	if list, _, err := gh.Issues.ListByRepo(ctx, "acme", "app", &github.IssueListByRepoOptions{Assignee: "none"}); err != nil || len(list) != 0 {
		t.Fatalf("?assignee=none: %d %v", len(list), err)
	}
	if iss, _, err = gh.Issues.Edit(ctx, "acme", "app", 1, &github.IssueRequest{Assignees: &[]string{}}); err != nil || len(iss.Assignees) != 0 {
		t.Fatalf("clear: %v %v", iss, err)
	}
	// The issue's events record each change, with assignee and assigner.
	evs, _, err := gh.Issues.ListIssueEvents(ctx, "acme", "app", 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range evs {
		if e.GetEvent() == "assigned" || e.GetEvent() == "unassigned" {
			if e.GetAssigner().GetLogin() != f.sim.BotLogin() {
				t.Fatalf("%s event assigner %v", e.GetEvent(), e.GetAssigner())
			}
			got = append(got, e.GetEvent()+":"+e.GetAssignee().GetLogin())
		}
	}
	want := "assigned:bob assigned:erin unassigned:bob assigned:Copilot unassigned:erin unassigned:Copilot"
	if strings.Join(got, " ") != want {
		t.Fatalf("events %v, want %s", got, want)
	}
	// So does the timeline.
	_, raw, _, err := call(t, gh, "GET", "repos/acme/app/issues/1/timeline", nil)
	if err != nil {
		t.Fatal(err)
	}
	got = nil
	for _, row := range raw.([]any) {
		if e := digS(row, "event"); e == "assigned" || e == "unassigned" {
			got = append(got, e+":"+digS(row, "assignee.login"))
		}
	}
	if strings.Join(got, " ") != want {
		t.Fatalf("timeline %v, want %s", got, want)
	}
}

func TestAssigneesActorAndPullRequests(t *testing.T) {
	f, _ := assigneeFixture(t)
	dave, carol := f.sim.As("dave"), f.sim.As("carol")
	if _, err := carol.Assign(f.repo, 1, "bob"); err == nil || !strings.Contains(err.Error(), "triage") {
		t.Fatalf("a reader assigns: %v", err)
	}
	m := f.mark(t)
	iss, err := dave.Assign(f.repo, 1, "bob", "carol", "Copilot")
	if err != nil {
		t.Fatal(err)
	}
	f.sim.Locked(func() {
		if n := len(iss.Assignees); n != 2 {
			t.Errorf("%d assignees", n)
		}
	})
	hs := f.hooksSince(t, m)
	if hookNames(hs) != "issues.assigned issues.assigned" || digS(hs[0].body, "sender.login") != "dave" {
		t.Fatalf("deliveries %s sender %v", hookNames(hs), dig(hs[0].body, "sender.login"))
	}
	m = f.mark(t)
	if _, err := dave.Unassign(f.repo, 1, "Copilot", "erin"); err != nil {
		t.Fatal(err)
	}
	if hs := f.hooksSince(t, m); hookNames(hs) != "issues.unassigned" || digS(hs[0].body, "assignee.login") != "Copilot" ||
		assigneeLogins(dig(hs[0].body, "issue.assignees")) != "bob" {
		t.Fatalf("unassign deliveries %s", hookNames(hs))
	}

	// A pull request: pull_request.assigned, with the pull request's assignees.
	bob := f.sim.As("bob")
	if _, err := bob.Push(f.repo, "feature", "", map[string]string{"a.txt": "a"}, "a"); err != nil {
		t.Fatal(err)
	}
	pr, err := bob.OpenPR(f.repo, "feature", "main", "Feature", "Fixes #1", false)
	if err != nil {
		t.Fatal(err)
	}
	m = f.mark(t)
	if _, err := dave.Assign(f.repo, pr.Issue.Number, "bob"); err != nil {
		t.Fatal(err)
	}
	hs = f.hooksSince(t, m)
	if hookNames(hs) != "pull_request.assigned" || digS(hs[0].body, "assignee.login") != "bob" ||
		assigneeLogins(dig(hs[0].body, "pull_request.assignees")) != "bob" || digS(hs[0].body, "pull_request.assignee.login") != "bob" {
		t.Fatalf("PR deliveries %s: %v", hookNames(hs), hs)
	}
	m = f.mark(t)
	if _, err := dave.Unassign(f.repo, pr.Issue.Number, "bob"); err != nil {
		t.Fatal(err)
	}
	if hs = f.hooksSince(t, m); hookNames(hs) != "pull_request.unassigned" || dig(hs[0].body, "pull_request.assignee") != nil {
		t.Fatalf("PR unassign deliveries %s", hookNames(hs))
	}
}
