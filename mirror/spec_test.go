package mirror

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-github/v66/github"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/mirror/store"
)

// specEnv is an admitted item 7 whose admitted text is its issue's, with
// the fake's issue in step.
type specEnv struct {
	*env
	f *fakeCalls
	m *Mirror
}

const specTitle, specBody = "Cache the census pages", "Only the census."

func newSpecEnv(t *testing.T) *specEnv {
	e := newEnv(t)
	f := newFakeCalls(e.clock.Now)
	m := e.newMirror(f)
	e.create(7, tags())
	at := e.clock.Now().Truncate(time.Second)
	if _, err := e.l.RecordIssueState(e.ctx, e.repo, 7, store.IssueState{State: store.IssueOpen, Labels: []string{"backlog"}, UpdatedAt: at,
		SpecDigest: gating.SpecDigest(specTitle, specBody)}); err != nil {
		t.Fatal(err)
	}
	if err := e.acts.RecordAdmission(e.ctx, e.repo, 7, store.Admission{By: "alice", At: at, How: "test",
		Spec: gating.SpecState{Digest: gating.SpecDigest(specTitle, specBody), At: at}}); err != nil {
		t.Fatal(err)
	}
	f.labels[7] = []string{"backlog"}
	f.issues[7] = &github.Issue{Number: github.Int(7), Title: github.String(specTitle), Body: github.String(specBody), State: github.String("open"),
		HTMLURL: github.String("https://github.com/Acme/Widgets/issues/7"), UpdatedAt: &github.Timestamp{Time: at}}
	return &specEnv{env: e, f: f, m: m}
}

// deliver hands HandleIssues an issues delivery about item 7 by login (an
// account of type typ) with the issue's text body and extra fields.
func (e *specEnv) deliver(action, login, typ, body string, extra map[string]any) (string, error) {
	e.t.Helper()
	e.clock.Advance(2 * time.Second)
	at := e.clock.Now().UTC().Format(time.RFC3339)
	p := map[string]any{"action": action,
		"issue": map[string]any{"number": 7, "title": specTitle, "body": body, "state": "open", "updated_at": at,
			"html_url": "https://github.com/Acme/Widgets/issues/7", "user": map[string]any{"login": "alice"},
			"labels": []any{map[string]any{"name": "backlog"}}},
		"repository": map[string]any{"id": e.repo, "full_name": "Acme/Widgets"}, "sender": map[string]any{"login": login, "type": typ}}
	for k, v := range extra {
		p[k] = v
	}
	b, err := json.Marshal(p)
	if err != nil {
		e.t.Fatal(err)
	}
	if body != specBody {
		e.f.issues[7].Body = github.String(body)
		e.f.issues[7].UpdatedAt = &github.Timestamp{Time: e.clock.Now().Truncate(time.Second)}
	}
	return e.m.HandleIssues(e.ctx, Event{Name: "issues", Action: action, DeliveryID: "d-" + at + "-" + action, Payload: b})
}

// excluded is item 7's exclusion in the ready set ("" when ready).
func (e *specEnv) excluded() string {
	e.t.Helper()
	rs, err := e.l.ClaimSnapshot(e.ctx, e.repo, "issue-7")
	if err != nil {
		e.t.Fatal(err)
	}
	for _, x := range gating.ComputeReady(rs.Snapshot).Excluded {
		if x.Item == "issue-7" {
			return x.Reason
		}
	}
	return ""
}

func bodyChange(from string) map[string]any {
	return map[string]any{"changes": map[string]any{"body": map[string]any{"from": from}}}
}

// TestSpecRegateFailsClosed: the finding, not the label, keeps a re-gated
// item out of the ready set: in dry run (the label is held back, the issue
// still read) and when the label write fails (the settle after puts it
// back from the label events).
func TestSpecRegateFailsClosed(t *testing.T) {
	t.Run("dry run", func(t *testing.T) {
		e := newSpecEnv(t)
		e.m.Settings = func(context.Context, store.Repo) gating.Settings {
			s := gating.DefaultSettings()
			s.DryRun = true
			return s
		}
		out, err := e.deliver("edited", "helper[bot]", "Bot", "Rewrite the store too.", bodyChange(specBody))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out, "would be added (dry run)") {
			t.Errorf("outcome %q", out)
		}
		if got := e.f.calls(""); !slices.Equal(got, []string{"issue 7"}) {
			t.Errorf("calls %v, want only the confirming read of the issue", got)
		}
		if got := e.openFindings(7); !slices.Equal(got, []string{gating.CodeSpecChangedByAgent}) {
			t.Errorf("open findings %v", got)
		}
		if x := e.excluded(); x != gating.ExAwaitingAdmission {
			t.Errorf("excluded as %q, want awaiting-admission with the label still off", x)
		}
	})
	t.Run("label write fails", func(t *testing.T) {
		e := newSpecEnv(t)
		// Admitted by hana's removal of the label, before the agent's edit:
		// the retry must not read that removal as a re-admission.
		e.f.labelEvent(7, "labeled", "needs-specification", "backlog-pm[bot]", "Bot", e.clock.Now().Add(-2*time.Hour))
		e.f.labelEvent(7, "unlabeled", "needs-specification", "hana", "User", e.clock.Now().Add(-time.Hour))
		e.f.roles["hana"] = "triage"
		e.f.fail["addLabels"] = errors.New("boom")
		if _, err := e.deliver("edited", "helper[bot]", "Bot", "Rewrite the store too.", bodyChange(specBody)); err == nil || !strings.Contains(err.Error(), "boom") {
			t.Fatalf("err %v, want the label write's", err)
		}
		if x := e.excluded(); x != gating.ExAwaitingAdmission {
			t.Errorf("excluded as %q, want awaiting-admission while the label is off", x)
		}
		delete(e.f.fail, "addLabels")
		e.f.log = nil
		if _, err := e.m.settleItem(e.ctx, e.repoRow(), 7); err != nil {
			t.Fatal(err)
		}
		if !e.f.hasLabel(7, "needs-specification") {
			t.Errorf("the retry did not put the label back: calls %v", e.f.calls(""))
		}
		if got := e.f.calls("issueEvents"); len(got) != 1 {
			t.Errorf("label events read %v, want once (a human's removal since would admit)", got)
		}
		if x := e.excluded(); x != gating.ExAwaitingAdmission {
			t.Errorf("excluded as %q", x)
		}
		if got := e.openFindings(7); !slices.Equal(got, []string{gating.CodeSpecChangedByAgent}) {
			t.Errorf("open findings %v", got)
		}
	})
	t.Run("confirming read fails", func(t *testing.T) {
		e := newSpecEnv(t)
		e.f.fail["issue"] = errors.New("boom")
		if _, err := e.deliver("edited", "helper[bot]", "Bot", "Rewrite the store too.", bodyChange(specBody)); err == nil {
			t.Fatal("no error: the delivery would not be retried")
		}
		e.f.noCalls(t, "addLabels")
		if got := e.openFindings(7); len(got) != 0 {
			t.Errorf("open findings %v before the confirming read", got)
		}
	})
}

// TestSpecOnlyTitleAndBody: deliveries that are not edits of the title or
// body (assignees, milestones, an edit of neither) and a human's edit cost
// no GitHub call and leave the item admitted; an agent's edit costs one
// read and one label write.
func TestSpecOnlyTitleAndBody(t *testing.T) {
	e := newSpecEnv(t)
	for _, d := range []struct {
		action, login, typ, body string
		extra                    map[string]any
	}{
		{"assigned", "helper[bot]", "Bot", specBody, map[string]any{"assignee": map[string]any{"login": "helper[bot]"}}},
		{"milestoned", "helper[bot]", "Bot", specBody, map[string]any{"milestone": map[string]any{"title": "v2"}}},
		{"edited", "helper[bot]", "Bot", specBody, map[string]any{"changes": map[string]any{}}},
		{"edited", "hana", "User", "Only the census, and its pages.", bodyChange(specBody)},
	} {
		out, err := e.deliver(d.action, d.login, d.typ, d.body, d.extra)
		if err != nil {
			t.Fatalf("%s by %s: %v", d.action, d.login, err)
		}
		if got := e.f.calls(""); len(got) != 0 {
			t.Errorf("%s by %s (%q): calls %v, want none", d.action, d.login, out, got)
		}
		if x := e.excluded(); x != "" {
			t.Errorf("%s by %s: excluded as %q, want ready", d.action, d.login, x)
		}
	}
	// The human's text is the admitted one now.
	a, err := e.acts.Admission(e.ctx, e.repo, 7)
	if err != nil || a == nil || a.Spec.Digest != gating.SpecDigest(specTitle, "Only the census, and its pages.") {
		t.Fatalf("admission %+v (%v): the human's edit is not the admitted text", a, err)
	}
	out, err := e.deliver("edited", "pm-agent", "User", "Only the census; and delete the dashboard.", bodyChange("Only the census, and its pages."))
	if err != nil {
		t.Fatal(err)
	}
	if got := e.f.calls(""); !slices.Equal(got, []string{"issue 7", "addLabels 7 [needs-specification]"}) {
		t.Errorf("the agent's edit (%q) made calls %v, want the read and the label", out, got)
	}
	if !strings.Contains(out, "pm-agent (a configured agent)") {
		t.Errorf("outcome %q does not name the agent", out)
	}
}
