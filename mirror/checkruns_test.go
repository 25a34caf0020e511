package mirror

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-github/v66/github"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/mirror/store"
)

const (
	headA = "aaaaaaa1111111111111111111111111111111111"
	headB = "bbbbbbb2222222222222222222222222222222222"
)

// recordPR records open pull request n with head sha, delivering item 5
// into its baseBranch.
func (e *env) recordPR(n int, sha string) {
	e.t.Helper()
	pr := store.PullRecord{PullRequest: gating.PullRequest{Number: n, State: "open", HeadRef: "work/5", HeadSHA: sha, BaseRef: "feat/epic",
		Body: "Refs #5"}, UpdatedAt: e.clock.Now()}
	if _, err := e.l.RecordPull(e.ctx, e.repo, pr); err != nil {
		e.t.Fatal(err)
	}
}

// checkStep is one evaluation of a head's check run: before changes the
// world, then checkHead runs; calls are the GitHub calls it makes.
type checkStep struct {
	name      string
	before    func(e *env, f *fakeCalls)
	head      string
	dry       bool
	newHead   bool // a delivery brought the head (no run can be on it yet)
	wantOut   string
	wantCalls []string
}

// TestCheckRun: warden's check run is created once per head and edited
// only when its verdict changes (CONTRACT.md §8); a create whose answer
// was lost is adopted, not made twice; a run gone from GitHub is made
// anew; dry_run writes nothing.
func TestCheckRun(t *testing.T) {
	claim := func(e *env, _ *fakeCalls) { e.claim(5, "w/1", 600) }
	cases := []struct {
		name     string
		steps    []checkStep
		wantRuns map[string][]string // head → the conclusions of its runs
	}{{
		name: "created once, updated when the verdict changes",
		steps: []checkStep{
			{name: "first", newHead: true, head: headA, wantOut: "check run on aaaaaaa created: neutral", wantCalls: []string{"createCheckRun aaaaaaa neutral"}},
			{name: "unchanged", head: headA, wantOut: "", wantCalls: nil},
			{name: "claimed", before: claim, head: headA, wantOut: "check run on aaaaaaa: success", wantCalls: []string{"updateCheckRun 1001 success"}},
			{name: "unchanged again", head: headA, wantOut: "", wantCalls: nil},
			{name: "another head", before: func(e *env, _ *fakeCalls) { e.recordPR(10, headB) }, newHead: true, head: headB,
				wantOut: "created: success", wantCalls: []string{"createCheckRun bbbbbbb success"}},
		},
		wantRuns: map[string][]string{headA: {"success"}, headB: {"success"}},
	}, {
		name: "a create whose answer was lost is adopted",
		steps: []checkStep{
			{name: "lost", before: func(_ *env, f *fakeCalls) { f.lost["createCheckRun"] = errors.New("timeout") }, newHead: true, head: headA,
				wantOut: "error: create the check run on aaaaaaa: timeout", wantCalls: []string{"createCheckRun aaaaaaa neutral"}},
			{name: "adopted", before: func(_ *env, f *fakeCalls) { delete(f.lost, "createCheckRun") }, head: headA,
				wantOut: "check run on aaaaaaa: neutral", wantCalls: []string{"checkRunsFor aaaaaaa backlog", "updateCheckRun 1001 neutral"}},
			{name: "unchanged", head: headA, wantOut: "", wantCalls: nil},
		},
		wantRuns: map[string][]string{headA: {"neutral"}},
	}, {
		name: "a run gone from GitHub is made anew",
		steps: []checkStep{
			{name: "first", newHead: true, head: headA, wantOut: "created: neutral", wantCalls: []string{"createCheckRun aaaaaaa neutral"}},
			{name: "gone", before: func(e *env, f *fakeCalls) { f.runs = map[string][]*github.CheckRun{}; claim(e, f) }, head: headA,
				wantOut: "created: success", wantCalls: []string{"updateCheckRun 1001 success", "createCheckRun aaaaaaa success"}},
		},
		wantRuns: map[string][]string{headA: {"success"}},
	}, {
		name: "a commit GitHub does not know",
		steps: []checkStep{
			{name: "unknown", before: func(_ *env, f *fakeCalls) { f.fail["createCheckRun"] = errUnprocessable }, newHead: true, head: headA,
				wantOut: "commit unknown to GitHub", wantCalls: []string{"createCheckRun aaaaaaa neutral"}},
		},
	}, {
		name: "a head no delivery brought is looked for first",
		steps: []checkStep{
			{name: "none on GitHub", head: headA, wantOut: "created: neutral",
				wantCalls: []string{"checkRunsFor aaaaaaa backlog", "createCheckRun aaaaaaa neutral"}},
			{name: "recorded now", head: headA, wantOut: "", wantCalls: nil},
		},
		wantRuns: map[string][]string{headA: {"neutral"}},
	}, {
		name: "a run warden made before its record was lost is adopted",
		steps: []checkStep{
			{name: "adopted, rewritten only where it differs", before: func(_ *env, f *fakeCalls) {
				f.runs[headA] = []*github.CheckRun{{ID: github.Int64(77), Name: github.String(CheckRunName), HeadSHA: github.String(headA),
					Status: github.String("completed"), Conclusion: github.String("success"), App: &github.App{Slug: github.String("warden")},
					Output: &github.CheckRunOutput{Title: github.String("an older verdict"), Summary: github.String("")}}}
			}, head: headA, wantOut: "check run on aaaaaaa: neutral", wantCalls: []string{"checkRunsFor aaaaaaa backlog", "updateCheckRun 77 neutral"}},
			{name: "unchanged", head: headA, wantOut: "", wantCalls: nil},
		},
		wantRuns: map[string][]string{headA: {"neutral"}},
	}, {
		name: "dry run writes nothing",
		steps: []checkStep{
			{name: "dry", head: headA, dry: true, wantOut: "check run on aaaaaaa would be neutral (dry run)", wantCalls: nil},
		},
	}, {
		name: "a head no pull request has",
		steps: []checkStep{
			{name: "none", head: headB, wantOut: "", wantCalls: nil},
		},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			f := newFakeCalls(e.clock.Now)
			m := e.newMirror(f)
			dry := false
			m.Settings = func(context.Context, store.Repo) gating.Settings {
				s := gating.DefaultSettings()
				s.DryRun = dry
				return s
			}
			e.create(5, tags())
			e.recordPR(9, headA)
			for _, s := range tc.steps {
				if s.before != nil {
					s.before(e, f)
				}
				dry = s.dry
				f.mu.Lock()
				f.log = nil
				f.mu.Unlock()
				ctx := e.ctx
				if s.newHead {
					ctx = withNewHead(ctx, s.head)
				}
				out, err := m.checkHead(ctx, e.repoRow(), s.head)
				if err != nil {
					out = "error: " + err.Error()
				}
				if s.wantOut == "" && out != "" || !strings.Contains(out, s.wantOut) {
					t.Errorf("%s: outcome %q, want %q", s.name, out, s.wantOut)
				}
				if got := f.calls(""); !slices.Equal(got, s.wantCalls) {
					t.Errorf("%s: calls %v, want %v", s.name, got, s.wantCalls)
				}
			}
			for _, head := range []string{headA, headB} {
				var got []string
				for _, r := range f.runsOn(head) {
					got = append(got, r.GetConclusion())
				}
				if want := tc.wantRuns[head]; !slices.Equal(got, want) {
					t.Errorf("runs on %s: %v, want %v", shortSHA(head), got, want)
				}
			}
		})
	}
}

// TestCheckRunEpicMemberHead: a delivered epic member's head is judged by
// compares (two or three), the head cut from the default branch rather
// than the epic's branch failing pr-not-from-base; an epic branch GitHub
// no longer has judges nothing (one compare).
func TestCheckRunEpicMemberHead(t *testing.T) {
	cases := []struct {
		name string
		// compares are GitHub's answers ("base...head"); one missing is a 404.
		compares       map[string]*github.CommitsComparison
		wantConclusion string
		wantCompares   []string
	}{{
		name: "cut from the default branch",
		compares: map[string]*github.CommitsComparison{
			"feat/epic..." + headA: {MergeBaseCommit: &github.RepositoryCommit{SHA: github.String("mb1")}},
			"main...mb1":           {Status: github.String("behind")},
			"main...feat/epic":     {AheadBy: github.Int(2)},
		},
		wantConclusion: "failure",
		wantCompares:   []string{"compare feat/epic..." + headA, "compare main...mb1", "compare main...feat/epic"},
	}, {
		name: "cut from the epic's branch",
		compares: map[string]*github.CommitsComparison{
			"feat/epic..." + headA: {MergeBaseCommit: &github.RepositoryCommit{SHA: github.String("mb2")}},
			"main...mb2":           {Status: github.String("ahead")},
		},
		wantConclusion: "neutral",
		wantCompares:   []string{"compare feat/epic..." + headA, "compare main...mb2"},
	}, {
		name:           "the epic branch is gone",
		wantConclusion: "neutral",
		wantCompares:   []string{"compare feat/epic..." + headA},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			f := newFakeCalls(e.clock.Now)
			m := e.newMirror(f)
			maps.Copy(f.compares, tc.compares)
			e.create(10, tags())
			if _, err := e.l.Create(e.ctx, e.repo, store.NewItem{Number: 12, Title: "member", Body: "Spec: #12", Author: "backlog-pm",
				Provenance: "test", Tags: tags(), Links: []gating.Link{{Rel: gating.PartOf, Target: "issue-10"}}}, pm, store.WriteOptions{}); err != nil {
				t.Fatal(err)
			}
			if err := e.acts.RecordAdmission(e.ctx, e.repo, 12, store.Admission{By: "alice", At: e.clock.Now(), How: "test"}); err != nil {
				t.Fatal(err)
			}
			if _, err := e.l.RecordIssueState(e.ctx, e.repo, 12, store.IssueState{State: store.IssueOpen, Labels: []string{"backlog"}, UpdatedAt: e.clock.Now()}); err != nil {
				t.Fatal(err)
			}
			pr := store.PullRecord{PullRequest: gating.PullRequest{Number: 9, State: "open", HeadRef: "work/12", HeadSHA: headA, BaseRef: "feat/epic",
				Body: "Refs #12"}, UpdatedAt: e.clock.Now()}
			if _, err := e.l.RecordPull(e.ctx, e.repo, pr); err != nil {
				t.Fatal(err)
			}
			if _, err := m.checkHead(e.ctx, e.repoRow(), headA); err != nil {
				t.Fatal(err)
			}
			if got := f.calls("compare"); !slices.Equal(got, tc.wantCompares) {
				t.Errorf("compares %v, want %v", got, tc.wantCompares)
			}
			runs := f.runsOn(headA)
			if len(runs) != 1 || runs[0].GetConclusion() != tc.wantConclusion {
				t.Fatalf("runs %v, want one %s", runs, tc.wantConclusion)
			}
			if fails := strings.Contains(runs[0].GetOutput().GetSummary(), "pr-not-from-base"); fails != (tc.wantConclusion == "failure") {
				t.Errorf("pr-not-from-base %v in:\n%s", fails, runs[0].GetOutput().GetSummary())
			}
		})
	}
}
