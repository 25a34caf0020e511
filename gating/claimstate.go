package gating

import "time"

// ClaimStateOf classifies a claim at now: held while the lease is live;
// released when Released >= Fence > 0; never when Fence == 0; otherwise
// (lease expired, unreleased) lapsed while now < LastEvidence (or GrantedAt,
// if later) + quarantine, else abandoned.
//
// The checks run never, released, held, lapsed/abandoned: a released claim is
// released even if its lease had time left, because release ends custody.
// Both boundaries are half-open: at the instant the lease expires the claim is
// no longer held, and at the instant the quarantine ends it is abandoned.
func ClaimStateOf(c ClaimView, now time.Time, quarantine time.Duration) ClaimState {
	switch {
	case c.Fence <= 0:
		return StateNever
	case c.Released >= c.Fence:
		return StateReleased
	case now.Before(c.LeaseExpiresAt):
		return StateHeld
	case now.Before(QuarantineEnds(c, quarantine)):
		return StateLapsed
	default:
		return StateAbandoned
	}
}

// QuarantineEnds is when a lapsed claim stops being quarantined for its
// holder: quarantine after its latest evidence of work (LastEvidence, or
// GrantedAt if that is later).
func QuarantineEnds(c ClaimView, quarantine time.Duration) time.Time {
	base := c.LastEvidence
	if c.GrantedAt.After(base) {
		base = c.GrantedAt
	}
	return base.Add(quarantine)
}

// InFlight reports a live claim as the ready set counts it: held or lapsed.
// Released, abandoned and never-claimed are "no live claim".
func (s ClaimState) InFlight() bool { return s == StateHeld || s == StateLapsed }
