package mirror

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/mirror/store"
)

// Tests of the rule that no finding is published from a judgement a later
// read contradicted: settleItem judges an item again after its admission
// repair read the label events, and the sweep settles again an item whose
// report lists a finding the ledger no longer holds.

// recordingReports is a ReportSink (and a reportLister) that keeps what
// each item's report was last given, as Reports keeps it.
type recordingReports struct {
	mu        sync.Mutex
	listed    map[int][]gating.ReportFinding
	published map[int]int // Publish calls by issue number
}

func newRecordingReports() *recordingReports {
	return &recordingReports{listed: map[int][]gating.ReportFinding{}, published: map[int]int{}}
}

func (r *recordingReports) Publish(_ context.Context, _ store.Repo, n int, fs []gating.ReportFinding) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.published[n]++
	if slices.Equal(r.listed[n], fs) {
		return ReportUnchanged, nil
	}
	r.listed[n] = slices.Clone(fs)
	return ReportEdited, nil
}

func (r *recordingReports) Refuse(context.Context, store.Repo, int, string) (string, error) {
	return "", nil
}
func (r *recordingReports) Refresh(context.Context, store.Repo, int) (string, error) { return "", nil }
func (r *recordingReports) Flush(context.Context) (int, error)                       { return 0, nil }

func (r *recordingReports) Listed(_ context.Context, _ store.Repo) (map[int][]string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[int][]string{}
	for n, fs := range r.listed {
		for _, f := range fs {
			out[n] = append(out[n], f.Code)
		}
	}
	return out, nil
}

// codes are the codes the item's report lists.
func (r *recordingReports) codes(n int) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, f := range r.listed[n] {
		out = append(out, f.Code)
	}
	return out
}

func (r *recordingReports) calls(n int) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.published[n]
}

const (
	admissionLabel = "needs-specification"
	codeUnrecorded = "admission-unrecorded"
)

// createUnadmitted makes item n with no admission act, its issue recorded
// (as of at) with labels.
func (e *env) createUnadmitted(n int, at time.Time, labels ...string) {
	e.t.Helper()
	if _, err := e.l.Create(e.ctx, e.repo, store.NewItem{Number: n, Title: fmt.Sprintf("item %d", n), Body: "Spec: #" + fmt.Sprint(n),
		Author: "builder[bot]", Provenance: "test", Tags: tags()}, pm, store.WriteOptions{}); err != nil {
		e.t.Fatalf("create issue-%d: %v", n, err)
	}
	if _, err := e.l.RecordIssueState(e.ctx, e.repo, n, store.IssueState{State: store.IssueOpen, Labels: labels, UpdatedAt: at}); err != nil {
		e.t.Fatal(err)
	}
}

// TestSettleJudgesAgainAfterAdmissionRepair: an item whose recorded labels
// lack the admission label, with no admission act, reads
// admission-unrecorded; settling it reads the label events, and whatever
// they say, what is published is judged from the ledger after that read.
func TestSettleJudgesAgainAfterAdmissionRepair(t *testing.T) {
	type ev struct {
		action, login, typ string
		ago                time.Duration
	}
	cases := []struct {
		name      string
		events    []ev
		dryRun    bool
		wantCodes []string // of admission-unrecorded: listed or not
		wantAdd   bool     // warden puts the label back
		wantAct   bool     // an admission act is recorded
		wantLabel bool     // the recorded labels carry it afterwards
		wantOut   string
	}{
		{name: "on the issue after all: a delivery was behind",
			events:    []ev{{"labeled", "builder[bot]", "Bot", 5 * time.Second}},
			wantLabel: true, wantOut: "on the issue after all"},
		{name: "an agent removed it and a maintainer put it back",
			events:    []ev{{"labeled", testBot, "Bot", 9 * time.Second}, {"unlabeled", "builder[bot]", "Bot", 4 * time.Second}, {"labeled", "maria", "User", 3 * time.Second}},
			wantLabel: true, wantOut: "on the issue after all"},
		{name: "a maintainer removed it: admitted",
			events:  []ev{{"labeled", "builder[bot]", "Bot", 9 * time.Second}, {"unlabeled", "maria", "User", 2 * time.Second}},
			wantAct: true, wantOut: "admission by maria recorded"},
		{name: "an agent removed it: put back",
			events:  []ev{{"labeled", testBot, "Bot", 9 * time.Second}, {"unlabeled", "builder[bot]", "Bot", 2 * time.Second}},
			wantAdd: true, wantLabel: true, wantOut: "needs-specification added"},
		{name: "no event names it: put back",
			wantAdd: true, wantLabel: true, wantOut: "needs-specification added"},
		{name: "dry run: nothing read, the finding stands",
			events: []ev{{"labeled", "builder[bot]", "Bot", 5 * time.Second}}, dryRun: true,
			wantCodes: []string{codeUnrecorded}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			now := e.clock.Now()
			f := newFakeCalls(e.clock.Now)
			f.roles["maria"] = "maintain"
			const n = 7
			for _, x := range c.events {
				f.labelEvent(n, x.action, admissionLabel, x.login, x.typ, now.Add(-x.ago).Truncate(time.Second))
			}
			// What warden recorded: a delivery from before the label was
			// (back) on the issue.
			e.createUnadmitted(n, now.Add(-10*time.Second).Truncate(time.Second), "backlog")
			m := e.newMirror(f)
			if c.dryRun {
				m.Settings = func(context.Context, store.Repo) gating.Settings {
					s := gating.DefaultSettings()
					s.DryRun = true
					return s
				}
			}
			rep := newRecordingReports()
			m.Reports = rep
			repo, err := e.l.RepoByID(e.ctx, e.repo)
			if err != nil {
				t.Fatal(err)
			}
			out, err := m.settleItem(e.ctx, repo, n)
			if err != nil {
				t.Fatal(err)
			}
			if c.wantOut != "" && !strings.Contains(out, c.wantOut) {
				t.Errorf("outcome %q, want it to say %q", out, c.wantOut)
			}
			if got := slices.DeleteFunc(rep.codes(n), func(s string) bool { return s != codeUnrecorded }); !slices.Equal(got, c.wantCodes) {
				t.Errorf("published %v, want %v (all: %v)", got, c.wantCodes, rep.codes(n))
			}
			if adds := f.calls("addLabels"); (len(adds) > 0) != c.wantAdd {
				t.Errorf("label writes %v, want a write %v", adds, c.wantAdd)
			}
			adm, err := e.acts.Admission(e.ctx, e.repo, n)
			if err != nil {
				t.Fatal(err)
			}
			if (adm != nil) != c.wantAct {
				t.Errorf("admission act %+v, want one %v", adm, c.wantAct)
			}
			st, err := e.l.IssueState(e.ctx, e.repo, n)
			if err != nil {
				t.Fatal(err)
			}
			if st.HasLabel(admissionLabel) != c.wantLabel {
				t.Errorf("recorded labels %v, want %s %v", st.Labels, admissionLabel, c.wantLabel)
			}
			if !c.wantLabel {
				return
			}
			// A delivery older than the read cannot undo it, and the item
			// is not judged unrecorded again.
			stale := store.IssueState{State: store.IssueOpen, Labels: []string{"backlog"}, UpdatedAt: now.Add(-6 * time.Second).Truncate(time.Second)}
			if applied, err := e.l.RecordIssueState(e.ctx, e.repo, n, stale); err != nil || applied {
				t.Errorf("a delivery from before the read was applied (%v, %v)", applied, err)
			}
			if _, err := m.settleItem(e.ctx, repo, n); err != nil {
				t.Fatal(err)
			}
			if slices.Contains(rep.codes(n), codeUnrecorded) {
				t.Errorf("settled again: %v", rep.codes(n))
			}
		})
	}
}

// TestSweepJudgesStaleReportsAgain: a report that lists a finding the
// ledger no longer holds (an older warden published it from a stale
// snapshot) is settled again by the next sweep; a report whose findings
// all hold, and the report of an issue that is no item, are left alone.
func TestSweepJudgesStaleReportsAgain(t *testing.T) {
	e := newEnv(t)
	f := newFakeCalls(e.clock.Now)
	m := e.newMirror(f)
	rep := newRecordingReports()
	m.Reports = rep
	e.create(1, tags()) // admitted: admission-unrecorded is false
	// Recorded without the label and with no act: the finding holds (the
	// sweep leaves its repair to the item's next settle).
	e.createUnadmitted(2, e.clock.Now(), "backlog")
	rep.listed[1] = []gating.ReportFinding{{Code: codeUnrecorded, Detail: "stale"}}
	rep.listed[2] = []gating.ReportFinding{{Code: codeUnrecorded, Detail: "holds"}}
	rep.listed[9] = []gating.ReportFinding{{Code: codeUnrecorded, Detail: "not an item"}}
	if _, err := m.Sweep(e.ctx); err != nil {
		t.Fatal(err)
	}
	if got := rep.codes(1); slices.Contains(got, codeUnrecorded) || rep.calls(1) != 1 {
		t.Errorf("issue-1: report %v after %d publishes, want admission-unrecorded gone after one", got, rep.calls(1))
	}
	if rep.calls(2) != 0 || rep.calls(9) != 0 {
		t.Errorf("publishes of issue-2 %d, of #9 %d: want none (nothing stale)", rep.calls(2), rep.calls(9))
	}
	// The next sweep finds nothing to judge again.
	if _, err := m.Sweep(e.ctx); err != nil {
		t.Fatal(err)
	}
	if rep.calls(1) != 1 {
		t.Errorf("issue-1 published %d times after a second sweep, want once", rep.calls(1))
	}
	f.noCalls(t, "addLabels", "removeLabel", "createComment", "issueEvents")
}

// TestStaleReports: which reports list a finding the ready set no longer
// holds.
func TestStaleReports(t *testing.T) {
	items := map[gating.ItemID]*store.Item{"issue-1": {}, "issue-2": {}, "issue-3": {}}
	held := []gating.Defect{
		{Code: "cycle", Item: "issue-1"},
		{Code: codeUnrecorded, Item: "issue-2"},
		{Code: "ready-empty-pending"}, // repository-wide
	}
	cases := []struct {
		name   string
		listed map[int][]string
		want   []int
	}{
		{"nothing listed", nil, nil},
		{"every listed finding held", map[int][]string{1: {"cycle"}, 2: {codeUnrecorded}}, nil},
		{"one of two no longer held", map[int][]string{1: {"cycle", codeUnrecorded}}, []int{1}},
		{"held about another item only", map[int][]string{3: {"cycle"}}, []int{3}},
		{"a repository-wide code is no item's", map[int][]string{3: {"ready-empty-pending"}}, []int{3}},
		{"an issue that is no item", map[int][]string{4: {"cycle"}}, nil},
		{"in order", map[int][]string{3: {"x"}, 1: {"y"}, 2: {"z"}}, []int{1, 2, 3}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := staleReports(c.listed, held, items); !slices.Equal(got, c.want) {
				t.Errorf("staleReports = %v, want %v", got, c.want)
			}
		})
	}
}
