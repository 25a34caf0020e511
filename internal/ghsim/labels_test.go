package ghsim

import (
	"context"
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-github/v66/github"
)

func TestLabelsRepositoryCRUDCaseInsensitiveAndEscaped(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	gh, _ := f.app.Installation(f.inst.ID)
	m := f.mark(t)
	for _, l := range []*github.Label{
		{Name: github.String("needs/triage"), Color: github.String("D73A4A"), Description: github.String("to triage")},
		{Name: github.String("good first issue"), Color: github.String("7057ff")},
		{Name: github.String("Bug")},
	} {
		got, resp, err := gh.Issues.CreateLabel(ctx, "acme", "app", l)
		if err != nil || resp.StatusCode != 201 || got.GetName() != l.GetName() {
			t.Fatalf("create %s: %v", l.GetName(), err)
		}
	}
	// Names are unique whatever their case.
	_, _, err := gh.Issues.CreateLabel(ctx, "acme", "app", &github.Label{Name: github.String("bug")})
	wantValidation(t, err, "Label", "name", "already_exists")
	_, _, err = gh.Issues.CreateLabel(ctx, "acme", "app", &github.Label{Name: github.String("x"), Color: github.String("red")})
	wantValidation(t, err, "Label", "color", "invalid")
	_, _, err = gh.Issues.CreateLabel(ctx, "acme", "app", &github.Label{Name: github.String("x"), Description: github.String(strings.Repeat("d", 101))})
	wantValidation(t, err, "Label", "description", "custom")

	// go-github does not escape the name; the caller must (a "/" would be a
	// path separator), and the simulator unescapes.
	l, _, err := gh.Issues.GetLabel(ctx, "acme", "app", url.PathEscape("NEEDS/TRIAGE"))
	if err != nil || l.GetName() != "needs/triage" || l.GetColor() != "d73a4a" || l.GetDescription() != "to triage" ||
		l.GetURL() != "https://api.github.com/repos/acme/app/labels/needs%2Ftriage" {
		t.Fatalf("get escaped: %+v %v", l, err)
	}
	l, _, err = gh.Issues.GetLabel(ctx, "acme", "app", "good first issue") // spaces survive unescaped
	if err != nil || l.GetName() != "good first issue" {
		t.Fatalf("get with spaces: %+v %v", l, err)
	}
	_, obj, _, _ := call(t, gh, "GET", "repos/acme/app/labels/Bug", nil)
	if v, ok := obj.(map[string]any)["description"]; !ok || v != nil {
		t.Fatalf("description without one: %v", obj)
	}
	if _, _, err := gh.Issues.GetLabel(ctx, "acme", "app", "nope"); errResp(t, err, 404).Message != "Not Found" {
		t.Fatal(err)
	}

	// Rename (go-github sends "name"; the API documents "new_name") and recolor.
	l, _, err = gh.Issues.EditLabel(ctx, "acme", "app", url.PathEscape("needs/triage"), &github.Label{Name: github.String("needs/Triage!"), Color: github.String("000000")})
	if err != nil || l.GetName() != "needs/Triage!" || l.GetColor() != "000000" {
		t.Fatalf("edit: %+v %v", l, err)
	}
	code, _, _, err := call(t, gh, "PATCH", "repos/acme/app/labels/"+url.PathEscape("good first issue"), map[string]any{"new_name": "Bug"})
	if code != 422 || err == nil {
		t.Fatalf("rename onto an existing name: %d", code)
	}
	code, obj, _, err = call(t, gh, "PATCH", "repos/acme/app/labels/"+url.PathEscape("good first issue"), map[string]any{"new_name": "Good First Issue"})
	if err != nil || code != 200 || digS(obj, "name") != "Good First Issue" {
		t.Fatalf("case-only rename: %d %v %v", code, obj, err)
	}
	all, resp, err := gh.Issues.ListLabels(ctx, "acme", "app", &github.ListOptions{PerPage: 2})
	if err != nil || labelNames(all) != "Bug,Good First Issue" || resp.NextPage != 2 {
		t.Fatalf("list: %s %v", labelNames(all), err)
	}
	resp, err = gh.Issues.DeleteLabel(ctx, "acme", "app", url.PathEscape("NEEDS/triage!"))
	if err != nil || resp.StatusCode != 204 {
		t.Fatalf("delete: %v", err)
	}
	if _, err := gh.Issues.DeleteLabel(ctx, "acme", "app", "needs%2Ftriage%21"); err == nil {
		t.Fatal("deleted twice")
	}
	hs := f.hooksSince(t, m)
	if got := hookNames(hs); got != "label.created label.created label.created label.edited label.edited label.deleted" {
		t.Fatalf("deliveries %s", got)
	}
	if digS(hs[3].body, "changes.name.from") != "needs/triage" || digS(hs[3].body, "changes.color.from") != "d73a4a" ||
		digS(hs[4].body, "changes.name.from") != "good first issue" || digS(hs[5].body, "label.name") != "needs/Triage!" {
		t.Fatalf("changes %v / %v / %v", hs[3].body["changes"], hs[4].body["changes"], hs[5].body["label"])
	}

	// A person manages labels with write access.
	carol := f.sim.As("carol")
	if _, err := carol.CreateLabel(f.repo, "z", "", ""); err == nil {
		t.Fatal("created a label without write access")
	}
	f.sim.SetRole(f.repo, "carol", "write")
	m = f.mark(t)
	if _, err := carol.CreateLabel(f.repo, "z", "#ABCDEF", "zed"); err != nil {
		t.Fatal(err)
	}
	color := "123456"
	if _, err := carol.EditLabel(f.repo, "Z", nil, &color, nil); err != nil {
		t.Fatal(err)
	}
	if err := carol.DeleteLabel(f.repo, "z"); err != nil {
		t.Fatal(err)
	}
	hs = f.hooksSince(t, m)
	if hookNames(hs) != "label.created label.edited label.deleted" || digS(hs[0].body, "sender.login") != "carol" ||
		digS(hs[0].body, "label.color") != "abcdef" {
		t.Fatalf("carol's deliveries %s %v", hookNames(hs), hs[0].body["label"])
	}
}

func TestLabelsOnIssues(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	gh, _ := f.app.Installation(f.inst.ID)
	if _, err := f.sim.As("acme").CreateLabel(f.repo, "Needs/Triage", "d73a4a", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := f.sim.As("alice").OpenIssue(f.repo, "an issue", ""); err != nil {
		t.Fatal(err)
	}
	// go-github sends a bare array; names match the repository's in any case.
	m := f.mark(t)
	ls, resp, err := gh.Issues.AddLabelsToIssue(ctx, "acme", "app", 1, []string{"needs/triage", "item", "ITEM"})
	if err != nil || resp.StatusCode != 200 || labelNames(ls) != "item,Needs/Triage" {
		t.Fatalf("add: %s %v", labelNames(ls), err)
	}
	// The documented object form, and labels the issue already has: nothing sent.
	code, obj, _, err := call(t, gh, "POST", "repos/acme/app/issues/1/labels", map[string]any{"labels": []string{"Item"}})
	if err != nil || code != 200 || len(obj.([]any)) != 2 {
		t.Fatalf("add again: %d %v %v", code, obj, err)
	}
	hs := f.hooksSince(t, m)
	if got := hookNames(hs); got != "label.created issues.labeled issues.labeled" {
		t.Fatalf("deliveries %s", got)
	}
	if digS(hs[1].body, "label.name") != "Needs/Triage" || digS(hs[2].body, "label.name") != "item" {
		t.Fatalf("labeled %v %v", hs[1].body["label"], hs[2].body["label"])
	}

	// A human removes a label: the human is the sender and the event's actor.
	bob := f.sim.As("bob")
	if _, err := bob.RemoveLabel(f.repo, 1, "item"); err == nil {
		t.Fatal("removed a label without triage")
	}
	f.sim.SetRole(f.repo, "bob", "triage")
	m = f.mark(t)
	if _, err := bob.RemoveLabel(f.repo, 1, "needs/triage"); err != nil {
		t.Fatal(err)
	}
	hs = f.hooksSince(t, m)
	if len(hs) != 1 || hs[0].String() != "issues.unlabeled" || digS(hs[0].body, "sender.login") != "bob" ||
		digS(hs[0].body, "label.name") != "Needs/Triage" || len(dig(hs[0].body, "issue.labels").([]any)) != 1 {
		t.Fatalf("unlabeled by bob: %s", hookNames(hs))
	}
	evs, _, _ := gh.Issues.ListIssueEvents(ctx, "acme", "app", 1, nil)
	last := evs[len(evs)-1]
	if last.GetEvent() != "unlabeled" || last.GetActor().GetLogin() != "bob" || last.PerformedViaGithubApp != nil ||
		last.GetLabel().GetName() != "Needs/Triage" || last.GetLabel().GetColor() != "d73a4a" {
		t.Fatalf("unlabeled event %+v", last)
	}
	if evs[0].GetPerformedViaGithubApp().GetSlug() != "warden-sim" || evs[0].GetActor().GetType() != "Bot" {
		t.Fatalf("the App's labeled event %+v", evs[0])
	}

	// Removing a label the issue lacks: 404 "Label does not exist".
	_, err = gh.Issues.RemoveLabelForIssue(ctx, "acme", "app", 1, url.PathEscape("needs/triage"))
	if er := errResp(t, err, 404); er.Message != "Label does not exist" {
		t.Fatalf("remove missing: %v", er)
	}
	// Escaped names through the issue-label route; the answer is the labels left.
	if _, _, err := gh.Issues.AddLabelsToIssue(ctx, "acme", "app", 1, []string{"good first issue", "a/b"}); err != nil {
		t.Fatal(err)
	}
	code, obj, _, err = call(t, gh, "DELETE", "repos/acme/app/issues/1/labels/"+url.PathEscape("a/b"), nil)
	if err != nil || code != 200 || len(obj.([]any)) != 2 {
		t.Fatalf("remove a/b: %d %v %v", code, obj, err)
	}
	if _, err := gh.Issues.RemoveLabelForIssue(ctx, "acme", "app", 1, "GOOD first issue"); err != nil {
		t.Fatalf("remove with spaces, other case: %v", err)
	}

	// PUT replaces: unlabeled for what goes, labeled for what comes.
	m = f.mark(t)
	ls, _, err = gh.Issues.ReplaceLabelsForIssue(ctx, "acme", "app", 1, []string{"p1", "item"})
	if err != nil || labelNames(ls) != "item,p1" {
		t.Fatalf("replace: %s %v", labelNames(ls), err)
	}
	if got := hookNames(f.hooksSince(t, m)); got != "label.created issues.labeled" {
		t.Fatalf("replace deliveries %s", got)
	}
	m = f.mark(t)
	code, obj, _, err = call(t, gh, "PUT", "repos/acme/app/issues/1/labels", map[string]any{"labels": []map[string]string{{"name": "p2"}}})
	if err != nil || code != 200 || len(obj.([]any)) != 1 {
		t.Fatalf("replace (objects): %d %v %v", code, obj, err)
	}
	if got := hookNames(f.hooksSince(t, m)); got != "label.created issues.unlabeled issues.unlabeled issues.labeled" {
		t.Fatalf("replace deliveries %s", got)
	}
	ls, _, err = gh.Issues.ListLabelsByIssue(ctx, "acme", "app", 1, nil)
	if err != nil || labelNames(ls) != "p2" {
		t.Fatalf("list: %s %v", labelNames(ls), err)
	}
	// POST with an empty list removes every label; DELETE …/labels too.
	code, obj, _, err = call(t, gh, "POST", "repos/acme/app/issues/1/labels", json.RawMessage(`[]`))
	if err != nil || code != 200 || len(obj.([]any)) != 0 {
		t.Fatalf("post []: %d %v %v", code, obj, err)
	}
	gh.Issues.AddLabelsToIssue(ctx, "acme", "app", 1, []string{"x"})
	resp, err = gh.Issues.RemoveLabelsForIssue(ctx, "acme", "app", 1)
	if err != nil || resp.StatusCode != 204 {
		t.Fatalf("remove all: %v", err)
	}
	// Bad bodies.
	code, _, _, err = call(t, gh, "POST", "repos/acme/app/issues/1/labels", map[string]any{"names": []string{"x"}})
	if code != 422 || err == nil {
		t.Fatalf("no labels key: %d", code)
	}
	code, _, _, err = call(t, gh, "POST", "repos/acme/app/issues/1/labels", json.RawMessage(`[""]`))
	if code != 422 || err == nil {
		t.Fatalf("blank name: %d", code)
	}
	_, _, err = gh.Issues.AddLabelsToIssue(ctx, "acme", "app", 9, []string{"x"})
	errResp(t, err, 404)

	// The Actor's SetLabels and AddLabels.
	m = f.mark(t)
	if _, err := bob.AddLabels(f.repo, 1, "x", "y"); err != nil {
		t.Fatal(err)
	}
	if iss, err := bob.SetLabels(f.repo, 1, "y", "z"); err != nil || len(iss.Labels) != 2 {
		t.Fatalf("set: %v", err)
	}
	if got := hookNames(f.hooksSince(t, m)); got != "label.created issues.labeled issues.labeled label.created issues.unlabeled issues.labeled" {
		t.Fatalf("actor deliveries %s", got)
	}
}
