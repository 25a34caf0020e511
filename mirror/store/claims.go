package store

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"time"
	"unicode"
	"unicode/utf8"

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

// ---- request checks ----

func checkOwner(owner string) error {
	n := utf8.RuneCountInString(owner)
	if !utf8.ValidString(owner) || n < 1 || n > 200 {
		return refusal(ReasonInvalidRequest, "owner %q must be 1 to 200 characters of UTF-8", owner)
	}
	for _, r := range owner {
		if unicode.IsSpace(r) || !unicode.IsPrint(r) {
			return refusal(ReasonInvalidRequest, "owner %q contains a space or a control character", owner)
		}
	}
	return nil
}

func checkSeconds(field string, v *float64, max float64) error {
	if v == nil {
		return nil
	}
	if math.IsNaN(*v) || math.IsInf(*v, 0) || *v < 0 {
		return refusal(ReasonInvalidRequest, "%s %v must be a non-negative number of seconds", field, *v)
	}
	if max > 0 && *v > max {
		return refusal(ReasonInvalidRequest, "%s %v is more than %v", field, *v, max)
	}
	return nil
}

// checkClaimRequest is every check of a claim that reads nothing.
func checkClaimRequest(req ClaimRequest, actor Actor) error {
	if err := checkActor(actor); err != nil {
		return err
	}
	if err := checkOwner(req.Owner); err != nil {
		return err
	}
	switch req.Purpose {
	case "":
	case "maintenance":
		if !gating.Authors(actor.Role) {
			return refusal(ReasonRoleNotAllowed, "maintenance claims are for pm, human and warden; this token is %s", actor.Role)
		}
	default:
		return refusal(ReasonInvalidRequest, "purpose %q is neither empty nor \"maintenance\"", req.Purpose)
	}
	if actor.Role == gating.RoleWorker && !gating.OwnedBy(req.Owner, actor.Name) {
		return refusal(ReasonOwnerNotAllowed, "worker %s claims only under owners beginning with %q; asked for %q", actor.Name, actor.Name+"/", req.Owner)
	}
	if len(req.Branch) > maxBranch || !utf8.ValidString(req.Branch) ||
		containsFunc(req.Branch, func(r rune) bool { return unicode.IsSpace(r) || !unicode.IsPrint(r) }) {
		return refusal(ReasonInvalidRequest, "branch %q must be at most %d printable characters without spaces", req.Branch, maxBranch)
	}
	if err := checkSeconds("leaseSeconds", req.LeaseSeconds, 0); err != nil {
		return err
	}
	return checkSeconds("maxWaitSeconds", req.MaxWaitSeconds, gating.MaxWait.Seconds())
}

func containsFunc(s string, f func(rune) bool) bool {
	for _, r := range s {
		if f(r) {
			return true
		}
	}
	return false
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
	lease := gating.ClampLease(req.LeaseSeconds, l.cfg.LeaseDefault, l.cfg.LeaseMax)
	var wait time.Duration
	if req.MaxWaitSeconds != nil {
		wait = time.Duration(*req.MaxWaitSeconds * float64(time.Second))
	}
	if wait <= 0 {
		a, err := l.claimOnce(ctx, repoID, n, req, lease, false)
		return a.res, err
	}
	return l.claimWaiting(ctx, repoID, n, req, lease, wait)
}

// attempt is the outcome of one try at a claim.
type attempt struct {
	res       ClaimResult
	contended bool
	holderExp int64 // the holder's lease expiry (unix ms) when contended; 0 unknown
}

// claimOnce tries once, in one write transaction. head says the caller is
// the head of the item's wait queue (and may take a claim others wait for).
func (l *Ledger) claimOnce(ctx context.Context, repoID int64, n int, req ClaimRequest, lease time.Duration, head bool) (attempt, error) {
	var a attempt
	id := gating.IDFor(n)
	err := l.writeTxQ(ctx, func(ctx context.Context, tx Querier) error {
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
			snap, j, err := l.judgeSnapshot(ctx, tx, repo, l.settingsFor(ctx, repo), it)
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
		a.res = grantedResult(id, fence, req.Owner, l.cfg.Region, exp, lease)
		return nil
	})
	if err != nil {
		return attempt{}, err
	}
	return a, nil
}

// ---- renew ----

// Renew extends the lease of the claim holding token, which must be the
// item's current fence, unreleased, with its lease unexpired; else Granted
// false, "superseded" ("missing" for a missing item). The new lease is
// now + the clamped length; an omitted length is the default, however long
// the lease it replaces (the protocol's trap, reported as leaseShortened).
func (l *Ledger) Renew(ctx context.Context, repoID int64, id gating.ItemID, token int64, leaseSeconds *float64, actor Actor) (ClaimResult, error) {
	n, err := parseNumber(id)
	if err != nil {
		return ClaimResult{}, err
	}
	if err := checkActor(actor); err != nil {
		return ClaimResult{}, err
	}
	if err := checkSeconds("leaseSeconds", leaseSeconds, 0); err != nil {
		return ClaimResult{}, err
	}
	lease := gating.ClampLease(leaseSeconds, l.cfg.LeaseDefault, l.cfg.LeaseMax)
	var out ClaimResult
	err = l.writeTxQ(ctx, func(ctx context.Context, tx Querier) error {
		if _, err := servedRepo(ctx, tx, repoID); err != nil {
			return err
		}
		it, err := l.loadHead(ctx, tx, lockUpdate, repoID, n)
		if err != nil {
			return err
		}
		if it == nil {
			out = notGranted(id, ReasonMissing)
			return nil
		}
		g := it.Grant
		if actor.Role == gating.RoleWorker && token == it.Fence.Token && g != nil && !gating.OwnedBy(g.Owner, actor.Name) {
			return refusal(ReasonOwnerNotAllowed, "worker %s may not renew the claim of %s", actor.Name, g.Owner)
		}
		now := l.nowMs()
		if token <= 0 || token != it.Fence.Token || !it.Fence.Claimed() || g == nil || g.LeaseExpiresAt.UnixMilli() <= now {
			out = notGranted(id, ReasonSuperseded)
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
		if err := recordEvidence(ctx, tx, repoID, n, token, now, EvidenceRenew); err != nil {
			return err
		}
		out = grantedResult(id, token, g.Owner, g.Region, exp, lease)
		p := Timestamp(msTime(prev))
		shortened := exp < prev
		out.PreviousLeaseExpiresAtUtc, out.LeaseShortened = &p, &shortened
		return nil
	})
	if err != nil {
		return ClaimResult{}, err
	}
	return out, nil
}

// ---- release ----

// Release ends the claim holding token. It is honoured only for the item's
// current fence presented exactly and not yet released: the released mark
// becomes the fence and the grant log row its release time. Otherwise
// Released false: "stale", "missing" or "unclaimed". Releasing needs no
// served repository (letting go is always harmless).
func (l *Ledger) Release(ctx context.Context, repoID int64, id gating.ItemID, token int64, actor Actor) (ReleaseResult, error) {
	n, err := parseNumber(id)
	if err != nil {
		return ReleaseResult{}, err
	}
	if err := checkActor(actor); err != nil {
		return ReleaseResult{}, err
	}
	out := ReleaseResult{Key: string(id), FencingToken: token}
	no := func(reason string) { out.Reason = &reason }
	released := false
	err = l.writeTxQ(ctx, func(ctx context.Context, tx Querier) error {
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
		released = true
		return nil
	})
	if err != nil {
		return ReleaseResult{}, err
	}
	if released {
		l.wake(itemKey{repoID, n})
	}
	return out, nil
}

// ---- status ----

// Status reports an item's claim state (read-only; the lease fields are
// advisory). State is gating.ClaimStateOf over the current grant and its
// holder's last evidence of work: held, lapsed (quarantined), abandoned,
// released, or "" when never claimed. A missing item is Exists false, not an
// error.
func (l *Ledger) Status(ctx context.Context, repoID int64, id gating.ItemID) (ClaimStatus, error) {
	n, err := parseNumber(id)
	if err != nil {
		return ClaimStatus{}, err
	}
	var st ClaimStatus
	err = l.readTx(ctx, func(tx *sql.Tx) error {
		it, err := l.loadHead(ctx, tx, lockNone, repoID, n)
		if err != nil {
			return err
		}
		var ev int64
		if it != nil && it.Fence.Token > 0 {
			if ev, _, err = evidenceOf(ctx, tx, repoID, n, it.Fence.Token); err != nil {
				return err
			}
			if it.Grant == nil {
				// A fence adopted from the trail: its marker names the holder.
				trail, err := trailOf(ctx, tx, repoID, n)
				if err != nil {
					return err
				}
				it.Grant = trailHolder(id, it.Fence, trail)
			}
		}
		st = l.status(id, it, ev)
		return nil
	})
	if err != nil {
		return ClaimStatus{}, err
	}
	return st, nil
}

func (l *Ledger) status(id gating.ItemID, it *Item, evidenceMs int64) ClaimStatus {
	st := ClaimStatus{Key: string(id)}
	if it == nil {
		return st
	}
	st.Exists = true
	f := it.Fence
	if f.Token == 0 {
		return st
	}
	tok := f.Token
	st.FencingToken = &tok
	if f.Released > 0 {
		rel := f.Released
		st.ReleasedFencingToken = &rel
	}
	st.Claimed = f.Claimed()
	if g := it.Grant; g != nil {
		owner, region := g.Owner, g.Region
		st.Owner, st.Region = &owner, &region
	}
	now := l.cfg.Now()
	st.State = string(gating.ClaimStateOf(claimView(it, evidenceMs), now, l.cfg.Quarantine))
	if st.Claimed && it.Grant != nil && it.Grant.LeaseExpiresAt.UnixMilli() > now.UnixMilli() {
		st.IsHeld = true
		exp := Timestamp(it.Grant.LeaseExpiresAt)
		st.LeaseExpiresAtUtc = &exp
	}
	return st
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
