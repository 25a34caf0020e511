package store

import (
	"context"
	"database/sql"
	"fmt"
	"hash/fnv"
	"slices"

	"github.com/wardenhq/warden/gating"
)

// The best ready item in one call (POST /ready/claim), the lock behind the
// per-owner cap, and the record of defaulted leases (CONTRACT.md §11).

// NextResult is ClaimNext's answer: the grant (its Key is the item), or
// why none was made, with the refusals of the candidates tried before it.
type NextResult struct {
	ClaimResult
	Tried []ClaimResult
}

// ClaimNext claims the first of ids that is granted: the caller's order
// (gating.ClaimCandidates of the ready set), tried one by one, each in a
// claim transaction of its own that judges the item again, as Claim does
// without a wait; so a concurrent claimant never gets the same item, and a
// candidate taken since the caller read the ready set is simply passed
// over. It stops at the first grant, or at a refusal about the owner
// rather than the item (not-ready owner-cap: every candidate would answer
// it). req takes an owner, a lease and a requestId, nothing else.
//
// With a requestId a resend is answered with the first send's grant while
// its lease lasts, whichever item that was and whatever the ready set is
// now (the record keys the owner and the lease, not the item). When
// nothing is granted the answer (Key empty) is contended if a candidate
// was (another claimant won it: asking again may find another), else the
// last refusal; with no candidate at all, not-ready with no exclusion (the
// caller says why: the ready set is empty).
func (l *Ledger) ClaimNext(ctx context.Context, repoID int64, ids []gating.ItemID, req ClaimRequest, actor Actor) (NextResult, error) {
	if req.MaxWaitSeconds != nil || req.Branch != "" || req.Purpose != "" {
		return NextResult{}, refusal(ReasonInvalidRequest, "a claim of the best ready item takes an owner, a lease and a requestId, no wait, branch or purpose")
	}
	if err := checkClaimRequest(req, actor); err != nil {
		return NextResult{}, err
	}
	k, err := claimKeyed(actor, opNext, 0, req)
	if err != nil {
		return NextResult{}, err
	}
	l.pruneFor(ctx, k)
	if b, err := l.lookupKeyed(ctx, repoID, k); err != nil || b != nil {
		if err != nil {
			return NextResult{}, err
		}
		r, err := replayedClaim(b)
		return NextResult{ClaimResult: r, Tried: []ClaimResult{}}, err
	}
	lease := gating.ClampLease(req.LeaseSeconds, l.cfg.LeaseDefault, l.cfg.LeaseMax)
	out := NextResult{Tried: []ClaimResult{}}
	for _, id := range ids {
		n, err := parseNumber(id)
		if err != nil {
			return NextResult{}, err
		}
		var kn *keyed
		if k != nil {
			c := *k
			c.number = n
			kn = &c
		}
		a, err := l.claimOnce(ctx, repoID, n, req, lease, false, kn)
		if err != nil {
			return NextResult{}, err
		}
		if a.res.Granted {
			out.ClaimResult = a.res
			return out, nil
		}
		out.Tried = append(out.Tried, a.res)
		if a.res.Exclusion != nil && *a.res.Exclusion == gating.ExOwnerCap {
			break
		}
	}
	out.ClaimResult = nextRefusal(out.Tried)
	return out, nil
}

// nextRefusal is ClaimNext's answer when no candidate was granted.
func nextRefusal(tried []ClaimResult) ClaimResult {
	if len(tried) == 0 {
		reason := ReasonNotReady
		return ClaimResult{Reason: &reason}
	}
	for _, r := range tried {
		if r.Reason != nil && *r.Reason == ReasonContended {
			return notGranted("", ReasonContended)
		}
	}
	last := tried[len(tried)-1]
	last.Key = ""
	return last
}

// lockOwner serialises, on PostgreSQL, the claims of one owner's principal
// (gating.OwnerPrincipal) in a repository while max_claims_per_owner is
// set, so that two claims racing for different items cannot both pass the
// cap: a transaction-scoped advisory lock, taken before the claim reads
// what is in flight (on SQLite the one writer serialises every claim).
func (l *Ledger) lockOwner(ctx context.Context, q Querier, repoID int64, owner string, set gating.Settings) error {
	if !l.pg || set.MaxClaimsPerOwner <= 0 {
		return nil
	}
	h := fnv.New64a()
	fmt.Fprintf(h, "warden-owner-cap\x00%d\x00%s", repoID, gating.OwnerPrincipal(owner))
	if _, err := q.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(h.Sum64())); err != nil {
		return fmt.Errorf("lock the claims of %s: %w", gating.OwnerPrincipal(owner), err)
	}
	return nil
}

// markLease records, in the transaction of a grant (via opClaim) or a
// renew (opRenew) of item n's fence, whether its lease is the default one
// (grant_leases): a row while it is, none once a renew names its lease.
func markLease(ctx context.Context, q Querier, repoID int64, n int, fence int64, defaulted bool, via string, now int64) error {
	var err error
	switch {
	case defaulted:
		_, err = q.ExecContext(ctx, `INSERT INTO grant_leases (repo_id, number, fence, via, at) VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (repo_id, number, fence) DO UPDATE SET via = excluded.via, at = excluded.at`, repoID, n, fence, via, now)
	case via == opRenew:
		_, err = q.ExecContext(ctx, `DELETE FROM grant_leases WHERE repo_id = $1 AND number = $2 AND fence = $3`, repoID, n, fence)
	}
	if err != nil {
		return fmt.Errorf("%s %s: record whether the lease was defaulted: %w", via, gating.IDFor(n), err)
	}
	return nil
}

// LeaseDefaults lists the claims of rs in flight (fence above the released
// mark) whose current lease is the default one: granted, or last renewed,
// without leaseSeconds. Read after rs; a claim whose fence moved since is
// left out.
func (l *Ledger) LeaseDefaults(ctx context.Context, rs *Snapshot) ([]gating.LeaseDefault, error) {
	fences := map[int]int64{}
	nums := []int{}
	for id, it := range rs.Items {
		if it.Fence.Claimed() {
			fences[id.Number()] = it.Fence.Token
			nums = append(nums, id.Number())
		}
	}
	if len(nums) == 0 {
		return nil, nil
	}
	slices.Sort(nums)
	var out []gating.LeaseDefault
	err := eachChunk(ctx, l.db.Read, rs.Repo.ID, nums, `SELECT number, fence, via, at FROM grant_leases WHERE repo_id = $1`, "number", func(rows *sql.Rows) error {
		var n int
		var fence, at int64
		var via string
		if err := rows.Scan(&n, &fence, &via, &at); err != nil {
			return err
		}
		if fences[n] == fence {
			out = append(out, gating.LeaseDefault{Item: gating.IDFor(n), Fence: fence, Via: via, At: msTime(at)})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("defaulted leases of %s: %w", rs.Repo.FullName, err)
	}
	slices.SortFunc(out, func(a, b gating.LeaseDefault) int { return a.Item.Number() - b.Item.Number() })
	return out, nil
}

// Report is rs's "where are we" report over r (rs.Ready()) with what the
// snapshot does not carry: the in-flight claims whose lease was defaulted
// (gating.Report.NoteLeaseDefaults). When those cannot be read the report
// comes without them, with the error.
func (l *Ledger) Report(ctx context.Context, rs *Snapshot, r gating.Result) (gating.Report, error) {
	rep := rs.Report(r)
	ds, err := l.LeaseDefaults(ctx, rs)
	if err != nil {
		return rep, err
	}
	rep.NoteLeaseDefaults(ds)
	return rep, nil
}
