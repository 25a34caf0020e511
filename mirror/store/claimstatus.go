package store

import (
	"context"
	"database/sql"

	"github.com/wardenhq/warden/gating"
)

// Claim status (GET /items/{id}/claim).

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
		var ev evidenceRow
		if it != nil && it.Fence.Token > 0 {
			if ev, err = evidenceRowOf(ctx, tx, repoID, n, it.Fence.Token); err != nil {
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

func (l *Ledger) status(id gating.ItemID, it *Item, ev evidenceRow) ClaimStatus {
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
		at := Timestamp(g.GrantedAt)
		st.GrantedAt = &at
	}
	now := l.cfg.Now()
	cv := ev.view(it)
	st.State = string(gating.ClaimStateOf(cv, now, l.cfg.Quarantine))
	if it.Grant != nil && st.Claimed {
		st.LastEvidence = cv.Evidence() // a released claim needs none
	}
	if st.Claimed && it.Grant != nil && it.Grant.LeaseExpiresAt.UnixMilli() > now.UnixMilli() {
		st.IsHeld = true
		exp := Timestamp(it.Grant.LeaseExpiresAt)
		st.LeaseExpiresAtUtc = &exp
	}
	return st
}
