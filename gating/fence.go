package gating

import "time"

// Verdict is the write-admission verdict of a fenced record (the protocol
// store's RepoContextFenceVerdict).
type Verdict string

// The six verdicts.
const (
	Accepted      Verdict = "Accepted"
	StaleToken    Verdict = "StaleToken"
	ClaimRequired Verdict = "ClaimRequired"
	ClaimReleased Verdict = "ClaimReleased"
	ForeignRegion Verdict = "ForeignRegion"
	UnissuedToken Verdict = "UnissuedToken"
)

// Fence is an item's durable claim state: the fencing high-water mark, the
// released high-water mark (both only grow; 0 = never), and the region of the
// claim that owns the fence.
type Fence struct {
	Token    int64
	Released int64
	Region   string
}

// Claimed reports a live claim: the record was claimed and that claim was
// not released. Lease expiry is deliberately not consulted (the protocol's
// IsClaimLive).
func (f Fence) Claimed() bool { return f.Token > 0 && f.Released < f.Token }

// Admit is the write-admission table (PROTOCOL.md "Claims"): may a write
// presenting token (nil: none) be applied to a record with fence f, in this
// deployment's region? lockCurrent is the token the lock holds now, if any:
// a token ahead of the record's stamp is honoured only when the lock issued
// it. (warden's ledger stamps the fence in the same transaction as the grant,
// so lockCurrent is never ahead of f.Token, and any token above it is
// UnissuedToken.)
func Admit(f Fence, token *int64, region string, lockCurrent *int64) Verdict {
	if f.Token <= 0 {
		return Accepted // never claimed: every pre-existing caller works unchanged
	}
	live := f.Claimed()
	if token == nil {
		if live {
			return ClaimRequired
		}
		return Accepted
	}
	presented := *token
	if presented < f.Token {
		return StaleToken
	}
	if presented > f.Token && (lockCurrent == nil || *lockCurrent != presented) {
		return UnissuedToken
	}
	if !live {
		return ClaimReleased
	}
	if f.Region != region {
		return ForeignRegion
	}
	return Accepted
}

// ClampLease returns the lease to grant for a requested length in seconds
// (nil or not positive: the default), clamped to max. Callers act on the
// returned length, never on the one they asked for.
func ClampLease(requested *float64, def, max time.Duration) time.Duration {
	d := def
	if requested != nil && *requested > 0 {
		// Guard against overflow: anything beyond the ceiling is the ceiling.
		if *requested >= max.Seconds() {
			return max
		}
		d = time.Duration(*requested * float64(time.Second))
	}
	if d > max {
		d = max
	}
	if d < time.Second {
		d = time.Second
	}
	return d
}

// MaxWait is the longest bounded wait a claim may ask for.
const MaxWait = 60 * time.Second
