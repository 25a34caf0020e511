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
// per grant, the latest such evidence, its kind and what it was in words
// (the report's evidence line):
//
//   - the grant itself (a fence move): its granted_at, implicitly;
//   - a renew (EvidenceRenew), recorded by Renew in its own transaction;
//   - a push to the claim's branch (EvidencePush), recorded by
//     RecordPushEvidence from `push` deliveries;
//   - a branch created at the claim's branch's head (EvidencePushDescendant),
//     a push to another branch by a login acting for the holder
//     (EvidencePushByHolder), activity on a pull request from the claim's
//     branch or by the holder's login (EvidencePullRequest), and a comment by
//     a login acting for the holder (EvidenceComment): RecordActivity.
//
// A login acts for a holder when it posted the claim marker of the current
// grant, pushed the claim's branch since the grant, or opened a pull request
// from it (holderLogins). Evidence only moves forward (a later time replaces
// an earlier one, never the reverse), is never before the grant, and never
// in the future.
const (
	EvidenceGrant          = gating.EvidenceGrant
	EvidenceRenew          = gating.EvidenceRenew
	EvidencePush           = gating.EvidencePush
	EvidencePushDescendant = gating.EvidencePushDescendant
	EvidencePushByHolder   = gating.EvidencePushByHolder
	EvidencePullRequest    = gating.EvidencePullRequest
	EvidenceComment        = gating.EvidenceComment
)

// pushSlack is how far a push may predate the grant it is evidence for:
// GitHub's push times have one-second resolution, the grant milliseconds.
const pushSlack = time.Second

// recordEvidence upserts the evidence of one grant through q (a write
// transaction or the write pool): at replaces the stored time only when it
// is later.
func recordEvidence(ctx context.Context, q Querier, repoID int64, n int, fence int64, at int64, kind, detail string) error {
	_, err := q.ExecContext(ctx, `INSERT INTO ledger_evidence (repo_id, number, fence, last_at, kind, detail) VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (repo_id, number, fence) DO UPDATE SET last_at = excluded.last_at, kind = excluded.kind, detail = excluded.detail
		WHERE excluded.last_at > ledger_evidence.last_at`, repoID, n, fence, at, kind, detail)
	if err != nil {
		return fmt.Errorf("record %s evidence for %s fence %d: %w", kind, gating.IDFor(n), fence, err)
	}
	return nil
}

// RecordEvidence records evidence of work at time at for the grant with
// this fence, if that grant is the item's current, unreleased one (evidence
// for a superseded or released grant changes nothing). at is clamped to the
// ledger's now and to the grant's time. It reports whether it recorded.
func (l *Ledger) RecordEvidence(ctx context.Context, repoID int64, id gating.ItemID, fence int64, at time.Time, kind, detail string) (bool, error) {
	n, err := parseNumber(id)
	if err != nil {
		return false, err
	}
	switch kind {
	case EvidenceRenew, EvidencePush, EvidencePushDescendant, EvidencePushByHolder, EvidencePullRequest, EvidenceComment:
	default:
		return false, refusal(ReasonInvalidRequest, "evidence kind %q is not renew, push, push-descendant, push-by-holder, pull-request or comment", kind)
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
		return recordEvidence(ctx, tx, repoID, n, fence, ms, kind, detail)
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
// is no evidence for it. login is the pusher (for the evidence line; ""
// unknown). It returns the claims it counted for.
func (l *Ledger) RecordPushEvidence(ctx context.Context, repoID int64, branch string, at time.Time, login string) ([]PushEvidence, error) {
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
			if err := recordEvidence(ctx, tx, repoID, n, it.Fence.Token, ms, EvidencePush, gating.PushEvidenceDetail(branch, login)); err != nil {
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
// takeover collisions and, with rewrite — gating.RewriteForced or
// RewriteDeleted — for prior-branch-rewritten). The same push logged twice
// is one row. It returns the items it logged for.
func (l *Ledger) RecordBranchPush(ctx context.Context, repoID int64, branch string, at time.Time, login, rewrite string) ([]int, error) {
	if branch == "" {
		return nil, nil
	}
	if at.IsZero() {
		at = l.cfg.Now()
	}
	var nums []int
	err := l.writeTx(ctx, func(tx *sql.Tx) error {
		err := eachRow(ctx, tx, `SELECT DISTINCT number FROM ledger_grants WHERE repo_id = $1 AND branch = $2 ORDER BY number`, []any{repoID, branch}, func(rows *sql.Rows) error {
			var n int
			if err := rows.Scan(&n); err != nil {
				return err
			}
			nums = append(nums, n)
			return nil
		})
		if err != nil {
			return fmt.Errorf("grants on branch %s: %w", branch, err)
		}
		p := gating.BranchPush{At: msTime(at.UnixMilli()), Branch: branch, Login: login, Rewrite: rewrite}
		for _, n := range nums {
			if _, err := l.logPush(ctx, tx, repoID, n, p); err != nil {
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

// evidenceRow is one grant's recorded evidence of work (at: unix ms, 0 for
// none).
type evidenceRow struct {
	at           int64
	kind, detail string
}

// view is the item's claim as gating sees it with this evidence: its kind
// and detail only when it is later than the grant (else the grant is the
// evidence).
func (e evidenceRow) view(it *Item) gating.ClaimView {
	cv := claimView(it, e.at)
	if it.Grant != nil && e.at > it.Grant.GrantedAt.UnixMilli() {
		cv.EvidenceKind, cv.EvidenceDetail = e.kind, e.detail
	}
	return cv
}

// evidenceRowOf reads the recorded evidence of one grant (zero when none).
func evidenceRowOf(ctx context.Context, q Querier, repoID int64, n int, fence int64) (evidenceRow, error) {
	var e evidenceRow
	err := q.QueryRowContext(ctx, `SELECT last_at, kind, detail FROM ledger_evidence WHERE repo_id = $1 AND number = $2 AND fence = $3`,
		repoID, n, fence).Scan(&e.at, &e.kind, &e.detail)
	if err == sql.ErrNoRows {
		return evidenceRow{}, nil
	}
	if err != nil {
		return evidenceRow{}, fmt.Errorf("evidence of %s fence %d: %w", gating.IDFor(n), fence, err)
	}
	return e, nil
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
