package ghsim

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

func TestSubIssues(t *testing.T) {
	f := newFixture(t)
	gh, _ := f.app.Installation(f.inst.ID)
	pm := f.sim.As("pm")
	f.sim.SetRole(f.repo, "pm", "triage")
	var ids []int64
	for k := 1; k <= 4; k++ {
		iss, err := pm.OpenIssue(f.repo, fmt.Sprintf("issue %d", k), "")
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, iss.ID)
	}
	m := f.mark(t)
	// sub_issue_id is the child's id, not its number.
	code, obj, resp, err := call(t, gh, "POST", "repos/acme/app/issues/1/sub_issues", map[string]any{"sub_issue_id": ids[1]})
	if err != nil || code != 201 || dig(obj, "number") != 1.0 || dig(obj, "sub_issues_summary.total") != 1.0 {
		t.Fatalf("add: %d %v %v", code, obj, err)
	}
	if !strings.HasSuffix(resp.Header.Get("Location"), "/issues/1/sub_issues") {
		t.Fatalf("Location %q", resp.Header.Get("Location"))
	}
	hs := f.hooksSince(t, m)
	if hookNames(hs) != "sub_issues.sub_issue_added sub_issues.parent_issue_added" {
		t.Fatalf("deliveries %s", hookNames(hs))
	}
	if dig(hs[0].body, "parent_issue.number") != 1.0 || dig(hs[0].body, "sub_issue.number") != 2.0 ||
		dig(hs[0].body, "sub_issue_id") != float64(ids[1]) || digS(hs[0].body, "sub_issue_repo.full_name") != "acme/app" ||
		digS(hs[1].body, "parent_issue_repo.full_name") != "acme/app" || digS(hs[0].body, "sender.type") != "Bot" ||
		dig(hs[0].body, "installation.id") != float64(f.inst.ID) {
		t.Fatalf("payloads %v", hs)
	}
	// A string id, an unknown id, a number instead of an id: 422.
	for _, body := range []string{fmt.Sprintf(`{"sub_issue_id":"%d"}`, ids[2]), `{"sub_issue_id":999999}`, `{"sub_issue_id":3}`, `{}`} {
		if code, _, _, err := call(t, gh, "POST", "repos/acme/app/issues/1/sub_issues", json.RawMessage(body)); code != 422 || err == nil {
			t.Fatalf("%s: %d", body, code)
		}
	}
	// Already has a parent: 422 unless replace_parent.
	_, _, _, err = call(t, gh, "POST", "repos/acme/app/issues/3/sub_issues", map[string]any{"sub_issue_id": ids[1]})
	errResp(t, err, 422)
	// Cycles are refused.
	_, _, _, err = call(t, gh, "POST", "repos/acme/app/issues/2/sub_issues", map[string]any{"sub_issue_id": ids[0]})
	errResp(t, err, 422)
	m = f.mark(t)
	code, _, _, err = call(t, gh, "POST", "repos/acme/app/issues/3/sub_issues", map[string]any{"sub_issue_id": ids[1], "replace_parent": true})
	if err != nil || code != 201 {
		t.Fatalf("replace_parent: %d %v", code, err)
	}
	if got := hookNames(f.hooksSince(t, m)); got != "sub_issues.sub_issue_removed sub_issues.parent_issue_removed sub_issues.sub_issue_added sub_issues.parent_issue_added" {
		t.Fatalf("replace deliveries %s", got)
	}
	_, obj, _, err = call(t, gh, "GET", "repos/acme/app/issues/2/parent", nil)
	if err != nil || dig(obj, "number") != 3.0 {
		t.Fatalf("parent: %v %v", obj, err)
	}
	_, _, _, err = call(t, gh, "GET", "repos/acme/app/issues/3/parent", nil)
	errResp(t, err, 404)
	_, obj, _, _ = call(t, gh, "GET", "repos/acme/app/issues/2", nil)
	if !strings.HasSuffix(digS(obj, "parent_issue_url"), "/repos/acme/app/issues/3") {
		t.Fatalf("parent_issue_url %v", dig(obj, "parent_issue_url"))
	}

	// A person adds one; the summary counts closed children as completed.
	m = f.mark(t)
	if _, err := pm.AddSubIssue(f.repo, 3, 4); err != nil {
		t.Fatal(err)
	}
	if hs := f.hooksSince(t, m); len(hs) != 2 || digS(hs[0].body, "sender.login") != "pm" {
		t.Fatalf("pm's deliveries %s", hookNames(hs))
	}
	if _, err := pm.CloseIssue(f.repo, 4, ""); err != nil {
		t.Fatal(err)
	}
	_, obj, _, _ = call(t, gh, "GET", "repos/acme/app/issues/3", nil)
	if s := dig(obj, "sub_issues_summary"); fmt.Sprint(s) != "map[completed:1 percent_completed:50 total:2]" {
		t.Fatalf("summary %v", s)
	}
	// Order, and reprioritizing.
	_, obj, _, err = call(t, gh, "GET", "repos/acme/app/issues/3/sub_issues", nil)
	if err != nil || len(obj.([]any)) != 2 || dig(obj.([]any)[0], "number") != 2.0 {
		t.Fatalf("list: %v %v", obj, err)
	}
	code, _, _, err = call(t, gh, "PATCH", "repos/acme/app/issues/3/sub_issues/priority", map[string]any{"sub_issue_id": ids[3], "before_id": ids[1]})
	if err != nil || code != 200 {
		t.Fatalf("priority: %d %v", code, err)
	}
	_, obj, _, _ = call(t, gh, "GET", "repos/acme/app/issues/3/sub_issues", nil)
	if dig(obj.([]any)[0], "number") != 4.0 {
		t.Fatalf("after reprioritizing: %v", obj)
	}
	// Remove (the route is singular): 200 with the parent.
	m = f.mark(t)
	code, obj, _, err = call(t, gh, "DELETE", "repos/acme/app/issues/3/sub_issue", map[string]any{"sub_issue_id": ids[1]})
	if err != nil || code != 200 || dig(obj, "sub_issues_summary.total") != 1.0 {
		t.Fatalf("remove: %d %v %v", code, obj, err)
	}
	if got := hookNames(f.hooksSince(t, m)); got != "sub_issues.sub_issue_removed sub_issues.parent_issue_removed" {
		t.Fatalf("remove deliveries %s", got)
	}
	_, _, _, err = call(t, gh, "DELETE", "repos/acme/app/issues/3/sub_issue", map[string]any{"sub_issue_id": ids[1]})
	errResp(t, err, 404)
	if _, err := pm.RemoveSubIssue(f.repo, 3, 4); err != nil {
		t.Fatal(err)
	}
	if _, err := f.sim.As("rando").AddSubIssue(f.repo, 1, 2); err == nil {
		t.Fatal("a user without triage added a sub-issue")
	}
}

func TestSubIssuesAtMostOneHundred(t *testing.T) {
	f := newFixture(t)
	gh, _ := f.app.Installation(f.inst.ID)
	var last int64
	f.sim.Locked(func() {
		parent, _ := f.sim.createIssueLocked(f.repo, f.sim.bot, "epic", "", nil)
		for k := 0; k < 101; k++ {
			c, _ := f.sim.createIssueLocked(f.repo, f.sim.bot, fmt.Sprintf("child %d", k), "", nil)
			if k < 100 {
				if e := f.sim.addSubIssueLocked(f.repo, parent, c.ID, f.sim.bot, false); e != nil {
					t.Error(e)
				}
			}
			last = c.ID
		}
	})
	_, _, _, err := call(t, gh, "POST", "repos/acme/app/issues/1/sub_issues", map[string]any{"sub_issue_id": last})
	if er := errResp(t, err, 422); !strings.Contains(fmt.Sprint(er.Errors), "100") {
		t.Fatalf("101st: %v", er)
	}
	// Pages of sub-issues.
	_, obj, resp, err := call(t, gh, "GET", "repos/acme/app/issues/1/sub_issues?per_page=100&page=2", nil)
	if err != nil || len(obj.([]any)) != 0 || resp.PrevPage != 1 {
		t.Fatalf("page 2: %v %v", obj, err)
	}
}
