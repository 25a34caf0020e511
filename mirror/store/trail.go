package store

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/wardenhq/warden/gating"
)

// WorkerMarkerStart is what a body starts with when it is (or tries to be) a
// backlog-worker marker: the only comments whose author's write access is
// looked up.
const WorkerMarkerStart = "<!-- backlog-worker:"

// TrailRecord is one comment of an item's trail as stored.
type TrailRecord struct {
	CommentID    int64     `json:"commentId"`
	Author       string    `json:"author"`
	AuthorType   string    `json:"authorType"`
	CreatedAt    time.Time `json:"createdAt"`
	EarliestBody string    `json:"earliestBody"`
	EarliestAt   time.Time `json:"earliestAt"`
	CurrentBody  string    `json:"currentBody"`
	CurrentAt    time.Time `json:"currentAt"`
	Edited       bool      `json:"edited"`
	Deleted      bool      `json:"deleted"`
	IsAgent      bool      `json:"isAgent"`
	IsWarden     bool      `json:"isWarden"`
	HasWrite     bool      `json:"hasWrite"`
}

// TrailComment is the record as gating.EvaluateTrail reads it.
func (r TrailRecord) TrailComment() gating.TrailComment {
	c := gating.TrailComment{ID: r.CommentID, Author: r.Author, CreatedAt: r.CreatedAt,
		AuthorIsAgent: r.IsAgent, AuthorIsWarden: r.IsWarden, AuthorHasWrite: r.HasWrite,
		Body: r.EarliestBody, Edited: r.Edited, Deleted: r.Deleted}
	if r.Edited && r.CurrentBody != r.EarliestBody {
		c.CurrentBody = r.CurrentBody
	}
	return c
}

// RecordTrailComment merges one delivery's view of a comment into the trail
// (see trailMigrations): the first delivery inserts the row; later ones move
// the earliest text back in time only, the current text forward only, and
// only set the flags. Handling the same delivery twice changes nothing. It
// reports whether anything changed.
func (l *Ledger) RecordTrailComment(ctx context.Context, repoID int64, number int, r TrailRecord) (bool, error) {
	changed := false
	err := l.writeTx(ctx, func(tx *sql.Tx) error {
		if err := l.lockSummary(ctx, tx, repoID, number); err != nil {
			return err
		}
		sum, hadSum, err := readSummary(ctx, tx, repoID, number)
		if err != nil {
			return err
		}
		old, err := trailRow(ctx, tx, repoID, number, r.CommentID)
		if err != nil {
			return err
		}
		// The summary, extended by this comment as recorded now (written
		// after the comment, at the generation its write left).
		extend := func(before *TrailRecord, after TrailRecord) error {
			var was *gating.TrailComment
			if before != nil {
				c := before.TrailComment()
				was = &c
			}
			now := stored(after).TrailComment() // as a whole read will see it
			return extendSummary(ctx, tx, repoID, number, sum, hadSum, func(s gating.TrailSummary) (gating.TrailSummary, bool) {
				return s.WithComment(was, now, gating.IDFor(number))
			})
		}
		if old == nil {
			changed = true
			_, err := tx.ExecContext(ctx, `INSERT INTO trail_comments (repo_id, number, comment_id, author, author_type, created_at,
				earliest_body, earliest_at, current_body, current_at, edited, deleted, is_agent, is_warden, has_write, recorded_at)
				VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)`,
				repoID, number, r.CommentID, r.Author, r.AuthorType, r.CreatedAt.UnixMilli(),
				r.EarliestBody, r.EarliestAt.UnixMilli(), r.CurrentBody, r.CurrentAt.UnixMilli(),
				b2i(r.Edited), b2i(r.Deleted), b2i(r.IsAgent), b2i(r.IsWarden), b2i(r.HasWrite), l.nowMs())
			if err != nil {
				return fmt.Errorf("record comment %d on %s: %w", r.CommentID, gating.IDFor(number), err)
			}
			return extend(nil, r)
		}
		m := mergeTrail(*old, r)
		if m == *old {
			return nil
		}
		changed = true
		_, err = tx.ExecContext(ctx, `UPDATE trail_comments SET earliest_body = $1, earliest_at = $2, current_body = $3, current_at = $4,
			edited = $5, deleted = $6, is_agent = $7, is_warden = $8, has_write = $9
			WHERE repo_id = $10 AND number = $11 AND comment_id = $12`,
			m.EarliestBody, m.EarliestAt.UnixMilli(), m.CurrentBody, m.CurrentAt.UnixMilli(),
			b2i(m.Edited), b2i(m.Deleted), b2i(m.IsAgent), b2i(m.IsWarden), b2i(m.HasWrite), repoID, number, r.CommentID)
		if err != nil {
			return fmt.Errorf("update comment %d on %s: %w", r.CommentID, gating.IDFor(number), err)
		}
		return extend(old, m)
	})
	return changed, err
}

// stored is r as its row reads back: its times in unix milliseconds, UTC.
func stored(r TrailRecord) TrailRecord {
	r.CreatedAt, r.EarliestAt, r.CurrentAt = msTime(r.CreatedAt.UnixMilli()), msTime(r.EarliestAt.UnixMilli()), msTime(r.CurrentAt.UnixMilli())
	return r
}

// mergeTrail merges a delivery's view n into the stored row o.
func mergeTrail(o, n TrailRecord) TrailRecord {
	m := o
	if n.EarliestAt.Before(o.EarliestAt) {
		m.EarliestBody, m.EarliestAt = n.EarliestBody, n.EarliestAt
	}
	if !n.CurrentAt.Before(o.CurrentAt) {
		m.CurrentBody, m.CurrentAt = n.CurrentBody, n.CurrentAt
	}
	m.Edited = o.Edited || n.Edited || m.CurrentBody != m.EarliestBody
	m.Deleted = o.Deleted || n.Deleted
	m.IsAgent = o.IsAgent || n.IsAgent
	m.IsWarden = o.IsWarden || n.IsWarden
	m.HasWrite = o.HasWrite || n.HasWrite
	return m
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

const trailSelect = `SELECT number, comment_id, author, author_type, created_at, earliest_body, earliest_at, current_body, current_at,
	edited, deleted, is_agent, is_warden, has_write FROM trail_comments`

func scanTrail(rows interface{ Scan(...any) error }) (int, TrailRecord, error) {
	var n int
	var r TrailRecord
	var created, eat, cat, edited, deleted, agent, warden, write int64
	if err := rows.Scan(&n, &r.CommentID, &r.Author, &r.AuthorType, &created, &r.EarliestBody, &eat, &r.CurrentBody, &cat,
		&edited, &deleted, &agent, &warden, &write); err != nil {
		return 0, r, err
	}
	r.CreatedAt, r.EarliestAt, r.CurrentAt = msTime(created), msTime(eat), msTime(cat)
	r.Edited, r.Deleted, r.IsAgent, r.IsWarden, r.HasWrite = edited != 0, deleted != 0, agent != 0, warden != 0, write != 0
	return n, r, nil
}

func trailRow(ctx context.Context, q Querier, repoID int64, number int, id int64) (*TrailRecord, error) {
	row := q.QueryRowContext(ctx, trailSelect+` WHERE repo_id = $1 AND number = $2 AND comment_id = $3`, repoID, number, id)
	_, r, err := scanTrail(row)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read comment %d on %s: %w", id, gating.IDFor(number), err)
	}
	return &r, nil
}

// TrailComments is an item's trail as stored, by (created_at, comment id).
func (l *Ledger) TrailComments(ctx context.Context, repoID int64, id gating.ItemID) ([]TrailRecord, error) {
	n, err := parseNumber(id)
	if err != nil {
		return nil, err
	}
	var out []TrailRecord
	err = l.readTx(ctx, func(tx *sql.Tx) error {
		out, err = trailOf(ctx, tx, repoID, n)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("trail of %s: %w", id, err)
	}
	return out, nil
}

// trailOf reads item n's trail in q, in the trail's order.
func trailOf(ctx context.Context, q Querier, repoID int64, n int) ([]TrailRecord, error) {
	out := []TrailRecord{}
	err := eachChunk(ctx, q, repoID, []int{n}, trailSelect+` WHERE repo_id = $1`, "number", func(rows *sql.Rows) error {
		_, r, err := scanTrail(rows)
		out = append(out, r)
		return err
	})
	if err != nil {
		return nil, err
	}
	sortTrail(out)
	return out, nil
}

func sortTrail(rs []TrailRecord) {
	slices.SortFunc(rs, func(a, b TrailRecord) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.CommentID, b.CommentID))
	})
}

// trailEval evaluates one item's trail against its grant log (the snapshot's
// view of the item).
func trailEval(it *Item, trail []TrailRecord, grants []Grant, now time.Time, x trailExtra) gating.TrailResult {
	return gating.EvaluateTrail(trailInput(it, trail, grants, now, x))
}

// trailExtra is what the trail reads beside the comments and the grant log:
// the item's epoch (last human unpark, last /backlog resolve) and the
// pushes to its grants' branches.
type trailExtra struct {
	Epoch  Epoch
	Pushes []gating.BranchPush
}

// OwnComment is the newest comment warden itself made on issue n whose
// current text begins with prefix, as the trail recorded it (0: none), and
// that text: a report comment a database that was lost or replaced no
// longer names is found here, so it is edited (when it says something
// else) rather than posted a second time.
func (l *Ledger) OwnComment(ctx context.Context, repoID int64, n int, prefix string) (int64, string, error) {
	rows, err := l.db.Read.QueryContext(ctx, `SELECT comment_id, current_body FROM trail_comments
		WHERE repo_id = $1 AND number = $2 AND is_warden = 1 AND deleted = 0 ORDER BY created_at DESC, comment_id DESC`, repoID, n)
	if err != nil {
		return 0, "", fmt.Errorf("warden's own comments on #%d: %w", n, err)
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var body string
		if err := rows.Scan(&id, &body); err != nil {
			return 0, "", fmt.Errorf("warden's own comments on #%d: %w", n, err)
		}
		if strings.HasPrefix(body, prefix) {
			return id, body, nil
		}
	}
	if err := rows.Err(); err != nil {
		return 0, "", fmt.Errorf("warden's own comments on #%d: %w", n, err)
	}
	return 0, "", nil
}
