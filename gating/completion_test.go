package gating

import (
	"strings"
	"testing"
)

// cpItem is item n as a completing write leaves it: mandatory tags,
// state:complete, and the extra tags.
func cpItem(n int, extra ...string) *Item {
	return &Item{ID: IDFor(n), Tags: with(append([]string{"state:complete"}, extra...)...)}
}

// cpClaim is a live claim at fence 5.
var cpClaim = ClaimView{Fence: 5, Released: 4, Owner: "w/1", Region: "local", Branch: "feat/x", GrantedAt: rt0}

func cpMergedInto(n int, head, base string) *PullRequest {
	return &PullRequest{Number: n, State: "closed", Merged: true, HeadRef: head, BaseRef: base, MergedAt: rt0}
}

func cpInput(it *Item, prs map[int]*PullRequest, items ...*Item) CompletionInput {
	return CompletionInput{Item: it, Claim: cpClaim, Token: ptr[int64](5), PRs: prs, Items: append([]*Item{it}, items...), DefaultBranch: "main", RepoFullName: crRepo}
}

func TestProveCompletion(t *testing.T) {
	merged7 := map[int]*PullRequest{7: cpMergedInto(7, "feat/x", "main")}
	epic := func(extra ...string) *Item {
		it := cpItem(10, extra...)
		for k, tg := range it.Tags {
			if tg == "baseBranch:main" {
				it.Tags[k] = "baseBranch:feat/epic/x"
			}
		}
		return it
	}
	memberOf := func(n int, tags ...string) *Item {
		return &Item{ID: IDFor(n), Tags: with(tags...), Links: []Link{{PartOf, "issue-10"}}}
	}
	integrator := func(n int, tags ...string) *Item {
		return &Item{ID: IDFor(n), Tags: with(tags...), Links: []Link{{PartOf, "issue-10"}, {Integrates, "issue-10"}}}
	}
	bucket := map[int]*PullRequest{9: cpMergedInto(9, "feat/epic/x", "main")}
	cases := []struct {
		name   string
		in     CompletionInput
		proven bool
		reason string
		subs   []string
	}{
		// The merged PR must link the item itself (§9: "that links this item").
		{"merged PR linking nothing", func() CompletionInput {
			in := cpInput(cpItem(12, "pr:7"), merged7)
			in.Claim.Branch = "feat/other"
			return in
		}(), false, ReasonCompletionUnproven, []string{"does not link issue-12", "a pr: tag alone proves nothing"}},
		{"merged PR linking by its body", func() CompletionInput {
			pr := cpMergedInto(7, "feat/y", "main")
			pr.Body = "Closes #12"
			in := cpInput(cpItem(12, "pr:7"), map[int]*PullRequest{7: pr})
			in.Claim.Branch = "feat/other"
			return in
		}(), true, "", nil},
		{"merged PR naming the item only in code", func() CompletionInput {
			pr := cpMergedInto(7, "feat/y", "main")
			pr.Body = "```\nCloses #12\n```"
			in := cpInput(cpItem(12, "pr:7"), map[int]*PullRequest{7: pr})
			in.Claim.Branch = "feat/other"
			return in
		}(), false, ReasonCompletionUnproven, []string{"does not link"}},
		{"adopting a direct deployment: no claim, no link needed", func() CompletionInput {
			in := cpInput(cpItem(12, "pr:7"), map[int]*PullRequest{7: cpMergedInto(7, "hotfix", "main")})
			in.Claim, in.Token, in.Adopting = ClaimView{}, nil, true
			return in
		}(), true, "", nil},
		// The fence.
		{"never claimed", func() CompletionInput { in := cpInput(cpItem(12, "pr:7"), merged7); in.Claim = ClaimView{}; return in }(), false, "ClaimRequired", []string{"never claimed"}},
		{"no token", func() CompletionInput { in := cpInput(cpItem(12, "pr:7"), merged7); in.Token = nil; return in }(), false, "ClaimRequired", []string{"fence 5"}},
		{"stale token", func() CompletionInput {
			in := cpInput(cpItem(12, "pr:7"), merged7)
			in.Token = ptr[int64](4)
			return in
		}(), false, "StaleToken", []string{"token 4", "fence 5"}},
		{"unissued token", func() CompletionInput {
			in := cpInput(cpItem(12, "pr:7"), merged7)
			in.Token = ptr[int64](6)
			return in
		}(), false, "UnissuedToken", nil},
		{"released claim", func() CompletionInput { in := cpInput(cpItem(12, "pr:7"), merged7); in.Claim.Released = 5; return in }(), false, "ClaimReleased", nil},
		{"maintenance claim (reserved merge)", func() CompletionInput {
			in := cpInput(cpItem(12, "pr:7"), merged7)
			in.Claim.Purpose, in.Claim.Owner = "maintenance", "pm"
			return in
		}(), true, "", []string{"pr:7", "#7", "merged into baseBranch:main"}},

		// Open pull requests, checked first.
		{"pr tag names an open PR", cpInput(cpItem(12, "pr:7"), map[int]*PullRequest{7: {Number: 7, State: "open", HeadRef: "feat/x", BaseRef: "main"}}), false, ReasonCompleteWithOpenPR, []string{"#7 (head feat/x into main)"}},
		{"an open PR beside a merged one", cpInput(cpItem(12, "pr:7", "pr:8"), map[int]*PullRequest{7: merged7[7], 8: {Number: 8, State: "open"}}), false, ReasonCompleteWithOpenPR, []string{"#8"}},
		{"an open PR beside a malformed tag", cpInput(cpItem(12, "pr:x", "pr:8"), map[int]*PullRequest{8: {Number: 8, State: "open"}}), false, ReasonCompleteWithOpenPR, nil},

		// phase:research.
		{"research with findings", func() CompletionInput {
			in := cpInput(cpItem(12), nil)
			in.Item.Tags[2] = "phase:research"
			in.HolderLogin = "w1-bot"
			in.Findings = []FindingsComment{{Author: "w1-bot", At: rt0, Agent: true}}
			return in
		}(), true, "", []string{"phase:research", "issue #12"}},
		{"research without findings", func() CompletionInput {
			in := cpInput(cpItem(12), nil)
			in.Item.Tags[2] = "phase:research"
			return in
		}(), false, ReasonCompletionUnproven, []string{"no findings were commented on issue #12", "fence 5"}},
		{"research with an open PR", func() CompletionInput {
			in := cpInput(cpItem(12, "pr:8"), map[int]*PullRequest{8: {Number: 8, State: "open"}})
			in.Item.Tags[2] = "phase:research"
			in.HolderLogin = "w1-bot"
			in.Findings = []FindingsComment{{Author: "w1-bot", At: rt0, Agent: true}}
			return in
		}(), false, ReasonCompleteWithOpenPR, nil},

		// The pr: tags.
		{"no pr tag", cpInput(cpItem(12), nil), false, ReasonCompletionUnproven, []string{"no pr:<n> tag"}},
		{"malformed pr tag", cpInput(cpItem(12, "pr:#7"), merged7), false, ReasonCompletionUnproven, []string{"pr:#7"}},
		{"pr tag with a leading zero", cpInput(cpItem(12, "pr:07"), merged7), false, ReasonCompletionUnproven, []string{"pr:07"}},
		{"not looked up", cpInput(cpItem(12, "pr:7"), nil), false, ReasonCompletionUnproven, []string{"pr:7 was not looked up"}},
		{"not a pull request", cpInput(cpItem(12, "pr:7"), map[int]*PullRequest{7: nil}), false, ReasonCompletionUnproven, []string{"#7 is not a pull request"}},
		{"closed without merging", cpInput(cpItem(12, "pr:7"), map[int]*PullRequest{7: {Number: 7, State: "closed", HeadRef: "feat/x", BaseRef: "main"}}), false, ReasonCompletionUnproven, []string{"#7 (head feat/x into main) was closed without merging"}},
		{"merged into another base", cpInput(cpItem(12, "pr:7"), map[int]*PullRequest{7: cpMergedInto(7, "feat/x", "develop")}), false, ReasonCompletionUnproven, []string{"not merged into baseBranch:main"}},
		{"merged into its base", cpInput(cpItem(12, "pr:7"), merged7), true, "", []string{"issue-12's pr:7 names #7 (head feat/x into main), merged at"}},
		{"one of two tags proves it", cpInput(cpItem(12, "pr:6", "pr:7"), map[int]*PullRequest{6: nil, 7: merged7[7]}), true, "", []string{"pr:7"}},
		{"another complete item's completion PR", cpInput(cpItem(12, "pr:7"), merged7, cpItem(13, "pr:7")), false, ReasonCompletionUnproven, []string{"already issue-13's completion pull request"}},
		{"another live item naming the PR", cpInput(cpItem(12, "pr:7"), merged7, &Item{ID: "issue-13", Tags: with("pr:7")}), true, "", nil},
		{"no single baseBranch", func() CompletionInput {
			in := cpInput(cpItem(12, "pr:7", "baseBranch:dev"), merged7)
			return in
		}(), false, ReasonCompletionUnproven, []string{"baseBranch"}},

		// Groupings.
		{"grouping, integration complete, bucket merged", cpInput(epic("pr:9"), bucket, memberOf(11, "state:complete"), integrator(14, "state:complete", "pr:8")), true, "",
			[]string{"#9", "bucket", "issue-14 is complete"}},
		{"grouping, no integration item", cpInput(epic("pr:9"), bucket, memberOf(11, "state:complete")), false, ReasonCompletionUnproven, []string{"integration-missing"}},
		{"grouping, two integration items", cpInput(epic("pr:9"), bucket, integrator(11, "state:complete"), integrator(14, "state:complete")), false, ReasonCompletionUnproven, []string{"integration-duplicate", "issue-11, issue-14"}},
		{"grouping, integration live", cpInput(epic("pr:9"), bucket, memberOf(11, "state:complete"), integrator(14)), false, ReasonCompletionUnproven, []string{"issue-14 is not complete"}},
		{"grouping, integration parked", cpInput(epic("pr:9"), bucket, integrator(14, "state:parked", "ruling-owner:pm", "ruling-topic:x")), false, ReasonCompletionUnproven, []string{"issue-14 is not complete"}},
		{"grouping, bucket from another head", cpInput(epic("pr:9"), map[int]*PullRequest{9: cpMergedInto(9, "feat/other", "main")}, integrator(14, "state:complete")), false, ReasonCompletionUnproven,
			[]string{"not the grouping's bucket (head feat/epic/x into the default branch main)"}},
		{"grouping, bucket into another base", cpInput(epic("pr:9"), map[int]*PullRequest{9: cpMergedInto(9, "feat/epic/x", "release")}, integrator(14, "state:complete")), false, ReasonCompletionUnproven, []string{"not the grouping's bucket"}},
		{"grouping, bucket from a fork", cpInput(epic("pr:9"), map[int]*PullRequest{9: func() *PullRequest {
			p := cpMergedInto(9, "feat/epic/x", "main")
			p.HeadRepoFullName = "m/r"
			return p
		}()}, integrator(14, "state:complete")), false, ReasonCompletionUnproven, []string{"m/r:feat/epic/x"}},
		{"grouping, a member's PR into the epic branch is no bucket", cpInput(epic("pr:8"), map[int]*PullRequest{8: cpMergedInto(8, "feat/epic/x-11", "feat/epic/x")}, integrator(14, "state:complete")), false, ReasonCompletionUnproven, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := ProveCompletion(tc.in)
			if v.Proven != tc.proven || v.Reason != tc.reason {
				t.Fatalf("got proven=%v reason=%q (%s), want proven=%v reason=%q", v.Proven, v.Reason, v.Detail, tc.proven, tc.reason)
			}
			if v.Detail == "" {
				t.Errorf("empty detail")
			}
			for _, s := range tc.subs {
				if !strings.Contains(v.Detail, s) {
					t.Errorf("detail %q lacks %q", v.Detail, s)
				}
			}
		})
	}
}

func TestProveCompletionNoItem(t *testing.T) {
	if v := ProveCompletion(CompletionInput{}); v.Proven || v.Reason != ReasonCompletionUnproven {
		t.Errorf("nil item: %+v", v)
	}
}
