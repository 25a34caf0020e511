package gating

import (
	"slices"
	"strings"
	"testing"
)

// TestTrailCollisionActivity: after a takeover, what activity by the prior
// owner is a collision (and holds the item), and what a prior attempt's
// branch being rewritten reports.
func TestTrailCollisionActivity(t *testing.T) {
	// agent-a posts wA's markers, agent-b wB's; bot posts for both.
	takeover := func(extra ...TrailComment) []TrailComment {
		return append(trCs(trClaimC(1, 1, "agent-a", wA, 1), trTakeoverC(2, 90, "agent-b", wB, 2, wA, 1)), extra...)
	}
	grants := []GrantEntry{trGrant(1, wA, 0, trBranch("feat/a")), trGrant(2, wB, 89, trBranch("feat/b"))}
	in := func(cs []TrailComment, pushes ...BranchPush) TrailInput {
		x := trIn(cs, grants...)
		x.Pushes = pushes
		return x
	}
	agentProse := func(id int64, m int, login, body string) TrailComment { return trAgent(trProse(id, m, login, body)) }
	cases := []struct {
		name   string
		in     TrailInput
		codes  []string // the findings' codes, sorted
		hold   bool
		detail string // a finding's detail contains it
	}{
		{"prose by the login that posted the prior owner's markers", in(takeover(agentProse(3, 95, "agent-a", "Still on it: the tests pass."))),
			[]string{CodeTakeoverCollision}, true, `comment 3 by "agent-a"`},
		{"prose by that login before the takeover", in(takeover(agentProse(3, 80, "agent-a", "Halfway there."))), nil, false, ""},
		{"prose by the new holder", in(takeover(agentProse(3, 95, "agent-b", "Picking this up."))), nil, false, ""},
		{"prose by a login posting for both owners tells nothing", func() TrailInput {
			cs := trCs(trClaimC(1, 1, "bot", wA, 1), trTakeoverC(2, 90, "bot", wB, 2, wA, 1), agentProse(3, 95, "bot", "Progress."))
			return in(cs)
		}(), nil, false, ""},
		{"prose by an agent known only by its pushes to the prior branch (warden posted the markers)", func() TrailInput {
			cs := trCs(trClaimC(1, 1, "warden[bot]", wA, 1), trTakeoverC(2, 90, "warden[bot]", wB, 2, wA, 1), agentProse(3, 95, "agent-a", "Still here."))
			cs[0].AuthorIsWarden, cs[1].AuthorIsWarden = true, true
			return in(cs, BranchPush{At: trT(30), Branch: "feat/a", Login: "agent-a"})
		}(), []string{CodeTakeoverCollision}, true, `comment 3 by "agent-a"`},
		{"prose by a person who pushed the prior branch is not the holder's", func() TrailInput {
			cs := trCs(trClaimC(1, 1, "warden[bot]", wA, 1), trTakeoverC(2, 90, "warden[bot]", wB, 2, wA, 1), trHuman(trProse(3, 95, "hana", "Why two?"), true))
			cs[0].AuthorIsWarden, cs[1].AuthorIsWarden = true, true
			return in(cs, BranchPush{At: trT(30), Branch: "feat/a", Login: "hana"})
		}(), nil, false, ""},
		{"a push to another branch by the prior owner's marker login", in(takeover(), BranchPush{At: trT(95), Branch: "scratch", Login: "agent-a"}),
			[]string{CodeTakeoverCollision}, true, `a push by "agent-a" to "scratch"`},
		{"a push to another branch by the new holder", in(takeover(), BranchPush{At: trT(95), Branch: "scratch", Login: "agent-b"}), nil, false, ""},
		{"a push to another branch before the takeover", in(takeover(), BranchPush{At: trT(85), Branch: "scratch", Login: "agent-a"}), nil, false, ""},

		{"the new holder force-pushes the prior branch", in(takeover(), BranchPush{At: trT(95), Branch: "feat/a", Login: "agent-b", Rewrite: RewriteForced}),
			[]string{CodePriorBranchRewritten}, false, `was force-pushed by "agent-b"`},
		{"someone deletes the prior branch", in(takeover(), BranchPush{At: trT(95), Branch: "feat/a", Login: "hana", Rewrite: RewriteDeleted}),
			[]string{CodePriorBranchRewritten}, false, `was deleted by "hana"`},
		{"the prior branch deleted once the item is complete", func() TrailInput {
			x := in(takeover(), BranchPush{At: trT(95), Branch: "feat/a", Login: "hana", Rewrite: RewriteDeleted})
			x.Tags = []string{"state:complete"}
			return x
		}(), nil, false, ""},
		{"the prior holder force-pushes its own branch after the takeover: its activity", in(takeover(), BranchPush{At: trT(95), Branch: "feat/a", Login: "agent-a", Rewrite: RewriteForced}),
			[]string{CodeTakeoverCollision}, true, `branch "feat/a" by "agent-a"`},
		{"a force-push while the holder still holds it", in(takeover(), BranchPush{At: trT(50), Branch: "feat/a", Login: "agent-b", Rewrite: RewriteForced}), nil, false, ""},
		{"after a release, the next holder force-pushes the released branch", func() TrailInput {
			x := trIn(trCs(trClaimC(1, 1, "agent-a", wA, 1), trClaimC(2, 90, "agent-b", wB, 2)),
				trGrant(1, wA, 0, trBranch("feat/a"), trReleased(60)), trGrant(2, wB, 89, trBranch("feat/a")))
			x.Pushes = []BranchPush{{At: trT(95), Branch: "feat/a", Login: "agent-b", Rewrite: RewriteForced}}
			return x
		}(), []string{CodePriorBranchRewritten}, false, "recorded for"},
		{"the new holder building on the prior branch adds commits: no rewrite", func() TrailInput {
			x := trIn(takeover(), trGrant(1, wA, 0, trBranch("feat/a")), trGrant(2, wB, 89, trBranch("feat/a")))
			x.Pushes = []BranchPush{{At: trT(95), Branch: "feat/a", Login: "agent-b"}}
			return x
		}(), nil, false, ""},
		{"a rewrite a human has resolved", func() TrailInput {
			x := in(takeover(), BranchPush{At: trT(95), Branch: "feat/a", Login: "agent-b", Rewrite: RewriteForced})
			x.CollisionResolvedAt = trT(100)
			return x
		}(), nil, false, ""},
		{"a rewrite by an unknown login", in(takeover(), BranchPush{At: trT(95), Branch: "feat/a", Rewrite: RewriteForced}),
			[]string{CodePriorBranchRewritten}, false, "by an unknown login"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := EvaluateTrail(c.in)
			codes := trCodes(r)
			if !slices.Equal(codes, c.codes) || r.CollisionHold != c.hold {
				t.Fatalf("codes %v hold %v, want %v hold %v: %+v", codes, r.CollisionHold, c.codes, c.hold, r.Findings)
			}
			if c.detail == "" {
				return
			}
			for _, f := range r.Findings {
				if strings.Contains(f.Detail, c.detail) {
					return
				}
			}
			t.Errorf("no finding mentions %q: %+v", c.detail, r.Findings)
		})
	}
}
