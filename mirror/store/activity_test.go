package store

import (
	"fmt"
	"testing"
	"time"

	"github.com/wardenhq/warden/gating"
)

// testActivityEvidence: what RecordActivity counts as evidence of work, on
// every backend. bot-a posted issue-1's marker, bot-s posted the markers of
// issue-2 and issue-3 (two owners: a shared login), nobody posted issue-4's
// (its branch was pushed by bot-p).
func testActivityEvidence(t *testing.T, setup func(t *testing.T) *env) {
	e := setup(t)
	for n := 1; n <= 5; n++ {
		e.create(n, tags())
	}
	t0 := e.clock.Now()
	claim := func(n int, owner, branch string) int64 {
		r, err := e.l.Claim(e.ctx, e.repo, gating.IDFor(n), ClaimRequest{Owner: owner, LeaseSeconds: f64(60), Branch: branch}, pm)
		if err != nil || !r.Granted {
			t.Fatalf("claim %d: %+v %v", n, r, err)
		}
		return *r.FencingToken
	}
	marker := func(n int, id int64, login, owner string, fence int64) {
		rec := TrailRecord{CommentID: id, Author: login, AuthorType: "Bot", CreatedAt: t0, EarliestAt: t0, CurrentAt: t0, IsAgent: true,
			EarliestBody: gating.ClaimMarker(string(gating.IDFor(n)), owner, testRegion, fence, t0, nil) + "\nclaimed"}
		rec.CurrentBody = rec.EarliestBody
		if _, err := e.l.RecordTrailComment(e.ctx, e.repo, n, rec); err != nil {
			t.Fatal(err)
		}
	}
	marker(1, 11, "bot-a", "pm/a", claim(1, "pm/a", "feat/a"))
	marker(2, 21, "bot-s", "pm/s1", claim(2, "pm/s1", "feat/s1"))
	marker(3, 31, "bot-s", "pm/s2", claim(3, "pm/s2", "feat/s2"))
	claim(4, "pm/p", "feat/p")
	claim(5, "pm/q", "feat/q")
	e.clock.Advance(10 * time.Minute)
	if _, err := e.l.RecordBranchPush(e.ctx, e.repo, "feat/p", e.clock.Now(), "bot-p", ""); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(10 * time.Minute)
	now := e.clock.Now()

	cases := []struct {
		name string
		act  Activity
		want map[int]string // item → evidence kind recorded
	}{
		{"a push elsewhere by a holder's marker login", Activity{Kind: ActivityPush, Login: "bot-a", Branch: "scratch", At: now},
			map[int]string{1: EvidencePushByHolder}},
		{"a push elsewhere by a login posting for two owners", Activity{Kind: ActivityPush, Login: "bot-s", Branch: "scratch", At: now}, nil},
		{"a push elsewhere by a login known by its pushes to the claim's branch", Activity{Kind: ActivityPush, Login: "bot-p", Branch: "scratch", At: now},
			map[int]string{4: EvidencePushByHolder}},
		{"a branch created at a claim's branch head, by anyone", Activity{Kind: ActivityPush, Login: "someone", Branch: "feat/q2", BaseRef: "feat/q", At: now},
			map[int]string{5: EvidencePushDescendant}},
		{"a deletion is no evidence", Activity{Kind: ActivityPush, Login: "bot-a", Branch: "scratch", Rewrite: gating.RewriteDeleted, At: now}, nil},
		{"a pull request from a claim's branch, by anyone", Activity{Kind: ActivityPull, Login: "someone", Branch: "feat/q", PR: 9, Action: "opened", At: now},
			map[int]string{5: EvidencePullRequest}},
		{"a comment on its item by a shared login", Activity{Kind: ActivityComment, Login: "bot-s", Item: 2, At: now},
			map[int]string{2: EvidenceComment}},
		{"a comment on its item by a stranger", Activity{Kind: ActivityComment, Login: "stranger", Item: 1, At: now}, nil},
		{"a comment elsewhere by a holder's login", Activity{Kind: ActivityComment, Login: "bot-a", Item: 3, At: now},
			map[int]string{1: EvidenceComment}},
	}
	for _, c := range cases {
		e.clock.Advance(time.Second) // each later than the last
		c.act.At = e.clock.Now()
		res, err := e.l.RecordActivity(e.ctx, e.repo, c.act)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		got := map[int]string{}
		for _, ev := range res.Evidence {
			_, kind, err := e.l.LastEvidence(e.ctx, e.repo, ev.Item.Number(), ev.Fence)
			if err != nil {
				t.Fatal(err)
			}
			got[ev.Item.Number()] = kind
		}
		if fmt.Sprint(got) != fmt.Sprint(c.want) && !(len(got) == 0 && len(c.want) == 0) {
			t.Errorf("%s: evidence %v, want %v", c.name, got, c.want)
		}
	}
}
