package store

import (
	"time"

	"github.com/wardenhq/warden/gating"
)

// grantEntries converts the grant log to the rules' form.
func grantEntries(grants []Grant) []gating.GrantEntry {
	out := make([]gating.GrantEntry, len(grants))
	for i, g := range grants {
		out[i] = gating.GrantEntry{Fence: g.Fence, Owner: g.Owner, Maintenance: g.Purpose == "maintenance",
			Branch: g.Branch, GrantedAt: g.GrantedAt, LeaseExpiresAt: g.LeaseExpiresAt}
		if g.ReleasedAt != nil {
			out[i].ReleasedAt = *g.ReleasedAt
		}
	}
	return out
}

// Attempts counts the attempts in a grant log (CONTRACT.md §6) by the rules'
// one definition (gating.EvaluateTrail over the grants): every
// custody-changing grant that is not a maintenance claim. The snapshot
// refines it from the comment trail (trailEval), floored by this one.
// This is the lifetime count; EpochAttempts counts the current epoch's.
func Attempts(grants []Grant) int {
	_, lifetime := gating.GrantAttempts("", grantEntries(grants), time.Time{})
	return lifetime
}

// EpochAttempts counts the grant log's attempts in the epoch that began at
// epochStart (the last human unpark; zero: the item's whole life).
func EpochAttempts(grants []Grant, epochStart time.Time) int {
	epoch, _ := gating.GrantAttempts("", grantEntries(grants), epochStart)
	return epoch
}

// CleanReclaims lists the clean re-claims in an item's grant log, oldest
// first (gating.CleanReclaims).
func CleanReclaims(id gating.ItemID, grants []Grant) []gating.CleanReclaim {
	return gating.CleanReclaims(id, grantEntries(grants))
}
