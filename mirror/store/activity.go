package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/wardenhq/warden/gating"
)

// Activity kinds (gating's).
const (
	ActivityPush    = gating.ActPush
	ActivityPull    = gating.ActPull
	ActivityComment = gating.ActComment
)

// Activity is one act seen on GitHub (gating.Act).
type Activity = gating.Act

// ActivityResult is what RecordActivity made of an act: the claims it was
// evidence of work for, and the items whose trail logged it (a push
// elsewhere by a login that posted a prior owner's markers: settle them).
type ActivityResult struct {
	Evidence []PushEvidence
	Logged   []int
}

// liveClaim is a current, unreleased grant, and what the acting login is to
// it.
type liveClaim struct {
	n       int
	fence   int64
	owner   string
	branch  string
	granted time.Time
	holder  bool // the login acts for its holder
	prior   bool // the login posted the claim markers of another owner of the item
}

// RecordActivity records act as evidence of work for the current,
// unreleased claims it shows alive, and logs a push by a login that posted
// an earlier owner's markers on an item now held by another (the trail
// judges it a collision). What counts for a claim:
//
//   - a branch created at the head of the claim's branch (BaseRef), by
//     anyone: push-descendant;
//   - activity on a pull request from the claim's branch, by anyone but
//     warden: pull-request; a comment on that PR by a login acting for the
//     holder: pull-request;
//   - a comment on the item by a login acting for its holder: comment;
//   - a push elsewhere, a pull request from another branch, or a comment
//     elsewhere by a login acting for the holder: push-by-holder,
//     pull-request, comment — only when the login acts for no live claim of
//     another owner (one bot account running several workers shows none of
//     them alive by acting somewhere else).
//
// A push to the claim's own branch is RecordPushEvidence's. Deletions are
// no evidence.
func (l *Ledger) RecordActivity(ctx context.Context, repoID int64, act Activity) (ActivityResult, error) {
	var res ActivityResult
	if !act.MayEvidence() {
		return res, nil
	}
	err := l.writeTx(ctx, func(tx *sql.Tx) error {
		claims, err := liveClaimsFor(ctx, tx, repoID, act.Login)
		if err != nil || len(claims) == 0 {
			return err
		}
		prHead := act.Branch // a comment's PR head, when the delivery carries it
		if act.Kind == ActivityComment && act.PR > 0 && prHead == "" {
			if err := tx.QueryRowContext(ctx, `SELECT head_ref FROM pull_requests WHERE repo_id = $1 AND number = $2`, repoID, act.PR).Scan(&prHead); err != nil && err != sql.ErrNoRows {
				return fmt.Errorf("pull request #%d: %w", act.PR, err)
			}
		}
		views := make([]gating.ActClaim, len(claims))
		for i, c := range claims {
			views[i] = gating.ActClaim{Item: c.n, Owner: c.owner, Branch: c.branch, Holder: c.holder}
		}
		shared := gating.SharedLogin(views)
		for i, c := range claims {
			kind, detail := gating.ActEvidence(act, views[i], prHead, shared)
			if kind != "" {
				ok, err := l.evidenceFor(ctx, tx, repoID, c, act.At, kind, detail)
				if err != nil {
					return err
				}
				if ok {
					res.Evidence = append(res.Evidence, PushEvidence{Item: gating.IDFor(c.n), Fence: c.fence, Owner: c.owner})
				}
			}
			if act.Kind == ActivityPush && c.prior && !c.holder {
				logged, err := l.logForeignPush(ctx, tx, repoID, c.n, act)
				if err != nil {
					return err
				}
				if logged {
					res.Logged = append(res.Logged, c.n)
				}
			}
		}
		return nil
	})
	if err != nil {
		return ActivityResult{}, err
	}
	return res, nil
}

// evidenceFor records evidence for claim c, re-read under the item's lock
// (the claim may have moved since it was listed).
func (l *Ledger) evidenceFor(ctx context.Context, tx *sql.Tx, repoID int64, c liveClaim, at time.Time, kind, detail string) (bool, error) {
	it, err := l.loadHead(ctx, tx, lockUpdate, repoID, c.n)
	if err != nil {
		return false, err
	}
	if it == nil || it.Grant == nil || !it.Fence.Claimed() || it.Fence.Token != c.fence {
		return false, nil
	}
	ms, ok := l.evidenceTime(it.Grant, at)
	if !ok {
		return false, nil
	}
	return true, recordEvidence(ctx, tx, repoID, c.n, c.fence, ms, kind, detail)
}

// logForeignPush logs act (a push to a branch no grant of item n recorded)
// in n's push log, for the trail's collision check, and extends n's
// summary. It reports whether the row is new.
func (l *Ledger) logForeignPush(ctx context.Context, tx *sql.Tx, repoID int64, n int, act Activity) (bool, error) {
	var recorded int
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM ledger_grants WHERE repo_id = $1 AND number = $2 AND branch = $3`, repoID, n, act.Branch).Scan(&recorded); err != nil {
		return false, fmt.Errorf("grants of %s on %s: %w", gating.IDFor(n), act.Branch, err)
	}
	if recorded > 0 {
		return false, nil // RecordBranchPush logs it
	}
	at := act.At
	if at.IsZero() {
		at = l.cfg.Now()
	}
	return l.logPush(ctx, tx, repoID, n, gating.BranchPush{At: msTime(at.UnixMilli()), Branch: act.Branch, Login: act.Login, Rewrite: act.Rewrite})
}

// logPush inserts one push into item n's log under its summary lock and
// extends the summary (WithPush). It reports whether the row is new.
func (l *Ledger) logPush(ctx context.Context, tx *sql.Tx, repoID int64, n int, p gating.BranchPush) (bool, error) {
	if err := l.lockSummary(ctx, tx, repoID, n); err != nil {
		return false, err
	}
	sum, hadSum, err := readSummary(ctx, tx, repoID, n)
	if err != nil {
		return false, err
	}
	r, err := tx.ExecContext(ctx, `INSERT INTO ledger_pushes (repo_id, number, branch, at, login, rewrite) VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (repo_id, number, branch, at, login) DO NOTHING`, repoID, n, p.Branch, p.At.UnixMilli(), p.Login, p.Rewrite)
	if err != nil {
		return false, fmt.Errorf("log a push to %s for %s: %w", p.Branch, gating.IDFor(n), err)
	}
	added, err := r.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("log a push to %s for %s: %w", p.Branch, gating.IDFor(n), err)
	}
	if err := extendSummary(ctx, tx, repoID, n, sum, hadSum, func(s gating.TrailSummary) (gating.TrailSummary, bool) { return s.WithPush(p) }); err != nil {
		return false, err
	}
	return added > 0, nil
}

// liveClaimsFor lists the repository's current, unreleased claims, and for
// each whether login acts for its holder (it posted the current grant's
// claim marker, pushed the claim's branch since the grant, or opened a pull
// request from it) and whether it posted the claim markers of another owner
// of the item. Four queries, whatever the number of claims.
func liveClaimsFor(ctx context.Context, q Querier, repoID int64, login string) ([]liveClaim, error) {
	var claims []liveClaim
	idx := map[int]int{}
	err := eachRow(ctx, q, `SELECT g.number, g.fence, g.owner, g.branch, g.granted_at FROM ledger_grants g
		JOIN ledger_items i ON i.repo_id = g.repo_id AND i.number = g.number AND i.fence = g.fence
		WHERE g.repo_id = $1 AND i.released < i.fence ORDER BY g.number`, []any{repoID}, func(rows *sql.Rows) error {
		var c liveClaim
		var granted int64
		if err := rows.Scan(&c.n, &c.fence, &c.owner, &c.branch, &granted); err != nil {
			return err
		}
		c.granted = msTime(granted)
		idx[c.n] = len(claims)
		claims = append(claims, c)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("live claims: %w", err)
	}
	if login == "" || len(claims) == 0 {
		return claims, nil
	}
	// The claim markers login posted on items under a live claim.
	err = eachRow(ctx, q, `SELECT t.number, t.earliest_body, t.is_agent, t.is_warden, t.has_write FROM trail_comments t
		JOIN ledger_items i ON i.repo_id = t.repo_id AND i.number = t.number
		WHERE t.repo_id = $1 AND t.author = $2 AND i.released < i.fence AND t.earliest_body LIKE '<!-- backlog-worker: claim %'`,
		[]any{repoID, login}, func(rows *sql.Rows) error {
			var n int
			var body string
			var agent, warden, write bool
			if err := rows.Scan(&n, &body, &agent, &warden, &write); err != nil {
				return err
			}
			k, ok := idx[n]
			if !ok || !(agent || warden || write) {
				return nil
			}
			c := &claims[k]
			m, st := gating.ParseMarker(body, gating.IDFor(n))
			switch {
			case st != gating.MarkerValid || m.Kind != gating.KindClaim:
			case m.Owner == c.owner && m.Fence == c.fence:
				c.holder = true
			case m.Owner != c.owner:
				c.prior = true
			}
			return nil
		})
	if err != nil {
		return nil, fmt.Errorf("claim markers by %s: %w", login, err)
	}
	// The branches login pushed, on items under a live claim.
	err = eachRow(ctx, q, `SELECT p.number, p.branch, MAX(p.at) FROM ledger_pushes p
		JOIN ledger_items i ON i.repo_id = p.repo_id AND i.number = p.number
		WHERE p.repo_id = $1 AND p.login = $2 AND i.released < i.fence AND p.rewrite <> 'deleted' GROUP BY p.number, p.branch`,
		[]any{repoID, login}, func(rows *sql.Rows) error {
			var n int
			var branch string
			var at int64
			if err := rows.Scan(&n, &branch, &at); err != nil {
				return err
			}
			if k, ok := idx[n]; ok && claims[k].branch == branch && at >= claims[k].granted.UnixMilli()-pushSlack.Milliseconds() {
				claims[k].holder = true
			}
			return nil
		})
	if err != nil {
		return nil, fmt.Errorf("pushes by %s: %w", login, err)
	}
	// The pull requests login opened from a live claim's branch.
	err = eachRow(ctx, q, `SELECT head_ref FROM pull_requests WHERE repo_id = $1 AND author = $2`, []any{repoID, login}, func(rows *sql.Rows) error {
		var head string
		if err := rows.Scan(&head); err != nil {
			return err
		}
		for k := range claims {
			if head != "" && claims[k].branch == head {
				claims[k].holder = true
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("pull requests by %s: %w", login, err)
	}
	return claims, nil
}

// eachRow runs query with args and calls scan for every row.
func eachRow(ctx context.Context, q Querier, query string, args []any, scan func(*sql.Rows) error) error {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := scan(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}
