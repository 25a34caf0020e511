package gating

import (
	"slices"
	"strings"
	"testing"
)

func TestBranchesNest(t *testing.T) {
	cases := []struct {
		a, b string
		want bool
	}{
		{"feat/epic/x/item", "feat/epic/x", true},
		{"feat/epic/x", "feat/epic/x/item", true},
		{"feat/epic/x/a/b", "feat/epic/x", true},
		{"feat", "feat/epic/x", true},
		{"feat/epic/x-item", "feat/epic/x", false}, // the convention: beside, not under
		{"feat/epic/xy", "feat/epic/x", false},
		{"feat/epic/x", "feat/epic/x", false}, // the same ref
		{"", "feat/epic/x", false},
		{"feat/epic/x", "", false},
		{"main/fix", "main", true},
	}
	for _, tc := range cases {
		if got := BranchesNest(tc.a, tc.b); got != tc.want {
			t.Errorf("BranchesNest(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}

func TestConventionalSubItemBranch(t *testing.T) {
	cases := []struct {
		head, epic string
		want       bool
	}{
		{"feat/epic/x-item", "feat/epic/x", true},
		{"feat/epic/x-", "feat/epic/x", false},
		{"feat/epic/x-item/more", "feat/epic/x", false},
		{"feat/item", "feat/epic/x", false},
		{"alice/feat/epic/x-item", "feat/epic/x", false},
		{"feat/epic/x/item", "feat/epic/x/integration", true}, // the namespace-free layout
		{"feat/epic/x/integration", "feat/epic/x/integration", false},
		{"feat/epic/x/a/b", "feat/epic/x/integration", false},
		{"", "feat/epic/x", false},
	}
	for _, tc := range cases {
		if got := ConventionalSubItemBranch(tc.head, tc.epic); got != tc.want {
			t.Errorf("ConventionalSubItemBranch(%q, %q) = %v, want %v", tc.head, tc.epic, got, tc.want)
		}
	}
}

func TestCheckClaimBranch(t *testing.T) {
	epic := &Item{ID: "issue-10", Tags: with("baseBranch:feat/epic/x")}
	epic.Tags = slices.DeleteFunc(epic.Tags, func(s string) bool { return s == "baseBranch:main" })
	memberTags := slices.DeleteFunc(with("baseBranch:feat/epic/x"), func(s string) bool { return s == "baseBranch:main" })
	member := &Item{ID: "issue-12", Tags: memberTags, Links: []Link{{PartOf, "issue-10"}}}
	// A member whose own baseBranch: is wrong still lives beside its epic's.
	stray := &Item{ID: "issue-13", Tags: with(), Links: []Link{{PartOf, "issue-10"}}}
	lookup := func(id ItemID) (*Item, bool) {
		if id == epic.ID {
			return epic, true
		}
		return nil, false
	}
	cases := []struct {
		name   string
		it     *Item
		branch string
		subs   []string // nil: not refused
	}{
		{"no branch", member, "", nil},
		{"the convention", member, "feat/epic/x-item", nil},
		{"off convention, beside", member, "alice/item", nil},
		{"nested under the epic branch", member, "feat/epic/x/item", []string{"feat/epic/x/item is nested under", "issue-12's baseBranch: feat/epic/x", "refs/heads/X/anything cannot coexist"}},
		{"over the epic branch", member, "feat/epic", []string{"has nested under it", "feat/epic/x"}},
		{"nested under the epic's branch, not the item's", stray, "feat/epic/x/item", []string{"epic issue-10's branch", "feat/epic/x"}},
		{"nested under the default branch base", &Item{ID: "issue-14", Tags: with()}, "main/fix", []string{"issue-14's baseBranch: main"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := CheckClaimBranch(tc.branch, tc.it, lookup)
			if tc.subs == nil {
				if r != nil {
					t.Fatalf("refused: %v", r)
				}
				return
			}
			if r == nil || r.Reason != CodeNestedEpicBranch {
				t.Fatalf("got %v, want %s", r, CodeNestedEpicBranch)
			}
			for _, s := range tc.subs {
				if !strings.Contains(r.Detail, s) {
					t.Errorf("detail %q lacks %q", r.Detail, s)
				}
			}
			if len(r.Rejected) != 1 || r.Rejected[0] != tc.branch {
				t.Errorf("rejected %v, want [%s]", r.Rejected, tc.branch)
			}
		})
	}
}

// TestCheckRunBranches covers nested-epic-branch (a failure) and
// branch-name-nit (reported, never a failure) on the backlog check run.
func TestCheckRunBranches(t *testing.T) {
	epic := mk(10, set("baseBranch", "feat/epic/x"))
	mem := mk(12, member(10), held("w/1"))
	cases := []struct {
		name     string
		items    []Candidate
		pr       PullRequest
		fromDef  map[ItemID]bool
		want     string   // conclusion
		codes    []string // the row's codes, in order
		subs     []string // in the row's detail
		notCodes []string
	}{
		{"conventional sub-item head", []Candidate{epic, mem}, crPR(crBody("Refs #12"), crBase("feat/epic/x"), crHead("feat/epic/x-item")), nil,
			ConclusionSuccess, nil, []string{"delivers issue-12"}, nil},
		{"off-convention head keeping both invariants is a nit", []Candidate{epic, mem}, crPR(crBody("Refs #12"), crBase("feat/epic/x"), crHead("alice/item")), nil,
			ConclusionSuccess, []string{CodeBranchNameNit}, []string{"alice/item is off the protocol's naming", "feat/epic/x-<item-slug>", "never a failure"}, nil},
		{"off-convention head cut from the default branch: no nit, pr-not-from-base", []Candidate{epic, mem}, crPR(crBody("Refs #12"), crBase("feat/epic/x"), crHead("alice/item")),
			map[ItemID]bool{"issue-12": true}, ConclusionFailure, []string{"pr-not-from-base"}, nil, []string{CodeBranchNameNit}},
		{"off-convention head into the default branch: no nit", []Candidate{epic, mem}, crPR(crBody("Refs #12"), crHead("alice/item")), nil,
			ConclusionFailure, []string{"epic-child-on-main"}, nil, []string{CodeBranchNameNit}},
		{"head nested under the epic branch fails", []Candidate{epic, mem}, crPR(crBody("Refs #12"), crBase("feat/epic/x"), crHead("feat/epic/x/item")), nil,
			ConclusionFailure, []string{CodeNestedEpicBranch}, []string{"the head branch feat/epic/x/item is nested under the pull request's base feat/epic/x", "cannot coexist"}, []string{CodeBranchNameNit}},
		{"head nested under the epic branch, into the default branch", []Candidate{epic, mem}, crPR(crBody("Refs #12"), crHead("feat/epic/x/item")), nil,
			ConclusionFailure, []string{"epic-child-on-main", CodeNestedEpicBranch}, []string{"issue-12's baseBranch: feat/epic/x"}, nil},
		{"head with the epic branch nested under it", []Candidate{epic, mem}, crPR(crBody("Refs #12"), crBase("feat/epic/x"), crHead("feat/epic")), nil,
			ConclusionFailure, []string{CodeNestedEpicBranch}, []string{"has nested under it"}, nil},
		{"not a member: head nested under the base", []Candidate{mk(12, held("w/1"))}, crPR(crHead("main/fix")), nil,
			ConclusionFailure, []string{CodeNestedEpicBranch}, []string{"main/fix is nested under the pull request's base main"}, nil},
		{"not a member: no naming convention", []Candidate{mk(12, held("w/1"))}, crPR(crHead("alice/fix")), nil,
			ConclusionSuccess, nil, nil, nil},
		{"a fork's nested head nests nothing here, but is off convention", []Candidate{epic, mem}, crPR(crBody("Refs #12"), crBase("feat/epic/x"), crHead("feat/epic/x/item"), crFork("m/r")), nil,
			ConclusionSuccess, []string{CodeBranchNameNit}, nil, []string{CodeNestedEpicBranch}},
		{"an epic on .../integration: nested sub-items are the convention", []Candidate{mk(10, set("baseBranch", "feat/epic/x/integration")),
			mk(12, link(PartOf, "issue-10"), set("baseBranch", "feat/epic/x/integration"), held("w/1"))},
			crPR(crBody("Refs #12"), crBase("feat/epic/x/integration"), crHead("feat/epic/x/item")), nil, ConclusionSuccess, nil, nil, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := crInput(snap(tc.items...), tc.pr)
			in.HeadFromDefault = tc.fromDef
			v := CheckRunVerdict(in)
			if v.Conclusion != tc.want {
				t.Errorf("conclusion %s, want %s; rows %+v", v.Conclusion, tc.want, v.Rows)
			}
			row := crRow(t, v, tc.pr.Number, 12)
			if !slices.Equal(row.Codes, tc.codes) {
				t.Errorf("codes %v, want %v; detail %s", row.Codes, tc.codes, row.Detail)
			}
			for _, s := range tc.subs {
				if !strings.Contains(row.Detail, s) {
					t.Errorf("detail %q lacks %q", row.Detail, s)
				}
			}
			for _, c := range tc.notCodes {
				if slices.Contains(row.Codes, c) {
					t.Errorf("row has code %s: %v", c, row.Codes)
				}
			}
			for _, c := range tc.codes {
				if c == CodeBranchNameNit && !strings.Contains(v.Summary, CodeBranchNameNit) {
					t.Errorf("the summary does not mention the nit:\n%s", v.Summary)
				}
			}
		})
	}
}
