package gating

import (
	"reflect"
	"testing"
)

// TestTrailCustody: which grant is a custody change of the work (and so
// needs a claim marker), and whose claim a takeover takes, as warden decides
// before posting a marker for a grant it made.
func TestTrailCustody(t *testing.T) {
	const wC = "backlog-worker/cccc"
	cases := []struct {
		name    string
		in      TrailInput
		fence   int64
		attempt bool
		prior   *PriorClaim
	}{
		{"the first claim", trIn(nil, trGrant(1, wA, 0)), 1, true, nil},
		{"a lapsed holder's re-claim", trIn(nil, trGrant(1, wA, 0), trGrant(2, wA, 40)), 2, false, nil},
		{"a re-claim across a maintenance claim", trIn(nil, trGrant(1, wA, 0), trGrant(2, "pm/sweep", 40, trMaint(), trReleased(41)), trGrant(3, wA, 50)), 3, false, nil},
		{"another owner across a maintenance claim takes the worker's claim", trIn(nil, trGrant(1, wA, 0), trGrant(2, "pm/sweep", 40, trMaint(), trReleased(41)), trGrant(3, wB, 50)), 3, true, &PriorClaim{Owner: wA, Fence: 1}},
		{"another owner of an unreleased claim", trIn(nil, trGrant(1, wA, 0), trGrant(2, wB, 40)), 2, true, &PriorClaim{Owner: wA, Fence: 1}},
		{"after a release", trIn(nil, trGrant(1, wA, 0, trReleased(20)), trGrant(2, wB, 40)), 2, true, nil},
		{"the same owner after a release", trIn(nil, trGrant(1, wA, 0, trReleased(20)), trGrant(2, wA, 40)), 2, true, nil},
		{"the same owner after an outcome closed its claim", trIn(trCs(trClaimC(1, 1, "agent-a", wA, 1), trOutcomeC(2, 20, "agent-a", wA, 1, "released")), trGrant(1, wA, 0), trGrant(2, wA, 40)), 2, true, nil},
		{"the same owner after an unpark", func() TrailInput {
			in := trIn(nil, trGrant(1, wA, 0), trGrant(2, wA, 40))
			in.EpochStart = trT(30)
			return in
		}(), 2, true, nil},
		{"a third owner takes the second's, not the first's", trIn(nil, trGrant(1, wA, 0), trGrant(2, wB, 40), trGrant(3, wC, 80)), 3, true, &PriorClaim{Owner: wB, Fence: 2}},
		{"a maintenance claim is none", trIn(nil, trGrant(1, wA, 0), trGrant(2, "pm/sweep", 40, trMaint())), 2, false, nil},
		{"no such grant", trIn(nil, trGrant(1, wA, 0)), 9, false, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			attempt, prior := EvaluateTrail(c.in).Custody(c.fence)
			if attempt != c.attempt || !reflect.DeepEqual(prior, c.prior) {
				t.Errorf("Custody(%d) = %v, %+v; want %v, %+v", c.fence, attempt, prior, c.attempt, c.prior)
			}
		})
	}
}
