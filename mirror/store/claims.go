package store

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/wardenhq/warden/gating"
)

// Claims: fenced, leased, with the protocol store's semantics (PROTOCOL.md
// "Claims"; lattice-source-extract.md §5).
//
// The fence lives on the item row (fence, released) and each grant in the
// grant log; a claim, renew or release is one write transaction that reads
// the item row under lock (SQLite: the single write connection; PostgreSQL:
// SELECT ... FOR UPDATE), decides, and writes. Lease expiry is judged with
// Config.Now. A claim that may wait queues in this process (claimwait.go).

// ---- results ----

func notGranted(id gating.ItemID, reason string) ClaimResult {
	return ClaimResult{Key: string(id), Reason: &reason}
}

func notReady(id gating.ItemID, exclusion string) ClaimResult {
	r := notGranted(id, ReasonNotReady)
	if exclusion == "" {
		exclusion = "not-claimable"
	}
	r.Exclusion = &exclusion
	return r
}

func grantedResult(id gating.ItemID, fence int64, owner, region string, expiresMs int64, lease time.Duration) ClaimResult {
	exp := Timestamp(msTime(expiresMs))
	secs := lease.Seconds()
	return ClaimResult{Key: string(id), Granted: true, FencingToken: &fence, Owner: &owner, Region: &region,
		LeaseExpiresAtUtc: &exp, LeaseSeconds: &secs}
}

// ---- claim ----

// Claim asks for the item's claim. Losing is an answer, not an error:
// Granted false with Reason missing, ForeignRegion, contended, timeout, or
// not-ready with the Exclusion code. A malformed or unauthorised request is
// a *gating.Refusal.
//
// A claim (other than a maintenance claim) is granted only when the item is
// claimable now: gating.Claimable judges it, inside the claim's own
// transaction, on the partial snapshot of what bears on it (claimSnapshot).
// An item whose lapsed claim is still quarantined (its holder showed
// evidence of work within Config.Quarantine) is not-ready (lapsed) for every
// owner but the holder's own: a same-owner re-claim continues the same work
// under a new, strictly higher fencing token (the protocol: "its fence
// increments, nothing else changes"), is no attempt, and is listed as a
// clean re-claim in the report. Maintenance claims skip readiness.
func (l *Ledger) Claim(ctx context.Context, repoID int64, id gating.ItemID, req ClaimRequest, actor Actor) (ClaimResult, error) {
	n, err := parseNumber(id)
	if err != nil {
		return ClaimResult{}, err
	}
	if err := checkClaimRequest(req, actor); err != nil {
		return ClaimResult{}, err
	}
	k, err := claimKeyed(actor, opClaim, n, req)
	if err != nil {
		return ClaimResult{}, err
	}
	l.pruneFor(ctx, k)
	lease := gating.ClampLease(req.LeaseSeconds, l.cfg.LeaseDefault, l.cfg.LeaseMax)
	var wait time.Duration
	if req.MaxWaitSeconds != nil {
		wait = time.Duration(*req.MaxWaitSeconds * float64(time.Second))
	}
	if wait <= 0 {
		a, err := l.claimOnce(ctx, repoID, n, req, lease, false, k)
		return a.res, err
	}
	return l.claimWaiting(ctx, repoID, n, req, lease, wait, k)
}

// attempt is the outcome of one try at a claim.
type attempt struct {
	res       ClaimResult
	contended bool
	holderExp int64 // the holder's lease expiry (unix ms) when contended; 0 unknown
}

// claimOnce tries once, in one write transaction. head says the caller is
// the head of the item's wait queue (and may take a claim others wait for).
// k, when the request carries a requestId, is answered from its record or
// records the answer (claimrequests.go).
func (l *Ledger) claimOnce(ctx context.Context, repoID int64, n int, req ClaimRequest, lease time.Duration, head bool, k *keyed) (attempt, error) {
	var a attempt
	err := l.writeTxQ(ctx, func(ctx context.Context, tx Querier) error {
		if replay, err := l.beginKeyed(ctx, tx, repoID, k); err != nil || replay != nil {
			if err == nil {
				a.res, err = replayedClaim(replay)
			}
			return err
		}
		if err := l.claimTx(ctx, tx, repoID, n, req, lease, head, &a); err != nil {
			return err
		}
		return l.finishKeyed(ctx, tx, repoID, k, n, a.res, grantUntil(a.res))
	})
	if err != nil {
		return attempt{}, err
	}
	return a, nil
}

// claimTx is claimOnce's decision and write, in tx, into a.
func (l *Ledger) claimTx(ctx context.Context, tx Querier, repoID int64, n int, req ClaimRequest, lease time.Duration, head bool, a *attempt) error {
	id := gating.IDFor(n)
	repo, err := servedRepo(ctx, tx, repoID)
	if err != nil {
		return err
	}
	it, err := l.loadHead(ctx, tx, lockUpdate, repoID, n)
	if err != nil {
		return err
	}
	if it == nil {
		a.res = notGranted(id, ReasonMissing)
		return nil
	}
	if err := loadTagsLinks(ctx, tx, repoID, n-1, n, map[int]*Item{n: it}); err != nil {
		return err
	}
	if err := checkClaimBranch(ctx, tx, repoID, it, req.Branch); err != nil {
		return err
	}
	if home, ok := (&gating.Item{Tags: it.Tags}).Tag("homeRegion"); !ok || home != l.cfg.Region {
		a.res = notGranted(id, ReasonForeignRegion)
		return nil
	}
	now := l.nowMs()
	if it.Fence.Claimed() && (it.Grant == nil || it.Grant.LeaseExpiresAt.UnixMilli() > now) {
		a.res, a.contended = notGranted(id, ReasonContended), true
		if it.Grant != nil {
			a.holderExp = it.Grant.LeaseExpiresAt.UnixMilli()
		}
		return nil
	}
	// From here to the commit the item's history is this claim's to
	// read and summarise.
	if err := l.lockSummary(ctx, tx, repoID, n); err != nil {
		return err
	}
	var sum gating.TrailSummary
	var hadSum bool
	var hist *gating.TrailInput // the whole history, when the judgement read it
	if req.Purpose == "maintenance" {
		if sum, hadSum, err = readSummary(ctx, tx, repoID, n); err != nil {
			return err
		}
	} else {
		set := l.settingsFor(ctx, repo)
		if err := l.lockOwner(ctx, tx, repoID, req.Owner, set); err != nil {
			return err
		}
		snap, j, err := l.judgeSnapshot(ctx, tx, repo, set, it)
		if err != nil {
			return err
		}
		sum, hadSum = j.sums[n]
		if in, ok := j.inputs[n]; ok {
			hist = &in
		}
		if ok, ex := gating.Claimable(snap, id, req.Owner); !ok {
			switch ex.Reason {
			case gating.ExForeignRegion:
				a.res = notGranted(id, ReasonForeignRegion)
			case gating.ExHeld:
				a.res, a.contended = notGranted(id, ReasonContended), true
			default:
				a.res = notReady(id, ex.Reason)
			}
			return nil
		}
		if _, capped := gating.OwnerCap(snap, req.Owner, set.MaxClaimsPerOwner); capped {
			a.res = notReady(id, gating.ExOwnerCap)
			return nil
		}
	}
	if !head && l.queued(itemKey{repoID, n}) > 0 {
		// Free, but promised to the claimants already waiting.
		a.res, a.contended = notGranted(id, ReasonContended), true
		return nil
	}
	fence := it.Fence.Token + 1
	exp := now + lease.Milliseconds()
	res, err := tx.ExecContext(ctx, `UPDATE ledger_items SET fence = $1 WHERE repo_id = $2 AND number = $3 AND fence = $4`,
		fence, repoID, n, it.Fence.Token)
	if err != nil {
		return fmt.Errorf("claim %s: %w", id, err)
	}
	if c, err := res.RowsAffected(); err != nil || c != 1 {
		return fmt.Errorf("claim %s: the fence moved under the lock (%d rows, %v)", id, c, err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO ledger_grants (repo_id, number, fence, owner, region, branch, purpose, granted_at, lease_expires_at, released_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, NULL)`,
		repoID, n, fence, req.Owner, l.cfg.Region, req.Branch, req.Purpose, now, exp); err != nil {
		return fmt.Errorf("claim %s: grant log: %w", id, err)
	}
	g := gating.GrantEntry{Fence: fence, Owner: req.Owner, Maintenance: req.Purpose == "maintenance", Branch: req.Branch,
		GrantedAt: msTime(now), LeaseExpiresAt: msTime(exp)}
	if err := summaryAfterGrant(ctx, tx, repoID, n, sum, hadSum, hist, g); err != nil {
		return err
	}
	defaulted := req.LeaseSeconds == nil || *req.LeaseSeconds <= 0
	if err := markLease(ctx, tx, repoID, n, fence, defaulted, opClaim, now); err != nil {
		return err
	}
	a.res = grantedResult(id, fence, req.Owner, l.cfg.Region, exp, lease)
	a.res.LeaseDefaulted = &defaulted
	return nil
}

// ---- renew ----

// Renew extends the lease of the claim holding token, which must be the
// item's current fence, unreleased, with its lease unexpired; else Granted
// false, "superseded" ("missing" for a missing item). The new lease is
// now + the clamped length; an omitted length is the default, however long
// the lease it replaces (the protocol's trap, reported as leaseShortened).
func (l *Ledger) Renew(ctx context.Context, repoID int64, id gating.ItemID, token int64, leaseSeconds *float64, actor Actor) (ClaimResult, error) {
	return l.RenewWith(ctx, repoID, id, RenewRequest{FencingToken: token, LeaseSeconds: leaseSeconds}, actor)
}

// RenewWith is Renew of req, which may carry a requestId: a resend is
// answered with the first answer while its lease lasts (claimrequests.go).
func (l *Ledger) RenewWith(ctx context.Context, repoID int64, id gating.ItemID, req RenewRequest, actor Actor) (ClaimResult, error) {
	n, err := parseNumber(id)
	if err != nil {
		return ClaimResult{}, err
	}
	if err := checkActor(actor); err != nil {
		return ClaimResult{}, err
	}
	if err := checkSeconds("leaseSeconds", req.LeaseSeconds, 0); err != nil {
		return ClaimResult{}, err
	}
	k, err := newKeyed(actor, req.RequestID, opRenew, n, renewBody{req.FencingToken, req.LeaseSeconds})
	if err != nil {
		return ClaimResult{}, err
	}
	l.pruneFor(ctx, k)
	var out ClaimResult
	err = l.writeTxQ(ctx, func(ctx context.Context, tx Querier) error {
		if replay, err := l.beginKeyed(ctx, tx, repoID, k); err != nil || replay != nil {
			if err == nil {
				out, err = replayedClaim(replay)
			}
			return err
		}
		if err := l.renewTx(ctx, tx, repoID, n, req, actor, &out); err != nil {
			return err
		}
		return l.finishKeyed(ctx, tx, repoID, k, n, out, grantUntil(out))
	})
	if err != nil {
		return ClaimResult{}, err
	}
	return out, nil
}

// renewTx is RenewWith's decision and write, in tx, into out.
func (l *Ledger) renewTx(ctx context.Context, tx Querier, repoID int64, n int, req RenewRequest, actor Actor, out *ClaimResult) error {
	id, token := gating.IDFor(n), req.FencingToken
	lease := gating.ClampLease(req.LeaseSeconds, l.cfg.LeaseDefault, l.cfg.LeaseMax)
	if _, err := servedRepo(ctx, tx, repoID); err != nil {
		return err
	}
	it, err := l.loadHead(ctx, tx, lockUpdate, repoID, n)
	if err != nil {
		return err
	}
	if it == nil {
		*out = notGranted(id, ReasonMissing)
		return nil
	}
	g := it.Grant
	if actor.Role == gating.RoleWorker && token == it.Fence.Token && g != nil && !gating.OwnedBy(g.Owner, actor.Name) {
		return refusal(ReasonOwnerNotAllowed, "worker %s may not renew the claim of %s", actor.Name, g.Owner)
	}
	now := l.nowMs()
	if token <= 0 || token != it.Fence.Token || !it.Fence.Claimed() || g == nil || g.LeaseExpiresAt.UnixMilli() <= now {
		*out = notGranted(id, ReasonSuperseded)
		return nil
	}
	prev := g.LeaseExpiresAt.UnixMilli()
	exp := now + lease.Milliseconds()
	if _, err := tx.ExecContext(ctx, `UPDATE ledger_grants SET lease_expires_at = $1 WHERE repo_id = $2 AND number = $3 AND fence = $4`,
		exp, repoID, n, token); err != nil {
		return fmt.Errorf("renew %s: %w", id, err)
	}
	// A renew is evidence of work (a fence move, in the protocol's
	// words): it keeps a claim that lapses later quarantined from now.
	if err := recordEvidence(ctx, tx, repoID, n, token, now, EvidenceRenew, "a renew of fence "+strconv.FormatInt(token, 10)); err != nil {
		return err
	}
	defaulted := req.LeaseSeconds == nil || *req.LeaseSeconds <= 0
	if err := markLease(ctx, tx, repoID, n, token, defaulted, opRenew, now); err != nil {
		return err
	}
	*out = grantedResult(id, token, g.Owner, g.Region, exp, lease)
	p := Timestamp(msTime(prev))
	shortened := exp < prev
	out.PreviousLeaseExpiresAtUtc, out.LeaseShortened, out.LeaseDefaulted = &p, &shortened, &defaulted
	return nil
}

// ---- release ----

// Release ends the claim holding token. It is honoured only for the item's
// current fence presented exactly and not yet released: the released mark
// becomes the fence and the grant log row its release time. Otherwise
// Released false: "stale", "missing" or "unclaimed". Releasing needs no
// served repository (letting go is always harmless).
func (l *Ledger) Release(ctx context.Context, repoID int64, id gating.ItemID, token int64, actor Actor) (ReleaseResult, error) {
	return l.ReleaseWith(ctx, repoID, id, ReleaseRequest{FencingToken: token}, actor)
}

// ReleaseWith is Release of req, which may carry a requestId: a resend of a
// release that released is answered with that answer (claimrequests.go).
func (l *Ledger) ReleaseWith(ctx context.Context, repoID int64, id gating.ItemID, req ReleaseRequest, actor Actor) (ReleaseResult, error) {
	n, err := parseNumber(id)
	if err != nil {
		return ReleaseResult{}, err
	}
	if err := checkActor(actor); err != nil {
		return ReleaseResult{}, err
	}
	token := req.FencingToken
	k, err := newKeyed(actor, req.RequestID, opRelease, n, releaseBody{token})
	if err != nil {
		return ReleaseResult{}, err
	}
	l.pruneFor(ctx, k)
	out := ReleaseResult{Key: string(id), FencingToken: token}
	err = l.writeTxQ(ctx, func(ctx context.Context, tx Querier) error {
		if replay, err := l.beginKeyed(ctx, tx, repoID, k); err != nil || replay != nil {
			if err == nil {
				out, err = replayedRelease(replay)
			}
			return err
		}
		if err := l.releaseTx(ctx, tx, repoID, n, actor, &out); err != nil {
			return err
		}
		return l.finishKeyed(ctx, tx, repoID, k, n, out, l.releaseUntil(out))
	})
	if err != nil {
		return ReleaseResult{}, err
	}
	if out.Released && !out.Replayed {
		l.wake(itemKey{repoID, n})
	}
	return out, nil
}

// releaseTx is ReleaseWith's decision and write, in tx, into out.
func (l *Ledger) releaseTx(ctx context.Context, tx Querier, repoID int64, n int, actor Actor, out *ReleaseResult) error {
	id, token := gating.IDFor(n), out.FencingToken
	no := func(reason string) { out.Reason = &reason }
	it, err := l.loadHead(ctx, tx, lockUpdate, repoID, n)
	if err != nil {
		return err
	}
	switch {
	case it == nil:
		no(ReasonMissing)
		return nil
	case it.Fence.Token == 0:
		no(ReasonUnclaimed)
		return nil
	case token != it.Fence.Token || !it.Fence.Claimed():
		no(ReasonStale)
		return nil
	}
	if actor.Role == gating.RoleWorker && (it.Grant == nil || !gating.OwnedBy(it.Grant.Owner, actor.Name)) {
		owner := "(unknown)"
		if it.Grant != nil {
			owner = it.Grant.Owner
		}
		return refusal(ReasonOwnerNotAllowed, "worker %s may not release the claim of %s", actor.Name, owner)
	}
	now := l.nowMs()
	if err := l.lockSummary(ctx, tx, repoID, n); err != nil {
		return err
	}
	sum, hadSum, err := readSummary(ctx, tx, repoID, n)
	if err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE ledger_items SET released = $1 WHERE repo_id = $2 AND number = $3 AND released < $1`,
		token, repoID, n); err != nil {
		return fmt.Errorf("release %s: %w", id, err)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE ledger_grants SET released_at = $1 WHERE repo_id = $2 AND number = $3 AND fence = $4`,
		now, repoID, n, token); err != nil {
		return fmt.Errorf("release %s: grant log: %w", id, err)
	}
	if err := extendSummary(ctx, tx, repoID, n, sum, hadSum, func(s gating.TrailSummary) (gating.TrailSummary, bool) { return s.WithRelease(token) }); err != nil {
		return err
	}
	out.Released = true
	return nil
}

// AdoptFence lifts item n's fencing high-water marks (the fence and the
// released fence) to at least fence, when a ledger that lost its grant log
// (a new database, a restore) learns from the comment trail that a token
// that high was held: no token a worker ever held is issued again, and a
// claim the ledger cannot see is taken as ended (its holder's renew is
// refused: fail closed). No grant is made up: the trail's markers stand for
// the custody before the grant log began (trailHolder names the last
// holder). It never lowers the marks, and reports whether it changed
// anything.
func (l *Ledger) AdoptFence(ctx context.Context, repoID int64, n int, fence int64) (bool, error) {
	if fence <= 0 {
		return false, nil
	}
	res, err := l.db.Write.ExecContext(ctx, `UPDATE ledger_items SET
		released = CASE WHEN released < $3 THEN $3 ELSE released END,
		fence = CASE WHEN fence < $3 THEN $3 ELSE fence END
		WHERE repo_id = $1 AND number = $2 AND (fence < $3 OR released < $3)`, repoID, n, fence)
	if err != nil {
		return false, fmt.Errorf("adopt fence %d of #%d: %w", fence, n, err)
	}
	k, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("adopt fence %d of #%d: %w", fence, n, err)
	}
	return k > 0, nil
}

// trailHolder stands in for the grant of an item's fence that the grant
// log lacks (the fence was adopted from the trail): the trusted claim
// marker that announced that token, as a released grant (nil when no
// marker did). It is read-only: the grant log itself is not written.
func trailHolder(id gating.ItemID, f gating.Fence, trail []TrailRecord) *Grant {
	if f.Token == 0 {
		return nil
	}
	cs := make([]gating.TrailComment, len(trail))
	for i, r := range trail {
		cs[i] = r.TrailComment()
	}
	most, claim := gating.TrailFence(id, cs)
	if claim == nil || most != f.Token {
		return nil
	}
	at := claim.At
	return &Grant{Fence: f.Token, Owner: claim.Owner, Region: claim.Region, GrantedAt: at, LeaseExpiresAt: at, ReleasedAt: &at}
}
