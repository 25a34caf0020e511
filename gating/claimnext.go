package gating

import (
	"slices"
	"strings"
)

// Claiming "the best ready item" (POST /ready/claim, CONTRACT.md §11) and
// the per-owner cap (max_claims_per_owner).

// ExOwnerCap is the exclusion of a claim that would take its owner past
// max_claims_per_owner live claims (CONTRACT.md §11): the owner already
// holds that many.
const ExOwnerCap = "owner-cap"

// OwnerPrincipal is who a claim owner's cap counts against: the part of
// the owner before its first "/", or the whole owner when it has none. A
// worker's owners are "<token name>/<run>" (§4), so its principal is its
// token: the agent, not one of its runs; otherwise a new run name per
// claim would lift the cap. A pm's "pm/repair-3" counts against "pm".
func OwnerPrincipal(owner string) string {
	p, _, _ := strings.Cut(owner, "/")
	return p
}

// OwnerCap says whether owner may take one more claim under max live
// claims per principal (0 or less: no cap), from a snapshot that holds
// every item in flight (Claimable's partial snapshot does). held lists, in
// id order, the items whose claims count: held (lease live at s.Now,
// unreleased) by an owner with the same principal, maintenance claims
// excepted. A lapsed, abandoned or released claim counts for nothing (the
// holder holds nothing while its lease is out), so re-claiming one's own
// lapsed item takes one more; reached is len(held) >= max.
func OwnerCap(s Snapshot, owner string, max int) (held []ItemID, reached bool) {
	if max <= 0 {
		return nil, false
	}
	p := OwnerPrincipal(owner)
	for i := range s.Items {
		c := &s.Items[i]
		cv := c.Claim
		if cv.Fence <= 0 || cv.Purpose == "maintenance" || OwnerPrincipal(cv.Owner) != p {
			continue
		}
		if ClaimStateOf(cv, s.Now, s.Quarantine) == StateHeld && c.Item != nil {
			held = append(held, c.Item.ID)
		}
	}
	slices.SortFunc(held, compareIDs)
	return held, len(held) >= max
}

// ClaimWindow is how many items at the head of the ready order a claim of
// the best ready item tries first: the protocol's "top three to five"
// (step 6), at its wide end, since a refusal costs the server one
// transaction, not the agent a round trip. ClaimTries bounds the items one
// call tries in all: when every item of the window went to other
// claimants meanwhile, the next window is tried, and so on.
const (
	ClaimWindow = 5
	ClaimTries  = 3 * ClaimWindow
)

// ClaimCandidates is the order in which POST /ready/claim tries the ready
// set (ready, in claim order: ComputeReady's, with step 7's disjoint
// candidates first): its first ClaimTries entries, window by window
// (ClaimWindow), with jitter inside each window so that concurrent
// claimants spread over it instead of all trying the same item first. The
// jitter reorders only neighbours that the ready order does not rank:
// entries of the same priority and the same disjointness (both disjoint
// from the items in flight, or both overlapping one). A higher priority is
// always tried first, and a disjoint candidate before an overlapping one;
// a claimant that loses a race moves on to the next candidate in the same
// call. shuffle has rand.Shuffle's shape (nil: no jitter). Resource
// collisions are exclusions (step 8), so no candidate has one; the claim
// transaction judges each candidate again.
func ClaimCandidates(ready []ReadyEntry, shuffle func(n int, swap func(i, j int))) []ItemID {
	n := min(len(ready), ClaimTries)
	out := make([]ItemID, n)
	for i := range n {
		out[i] = ready[i].Item
	}
	if shuffle == nil {
		return out
	}
	rank := func(e ReadyEntry) [2]any { return [2]any{e.Priority, len(e.Overlaps) > 0} }
	for start := 0; start < n; {
		end := start + 1
		for end < n && end%ClaimWindow != 0 && rank(ready[end]) == rank(ready[start]) {
			end++
		}
		if run := out[start:end]; len(run) > 1 {
			shuffle(len(run), func(i, j int) { run[i], run[j] = run[j], run[i] })
		}
		start = end
	}
	return out
}

// ExclusionCounts counts a ready set's exclusions by reason: why nothing
// was claimable, in brief (GET /ready lists them item by item).
func ExclusionCounts(ex []Exclusion) map[string]int {
	out := make(map[string]int, 8)
	for _, e := range ex {
		out[e.Reason]++
	}
	return out
}
