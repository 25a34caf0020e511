package mirror

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/mirror/store"
)

// poisonPark runs warden's own park of item n over a fresh snapshot.
func (e *env) poisonPark(m *Mirror, set gating.Settings, n int) (string, error) {
	e.t.Helper()
	rs, err := e.l.ClaimSnapshot(e.ctx, e.repo, gating.IDFor(n))
	if err != nil {
		e.t.Fatal(err)
	}
	return m.poisonPark(e.ctx, e.repoRow(), set, rs, gating.IDFor(n), 3)
}

// parkComments are the comments on issue n that are warden's park
// comments.
func parkComments(f *fakeCalls, n int) []int64 {
	var out []int64
	for _, c := range f.commentsOn(n) {
		if c.GetUser().GetLogin() == testBot && strings.HasPrefix(c.GetBody(), gating.ParkPrefix) {
			out = append(out, c.GetID())
		}
	}
	return out
}

func (e *env) parkRecord(n int) *store.ParkRecord {
	e.t.Helper()
	rec, err := e.acts.ParkRecord(e.ctx, e.repo, n)
	if err != nil {
		e.t.Fatal(err)
	}
	return rec
}

// TestPoisonPark: warden's own park writes state:parked with its route,
// adds the parked label and posts the question once: a second run posts
// nothing, and one after a post whose answer was lost finds the comment on
// GitHub rather than posting it again. dry_run writes nothing.
func TestPoisonPark(t *testing.T) {
	cases := []struct {
		name string
		// lose is the error the first post's answer is lost to (the
		// comment is made).
		lose error
		// dry is dry_run.
		dry bool

		wantFirstErr string
		// wantComments is how many park comments GitHub holds after both
		// runs; wantFinds whether the second run looked for one.
		wantComments int
		wantFinds    bool
	}{
		{name: "posted once", wantComments: 1},
		{name: "a lost answer is found, not posted again", lose: errors.New("connection reset"),
			wantFirstErr: "post the park comment on Acme/Widgets#5: connection reset", wantComments: 1, wantFinds: true},
		{name: "dry run writes nothing", dry: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			f := newFakeCalls(e.clock.Now)
			m := e.newMirror(f)
			e.create(5, tags())
			set := gating.DefaultSettings()
			set.DryRun = tc.dry
			if tc.lose != nil {
				f.lost["createComment"] = tc.lose
			}

			_, err := e.poisonPark(m, set, 5)
			if tc.wantFirstErr != "" {
				if err == nil || err.Error() != tc.wantFirstErr {
					t.Fatalf("first run: %v, want %q", err, tc.wantFirstErr)
				}
				if rec := e.parkRecord(5); rec == nil || rec.Stage != store.ParkCommenting {
					t.Fatalf("after a lost answer: %+v, want the park recorded as commenting", rec)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			delete(f.lost, "createComment")
			e.clock.Advance(time.Second)
			if _, err := e.poisonPark(m, set, 5); err != nil {
				t.Fatalf("second run: %v", err)
			}

			got := parkComments(f, 5)
			if len(got) != tc.wantComments {
				t.Fatalf("park comments %v, want %d", got, tc.wantComments)
			}
			if finds := len(f.calls("issueComments")) > 0; finds != tc.wantFinds {
				t.Errorf("looked for the comment: %v, want %v (calls %v)", finds, tc.wantFinds, f.calls(""))
			}
			it, err := e.l.Get(e.ctx, e.repo, gating.IDFor(5))
			if err != nil {
				t.Fatal(err)
			}
			if tc.dry {
				if it.HasTag("state:parked") || e.parkRecord(5) != nil {
					t.Errorf("dry run parked: tags %v", it.Tags)
				}
				f.noCalls(t, "")
				return
			}
			for _, tag := range []string{"state:parked", "ruling-owner:pm", "ruling-topic:poison-threshold"} {
				if !it.HasTag(tag) {
					t.Errorf("no %s among %v", tag, it.Tags)
				}
			}
			if !f.hasLabel(5, set.ParkedLabel) {
				t.Errorf("no %s label", set.ParkedLabel)
			}
			if n := len(f.calls("addLabels")); n != 1 {
				t.Errorf("%d label writes, want one", n)
			}
			body := f.commentsOn(5)[0].GetBody()
			if !strings.Contains(body, PoisonQuestion) {
				t.Errorf("the park comment does not ask the question:\n%s", body)
			}
			rec := e.parkRecord(5)
			if rec == nil || rec.Stage != store.ParkCommented || rec.CommentID != got[0] {
				t.Errorf("park record %+v, want commented with comment %d", rec, got[0])
			}
		})
	}
}

// TestManualParkWithoutQuestion: a human's park without a question labels
// the item and posts nothing (park-without-question is reported).
func TestManualParkWithoutQuestion(t *testing.T) {
	e := newEnv(t)
	f := newFakeCalls(e.clock.Now)
	m := e.newMirror(f)
	e.create(5, tags())
	set := gating.DefaultSettings()
	out, err := m.manualPark(e.ctx, e.repoRow(), set, 5, "hana", "hana", "manual-park", "", e.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(out, "no question yet") {
		t.Errorf("outcome %q", out)
	}
	if got := f.calls(""); !slices.Equal(got, []string{"addLabels 5 [stale]"}) {
		t.Errorf("calls %v, want the label only", got)
	}
	if got := e.openFindings(5); !slices.Equal(got, []string{CodeParkWithoutQuestion}) {
		t.Errorf("open findings %v", got)
	}
}

// TestRepairParkLabel: state:parked without the parked label gets it back,
// unless the label events show a human with triage removed it (an unpark).
func TestRepairParkLabel(t *testing.T) {
	parkedTags := append(tags(), "state:parked", "ruling-owner:pm", "ruling-topic:spec")
	cases := []struct {
		name       string
		by, typ    string
		roles      map[string]string
		wantOut    string
		wantLabel  bool
		wantParked bool
	}{
		{name: "an agent removed it: put back", by: "helper[bot]", typ: "Bot", wantOut: "label added", wantLabel: true, wantParked: true},
		{name: "a reader removed it: put back", by: "rita", typ: "User", roles: map[string]string{"rita": "read"}, wantOut: "label added", wantLabel: true, wantParked: true},
		{name: "a human with triage removed it: unparked", by: "hana", typ: "User", roles: map[string]string{"hana": "triage"}, wantOut: "unparked by hana"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			f := newFakeCalls(e.clock.Now)
			m := e.newMirror(f)
			e.createGated(5, parkedTags, "backlog")
			f.labelEvent(5, "labeled", "stale", testBot, "Bot", e.clock.Now().Add(-2*time.Minute))
			f.labelEvent(5, "unlabeled", "stale", tc.by, tc.typ, e.clock.Now().Add(-time.Minute))
			for k, v := range tc.roles {
				f.roles[k] = v
			}
			out, err := m.repairParkLabel(e.ctx, e.repoRow(), gating.DefaultSettings(), 5)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out, tc.wantOut) {
				t.Errorf("outcome %q, want %q", out, tc.wantOut)
			}
			if f.hasLabel(5, "stale") != tc.wantLabel {
				t.Errorf("label on: %v, want %v", f.hasLabel(5, "stale"), tc.wantLabel)
			}
			it, err := e.l.Get(e.ctx, e.repo, gating.IDFor(5))
			if err != nil {
				t.Fatal(err)
			}
			if it.HasTag("state:parked") != tc.wantParked {
				t.Errorf("parked %v, want %v", it.HasTag("state:parked"), tc.wantParked)
			}
		})
	}
}
