package gating

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// The trail's tests build an item's comments and grant log from these
// helpers. Minute m of the trail is trT(m); comment ids grow with time unless
// a row says otherwise; every author is an agent unless a row says otherwise.

const trItem = ItemID("issue-2101")

var trT0 = time.Date(2026, 9, 6, 0, 0, 0, 0, time.UTC)

func trT(m int) time.Time { return trT0.Add(time.Duration(m) * time.Minute) }

// trClaimC is a claim marker comment posted by login at minute m.
func trClaimC(id int64, m int, login, owner string, fence int64) TrailComment {
	return TrailComment{ID: id, Author: login, AuthorIsAgent: true, CreatedAt: trT(m),
		Body: ClaimMarker(string(trItem), owner, "local", fence, trT(m), nil) + "\nClaimed `issue-2101`."}
}

// trTakeoverC is a claim marker in the takeover form.
func trTakeoverC(id int64, m int, login, owner string, fence int64, priorOwner string, priorFence int64) TrailComment {
	c := trClaimC(id, m, login, owner, fence)
	c.Body = ClaimMarker(string(trItem), owner, "local", fence, trT(m), &PriorClaim{priorOwner, priorFence}) + "\nTaking over."
	return c
}

func trOutcomeC(id int64, m int, login, owner string, fence int64, result string) TrailComment {
	return TrailComment{ID: id, Author: login, AuthorIsAgent: true, CreatedAt: trT(m),
		Body: fmt.Sprintf("<!-- backlog-worker: outcome item=%s owner=%s fence=%d result=%s -->\nDone.", trItem, owner, fence, result)}
}

func trProse(id int64, m int, login, body string) TrailComment {
	return TrailComment{ID: id, Author: login, CreatedAt: trT(m), Body: body}
}

func trAgent(c TrailComment) TrailComment { c.AuthorIsAgent = true; return c }

// trHuman makes a comment's author a person: write access or not.
func trHuman(c TrailComment, write bool) TrailComment {
	c.AuthorIsAgent, c.AuthorHasWrite = false, write
	return c
}

type trGrantOpt func(*GrantEntry)

func trGrant(fence int64, owner string, m int, opts ...trGrantOpt) GrantEntry {
	g := GrantEntry{Fence: fence, Owner: owner, GrantedAt: trT(m), LeaseExpiresAt: trT(m + 30)}
	for _, o := range opts {
		o(&g)
	}
	return g
}

func trReleased(m int) trGrantOpt  { return func(g *GrantEntry) { g.ReleasedAt = trT(m) } }
func trBranch(b string) trGrantOpt { return func(g *GrantEntry) { g.Branch = b } }
func trMaint() trGrantOpt          { return func(g *GrantEntry) { g.Maintenance = true } }

func trIn(cs []TrailComment, gs ...GrantEntry) TrailInput {
	return TrailInput{Item: trItem, Comments: cs, Grants: gs}
}

func trCs(cs ...TrailComment) []TrailComment { return cs }

// trCodes lists the findings' codes, sorted.
func trCodes(r TrailResult) []string {
	var out []string
	for _, f := range r.Findings {
		out = append(out, f.Code)
	}
	slices.Sort(out)
	return out
}

func trFinding(r TrailResult, code string) (TrailFinding, bool) {
	for _, f := range r.Findings {
		if f.Code == code {
			return f, true
		}
	}
	return TrailFinding{}, false
}

const (
	wA = "backlog-worker/aaaa"
	wB = "backlog-worker/bbbb"
	wC = "backlog-worker/cccc"
)

func TestEvaluateTrail(t *testing.T) {
	type want struct {
		epoch, lifetime int
		codes           []string
		unknown, hold   bool
	}
	cases := []struct {
		name  string
		in    TrailInput
		want  want
		check func(t *testing.T, r TrailResult)
	}{
		// The protocol's fencing-token table, row by row.
		{"never claimed: no fence, no markers", trIn(nil), want{}, nil},
		{"consistent: one grant, one marker", trIn(trCs(trClaimC(1, 1, "agent-a", wA, 1)), trGrant(1, wA, 0)), want{epoch: 1, lifetime: 1},
			func(t *testing.T, r TrailResult) {
				if len(r.Backed) != 1 || r.Backed[0].CommentID != 1 || r.Backed[0].PreLedger {
					t.Errorf("backed %+v", r.Backed)
				}
			}},
		{"fence above 0 with no markers: attempts from the grant log, claimed-unmarked",
			trIn(nil, trGrant(1, wA, 0, trReleased(5)), trGrant(2, wB, 10)),
			want{epoch: 2, lifetime: 2, codes: []string{"claimed-unmarked", "claimed-unmarked"}},
			func(t *testing.T, r TrailResult) {
				if f := r.Findings[0]; f.Fence != 1 || len(f.Comments) != 0 || !strings.Contains(f.Detail, `"backlog-worker/aaaa"`) {
					t.Errorf("finding %+v", f)
				}
			}},
		{"fence above 0, no grant log, no markers: unknown, never zero",
			TrailInput{Item: trItem, Fence: 6}, want{epoch: 1, lifetime: 1, unknown: true, codes: []string{"claimed-unmarked"}},
			func(t *testing.T, r TrailResult) {
				if f := r.Findings[0]; !strings.Contains(f.Detail, "not zero") {
					t.Errorf("detail %q", f.Detail)
				}
				if len(r.History) != 1 || r.History[0].Owner != "" {
					t.Errorf("history %+v", r.History)
				}
			}},
		{"token ahead of the trail, no grant log: markers count, the gap is reported",
			TrailInput{Item: trItem, Fence: 3, Comments: trCs(trClaimC(1, 1, "agent-a", wA, 1))},
			want{epoch: 1, lifetime: 1, codes: []string{"claimed-unmarked"}}, nil},
		{"trail ahead of the token, no grant log: the marker beyond it does not count",
			TrailInput{Item: trItem, Fence: 1, Comments: trCs(trClaimC(1, 1, "agent-a", wA, 1), trClaimC(2, 2, "agent-b", wB, 2))},
			want{epoch: 1, lifetime: 1, codes: []string{"unbacked-marker"}}, nil},

		// Custody.
		{"a worker killed mid-attempt, taken over with the takeover marker",
			trIn(trCs(trClaimC(1, 1, "agent-a", wA, 1), trTakeoverC(2, 90, "agent-b", wB, 2, wA, 1)),
				trGrant(1, wA, 0), trGrant(2, wB, 89)),
			want{epoch: 2, lifetime: 2},
			func(t *testing.T, r TrailResult) {
				want := []AttemptLine{
					{Owner: wA, Fence: 1, At: trT(0), Outcome: "no outcome: custody passed to " + wB, InEpoch: true},
					{Owner: wB, Fence: 2, At: trT(89), Outcome: "no outcome yet: in progress", InEpoch: true, Prior: &PriorClaim{Owner: wA, Fence: 1}},
				}
				if !reflect.DeepEqual(r.History, want) {
					t.Errorf("history %+v", r.History)
				}
			}},
		{"a lapse and a same-owner re-claim is no attempt (and needs no marker)",
			trIn(trCs(trClaimC(1, 1, "agent-a", wA, 1), trOutcomeC(2, 80, "agent-a", wA, 2, "complete")),
				trGrant(1, wA, 0), trGrant(2, wA, 40, trReleased(81))),
			want{epoch: 1, lifetime: 1, codes: []string{"outcome-without-tag"}},
			func(t *testing.T, r TrailResult) {
				if len(r.History) != 1 || r.History[0].Outcome != "complete" {
					t.Errorf("history %+v", r.History)
				}
			}},
		{"a re-claim after the owner's own release is an attempt",
			trIn(trCs(trClaimC(1, 1, "agent-a", wA, 1), trOutcomeC(2, 20, "agent-a", wA, 1, "released"), trClaimC(3, 31, "agent-a", wA, 2)),
				trGrant(1, wA, 0, trReleased(21)), trGrant(2, wA, 30)),
			want{epoch: 2, lifetime: 2}, nil},
		{"a re-claim after an outcome is an attempt even when the release never came",
			trIn(trCs(trClaimC(1, 1, "agent-a", wA, 1), trOutcomeC(2, 20, "agent-a", wA, 1, "released"), trClaimC(3, 31, "agent-a", wA, 2)),
				trGrant(1, wA, 0), trGrant(2, wA, 30)),
			want{epoch: 2, lifetime: 2}, nil},
		{"three custody changes reach 3",
			trIn(trCs(
				trClaimC(1, 1, "agent-a", wA, 1), trOutcomeC(2, 20, "agent-a", wA, 1, "released"),
				trClaimC(3, 31, "agent-b", wB, 2), // after a release: a plain claim
				trTakeoverC(4, 200, "agent-c", wC, 4, wB, 3)),
				trGrant(1, wA, 0, trReleased(21)), trGrant(2, wB, 30), trGrant(3, wB, 80), trGrant(4, wC, 199)),
			want{epoch: 3, lifetime: 3},
			func(t *testing.T, r TrailResult) {
				var outs []string
				for _, h := range r.History {
					outs = append(outs, h.Owner+": "+h.Outcome)
				}
				if want := []string{wA + ": released", wB + ": no outcome: custody passed to " + wC, wC + ": no outcome yet: in progress"}; !slices.Equal(outs, want) {
					t.Errorf("history %q", outs)
				}
			}},
		{"a maintenance claim is no attempt and posts no marker",
			trIn(trCs(trClaimC(1, 1, "agent-a", wA, 1)), trGrant(1, wA, 0, trReleased(9)), trGrant(2, "warden", 10, trMaint(), trReleased(11))),
			want{epoch: 1, lifetime: 1}, nil},
		{"only maintenance grants: zero attempts (the fence moved, but no worker claimed)",
			trIn(nil, trGrant(1, "pm/1", 0, trMaint(), trReleased(1))), want{}, nil},
		// A maintenance claim changes no custody of work: a claim after it
		// is judged against the worker's claim before it.
		{"the same owner after a maintenance claim: its re-claim, one attempt (and no marker wanted)",
			trIn(trCs(trClaimC(1, 1, "agent-a", wA, 1)),
				trGrant(1, wA, 0), trGrant(2, "warden", 50, trMaint(), trReleased(51)), trGrant(3, wA, 60)),
			want{epoch: 1, lifetime: 1},
			func(t *testing.T, r TrailResult) {
				if len(r.History) != 1 || r.History[0].Fence != 1 || r.History[0].Outcome != "no outcome yet: in progress" {
					t.Errorf("history %+v", r.History)
				}
			}},
		{"A, a maintenance claim, B: A's attempt and B's (a takeover of A's unclosed claim; the plain marker is accepted)",
			trIn(trCs(trClaimC(1, 1, "agent-a", wA, 1), trClaimC(2, 61, "agent-b", wB, 3)),
				trGrant(1, wA, 0), trGrant(2, "pm/1", 50, trMaint(), trReleased(51)), trGrant(3, wB, 60)),
			want{epoch: 2, lifetime: 2}, nil},
		{"A, a maintenance claim, B: A active after B's claim is a collision",
			trIn(trCs(trClaimC(1, 1, "agent-a", wA, 1), trClaimC(2, 61, "agent-b", wB, 3), trOutcomeC(3, 70, "agent-a", wA, 1, "complete")),
				trGrant(1, wA, 0), trGrant(2, "warden", 50, trMaint(), trReleased(51)), trGrant(3, wB, 60)),
			want{epoch: 2, lifetime: 2, codes: []string{"takeover-collision"}, hold: true}, nil},
		{"A, a maintenance claim, B with the takeover form naming A",
			trIn(trCs(trClaimC(1, 1, "agent-a", wA, 1), trTakeoverC(2, 61, "agent-b", wB, 3, wA, 1)),
				trGrant(1, wA, 0), trGrant(2, "warden", 50, trMaint(), trReleased(51)), trGrant(3, wB, 60)),
			want{epoch: 2, lifetime: 2}, nil},
		{"A, maintenance, maintenance, A, B: two attempts",
			trIn(trCs(trClaimC(1, 1, "agent-a", wA, 1), trTakeoverC(2, 91, "agent-b", wB, 5, wA, 4)),
				trGrant(1, wA, 0), trGrant(2, "warden", 50, trMaint(), trReleased(51)), trGrant(3, "pm/1", 55, trMaint(), trReleased(56)),
				trGrant(4, wA, 60), trGrant(5, wB, 90)),
			want{epoch: 2, lifetime: 2}, nil},
		{"A released, a maintenance claim, A again: an attempt",
			trIn(trCs(trClaimC(1, 1, "agent-a", wA, 1), trClaimC(2, 61, "agent-a", wA, 3)),
				trGrant(1, wA, 0, trReleased(20)), trGrant(2, "warden", 50, trMaint(), trReleased(51)), trGrant(3, wA, 60)),
			want{epoch: 2, lifetime: 2}, nil},
		{"the same owner across a park and an unpark: the new epoch's first attempt",
			func() TrailInput {
				in := trIn(trCs(trClaimC(1, 1, "agent-a", wA, 1), trClaimC(2, 111, "agent-a", wA, 3)),
					trGrant(1, wA, 0), trGrant(2, "warden", 50, trMaint(), trReleased(51)), trGrant(3, wA, 110))
				in.EpochStart = trT(100)
				return in
			}(),
			want{epoch: 1, lifetime: 2}, nil},
		{"an unpark starts a new epoch: epoch 0, lifetime unchanged",
			func() TrailInput {
				in := trIn(trCs(trClaimC(1, 1, "agent-a", wA, 1), trTakeoverC(2, 61, "agent-b", wB, 2, wA, 1), trTakeoverC(3, 121, "agent-c", wC, 3, wB, 2),
					trOutcomeC(4, 150, "agent-c", wC, 3, "parked")),
					trGrant(1, wA, 0), trGrant(2, wB, 60), trGrant(3, wC, 120, trReleased(151)))
				in.EpochStart = trT(300)
				return in
			}(),
			want{epoch: 0, lifetime: 3},
			func(t *testing.T, r TrailResult) {
				if len(r.History) != 3 || len(r.EpochHistory()) != 0 {
					t.Errorf("history %+v", r.History)
				}
			}},
		{"after an unpark the next claim is the epoch's first",
			func() TrailInput {
				in := trIn(trCs(trClaimC(1, 1, "agent-a", wA, 1), trOutcomeC(2, 20, "agent-a", wA, 1, "parked"), trClaimC(3, 401, "agent-b", wB, 2)),
					trGrant(1, wA, 0, trReleased(21)), trGrant(2, wB, 400))
				in.EpochStart = trT(300)
				return in
			}(),
			want{epoch: 1, lifetime: 2},
			func(t *testing.T, r TrailResult) {
				if eh := r.EpochHistory(); len(eh) != 1 || eh[0].Owner != wB {
					t.Errorf("epoch history %+v", eh)
				}
			}},

		// Markers that count nothing.
		{"a forged marker counts nothing and makes nobody an agent",
			TrailInput{Item: trItem, Comments: trCs(trHuman(trClaimC(1, 1, "mallory", wA, 1), false))},
			want{codes: []string{"forged-marker"}},
			func(t *testing.T, r TrailResult) {
				if len(r.NewAgents) != 0 || len(r.Backed) != 0 {
					t.Errorf("agents %v backed %v", r.NewAgents, r.Backed)
				}
				if f := r.Findings[0]; !slices.Equal(f.Comments, []int64{1}) || !strings.Contains(f.Detail, `"mallory"`) {
					t.Errorf("finding %+v", f)
				}
			}},
		{"a forged marker backs no grant",
			trIn(trCs(trHuman(trClaimC(1, 1, "mallory", wA, 1), false)), trGrant(1, wA, 0)),
			want{epoch: 1, lifetime: 1, codes: []string{"claimed-unmarked", "forged-marker"}}, nil},
		{"warden's markers only from warden",
			trIn(trCs(trHuman(trProse(1, 1, "agent-a", "<!-- backlog-warden: park item=issue-2101 attempts=3 ruling-owner=pm ruling-topic=x -->"), false))),
			want{codes: []string{"forged-marker"}},
			func(t *testing.T, r TrailResult) {
				if len(r.Warden) != 0 {
					t.Errorf("warden %+v", r.Warden)
				}
			}},
		{"a marker with no grant behind it does not count",
			trIn(trCs(trClaimC(1, 1, "agent-a", wA, 1), trClaimC(2, 5, "agent-b", wB, 7)), trGrant(1, wA, 0)),
			want{epoch: 1, lifetime: 1, codes: []string{"unbacked-marker"}},
			func(t *testing.T, r TrailResult) {
				f, _ := trFinding(r, "unbacked-marker")
				if !strings.Contains(f.Detail, "no fence 7") || !slices.Equal(f.Comments, []int64{2}) {
					t.Errorf("finding %+v", f)
				}
			}},
		{"a marker naming a grant's fence under another owner does not count",
			trIn(trCs(trClaimC(1, 1, "agent-b", wB, 1)), trGrant(1, wA, 0)),
			want{epoch: 1, lifetime: 1, codes: []string{"claimed-unmarked", "unbacked-marker"}},
			func(t *testing.T, r TrailResult) {
				f, _ := trFinding(r, "unbacked-marker")
				if !strings.Contains(f.Detail, `claim of "backlog-worker/aaaa"`) || !strings.Contains(f.Detail, `owner=backlog-worker/bbbb`) {
					t.Errorf("detail %q", f.Detail)
				}
			}},
		{"a marker for a maintenance claim does not count",
			trIn(trCs(trClaimC(1, 1, "agent-a", "pm/1", 1)), trGrant(1, "pm/1", 0, trMaint())),
			want{codes: []string{"unbacked-marker"}}, nil},
		{"an outcome that closes no grant",
			trIn(trCs(trClaimC(1, 1, "agent-a", wA, 1), trOutcomeC(2, 5, "agent-a", wA, 9, "complete")), trGrant(1, wA, 0)),
			want{epoch: 1, lifetime: 1, codes: []string{"unbacked-marker"}}, nil},
		{"a malformed marker establishes nothing",
			trIn(trCs(
				trAgent(trProse(1, 1, "agent-a", strings.Replace(ClaimMarker(string(trItem), wA, "local", 1, trT(1), nil), "fence=1", "fence=01", 1))),
				trAgent(trProse(2, 2, "agent-a", ClaimMarker("issue-7", wA, "local", 1, trT(2), nil)))),
				trGrant(1, wA, 0)),
			want{epoch: 1, lifetime: 1, codes: []string{"claimed-unmarked", "malformed-marker", "malformed-marker"}},
			func(t *testing.T, r TrailResult) {
				f := r.Findings[1]
				if !strings.Contains(f.Detail, "another item than issue-2101") || !slices.Equal(f.Comments, []int64{2}) {
					t.Errorf("finding %+v", f)
				}
			}},
		{"quoting a marker in prose is nothing",
			trIn(trCs(trClaimC(1, 1, "agent-a", wA, 1), trProse(2, 2, "alice", "Look at this:\n"+ClaimMarker(string(trItem), wB, "local", 2, trT(2), nil))), trGrant(1, wA, 0)),
			want{epoch: 1, lifetime: 1}, nil},

		// Several markers for one grant.
		{"the same login twice for one grant: one attempt, duplicate-claim-marker",
			trIn(trCs(trClaimC(1, 1, "agent-a", wA, 1), trClaimC(2, 2, "agent-a", wA, 1)), trGrant(1, wA, 0)),
			want{epoch: 1, lifetime: 1, codes: []string{"duplicate-claim-marker"}},
			func(t *testing.T, r TrailResult) {
				if len(r.Backed) != 2 {
					t.Errorf("backed %+v", r.Backed)
				}
				if f, ok := trFinding(r, "duplicate-claim-marker"); !ok || !slices.Equal(f.Comments, []int64{1, 2}) || f.Fence != 1 {
					t.Errorf("finding %+v", f)
				}
			}},
		{"a comment delivered twice is one marker",
			trIn(trCs(trClaimC(1, 1, "agent-a", wA, 1), trClaimC(1, 1, "agent-a", wA, 1)), trGrant(1, wA, 0)),
			want{epoch: 1, lifetime: 1}, nil},
		{"a same-owner re-claim after a lapse posting a second claim marker: duplicate-claim-marker",
			trIn(trCs(trClaimC(1, 1, "agent-a", wA, 1), trClaimC(2, 41, "agent-a", wA, 2)), trGrant(1, wA, 0), trGrant(2, wA, 40)),
			want{epoch: 1, lifetime: 1, codes: []string{"duplicate-claim-marker"}},
			func(t *testing.T, r TrailResult) {
				if f, ok := trFinding(r, "duplicate-claim-marker"); !ok || !slices.Equal(f.Comments, []int64{1, 2}) || f.Fence != 2 || !strings.Contains(f.Detail, "re-claim") {
					t.Errorf("finding %+v", f)
				}
			}},
		{"a same-owner re-claim across a maintenance claim posting a second claim marker: duplicate-claim-marker",
			trIn(trCs(trClaimC(1, 1, "agent-a", wA, 1), trClaimC(2, 61, "agent-a", wA, 3)),
				trGrant(1, wA, 0), trGrant(2, "warden", 50, trMaint(), trReleased(51)), trGrant(3, wA, 60)),
			want{epoch: 1, lifetime: 1, codes: []string{"duplicate-claim-marker"}}, nil},
		{"a re-claim of an unmarked claim posting the custody's only marker: no duplicate",
			trIn(trCs(trClaimC(2, 41, "agent-a", wA, 2)), trGrant(1, wA, 0), trGrant(2, wA, 40)),
			want{epoch: 1, lifetime: 1, codes: []string{"claimed-unmarked"}}, nil},
		{"two re-claims of an unmarked claim, each with a marker: the second is a duplicate",
			trIn(trCs(trClaimC(2, 41, "agent-a", wA, 2), trClaimC(3, 81, "agent-a", wA, 3)), trGrant(1, wA, 0), trGrant(2, wA, 40), trGrant(3, wA, 80)),
			want{epoch: 1, lifetime: 1, codes: []string{"claimed-unmarked", "duplicate-claim-marker"}},
			func(t *testing.T, r TrailResult) {
				if f, _ := trFinding(r, "duplicate-claim-marker"); !slices.Equal(f.Comments, []int64{2, 3}) {
					t.Errorf("finding %+v", f)
				}
			}},
		{"another login announcing the same grant: duplicate-claim-marker",
			trIn(trCs(trClaimC(1, 1, "agent-a", wA, 1), trClaimC(2, 2, "agent-z", wA, 1)), trGrant(1, wA, 0)),
			want{epoch: 1, lifetime: 1, codes: []string{"duplicate-claim-marker"}},
			func(t *testing.T, r TrailResult) {
				if f := r.Findings[0]; !slices.Equal(f.Comments, []int64{1, 2}) || !strings.Contains(f.Detail, `"agent-a"`) || !strings.Contains(f.Detail, `"agent-z"`) {
					t.Errorf("finding %+v", f)
				}
			}},

		// Takeovers.
		{"an unannounced takeover still counts",
			trIn(trCs(trClaimC(1, 1, "agent-a", wA, 1), trClaimC(2, 90, "agent-b", wB, 2)), trGrant(1, wA, 0), trGrant(2, wB, 89)),
			want{epoch: 2, lifetime: 2, codes: []string{"unannounced-takeover"}},
			func(t *testing.T, r TrailResult) {
				if f := r.Findings[0]; !strings.Contains(f.Detail, "prior-owner=backlog-worker/aaaa prior-fence=1") {
					t.Errorf("detail %q", f.Detail)
				}
			}},
		{"a claim after a release needs no takeover form",
			trIn(trCs(trClaimC(1, 1, "agent-a", wA, 1), trClaimC(2, 90, "agent-b", wB, 2)), trGrant(1, wA, 0, trReleased(50)), trGrant(2, wB, 89)),
			want{epoch: 2, lifetime: 2}, nil},
		{"a takeover naming the wrong prior owner",
			trIn(trCs(trClaimC(1, 1, "agent-a", wA, 1), trTakeoverC(2, 90, "agent-b", wB, 2, wC, 1)), trGrant(1, wA, 0), trGrant(2, wB, 89)),
			want{epoch: 2, lifetime: 2, codes: []string{"takeover-mismatch"}},
			func(t *testing.T, r TrailResult) {
				if f := r.Findings[0]; !strings.Contains(f.Detail, `prior-owner="backlog-worker/cccc"`) || !strings.Contains(f.Detail, `"backlog-worker/aaaa"'s fence 1`) {
					t.Errorf("detail %q", f.Detail)
				}
			}},
		{"a takeover naming the wrong prior fence",
			trIn(trCs(trClaimC(1, 1, "agent-a", wA, 1), trTakeoverC(2, 90, "agent-b", wB, 3, wA, 1)), trGrant(1, wA, 0), trGrant(2, wA, 40), trGrant(3, wB, 89)),
			want{epoch: 2, lifetime: 2, codes: []string{"takeover-mismatch"}}, nil},
		{"a takeover of nothing",
			TrailInput{Item: trItem, Comments: trCs(trTakeoverC(1, 1, "agent-a", wA, 2, wB, 1))},
			want{epoch: 1, lifetime: 1, codes: []string{"takeover-mismatch"}},
			func(t *testing.T, r TrailResult) {
				if f := r.Findings[0]; !strings.Contains(f.Detail, "no claim precedes it") {
					t.Errorf("detail %q", f.Detail)
				}
			}},
		{"a takeover of an unknown holder is not checked",
			trIn(trCs(trTakeoverC(1, 1, "agent-a", wA, 2, wB, 1)), trGrant(2, wA, 0)),
			want{epoch: 2, lifetime: 2, unknown: true, codes: []string{"claimed-unmarked"}}, nil},
		{"a takeover of one's own claim",
			trIn(trCs(trClaimC(1, 1, "agent-a", wA, 1), trTakeoverC(2, 50, "agent-a", wA, 2, wA, 1)), trGrant(1, wA, 0), trGrant(2, wA, 49)),
			want{epoch: 1, lifetime: 1, codes: []string{"takeover-mismatch"}}, nil},
		{"collision: the prior owner's marker after the takeover holds the item",
			trIn(trCs(trClaimC(1, 1, "agent-a", wA, 1), trTakeoverC(2, 90, "agent-b", wB, 2, wA, 1), trOutcomeC(3, 95, "agent-a", wA, 1, "complete")),
				trGrant(1, wA, 0), trGrant(2, wB, 89)),
			want{epoch: 2, lifetime: 2, codes: []string{"takeover-collision"}, hold: true},
			func(t *testing.T, r TrailResult) {
				if f := r.Findings[0]; !slices.Equal(f.Comments, []int64{2, 3}) || !strings.Contains(f.Detail, "result=complete") {
					t.Errorf("finding %+v", f)
				}
				if want := "no outcome: custody passed to " + wB + " (its outcome result=complete came later, in comment 3)"; r.History[0].Outcome != want {
					t.Errorf("history %q", r.History[0].Outcome)
				}
			}},
		{"collision in the same second, ordered by id",
			trIn(trCs(trClaimC(1, 1, "agent-a", wA, 1), trTakeoverC(2, 90, "agent-b", wB, 2, wA, 1), trOutcomeC(3, 90, "agent-a", wA, 1, "released")),
				trGrant(1, wA, 0), trGrant(2, wB, 89)),
			want{epoch: 2, lifetime: 2, codes: []string{"takeover-collision"}, hold: true}, nil},
		{"the prior owner's marker before the takeover is no collision",
			trIn(trCs(trClaimC(1, 1, "agent-a", wA, 1), trProse(5, 80, "agent-a", "still here"), trTakeoverC(6, 90, "agent-b", wB, 2, wA, 1)),
				trGrant(1, wA, 0), trGrant(2, wB, 89)),
			want{epoch: 2, lifetime: 2}, nil},
		{"a collision resolved by a human no longer holds",
			func() TrailInput {
				in := trIn(trCs(trClaimC(1, 1, "agent-a", wA, 1), trTakeoverC(2, 90, "agent-b", wB, 2, wA, 1), trOutcomeC(3, 95, "agent-a", wA, 1, "released")),
					trGrant(1, wA, 0), trGrant(2, wB, 89))
				in.CollisionResolvedAt = trT(100)
				return in
			}(),
			want{epoch: 2, lifetime: 2}, nil},
		{"activity after the resolve holds again",
			func() TrailInput {
				in := trIn(trCs(trClaimC(1, 1, "agent-a", wA, 1), trTakeoverC(2, 90, "agent-b", wB, 2, wA, 1),
					trOutcomeC(3, 95, "agent-a", wA, 1, "released"), trOutcomeC(4, 120, "agent-a", wA, 1, "released")),
					trGrant(1, wA, 0), trGrant(2, wB, 89))
				in.CollisionResolvedAt = trT(100)
				return in
			}(),
			want{epoch: 2, lifetime: 2, codes: []string{"takeover-collision"}, hold: true}, nil},
		{"collision: a push to the prior claim's branch after the takeover",
			func() TrailInput {
				in := trIn(trCs(trClaimC(1, 1, "agent-a", wA, 1), trTakeoverC(2, 90, "agent-b", wB, 2, wA, 1)),
					trGrant(1, wA, 0, trBranch("feat/a")), trGrant(2, wB, 89, trBranch("feat/b")))
				in.Pushes = []BranchPush{{At: trT(50), Branch: "feat/a"}, {At: trT(95), Branch: "feat/b"}, {At: trT(96), Branch: "feat/a", Login: "agent-a"}}
				return in
			}(),
			want{epoch: 2, lifetime: 2, codes: []string{"takeover-collision"}, hold: true},
			func(t *testing.T, r TrailResult) {
				if f := r.Findings[0]; !strings.Contains(f.Detail, `branch "feat/a" by "agent-a"`) || !slices.Equal(f.Comments, []int64{2}) {
					t.Errorf("finding %+v", f)
				}
			}},
		{"a new holder building on the prior branch: only the prior owner's login collides",
			func() TrailInput {
				in := trIn(trCs(trClaimC(1, 1, "agent-a", wA, 1), trTakeoverC(2, 90, "agent-b", wB, 2, wA, 1)),
					trGrant(1, wA, 0, trBranch("feat/a")), trGrant(2, wB, 89, trBranch("feat/a")))
				in.Pushes = []BranchPush{{At: trT(95), Branch: "feat/a", Login: "agent-b"}, {At: trT(96), Branch: "feat/a"}}
				return in
			}(),
			want{epoch: 2, lifetime: 2},
			func(t *testing.T, r TrailResult) {
				in := trIn(trCs(trClaimC(1, 1, "agent-a", wA, 1), trTakeoverC(2, 90, "agent-b", wB, 2, wA, 1)),
					trGrant(1, wA, 0, trBranch("feat/a")), trGrant(2, wB, 89, trBranch("feat/a")))
				in.Pushes = []BranchPush{{At: trT(97), Branch: "feat/a", Login: "agent-a"}}
				if r := EvaluateTrail(in); !r.CollisionHold {
					t.Errorf("a push by the prior owner's login is a collision: %+v", r.Findings)
				}
			}},
		{"an unannounced takeover is watched for collisions too",
			trIn(trCs(trClaimC(1, 1, "agent-a", wA, 1), trClaimC(2, 90, "agent-b", wB, 2), trOutcomeC(3, 95, "agent-a", wA, 1, "complete")),
				trGrant(1, wA, 0), trGrant(2, wB, 89)),
			want{epoch: 2, lifetime: 2, codes: []string{"takeover-collision", "unannounced-takeover"}, hold: true}, nil},
		{"the prior owner claiming again after a release is no collision",
			trIn(trCs(trClaimC(1, 1, "agent-a", wA, 1), trTakeoverC(2, 90, "agent-b", wB, 2, wA, 1), trOutcomeC(3, 100, "agent-b", wB, 2, "released"),
				trClaimC(4, 111, "agent-a", wA, 3)),
				trGrant(1, wA, 0), trGrant(2, wB, 89, trReleased(101)), trGrant(3, wA, 110)),
			want{epoch: 3, lifetime: 3}, nil},

		// Edits and deletions: the earliest text counts.
		{"an edited marker: the earliest text counts",
			func() TrailInput {
				c := trClaimC(1, 1, "agent-a", wA, 1)
				c.Edited, c.CurrentBody = true, ClaimMarker(string(trItem), wA, "local", 9, trT(1), nil)
				return trIn(trCs(c), trGrant(1, wA, 0))
			}(),
			want{epoch: 1, lifetime: 1, codes: []string{"marker-edited"}},
			func(t *testing.T, r TrailResult) {
				if len(r.Backed) != 1 || r.Backed[0].Marker.Fence != 1 {
					t.Errorf("backed %+v", r.Backed)
				}
				if f := r.Findings[0]; !strings.Contains(f.Detail, "fence=1") || !strings.Contains(f.Detail, "fence=9") {
					t.Errorf("detail %q", f.Detail)
				}
			}},
		{"a marker edited away still counts",
			func() TrailInput {
				c := trClaimC(1, 1, "agent-a", wA, 1)
				c.Edited, c.CurrentBody = true, "oops\nnever mind"
				return TrailInput{Item: trItem, Comments: trCs(c)}
			}(),
			want{epoch: 1, lifetime: 1, codes: []string{"marker-edited"}},
			func(t *testing.T, r TrailResult) {
				if f := r.Findings[0]; !strings.HasSuffix(f.Detail, `it now reads "oops"`) {
					t.Errorf("detail %q", f.Detail)
				}
			}},
		{"prose edited into a marker counts nothing",
			func() TrailInput {
				c := trProse(1, 1, "agent-a", "working on it")
				c.AuthorIsAgent, c.Edited, c.CurrentBody = true, true, ClaimMarker(string(trItem), wA, "local", 1, trT(1), nil)
				return TrailInput{Item: trItem, Comments: trCs(c)}
			}(),
			want{codes: []string{"marker-edited"}}, nil},
		{"a deleted marker: the count is unchanged",
			func() TrailInput {
				c := trClaimC(1, 1, "agent-a", wA, 1)
				c.Deleted = true
				return trIn(trCs(c, trTakeoverC(2, 90, "agent-b", wB, 2, wA, 1)), trGrant(1, wA, 0), trGrant(2, wB, 89))
			}(),
			want{epoch: 2, lifetime: 2, codes: []string{"marker-deleted"}}, nil},

		// Outcomes against tags.
		{"result=complete without state:complete",
			trIn(trCs(trClaimC(1, 1, "agent-a", wA, 1), trOutcomeC(2, 9, "agent-a", wA, 1, "complete")), trGrant(1, wA, 0, trReleased(10))),
			want{epoch: 1, lifetime: 1, codes: []string{"outcome-without-tag"}},
			func(t *testing.T, r TrailResult) {
				if f := r.Findings[0]; !strings.Contains(f.Detail, "no state:complete tag") || !slices.Equal(f.Comments, []int64{2}) {
					t.Errorf("finding %+v", f)
				}
			}},
		{"result=complete with state:complete",
			func() TrailInput {
				in := trIn(trCs(trClaimC(1, 1, "agent-a", wA, 1), trOutcomeC(2, 9, "agent-a", wA, 1, "complete")), trGrant(1, wA, 0, trReleased(10)))
				in.Tags = []string{"backlog", "state:complete"}
				return in
			}(),
			want{epoch: 1, lifetime: 1}, nil},
		{"result=parked without state:parked",
			trIn(trCs(trClaimC(1, 1, "agent-a", wA, 1), trOutcomeC(2, 9, "agent-a", wA, 1, "parked")), trGrant(1, wA, 0, trReleased(10))),
			want{epoch: 1, lifetime: 1, codes: []string{"outcome-without-tag"}}, nil},
		{"result=released asks for no tag",
			trIn(trCs(trClaimC(1, 1, "agent-a", wA, 1), trOutcomeC(2, 9, "agent-a", wA, 1, "released")), trGrant(1, wA, 0, trReleased(10))),
			want{epoch: 1, lifetime: 1}, nil},
		{"a parked outcome before the unpark is history",
			func() TrailInput {
				in := trIn(trCs(trClaimC(1, 1, "agent-a", wA, 1), trOutcomeC(2, 9, "agent-a", wA, 1, "parked")), trGrant(1, wA, 0, trReleased(10)))
				in.EpochStart = trT(60)
				return in
			}(),
			want{epoch: 0, lifetime: 1}, nil},
		{"an outcome followed by a new claim is history",
			trIn(trCs(trClaimC(1, 1, "agent-a", wA, 1), trOutcomeC(2, 9, "agent-a", wA, 1, "complete"), trClaimC(3, 21, "agent-b", wB, 2)),
				trGrant(1, wA, 0, trReleased(10)), trGrant(2, wB, 20)),
			want{epoch: 2, lifetime: 2}, nil},

		// History before the ledger.
		{"grant log empty: markers by agents count",
			TrailInput{Item: trItem, Comments: trCs(
				trClaimC(1, 1, "agent-a", wA, 1), trTakeoverC(2, 90, "agent-b", wB, 3, wA, 2),
				trOutcomeC(3, 100, "agent-b", wB, 3, "released"), trClaimC(4, 200, "agent-a", wA, 4))},
			want{epoch: 3, lifetime: 3},
			func(t *testing.T, r TrailResult) {
				if len(r.Backed) != 4 || !r.Backed[0].PreLedger {
					t.Errorf("backed %+v", r.Backed)
				}
			}},
		{"grant log empty: a same-owner second marker is a re-claim, not an attempt, and a duplicate",
			TrailInput{Item: trItem, Comments: trCs(trClaimC(1, 1, "agent-a", wA, 1), trClaimC(2, 50, "agent-a", wA, 2))},
			want{epoch: 1, lifetime: 1, codes: []string{"duplicate-claim-marker"}}, nil},
		{"grant log empty: the same marker posted twice is a duplicate",
			TrailInput{Item: trItem, Comments: trCs(trClaimC(1, 1, "agent-a", wA, 1), trClaimC(2, 2, "agent-a", wA, 1))},
			want{epoch: 1, lifetime: 1, codes: []string{"duplicate-claim-marker"}}, nil},
		{"grant log empty: an unannounced takeover and a mismatch, read from the trail",
			TrailInput{Item: trItem, Comments: trCs(trClaimC(1, 1, "agent-a", wA, 1), trClaimC(2, 50, "agent-b", wB, 2), trTakeoverC(3, 90, "agent-c", wC, 3, wA, 1))},
			want{epoch: 3, lifetime: 3, codes: []string{"takeover-mismatch", "unannounced-takeover"}}, nil},
		{"grant log empty: a collaborator with write access counts and becomes an agent",
			TrailInput{Item: trItem, Comments: trCs(trHuman(trClaimC(1, 1, "bob", wA, 1), true))},
			want{epoch: 1, lifetime: 1, codes: []string{"undeclared-agent"}},
			func(t *testing.T, r TrailResult) {
				if !slices.Equal(r.NewAgents, []string{"bob"}) {
					t.Errorf("new agents %v", r.NewAgents)
				}
			}},
		{"history before the ledger counts with the grants after it",
			func() TrailInput {
				in := trIn(trCs(trClaimC(1, 1, "agent-a", wA, 1), trTakeoverC(2, 90, "agent-b", wB, 2, wA, 1), trClaimC(3, 501, "agent-c", wC, 3)),
					trGrant(3, wC, 500))
				return in
			}(),
			want{epoch: 3, lifetime: 3, codes: []string{"unannounced-takeover"}}, nil},
		{"a marker after the ledger began with no grant is unbacked",
			func() TrailInput {
				in := TrailInput{Item: trItem, Comments: trCs(trClaimC(1, 1, "agent-a", wA, 1), trClaimC(2, 90, "agent-b", wB, 2)), LedgerSince: trT(60)}
				return in
			}(),
			want{epoch: 1, lifetime: 1, codes: []string{"unbacked-marker"}}, nil},
		{"fences before the grant log with no marker: unknown, counted once",
			trIn(trCs(trClaimC(1, 501, "agent-c", wC, 4)), trGrant(4, wC, 500)),
			want{epoch: 2, lifetime: 2, unknown: true, codes: []string{"claimed-unmarked"}}, nil},

		// Time.
		{"a fresh grant is given a moment for its marker",
			func() TrailInput {
				in := trIn(nil, trGrant(1, wA, 0))
				in.Now = trT(1)
				return in
			}(),
			want{epoch: 1, lifetime: 1}, nil},
		{"a lapsed lease in the history",
			func() TrailInput {
				in := trIn(trCs(trClaimC(1, 1, "agent-a", wA, 1)), trGrant(1, wA, 0))
				in.Now = trT(60)
				return in
			}(),
			want{epoch: 1, lifetime: 1},
			func(t *testing.T, r TrailResult) {
				if r.History[0].Outcome != "no outcome yet: the lease lapsed at 2026-09-06T00:30:00Z" {
					t.Errorf("history %+v", r.History)
				}
			}},
		{"warden's own park and report comments are listed, not counted",
			func() TrailInput {
				park := trProse(2, 30, "warden[bot]", ParkComment(trItem, 1, "pm", "poison-threshold", "why?", nil))
				park.AuthorIsWarden = true
				rep := trProse(3, 31, "warden[bot]", "<!-- backlog-warden: report item=issue-2101 -->\nnone")
				rep.AuthorIsWarden, rep.Edited = true, true
				return trIn(trCs(trClaimC(1, 1, "agent-a", wA, 1), park, rep), trGrant(1, wA, 0))
			}(),
			want{epoch: 1, lifetime: 1},
			func(t *testing.T, r TrailResult) {
				if len(r.Warden) != 2 || r.Warden[0].Marker.Kind != KindPark || r.Warden[1].Marker.Kind != KindReport {
					t.Errorf("warden %+v", r.Warden)
				}
			}},
		{"warden posting the claim marker (post_markers) backs the grant",
			func() TrailInput {
				c := trClaimC(1, 1, "warden[bot]", wA, 1)
				c.AuthorIsAgent, c.AuthorIsWarden = false, true
				return trIn(trCs(c), trGrant(1, wA, 0))
			}(),
			want{epoch: 1, lifetime: 1}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := EvaluateTrail(c.in)
			codes := slices.Clone(c.want.codes)
			slices.Sort(codes)
			if r.Attempts != c.want.epoch || r.LifetimeAttempts != c.want.lifetime || r.AttemptsUnknown != c.want.unknown ||
				r.CollisionHold != c.want.hold || !slices.Equal(trCodes(r), codes) {
				t.Errorf("got epoch %d lifetime %d unknown %v hold %v codes %v\nwant %+v", r.Attempts, r.LifetimeAttempts, r.AttemptsUnknown, r.CollisionHold, trCodes(r), c.want)
				for _, f := range r.Findings {
					t.Logf("  %s %v: %s", f.Code, f.Comments, f.Detail)
				}
			}
			for _, f := range r.Findings {
				if f.Item != trItem || f.Detail == "" {
					t.Errorf("finding %+v", f)
				}
			}
			if len(r.History) != r.LifetimeAttempts || len(r.EpochHistory()) != r.Attempts {
				t.Errorf("history %d lines, epoch %d, for %d / %d attempts", len(r.History), len(r.EpochHistory()), r.LifetimeAttempts, r.Attempts)
			}
			if c.check != nil {
				c.check(t, r)
			}
		})
	}
}

// trRich is a trail with something of everything.
func trRich() TrailInput {
	edited := trClaimC(1, 1, "agent-a", wA, 1)
	edited.Edited, edited.CurrentBody = true, "gone"
	deleted := trOutcomeC(4, 100, "agent-b", wB, 2, "released")
	deleted.Deleted = true
	in := trIn(trCs(
		edited,
		trClaimC(2, 1, "agent-z", wA, 1), // same second as comment 1: ordered by id
		trTakeoverC(3, 90, "agent-b", wB, 2, wA, 1),
		deleted,
		trOutcomeC(5, 100, "agent-a", wA, 1, "complete"), // same second as comment 4: after it by id, and after the takeover
		trHuman(trClaimC(6, 120, "mallory", wC, 3), false),
		trClaimC(7, 130, "agent-c", wC, 3),
		trProse(8, 130, "alice", "nice"),
		trProse(9, 131, "agent-c", "<!-- backlog-worker: claim item=issue-2101 -->"),
		trClaimC(10, 300, "agent-b", wB, 9),
	),
		trGrant(1, wA, 0, trBranch("feat/a")), trGrant(2, wB, 89, trBranch("feat/b"), trReleased(101)),
		trGrant(3, wC, 129), trGrant(4, "warden", 200, trMaint(), trReleased(201)), trGrant(5, wC, 210))
	in.Pushes = []BranchPush{{At: trT(95), Branch: "feat/a"}, {At: trT(96), Branch: "feat/b"}, {At: trT(50), Branch: "feat/a"}}
	in.Tags = []string{"backlog"}
	in.EpochStart = trT(100)
	return in
}

func TestEvaluateTrailIgnoresOrderOfReceipt(t *testing.T) {
	in := trRich()
	want := EvaluateTrail(in)
	if want.LifetimeAttempts != 3 || want.Attempts != 1 || !want.CollisionHold {
		t.Fatalf("the rich trail: %+v", want)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 200 {
		s := in
		s.Comments = slices.Clone(in.Comments)
		s.Grants = slices.Clone(in.Grants)
		s.Pushes = slices.Clone(in.Pushes)
		rng.Shuffle(len(s.Comments), func(a, b int) { s.Comments[a], s.Comments[b] = s.Comments[b], s.Comments[a] })
		rng.Shuffle(len(s.Grants), func(a, b int) { s.Grants[a], s.Grants[b] = s.Grants[b], s.Grants[a] })
		rng.Shuffle(len(s.Pushes), func(a, b int) { s.Pushes[a], s.Pushes[b] = s.Pushes[b], s.Pushes[a] })
		if i%3 == 0 { // a delivery received twice
			s.Comments = append(s.Comments, s.Comments[rng.IntN(len(s.Comments))])
		}
		if got := EvaluateTrail(s); !reflect.DeepEqual(got, want) {
			t.Fatalf("shuffle %d differs:\n got %+v\nwant %+v", i, got, want)
		}
	}
	// And the input is left as it was given.
	if !reflect.DeepEqual(in, trRich()) {
		t.Errorf("EvaluateTrail modified its input")
	}
}

// TestEvaluateTrailInvariants runs random trails: it never panics, never
// reports zero attempts for an item a worker claimed, never counts more
// attempts in the epoch than in the lifetime, nor fewer than the grant log's
// custody changes.
func TestEvaluateTrailInvariants(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	owners := []string{wA, wB, wC}
	for n := range 2000 {
		var in TrailInput
		in.Item = trItem
		var fence int64
		for range rng.IntN(6) {
			fence++
			g := trGrant(fence, owners[rng.IntN(3)], int(fence)*30)
			if rng.IntN(3) == 0 {
				g.ReleasedAt = trT(int(fence)*30 + 10)
			}
			if rng.IntN(6) == 0 {
				g.Maintenance = true
			}
			g.Branch = []string{"", "feat/x", "feat/y"}[rng.IntN(3)]
			in.Grants = append(in.Grants, g)
		}
		if len(in.Grants) == 0 && rng.IntN(2) == 0 {
			in.Fence = int64(rng.IntN(4))
		}
		for id := range int64(rng.IntN(10)) {
			m := rng.IntN(200)
			o := owners[rng.IntN(3)]
			f := int64(rng.IntN(7) + 1)
			var c TrailComment
			switch rng.IntN(5) {
			case 0:
				c = trOutcomeC(id, m, "agent-"+o[len(o)-1:], o, f, []string{"complete", "released", "parked"}[rng.IntN(3)])
			case 1:
				c = trTakeoverC(id, m, "agent-"+o[len(o)-1:], o, f, owners[rng.IntN(3)], int64(rng.IntN(7)+1))
			case 2:
				c = trProse(id, m, "x", []string{"hi", "<!-- backlog-worker: claim x", "<!-- backlog-warden: report item=issue-2101 -->"}[rng.IntN(3)])
			default:
				c = trClaimC(id, m, "agent-"+o[len(o)-1:], o, f)
			}
			c.AuthorIsAgent = rng.IntN(5) > 0
			c.AuthorHasWrite = rng.IntN(2) == 0
			c.Edited = rng.IntN(8) == 0
			c.Deleted = rng.IntN(8) == 0
			in.Comments = append(in.Comments, c)
		}
		for range rng.IntN(3) {
			in.Pushes = append(in.Pushes, BranchPush{At: trT(rng.IntN(200)), Branch: []string{"feat/x", "feat/y"}[rng.IntN(2)]})
		}
		if rng.IntN(3) == 0 {
			in.EpochStart = trT(rng.IntN(200))
		}
		r := EvaluateTrail(in)
		custody := 0
		var prev *GrantEntry
		worker := false
		for i := range in.Grants {
			g := &in.Grants[i]
			if g.Maintenance {
				continue // a maintenance claim changes no custody of work
			}
			worker = true
			if prev == nil || prev.Owner != g.Owner || !prev.ReleasedAt.IsZero() {
				custody++
			}
			prev = g
		}
		switch {
		case (worker || in.Fence > 0) && r.LifetimeAttempts == 0:
			t.Fatalf("run %d: zero attempts with fence above zero: %+v", n, in)
		case r.Attempts > r.LifetimeAttempts:
			t.Fatalf("run %d: epoch %d > lifetime %d", n, r.Attempts, r.LifetimeAttempts)
		case r.LifetimeAttempts < custody:
			t.Fatalf("run %d: %d attempts below the grant log's %d custody changes", n, r.LifetimeAttempts, custody)
		case r.CollisionHold != slices.ContainsFunc(r.Findings, func(f TrailFinding) bool { return f.Code == CodeTakeoverCollision }):
			t.Fatalf("run %d: hold %v without its finding", n, r.CollisionHold)
		}
	}
}
