package mirror

import (
	"sort"

	"github.com/wardenhq/warden/gating"
)

// Attempts counts the attempts in a grant log (CONTRACT.md §6): every
// custody-changing grant that is not a maintenance claim. A grant changes
// custody when it is the first, when the previous (non-maintenance) grant
// was released, or when it goes to another owner; a same-owner re-claim of
// its own unreleased (lapsed) claim is not an attempt. The comment trail
// refines the count once warden reads it (it is floored by this one).
//
// Epochs (a human unpark starts a new one) are not recorded yet, so this is
// the lifetime count; the epoch's count will start at the unpark's fence.
func Attempts(grants []Grant) int {
	n := 0
	walkGrants(grants, func(g *Grant, custody bool) {
		if custody {
			n++
		}
	})
	return n
}

// CleanReclaims lists the clean re-claims in an item's grant log, oldest
// first (PROTOCOL.md: "reporting a clean re-claim is mandatory"): the
// same-owner re-claims of its own lapsed, unreleased claim, exactly the
// non-maintenance grants other than the first that Attempts does not count.
// The holder came back, its fence moved, custody did not change. A re-claim
// after the quarantine ended (nobody took the item meanwhile) is listed too:
// it is the same near miss, only narrower.
func CleanReclaims(id gating.ItemID, grants []Grant) []gating.CleanReclaim {
	out := []gating.CleanReclaim{}
	var prev *Grant
	walkGrants(grants, func(g *Grant, custody bool) {
		if !custody && prev != nil {
			out = append(out, gating.CleanReclaim{Item: id, Owner: g.Owner, PriorFence: prev.Fence, Fence: g.Fence, AtUtc: g.GrantedAt.UTC()})
		}
		prev = g
	})
	return out
}

// walkGrants calls f for each non-maintenance grant in fence order, saying
// whether it changed custody.
func walkGrants(grants []Grant, f func(g *Grant, custody bool)) {
	gs := append([]Grant(nil), grants...)
	sort.SliceStable(gs, func(i, j int) bool { return gs[i].Fence < gs[j].Fence })
	var prev *Grant
	for i := range gs {
		g := &gs[i]
		if g.Purpose == "maintenance" {
			continue
		}
		f(g, prev == nil || prev.ReleasedAt != nil || prev.Owner != g.Owner)
		prev = g
	}
}
