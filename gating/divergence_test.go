package gating

import (
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// dvPR is pull request n from feat/<n> into main whose body is body.
func dvPR(n int, body string, mods ...func(*PullRequest)) PullRequest {
	pr := PullRequest{Number: n, State: "open", HeadRef: "feat/" + string(rune('a'+n%26)), BaseRef: "main", Body: body, Title: "a change"}
	for _, m := range mods {
		m(&pr)
	}
	return pr
}

func dvMerged() func(*PullRequest) {
	return func(p *PullRequest) { p.State, p.Merged, p.MergedAt = "closed", true, rnow.Add(-time.Hour) }
}
func dvDraft() func(*PullRequest) { return func(p *PullRequest) { p.Draft = true } }
func dvMergeable(b bool) func(*PullRequest) {
	return func(p *PullRequest) { p.Mergeable = &b }
}

// dvFacts builds facts over s with the given open and merged pull requests,
// linking each with PRLinks; green lists green pull requests.
func dvFacts(s Snapshot, open, merged []PullRequest, green ...int) RepoFacts {
	f := RepoFacts{Snapshot: s, RepoFullName: crRepo, OpenPRs: open, MergedPRs: merged, Links: map[int][]PRLink{}, Green: map[int]bool{}}
	for _, pr := range slices.Concat(open, merged) {
		f.Links[pr.Number] = PRLinks(pr, crRepo, s)
	}
	for _, n := range green {
		f.Green[n] = true
	}
	return f
}

// dvFind returns the defects with code on item n (0: repository-wide).
func dvFind(ds []Defect, code string, n int) []Defect {
	var out []Defect
	for _, d := range ds {
		if d.Code == code && (n == 0 && d.Item == "" || n != 0 && d.Item == IDFor(n)) {
			out = append(out, d)
		}
	}
	return out
}

func TestDivergences(t *testing.T) {
	none := func(*Candidate) {}
	type tcase struct {
		name  string
		facts RepoFacts
		code  string
		item  int  // 0: repository-wide
		made  bool // the divergence is made (false: a near miss)
		subs  []string
	}
	one := func(item Candidate) Snapshot { return snap(item) }
	cases := []tcase{
		// merged-not-complete
		{"merged, item live", dvFacts(one(mk(12, held("w/1"))), nil, []PullRequest{dvPR(7, "Closes #12", dvMerged())}), "merged-not-complete", 12, true,
			[]string{"ledger: issue-12 has no state:complete", "GitHub: pull request #7", "was merged at", "closes #12", "claim held by w/1 at fence 5"}},
		{"merged, item complete", dvFacts(one(mk(12, complete())), nil, []PullRequest{dvPR(7, "Closes #12", dvMerged())}), "merged-not-complete", 12, false, nil},
		{"closed without merging", dvFacts(one(mk(12)), nil, []PullRequest{dvPR(7, "Closes #12", func(p *PullRequest) { p.State = "closed" })}), "merged-not-complete", 12, false, nil},
		{"merged into another base", dvFacts(one(mk(12)), nil, []PullRequest{dvPR(7, "Closes #12", dvMerged(), crBase("develop"))}), "merged-not-complete", 12, false, nil},
		{"merged, item parked", dvFacts(one(mk(12, parked())), nil, []PullRequest{dvPR(7, "Closes #12", dvMerged())}), "merged-not-complete", 12, false, nil},
		{"merged bucket carries a live member", dvFacts(epicSnap(complete()), nil, []PullRequest{dvPR(7, "Refs #12", dvMerged(), crHead("feat/epic/x"))}), "merged-not-complete", 12, false, nil},
		{"merged bucket, integration complete, grouping live", dvFacts(epicSnap(complete()), nil, []PullRequest{dvPR(7, "", dvMerged(), crHead("feat/epic/x"))}), "merged-not-complete", 10, true,
			[]string{"grouping issue-10 has no state:complete", "issue-14 is complete", "#7"}},
		// A human ruled the merged pull request did not deliver the item
		// (/backlog undelivered): it makes no merged-not-complete for it.
		{"merged, disowned for the item", disown(dvFacts(one(mk(12)), nil, []PullRequest{dvPR(7, "Closes #12", dvMerged())}), 12, 7), "merged-not-complete", 12, false, nil},
		{"merged, another PR disowned", disown(dvFacts(one(mk(12)), nil, []PullRequest{dvPR(7, "Closes #12", dvMerged())}), 12, 8), "merged-not-complete", 12, true, []string{"#7"}},
		{"merged, disowned for another item", disown(dvFacts(one(mk(12)), nil, []PullRequest{dvPR(7, "Closes #12", dvMerged())}), 13, 7), "merged-not-complete", 12, true, []string{"#7"}},
		{"two merged, one disowned", disown(dvFacts(one(mk(12)), nil, []PullRequest{dvPR(7, "Closes #12", dvMerged()), dvPR(8, "Refs #12", dvMerged())}), 12, 7), "merged-not-complete", 12, true,
			[]string{"#8"}},
		{"merged bucket disowned for the grouping", disown(dvFacts(epicSnap(complete()), nil, []PullRequest{dvPR(7, "", dvMerged(), crHead("feat/epic/x"))}), 10, 7), "merged-not-complete", 10, false, nil},
		{"disowned, the PR still open: other findings stay", disown(dvFacts(one(mk(12, complete())), []PullRequest{dvPR(7, "Refs #12")}, nil), 12, 7), "complete-with-open-pr", 12, true, nil},

		// complete-with-open-pr
		{"complete, delivering PR open", dvFacts(one(mk(12, complete())), []PullRequest{dvPR(7, "Refs #12")}, nil), "complete-with-open-pr", 12, true,
			[]string{"ledger: issue-12 is state:complete", "GitHub: open pull request #7", "refs #12"}},
		{"complete, pr tag names an open PR", dvFacts(one(mk(12, complete(), tg("pr:7"))), []PullRequest{dvPR(7, "")}, nil), "complete-with-open-pr", 12, true,
			[]string{"state:complete", "pr:7 tag"}},
		{"complete, pr tag of a PR not in the open list", func() RepoFacts {
			f := dvFacts(one(mk(12, complete(), tg("pr:7"))), nil, nil)
			return f
		}(), "complete-with-open-pr", 12, false, nil},
		{"complete, the PR in the open list is closed", dvFacts(one(mk(12, complete(), tg("pr:7"))), []PullRequest{dvPR(7, "", crClosed())}, nil), "complete-with-open-pr", 12, false, nil},
		{"live item with an open PR", dvFacts(one(mk(12, held("w/1"))), []PullRequest{dvPR(7, "Refs #12")}, nil), "complete-with-open-pr", 12, false, nil},

		// resumable-green-pr
		{"green, released", dvFacts(one(mk(12, released("w/1"))), []PullRequest{dvPR(7, "Closes #12", dvMergeable(true))}, nil, 7), "resumable-green-pr", 12, true,
			[]string{"no live claim (claim released by w/1 at fence 5)", "GitHub: open pull request #7", "green and mergeable", "cheapest resume"}},
		{"green, never claimed", dvFacts(one(mk(12)), []PullRequest{dvPR(7, "Closes #12")}, nil, 7), "resumable-green-pr", 12, true, []string{"never claimed"}},
		{"green, abandoned", dvFacts(one(mk(12, abandoned("w/1"))), []PullRequest{dvPR(7, "Closes #12")}, nil, 7), "resumable-green-pr", 12, true, []string{"abandoned"}},
		{"green, held", dvFacts(one(mk(12, held("w/1"))), []PullRequest{dvPR(7, "Closes #12")}, nil, 7), "resumable-green-pr", 12, false, nil},
		{"green, lapsed", dvFacts(one(mk(12, lapsed("w/1"))), []PullRequest{dvPR(7, "Closes #12")}, nil, 7), "resumable-green-pr", 12, false, nil},
		{"not green", dvFacts(one(mk(12, released("w/1"))), []PullRequest{dvPR(7, "Closes #12")}, nil), "resumable-green-pr", 12, false, nil},
		{"green but draft", dvFacts(one(mk(12, released("w/1"))), []PullRequest{dvPR(7, "Closes #12", dvDraft())}, nil, 7), "resumable-green-pr", 12, false, nil},
		{"green but not mergeable", dvFacts(one(mk(12, released("w/1"))), []PullRequest{dvPR(7, "Closes #12", dvMergeable(false))}, nil, 7), "resumable-green-pr", 12, false, nil},
		{"green, item complete", dvFacts(one(mk(12, released("w/1"), complete())), []PullRequest{dvPR(7, "Closes #12")}, nil, 7), "resumable-green-pr", 12, false, nil},
		{"green, into the wrong base", dvFacts(one(mk(12, released("w/1"))), []PullRequest{dvPR(7, "Closes #12", crBase("develop"))}, nil, 7), "resumable-green-pr", 12, false, nil},
		{"green, item parked", dvFacts(one(mk(12, released("w/1"), parked())), []PullRequest{dvPR(7, "Closes #12")}, nil, 7), "resumable-green-pr", 12, false, nil},

		// epic-child-on-main
		{"member's PR into main", dvFacts(epicSnap(none), []PullRequest{dvPR(7, "Refs #12")}, nil), "epic-child-on-main", 12, true,
			[]string{"ledger: issue-12 is partOf issue-10 with baseBranch:feat/epic/x", "GitHub: open pull request #7", "targets the default branch main"}},
		{"member's PR into the epic branch", dvFacts(epicSnap(none), []PullRequest{dvPR(7, "Refs #12", crBase("feat/epic/x"))}, nil), "epic-child-on-main", 12, false, nil},

		// pr-wrong-base
		{"PR into another base", dvFacts(one(mk(12, held("w/1"))), []PullRequest{dvPR(7, "Refs #12", crBase("develop"))}, nil), "pr-wrong-base", 12, true,
			[]string{"ledger: issue-12's baseBranch: is main", "GitHub: open pull request #7", "targets develop"}},
		{"PR into its base", dvFacts(one(mk(12, held("w/1"))), []PullRequest{dvPR(7, "Refs #12")}, nil), "pr-wrong-base", 12, false, nil},
		{"member into main is epic-child-on-main, not pr-wrong-base", dvFacts(epicSnap(none), []PullRequest{dvPR(7, "Refs #12")}, nil), "pr-wrong-base", 12, false, nil},

		// integration-incomplete
		{"bucket merged, integration live", dvFacts(epicSnap(none), nil, []PullRequest{dvPR(7, "", dvMerged(), crHead("feat/epic/x"))}), "integration-incomplete", 10, true,
			[]string{"ledger: grouping issue-10's integration item issue-14 is not complete (live)", "GitHub: pull request #7 (head feat/epic/x into main) was merged"}},
		{"bucket merged, integration complete", dvFacts(epicSnap(complete()), nil, []PullRequest{dvPR(7, "", dvMerged(), crHead("feat/epic/x"))}), "integration-incomplete", 10, false, nil},
		{"bucket still open", dvFacts(epicSnap(none), []PullRequest{dvPR(7, "", crHead("feat/epic/x"))}, nil), "integration-incomplete", 10, false, nil},
		{"epic branch merged elsewhere", dvFacts(epicSnap(none), nil, []PullRequest{dvPR(7, "", dvMerged(), crHead("feat/epic/x"), crBase("release"))}), "integration-incomplete", 10, false, nil},

		// issue-closed-item-live
		{"issue closed, item live", withIssues(dvFacts(one(mk(12)), nil, nil), IssueFacts{12, "closed", "completed", true}), "issue-closed-item-live", 12, true,
			[]string{"ledger: issue-12 is not complete (live)", "GitHub: issue #12 was closed as completed"}},
		{"issue closed, item parked", withIssues(dvFacts(one(mk(12, parked())), nil, nil), IssueFacts{12, "closed", "not_planned", true}), "issue-closed-item-live", 12, true, []string{"parked"}},
		{"issue closed, item complete", withIssues(dvFacts(one(mk(12, complete())), nil, nil), IssueFacts{12, "closed", "completed", true}), "issue-closed-item-live", 12, false, nil},
		{"issue open, item live", withIssues(dvFacts(one(mk(12)), nil, nil), IssueFacts{12, "open", "", true}), "issue-closed-item-live", 12, false, nil},

		// complete-issue-open
		{"complete, issue open", withIssues(dvFacts(one(mk(12, complete())), nil, nil), IssueFacts{12, "open", "reopened", true}), "complete-issue-open", 12, true,
			[]string{"ledger: issue-12 is state:complete", "GitHub: issue #12 is still open"}},
		{"complete, issue closed", withIssues(dvFacts(one(mk(12, complete())), nil, nil), IssueFacts{12, "closed", "completed", true}), "complete-issue-open", 12, false, nil},
		{"live, issue open", withIssues(dvFacts(one(mk(12)), nil, nil), IssueFacts{12, "open", "", true}), "complete-issue-open", 12, false, nil},

		// pr-without-item
		{"open PR links nothing", dvFacts(one(mk(12)), []PullRequest{dvPR(7, "a drive-by fix", func(p *PullRequest) { p.Title = "@x Fix" })}, nil), "pr-without-item", 0, true,
			[]string{"ledger: no item is linked to pull request #7", "GitHub: pull request #7 (head feat/h into main)", `titled "@x Fix"`}},
		{"open PR links an item", dvFacts(one(mk(12)), []PullRequest{dvPR(7, "refs #12")}, nil), "pr-without-item", 0, false, nil},
		{"open PR references no item", dvFacts(one(mk(12)), []PullRequest{dvPR(7, "refs #99")}, nil), "pr-without-item", 0, true, nil},
		{"an open bucket links no item but is the grouping's", dvFacts(epicSnap(none), []PullRequest{dvPR(7, "merge the epic", crHead("feat/epic/x"))}, nil), "pr-without-item", 0, false, nil},
		{"a merged PR linking nothing is no finding", dvFacts(one(mk(12)), nil, []PullRequest{dvPR(7, "x", dvMerged())}), "pr-without-item", 0, false, nil},

		// issue-gone
		{"issue deleted", withIssues(dvFacts(one(mk(12)), nil, nil), IssueFacts{Number: 12}), "issue-gone", 12, true,
			[]string{"ledger: issue-12 exists (live)", "GitHub: issue #12 is gone"}},
		{"issue exists", withIssues(dvFacts(one(mk(12)), nil, nil), IssueFacts{12, "open", "", true}), "issue-gone", 12, false, nil},
		{"issue not looked at", dvFacts(one(mk(12)), nil, nil), "issue-gone", 12, false, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ds := Divergences(tc.facts)
			got := dvFind(ds, tc.code, tc.item)
			switch {
			case tc.made && len(got) != 1:
				t.Fatalf("%d %s on item %d, want 1; all: %+v", len(got), tc.code, tc.item, ds)
			case !tc.made && len(got) != 0:
				t.Fatalf("%s made: %+v", tc.code, got)
			}
			for _, sub := range tc.subs {
				if !strings.Contains(got[0].Detail, sub) {
					t.Errorf("detail %q lacks %q", got[0].Detail, sub)
				}
			}
		})
	}
}

// disown records a human's ruling that pull requests prs did not deliver
// item n.
func disown(f RepoFacts, n int, prs ...int) RepoFacts {
	if f.Disowned == nil {
		f.Disowned = map[int][]int{}
	}
	f.Disowned[n] = append(f.Disowned[n], prs...)
	return f
}

// TestUndeliveredRefusal: /backlog undelivered #<pr> is recorded only for a
// merged pull request that links the item or is its grouping's bucket;
// anything else is refused, saying why.
func TestUndeliveredRefusal(t *testing.T) {
	merged := []PullRequest{dvPR(7, "Closes #12", dvMerged()), dvPR(8, "An unrelated change", dvMerged()), dvPR(9, "Closes #12", crClosed())}
	open := []PullRequest{dvPR(20, "Refs #12")}
	f := dvFacts(snap(mk(12), mk(13)), open, merged)
	bucket := dvFacts(epicSnap(complete()), nil, []PullRequest{dvPR(7, "", dvMerged(), crHead("feat/epic/x"))})
	cases := []struct {
		name  string
		facts RepoFacts
		id    ItemID
		pr    int
		want  string // "" = may be recorded; else a substring of the reason
	}{
		{"merged and linked", f, "issue-12", 7, ""},
		{"merged, linked by a pr: tag", dvFacts(snap(mk(12, tg("pr:8"))), nil, merged), "issue-12", 8, ""},
		{"merged, linking nothing", f, "issue-12", 8, "does not link issue-12"},
		{"merged, linking another item", f, "issue-13", 7, "does not link issue-13"},
		{"closed without merging", f, "issue-12", 9, "no record of pull request #9 being merged"},
		{"still open", f, "issue-12", 20, "pull request #20 is still open"},
		{"unknown", f, "issue-12", 99, "no record of pull request #99 being merged"},
		{"no such item", f, "issue-14", 7, "issue-14 is not an item"},
		{"the grouping's merged bucket", bucket, "issue-10", 7, ""},
		{"a bucket that links a member: linked, so recorded", dvFacts(epicSnap(complete()), nil, []PullRequest{dvPR(7, "Refs #12", dvMerged(), crHead("feat/epic/x"))}), "issue-12", 7, ""},
	}
	for _, c := range cases {
		got := UndeliveredRefusal(c.facts, c.id, c.pr)
		switch {
		case c.want == "" && got != "":
			t.Errorf("%s: refused %q, want recorded", c.name, got)
		case c.want != "" && !strings.Contains(got, c.want):
			t.Errorf("%s: %q, want a refusal saying %q", c.name, got, c.want)
		}
	}
}

func withIssues(f RepoFacts, is ...IssueFacts) RepoFacts {
	f.Issues = map[int]IssueFacts{}
	for _, i := range is {
		f.Issues[i.Number] = i
	}
	return f
}

// A pr: tag that both links the open pull request and names it is one
// finding, not two.
func TestDivergencesCompleteWithOpenPROnce(t *testing.T) {
	f := dvFacts(snap(mk(12, complete(), tg("pr:7"))), []PullRequest{dvPR(7, "Closes #12")}, nil)
	if got := dvFind(Divergences(f), "complete-with-open-pr", 12); len(got) != 1 {
		t.Errorf("%d findings, want 1: %+v", len(got), got)
	}
}

func TestDivergencesOrderAndDeterminism(t *testing.T) {
	s := snap(mk(12, complete()), mk(13, released("w/1")), mk(14), mk(20, held("w/2")))
	open := []PullRequest{dvPR(7, "Refs #12"), dvPR(8, "Closes #13"), dvPR(9, "nothing"), dvPR(5, "Closes #20", crBase("develop"))}
	merged := []PullRequest{dvPR(3, "closes #14", dvMerged()), dvPR(4, "closes #20", dvMerged())}
	f := withIssues(dvFacts(s, open, merged, 8), IssueFacts{12, "open", "", true}, IssueFacts{14, "closed", "completed", true})
	want := Divergences(f)
	var codes []string
	for _, d := range want {
		codes = append(codes, d.Code+" "+string(d.Item))
	}
	wantCodes := []string{
		"complete-issue-open issue-12",
		"complete-with-open-pr issue-12",
		"issue-closed-item-live issue-14",
		"merged-not-complete issue-14",
		"merged-not-complete issue-20",
		"pr-without-item ",
		"pr-wrong-base issue-20",
		"resumable-green-pr issue-13",
	}
	if !reflect.DeepEqual(codes, wantCodes) {
		t.Errorf("codes\n got %q\nwant %q", codes, wantCodes)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20 {
		g := f
		g.OpenPRs = slices.Clone(open)
		g.MergedPRs = slices.Clone(merged)
		g.Snapshot.Items = slices.Clone(s.Items)
		rng.Shuffle(len(g.OpenPRs), func(i, j int) { g.OpenPRs[i], g.OpenPRs[j] = g.OpenPRs[j], g.OpenPRs[i] })
		rng.Shuffle(len(g.MergedPRs), func(i, j int) { g.MergedPRs[i], g.MergedPRs[j] = g.MergedPRs[j], g.MergedPRs[i] })
		rng.Shuffle(len(g.Snapshot.Items), func(i, j int) { g.Snapshot.Items[i], g.Snapshot.Items[j] = g.Snapshot.Items[j], g.Snapshot.Items[i] })
		if got := Divergences(g); !reflect.DeepEqual(got, want) {
			t.Fatalf("order-dependent:\n got %+v\nwant %+v", got, want)
		}
	}
}

// TestResumeCandidates: the pull requests whose checks the reconcile reads
// are exactly those a green result would make a resumable-green-pr.
func TestResumeCandidates(t *testing.T) {
	one := func(item Candidate) Snapshot { return snap(item) }
	cases := []struct {
		name string
		f    RepoFacts
		want []int
	}{
		{"released item", dvFacts(one(mk(12, released("w/1"))), []PullRequest{dvPR(7, "Closes #12")}, nil), []int{7}},
		{"never claimed", dvFacts(one(mk(12)), []PullRequest{dvPR(7, "Closes #12")}, nil), []int{7}},
		{"held: no resume", dvFacts(one(mk(12, held("w/1"))), []PullRequest{dvPR(7, "Closes #12")}, nil), nil},
		{"draft", dvFacts(one(mk(12)), []PullRequest{dvPR(7, "Closes #12", dvDraft())}, nil), nil},
		{"known unmergeable", dvFacts(one(mk(12)), []PullRequest{dvPR(7, "Closes #12", dvMergeable(false))}, nil), nil},
		{"links nothing", dvFacts(one(mk(12)), []PullRequest{dvPR(7, "A chore.")}, nil), nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := ResumeCandidates(c.f); !slices.Equal(got, c.want) {
				t.Fatalf("candidates %v, want %v", got, c.want)
			}
		})
	}
}

func TestGreen(t *testing.T) {
	yes, no := true, false
	ok := CheckResult{Name: "ci/test", Status: "completed", Conclusion: "success"}
	cases := []struct {
		name      string
		mergeable *bool
		draft     bool
		runs      []CheckResult
		state     string
		statuses  int
		want      bool
	}{
		{"all passed, no statuses", &yes, false, []CheckResult{ok, {Name: "lint", Status: "completed", Conclusion: "skipped"}}, "", 0, true},
		{"mergeable unknown", nil, false, []CheckResult{ok}, "", 0, false},
		{"not mergeable", &no, false, []CheckResult{ok}, "", 0, false},
		{"draft", &yes, true, []CheckResult{ok}, "", 0, false},
		{"a check failed", &yes, false, []CheckResult{ok, {Name: "ci/e2e", Status: "completed", Conclusion: "failure"}}, "", 0, false},
		{"a check still running", &yes, false, []CheckResult{{Name: "ci/e2e", Status: "in_progress"}}, "", 0, false},
		{"warden's own check is not counted", &yes, false, []CheckResult{ok, {Name: CheckRunName, Status: "completed", Conclusion: "failure"}}, "", 0, true},
		{"statuses success", &yes, false, []CheckResult{ok}, "success", 2, true},
		{"statuses pending", &yes, false, []CheckResult{ok}, "pending", 1, false},
	}
	for _, c := range cases {
		if got := Green(c.mergeable, c.draft, c.runs, c.state, c.statuses); got != c.want {
			t.Errorf("%s: green %v, want %v", c.name, got, c.want)
		}
	}
}
