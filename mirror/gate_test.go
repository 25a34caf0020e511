package mirror

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/mirror/store"
)

// createGated makes item n as an agent's, not admitted: no admission act
// on record, and the issue carrying labels.
func (e *env) createGated(n int, tg []string, labels ...string) store.Item {
	e.t.Helper()
	it, err := e.l.Create(e.ctx, e.repo, store.NewItem{Number: n, Title: fmt.Sprintf("item %d", n), Body: "Spec: #" + fmt.Sprint(n),
		Author: "backlog-pm", Provenance: "test", Tags: tg}, pm, store.WriteOptions{})
	if err != nil {
		e.t.Fatalf("create issue-%d: %v", n, err)
	}
	if _, err := e.l.RecordIssueState(e.ctx, e.repo, n, store.IssueState{State: store.IssueOpen, Labels: labels, UpdatedAt: e.clock.Now()}); err != nil {
		e.t.Fatal(err)
	}
	return it
}

// repoRow is the env's repository as the handlers get it.
func (e *env) repoRow() store.Repo {
	e.t.Helper()
	r, err := e.l.RepoByID(e.ctx, e.repo)
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

// openFindings are the codes of item n's open label findings.
func (e *env) openFindings(n int) []string {
	e.t.Helper()
	fs, err := e.acts.LabelFindings(e.ctx, e.repo, n, false)
	if err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, f := range fs {
		out = append(out, f.Code)
	}
	return out
}

// labelDelivery is an issues delivery about label on issue n, sent by
// login (an account of type typ).
func labelDelivery(n int, label, login, typ string) *issuesPayload {
	p := &issuesPayload{}
	p.Issue.Number = n
	p.Issue.UpdatedAt = "2030-01-02T03:04:05Z"
	p.Label = &struct {
		Name string `json:"name"`
	}{Name: label}
	p.Sender.Login, p.Sender.Type = login, typ
	return p
}

// labelEv is one label event the fake's issue shows, oldest first.
type labelEv struct{ action, label, login, typ string }

// TestGateLabelActs: the gate on the admission, parked and item labels
// (CONTRACT.md §5) decides from the issue's label events (the fake's), not
// from the delivery: the last act on the label, judged.
func TestGateLabelActs(t *testing.T) {
	const (
		adm    = "needs-specification"
		parked = "stale"
	)
	parkedTags := append(tags(), "state:parked", "ruling-owner:pm", "ruling-topic:spec")
	cases := []struct {
		name string
		// parked: the item carries state:parked and the parked label.
		parked bool
		// The delivery: label, action, its sender.
		label, action, sender, senderType string
		// filler events before events (other labels), to page the read.
		filler int
		events []labelEv
		roles  map[string]string
		fail   map[string]error

		wantOut        string
		wantErr        string
		wantAdded      []string // the labels put back (addLabels calls)
		wantAdmittedBy string   // "" for no admission recorded
		wantFindings   []string // the open label findings
		wantParked     bool     // the item carries state:parked after
		wantEventReads []string // the issueEvents calls, when it matters
	}{{
		name: "admission label removed by an agent is put back", label: adm, action: "unlabeled",
		events:  []labelEv{{"unlabeled", adm, "helper[bot]", "Bot"}},
		wantOut: "re-added", wantAdded: []string{adm}, wantFindings: []string{CodeAgentRemovedAdmission},
		wantEventReads: []string{"issueEvents 5 0"},
	}, {
		name: "admission label removed by a human with triage admits", label: adm, action: "unlabeled",
		events: []labelEv{{"unlabeled", adm, "hana", "User"}}, roles: map[string]string{"hana": "triage"},
		wantOut: "admitted by hana", wantAdmittedBy: "hana",
	}, {
		name: "admission label removed by a reader is put back", label: adm, action: "unlabeled",
		events: []labelEv{{"unlabeled", adm, "rita", "User"}}, roles: map[string]string{"rita": "read"},
		wantOut: "below triage", wantAdded: []string{adm}, wantFindings: []string{CodeAgentRemovedAdmission},
	}, {
		name: "a failed role lookup fails closed", label: adm, action: "unlabeled",
		events:  []labelEv{{"unlabeled", adm, "carol", "User"}},
		wantOut: "permission lookup failed", wantAdded: []string{adm}, wantFindings: []string{CodeAgentRemovedAdmission},
	}, {
		name: "label events showing the admission label back on: nothing to do", label: adm, action: "unlabeled",
		events: []labelEv{{"unlabeled", adm, "helper[bot]", "Bot"}, {"labeled", adm, "hana", "User"}},
		roles:  map[string]string{"hana": "triage"}, wantOut: "is on the issue again",
	}, {
		name: "the last act was warden's own: nothing to do", label: adm, action: "unlabeled",
		events:  []labelEv{{"unlabeled", adm, testBot, "Bot"}},
		wantOut: "nothing to do",
	}, {
		name: "the last act on page two decides", label: adm, action: "unlabeled", filler: 150,
		events:  []labelEv{{"unlabeled", adm, "helper[bot]", "Bot"}},
		wantOut: "re-added", wantAdded: []string{adm}, wantFindings: []string{CodeAgentRemovedAdmission},
		wantEventReads: []string{"issueEvents 5 0", "issueEvents 5 2"},
	}, {
		name: "unreadable label events: an error, nothing written", label: adm, action: "unlabeled",
		events:  []labelEv{{"unlabeled", adm, "helper[bot]", "Bot"}},
		fail:    map[string]error{"issueEvents": errors.New("boom")},
		wantErr: "read the label events of Acme/Widgets#5: boom",
	}, {
		name: "parked label removed by an agent is put back", parked: true, label: parked, action: "unlabeled",
		events:  []labelEv{{"unlabeled", parked, "helper[bot]", "Bot"}},
		wantOut: "re-added", wantAdded: []string{parked}, wantFindings: []string{CodeAgentRemovedPark}, wantParked: true,
	}, {
		name: "parked label removed by a configured agent acting as a User is put back", parked: true, label: parked, action: "unlabeled",
		events:  []labelEv{{"unlabeled", parked, "pm-agent", "User"}},
		wantOut: "re-added", wantAdded: []string{parked}, wantFindings: []string{CodeAgentRemovedPark}, wantParked: true,
	}, {
		name: "parked label removed by a human with triage unparks", parked: true, label: parked, action: "unlabeled",
		events: []labelEv{{"unlabeled", parked, "hana", "User"}}, roles: map[string]string{"hana": "maintain"},
		wantOut: "unparked by hana",
	}, {
		name: "item label removed by an agent is put back", label: "backlog", action: "unlabeled", sender: "pm-agent", senderType: "User",
		wantOut: "re-added", wantAdded: []string{"backlog"}, wantFindings: []string{CodeItemLabelRemoved},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			f := newFakeCalls(e.clock.Now)
			m := e.newMirror(f)
			var it store.Item
			labels := []string{"backlog", adm}
			if tc.parked {
				labels = []string{"backlog", parked}
				it = e.createGated(5, parkedTags, labels...)
				if err := e.acts.RecordAdmission(e.ctx, e.repo, 5, store.Admission{By: "alice", At: e.clock.Now(), How: "test"}); err != nil {
					t.Fatal(err)
				}
			} else {
				it = e.createGated(5, tags(), labels...)
			}
			t0 := e.clock.Now().Add(-time.Hour)
			for _, l := range labels {
				f.labelEvent(5, "labeled", l, "backlog-pm[bot]", "Bot", t0)
			}
			for i := range tc.filler {
				f.labelEvent(5, "labeled", fmt.Sprintf("other-%d", i), "hana", "User", t0.Add(time.Second))
			}
			for i, ev := range tc.events {
				f.labelEvent(5, ev.action, ev.label, ev.login, ev.typ, t0.Add(time.Duration(i+2)*time.Second))
			}
			for k, v := range tc.roles {
				f.roles[k] = v
			}
			for k, v := range tc.fail {
				f.fail[k] = v
			}
			f.log = nil
			sender, typ := tc.sender, tc.senderType
			if sender == "" && len(tc.events) > 0 {
				last := tc.events[len(tc.events)-1]
				sender, typ = last.login, last.typ
			}
			set := gating.DefaultSettings()
			p := labelDelivery(5, tc.label, sender, typ)
			out, err := m.issuesLabelAct(e.ctx, Event{Name: "issues", Action: tc.action}, e.repoRow(), set, p, &it)
			switch {
			case tc.wantErr != "" && (err == nil || err.Error() != tc.wantErr):
				t.Fatalf("err %v, want %q", err, tc.wantErr)
			case tc.wantErr == "" && err != nil:
				t.Fatal(err)
			}
			if !strings.Contains(out, tc.wantOut) {
				t.Errorf("outcome %q, want it to say %q", out, tc.wantOut)
			}
			var added []string
			for _, c := range f.calls("addLabels") {
				added = append(added, strings.TrimSuffix(strings.TrimPrefix(c, "addLabels 5 ["), "]"))
			}
			if !slices.Equal(added, tc.wantAdded) {
				t.Errorf("labels added %q, want %q", added, tc.wantAdded)
			}
			for _, l := range tc.wantAdded {
				if !f.hasLabel(5, l) {
					t.Errorf("%s is not on the issue", l)
				}
			}
			f.noCalls(t, "removeLabel", "createComment", "react")
			a, err := e.acts.Admission(e.ctx, e.repo, 5)
			if err != nil {
				t.Fatal(err)
			}
			if !tc.parked { // a parked item was admitted by alice at creation
				got := ""
				if a != nil {
					got = a.By
				}
				if got != tc.wantAdmittedBy {
					t.Errorf("admitted by %q, want %q", got, tc.wantAdmittedBy)
				}
			}
			if got := e.openFindings(5); !slices.Equal(got, tc.wantFindings) {
				t.Errorf("open findings %v, want %v", got, tc.wantFindings)
			}
			now, err := e.l.Get(e.ctx, e.repo, it.ID)
			if err != nil {
				t.Fatal(err)
			}
			if now.HasTag("state:parked") != tc.wantParked {
				t.Errorf("parked %v, want %v (tags %v)", now.HasTag("state:parked"), tc.wantParked, now.Tags)
			}
			if tc.wantEventReads != nil {
				if got := f.calls("issueEvents"); !slices.Equal(got, tc.wantEventReads) {
					t.Errorf("label event reads %v, want %v", got, tc.wantEventReads)
				}
			}
		})
	}
}

// TestGateDryRunWritesNothing: in dry_run an agent's removal is still
// reported, but the label is not put back.
func TestGateDryRunWritesNothing(t *testing.T) {
	e := newEnv(t)
	f := newFakeCalls(e.clock.Now)
	m := e.newMirror(f)
	it := e.createGated(5, tags(), "backlog")
	f.labelEvent(5, "unlabeled", "needs-specification", "helper[bot]", "Bot", e.clock.Now())
	set := gating.DefaultSettings()
	set.DryRun = true
	out, err := m.issuesLabelAct(e.ctx, Event{Action: "unlabeled"}, e.repoRow(), set, labelDelivery(5, set.AdmissionLabel, "helper[bot]", "Bot"), &it)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "re-added") {
		t.Errorf("outcome %q", out)
	}
	f.noCalls(t, "addLabels")
	if got := e.openFindings(5); !slices.Equal(got, []string{CodeAgentRemovedAdmission}) {
		t.Errorf("open findings %v", got)
	}
}

// TestPermissionsCache: a role is looked up once per ten minutes; a failed
// lookup is not cached.
func TestPermissionsCache(t *testing.T) {
	e := newEnv(t)
	f := newFakeCalls(e.clock.Now)
	m := e.newMirror(f)
	m.Perms.Now = e.clock.Now
	repo := e.repoRow()
	f.roles["hana"] = "triage"
	for range 2 {
		if r, err := m.role(e.ctx, repo, "hana"); err != nil || r != "triage" {
			t.Fatalf("role %q, %v", r, err)
		}
	}
	if got := f.calls("role"); len(got) != 1 {
		t.Errorf("lookups %v, want one", got)
	}
	e.clock.Advance(10 * time.Minute)
	if _, err := m.role(e.ctx, repo, "hana"); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := m.role(e.ctx, repo, "carol"); err == nil || !strings.Contains(err.Error(), "look up carol's role on Acme/Widgets") {
			t.Fatalf("failed lookup: %v", err)
		}
	}
	if got := f.calls("role"); !slices.Equal(got, []string{"role hana", "role hana", "role carol", "role carol"}) {
		t.Errorf("lookups %v", got)
	}
}
