package gating

import (
	"sort"
	"time"
)

// CleanReclaims lists the clean re-claims in an item's grant log, oldest
// first (PROTOCOL.md: "reporting a clean re-claim is mandatory"): a worker's
// re-claim of its own unreleased claim. The holder came back, its fence
// moved, custody did not change, and it was no attempt (EvaluateTrail counts
// it the same way). A maintenance claim between them holds the item but not
// its work, so it changes nothing here: the re-claim is listed, its fence
// more than one past PriorFence (the worker saw its token move further than
// its own re-claim explains, and the report says so).
func CleanReclaims(id ItemID, grants []GrantEntry) []CleanReclaim {
	gs := append([]GrantEntry(nil), grants...)
	sort.SliceStable(gs, func(i, j int) bool { return gs[i].Fence < gs[j].Fence })
	out := []CleanReclaim{}
	var prev *GrantEntry
	for i := range gs {
		g := &gs[i]
		if g.Maintenance {
			continue
		}
		if prev != nil && prev.ReleasedAt.IsZero() && prev.Owner == g.Owner {
			out = append(out, CleanReclaim{Item: id, Owner: g.Owner, PriorFence: prev.Fence, Fence: g.Fence, AtUtc: g.GrantedAt.UTC()})
		}
		prev = g
	}
	return out
}

// GrantAttempts is the attempt count of a grant log alone (no comment trail
// read yet): EvaluateTrail's count over the grants, in the epoch that
// started at epochStart (zero: the item's whole life) and over its lifetime.
func GrantAttempts(id ItemID, grants []GrantEntry, epochStart time.Time) (epoch, lifetime int) {
	r := EvaluateTrail(TrailInput{Item: id, Grants: grants, EpochStart: epochStart})
	return r.Attempts, r.LifetimeAttempts
}
