package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/wardenhq/warden/gating"
)

// Evidence of work (CONTRACT.md §9, PROTOCOL.md "Claims"): a lapsed claim
// stays quarantined while its holder shows it is alive. The ledger records,
// per grant, the latest such evidence and its kind:
//
//   - the grant itself (a fence move): its granted_at, implicitly;
//   - a renew (EvidenceRenew), recorded by Renew in its own transaction;
//   - a push to the claim's branch (EvidencePush), recorded by
//     RecordPushEvidence from `push` deliveries;
//   - a comment by the holder's login (EvidenceComment): HandleIssueComment
//     calls RecordEvidence with the comment's updated_at (its created_at
//     unless edited) when the commenter posted the current grant's claim
//     marker.
//
// Evidence only moves forward (a later time replaces an earlier one, never
// the reverse), is never before the grant, and never in the future.
const (
	EvidenceGrant   = "grant"
	EvidenceRenew   = "renew"
	EvidencePush    = "push"
	EvidenceComment = "comment"
)

// pushSlack is how far a push may predate the grant it is evidence for:
// GitHub's push times have one-second resolution, the grant milliseconds.
const pushSlack = time.Second

// recordEvidence upserts the evidence of one grant through q (a write
// transaction or the write pool): at replaces the stored time only when it
// is later.
func recordEvidence(ctx context.Context, q Querier, repoID int64, n int, fence int64, at int64, kind string) error {
	_, err := q.ExecContext(ctx, `INSERT INTO ledger_evidence (repo_id, number, fence, last_at, kind) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (repo_id, number, fence) DO UPDATE SET last_at = excluded.last_at, kind = excluded.kind
		WHERE excluded.last_at > ledger_evidence.last_at`, repoID, n, fence, at, kind)
	if err != nil {
		return fmt.Errorf("record %s evidence for %s fence %d: %w", kind, gating.IDFor(n), fence, err)
	}
	return nil
}

// RecordEvidence records evidence of work at time at for the grant with
// this fence, if that grant is the item's current, unreleased one (evidence
// for a superseded or released grant changes nothing). at is clamped to the
// ledger's now and to the grant's time. It reports whether it recorded.
func (l *Ledger) RecordEvidence(ctx context.Context, repoID int64, id gating.ItemID, fence int64, at time.Time, kind string) (bool, error) {
	n, err := parseNumber(id)
	if err != nil {
		return false, err
	}
	switch kind {
	case EvidenceRenew, EvidencePush, EvidenceComment:
	default:
		return false, refusal(ReasonInvalidRequest, "evidence kind %q is not renew, push or comment", kind)
	}
	recorded := false
	err = l.writeTx(ctx, func(tx *sql.Tx) error {
		it, err := l.loadHead(ctx, tx, lockUpdate, repoID, n)
		if err != nil || it == nil || it.Grant == nil || it.Fence.Token != fence || !it.Fence.Claimed() {
			return err
		}
		ms, ok := l.evidenceTime(it.Grant, at)
		if !ok {
			return nil
		}
		recorded = true
		return recordEvidence(ctx, tx, repoID, n, fence, ms, kind)
	})
	return recorded, err
}

// evidenceTime clamps at to [granted, now] (unix ms); false when at is
// before the grant (it is no evidence for this grant).
func (l *Ledger) evidenceTime(g *Grant, at time.Time) (int64, bool) {
	now := l.nowMs()
	ms := at.UnixMilli()
	if at.IsZero() || ms > now {
		ms = now
	}
	granted := g.GrantedAt.UnixMilli()
	if ms < granted-pushSlack.Milliseconds() {
		return 0, false
	}
	return max(ms, granted), true
}

// PushEvidence is one claim a push was evidence of work for.
type PushEvidence struct {
	Item  gating.ItemID `json:"item"`
	Fence int64         `json:"fencingToken"`
	Owner string        `json:"owner"`
}

// RecordPushEvidence records a push to branch at time at as evidence of
// work for every current, unreleased claim of the repository whose recorded
// branch is branch (held or lapsed; an abandoned claim whose holder pushes
// again is lapsed again: the holder is alive). A push older than a claim
// is no evidence for it. It returns the claims it counted for.
func (l *Ledger) RecordPushEvidence(ctx context.Context, repoID int64, branch string, at time.Time) ([]PushEvidence, error) {
	out := []PushEvidence{}
	if branch == "" {
		return out, nil
	}
	err := l.writeTx(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT g.number FROM ledger_grants g
			JOIN ledger_items i ON i.repo_id = g.repo_id AND i.number = g.number AND i.fence = g.fence
			WHERE g.repo_id = $1 AND g.branch = $2 AND i.released < i.fence ORDER BY g.number`, repoID, branch)
		if err != nil {
			return fmt.Errorf("claims on branch %s: %w", branch, err)
		}
		var nums []int
		for rows.Next() {
			var n int
			if err := rows.Scan(&n); err != nil {
				rows.Close()
				return fmt.Errorf("claims on branch %s: %w", branch, err)
			}
			nums = append(nums, n)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("claims on branch %s: %w", branch, err)
		}
		for _, n := range nums {
			// Re-read under the item's lock: the claim may have moved since.
			it, err := l.loadHead(ctx, tx, lockUpdate, repoID, n)
			if err != nil {
				return err
			}
			if it == nil || it.Grant == nil || !it.Fence.Claimed() || it.Grant.Branch != branch {
				continue
			}
			ms, ok := l.evidenceTime(it.Grant, at)
			if !ok {
				continue
			}
			if err := recordEvidence(ctx, tx, repoID, n, it.Fence.Token, ms, EvidencePush); err != nil {
				return err
			}
			out = append(out, PushEvidence{Item: it.ID, Fence: it.Fence.Token, Owner: it.Grant.Owner})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// RecordBranchPush logs a push to branch at time at by login for every
// item that has ever had a grant on that branch (the trail reads it for
// takeover collisions). The same push logged twice is one row. It returns
// the items it logged for.
func (l *Ledger) RecordBranchPush(ctx context.Context, repoID int64, branch string, at time.Time, login string) ([]int, error) {
	if branch == "" {
		return nil, nil
	}
	if at.IsZero() {
		at = l.cfg.Now()
	}
	var nums []int
	err := l.writeTx(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT DISTINCT number FROM ledger_grants WHERE repo_id = $1 AND branch = $2 ORDER BY number`, repoID, branch)
		if err != nil {
			return fmt.Errorf("grants on branch %s: %w", branch, err)
		}
		for rows.Next() {
			var n int
			if err := rows.Scan(&n); err != nil {
				rows.Close()
				return fmt.Errorf("grants on branch %s: %w", branch, err)
			}
			nums = append(nums, n)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("grants on branch %s: %w", branch, err)
		}
		p := gating.BranchPush{At: msTime(at.UnixMilli()), Branch: branch, Login: login}
		for _, n := range nums {
			if err := l.lockSummary(ctx, tx, repoID, n); err != nil {
				return err
			}
			sum, hadSum, err := readSummary(ctx, tx, repoID, n)
			if err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO ledger_pushes (repo_id, number, branch, at, login) VALUES ($1, $2, $3, $4, $5)
				ON CONFLICT (repo_id, number, branch, at, login) DO NOTHING`, repoID, n, branch, at.UnixMilli(), login); err != nil {
				return fmt.Errorf("log a push to %s for %s: %w", branch, gating.IDFor(n), err)
			}
			if err := extendSummary(ctx, tx, repoID, n, sum, hadSum, func(s gating.TrailSummary) (gating.TrailSummary, bool) { return s.WithPush(p) }); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return nums, nil
}

// evidenceOf reads the recorded evidence of one grant (unix ms and kind; 0
// and "" when none).
func evidenceOf(ctx context.Context, q Querier, repoID int64, n int, fence int64) (int64, string, error) {
	var at int64
	var kind string
	err := q.QueryRowContext(ctx, `SELECT last_at, kind FROM ledger_evidence WHERE repo_id = $1 AND number = $2 AND fence = $3`,
		repoID, n, fence).Scan(&at, &kind)
	if err == sql.ErrNoRows {
		return 0, "", nil
	}
	if err != nil {
		return 0, "", fmt.Errorf("evidence of %s fence %d: %w", gating.IDFor(n), fence, err)
	}
	return at, kind, nil
}

// claimView is an item's current grant as gating sees it: the fence, the
// grant, and the holder's last evidence of work (at least the grant's
// time). evidenceMs is the recorded evidence (0: none).
func claimView(it *Item, evidenceMs int64) gating.ClaimView {
	cv := gating.ClaimView{Fence: it.Fence.Token, Released: it.Fence.Released}
	if g := it.Grant; g != nil {
		cv.Owner, cv.Region, cv.Branch, cv.Purpose = g.Owner, g.Region, g.Branch, g.Purpose
		cv.GrantedAt, cv.LeaseExpiresAt = g.GrantedAt, g.LeaseExpiresAt
		cv.LastEvidence = g.GrantedAt
		if evidenceMs > g.GrantedAt.UnixMilli() {
			cv.LastEvidence = msTime(evidenceMs)
		}
	}
	return cv
}

// LastEvidence is the latest evidence of work recorded for the grant with
// fence on item n: when (Unix milliseconds, 0 for none) and its kind.
func (l *Ledger) LastEvidence(ctx context.Context, repoID int64, n int, fence int64) (int64, string, error) {
	return evidenceOf(ctx, l.db.Read, repoID, n, fence)
}
