package mirror

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/internal/db"
)

// The comment trail (CONTRACT.md §6): every comment on an item's issue, as
// warden first knew it. GitHub does not keep delivery order and a comment
// can be edited or deleted, so each row keeps
//
//   - the earliest known text (earliest_body) with the time it is known to
//     have been current by (earliest_at: the comment's created_at for the
//     text of an unedited created delivery; the updated_at of a delivery
//     that already showed an edit; just before an edit's updated_at for the
//     prior body an `edited` delivery carries in changes.body.from). A text
//     known to be older replaces it, never a newer one: the earliest text
//     only moves back in time, whatever the order of receipt;
//   - the current text (current_body) as of current_at (the payload's
//     updated_at; an older payload never overwrites a newer one);
//   - whether it was edited or deleted (flags only ever set);
//   - who wrote it and how far warden trusted that author when it recorded
//     it: an agent (a Bot account or a configured agent), warden itself (the
//     App's bot), or a login with write access (looked up only for a
//     non-agent author of a backlog-worker marker; a failed lookup is no
//     write access: fail closed). The flags are only ever set.
//
// Only the earliest text is parsed as a marker (gating.EvaluateTrail).
var trailMigrations = []db.Migration{
	{Version: 1, SQL: `CREATE TABLE trail_comments (
	repo_id BIGINT NOT NULL,
	number BIGINT NOT NULL,
	comment_id BIGINT NOT NULL,
	author TEXT NOT NULL,
	author_type TEXT NOT NULL,
	created_at BIGINT NOT NULL,
	earliest_body TEXT NOT NULL,
	earliest_at BIGINT NOT NULL,
	current_body TEXT NOT NULL,
	current_at BIGINT NOT NULL,
	edited BIGINT NOT NULL,
	deleted BIGINT NOT NULL,
	is_agent BIGINT NOT NULL,
	is_warden BIGINT NOT NULL,
	has_write BIGINT NOT NULL,
	recorded_at BIGINT NOT NULL,
	PRIMARY KEY (repo_id, number, comment_id))`},
}

// workerMarkerStart is what a body starts with when it is (or tries to be) a
// backlog-worker marker: the only comments whose author's write access is
// looked up.
const workerMarkerStart = "<!-- backlog-worker:"

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
		old, err := trailRow(ctx, tx, repoID, number, r.CommentID)
		if err != nil {
			return err
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
			return nil
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
		return nil
	})
	return changed, err
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

func trailRow(ctx context.Context, q querier, repoID int64, number int, id int64) (*TrailRecord, error) {
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
	out := []TrailRecord{}
	err = l.readTx(ctx, func(tx *sql.Tx) error {
		return eachChunk(ctx, tx, repoID, []int{n}, trailSelect+` WHERE repo_id = $1`, "number", func(rows *sql.Rows) error {
			_, r, err := scanTrail(rows)
			out = append(out, r)
			return err
		})
	})
	if err != nil {
		return nil, fmt.Errorf("trail of %s: %w", id, err)
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
	sortTrail(trail)
	cs := make([]gating.TrailComment, len(trail))
	for i, r := range trail {
		cs[i] = r.TrailComment()
	}
	return gating.EvaluateTrail(gating.TrailInput{Item: it.ID, Comments: cs, Grants: grantEntries(grants),
		Fence: it.Fence.Token, Tags: slices.Clone(it.Tags), Now: now, EpochStart: x.Epoch.Start,
		CollisionResolvedAt: x.Epoch.ResolvedAt, Pushes: x.Pushes})
}

// trailExtra is what the trail reads beside the comments and the grant log:
// the item's epoch (last human unpark, last /backlog resolve) and the
// pushes to its grants' branches.
type trailExtra struct {
	Epoch  Epoch
	Pushes []gating.BranchPush
}

type issueCommentPayload struct {
	Action  string `json:"action"`
	Comment struct {
		ID        int64  `json:"id"`
		Body      string `json:"body"`
		CreatedAt string `json:"created_at"`
		UpdatedAt string `json:"updated_at"`
		User      struct {
			Login string `json:"login"`
			Type  string `json:"type"`
		} `json:"user"`
	} `json:"comment"`
	Changes *struct {
		Body *struct {
			From string `json:"from"`
		} `json:"body"`
	} `json:"changes"`
	Issue struct {
		Number      int    `json:"number"`
		State       string `json:"state"`
		UpdatedAt   string `json:"updated_at"`
		PullRequest *struct {
			URL string `json:"url"`
		} `json:"pull_request"`
		Labels []struct {
			Name string `json:"name"`
		} `json:"labels"`
	} `json:"issue"`
	Repository struct {
		ID int64 `json:"id"`
	} `json:"repository"`
	Sender struct {
		Login string `json:"login"`
		Type  string `json:"type"`
	} `json:"sender"`
}

func parseGHTime(s string) (time.Time, bool) {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, false
	}
	return t.UTC(), true
}

// HandleIssueComment records a comment on an item's issue in the comment
// trail (created, edited, deleted; see trailMigrations), and counts a
// comment by the login that posted the current grant's claim marker as
// evidence of work. Pull requests and issues that are no items are ignored.
// Recording is bookkeeping: warden's own comments (FromSelf) are recorded
// too, as warden's.
func (m *Mirror) HandleIssueComment(ctx context.Context, ev Event) (string, error) {
	var p issueCommentPayload
	if err := json.Unmarshal(ev.Payload, &p); err != nil {
		return "", fmt.Errorf("issue_comment payload: %w", err)
	}
	switch ev.Action {
	case "created", "edited", "deleted":
	default:
		return OutcomeIgnored, nil
	}
	if p.Issue.Number <= 0 || p.Comment.ID == 0 {
		return OutcomeIgnored, nil
	}
	repo, err := m.Ledger.RepoByID(ctx, p.Repository.ID)
	if errors.Is(err, ErrNotFound) {
		return "repository not served", nil
	} else if err != nil {
		return "", err
	}
	if p.Issue.PullRequest != nil {
		// A pull request's conversation: /backlog recheck only.
		if ev.FromSelf {
			return OutcomeIgnored, nil
		}
		out, err := m.handleCommand(ctx, ev, repo, &p, true)
		if err != nil || out != "" {
			return out, err
		}
		return "a pull request's comment: " + OutcomeIgnored, nil
	}
	// The payload carries the issue's labels as of its updated_at: recorded
	// like an issues delivery's (an older one never overwrites a newer), so
	// a label change whose own delivery was lost is seen here.
	if t, ok := parseGHTime(p.Issue.UpdatedAt); ok && p.Issue.State != "" {
		st := IssueState{State: p.Issue.State, UpdatedAt: t, Labels: make([]string, 0, len(p.Issue.Labels))}
		for _, l := range p.Issue.Labels {
			st.Labels = append(st.Labels, l.Name)
		}
		if _, err := m.Ledger.RecordIssueState(ctx, repo.ID, p.Issue.Number, st); err != nil {
			return "", err
		}
	}
	id := gating.IDFor(p.Issue.Number)
	item, err := m.Ledger.Get(ctx, repo.ID, id)
	if errors.Is(err, ErrNotFound) {
		return "not an item: " + OutcomeIgnored, nil
	} else if err != nil {
		return "", err
	}

	created, ok := parseGHTime(p.Comment.CreatedAt)
	if !ok {
		return "", fmt.Errorf("issue_comment %d: created_at %q is no time", p.Comment.ID, p.Comment.CreatedAt)
	}
	updated, ok := parseGHTime(p.Comment.UpdatedAt)
	if !ok || updated.Before(created) {
		updated = created
	}
	r := TrailRecord{CommentID: p.Comment.ID, Author: p.Comment.User.Login, AuthorType: p.Comment.User.Type, CreatedAt: created,
		CurrentBody: p.Comment.Body, CurrentAt: updated}
	// The earliest text this delivery knows, and when it was current by.
	switch {
	case ev.Action == "edited" && p.Changes != nil && p.Changes.Body != nil:
		r.EarliestBody, r.EarliestAt, r.Edited = p.Changes.Body.From, updated.Add(-time.Millisecond), true
		if r.EarliestAt.Before(created) {
			r.EarliestAt = created
		}
	case updated.After(created):
		// First seen already edited: held to the text first seen.
		r.EarliestBody, r.EarliestAt, r.Edited = p.Comment.Body, updated, true
	default:
		r.EarliestBody, r.EarliestAt = p.Comment.Body, created
		r.Edited = ev.Action == "edited"
	}
	r.Deleted = ev.Action == "deleted"
	m.trust(ctx, ev, repo, &p, &r)

	n := p.Issue.Number
	changed, err := m.Ledger.RecordTrailComment(ctx, repo.ID, n, r)
	if err != nil {
		return "", err
	}
	outcome := fmt.Sprintf("comment %d on %s %s", r.CommentID, id, ev.Action)
	if !changed {
		outcome += " (already recorded)"
	}
	if ev.Action != "deleted" && item.Grant != nil && item.Fence.Claimed() {
		if holder, err := m.claimMarkerLogin(ctx, repo.ID, &item); err != nil {
			return "", err
		} else if holder != "" && strings.EqualFold(holder, r.Author) {
			ok, err := m.Ledger.RecordEvidence(ctx, repo.ID, id, item.Fence.Token, updated, EvidenceComment)
			if err != nil {
				return "", err
			}
			if ok {
				outcome += fmt.Sprintf("; evidence of work for fence %d", item.Fence.Token)
			}
		}
	}
	if ev.FromSelf {
		return outcome, nil
	}
	cmdOut, err := m.handleCommand(ctx, ev, repo, &p, false)
	if err != nil {
		return "", err
	}
	if cmdOut != "" {
		outcome += "; " + cmdOut
	}
	settled, err := m.settleItem(ctx, repo, n)
	if err != nil {
		return "", err
	}
	if settled != "" {
		outcome += "; " + settled
	}
	return outcome, nil
}

// trust fills the author's trust: warden (its own delivery about its own
// comment), an agent (Bot or configured), else write access, looked up only
// for a backlog-worker marker (fail closed).
func (m *Mirror) trust(ctx context.Context, ev Event, repo Repo, p *issueCommentPayload, r *TrailRecord) {
	m.trustAuthor(ctx, repo, r, ev.FromSelf && strings.EqualFold(p.Sender.Login, r.Author))
}

// trustAuthor fills a comment's author trust (see trust); isWarden says the
// author is warden's own bot.
func (m *Mirror) trustAuthor(ctx context.Context, repo Repo, r *TrailRecord, isWarden bool) {
	r.IsWarden = isWarden
	agents := append(append([]string(nil), m.Agents...), m.settings(ctx, repo).Agents...)
	r.IsAgent = gating.IsAgent(gating.Actor{Login: r.Author, Type: r.AuthorType}, agents)
	if r.IsAgent || r.IsWarden {
		return
	}
	if rec, err := m.Acts.IsRecorded(ctx, repo.ID, r.Author, AgentRecorded); err != nil {
		m.Log.Warn("recorded-agent lookup failed", "login", r.Author, "err", err)
	} else if rec {
		r.IsAgent = true
		return
	}
	if !strings.HasPrefix(r.EarliestBody, workerMarkerStart) && !strings.HasPrefix(r.CurrentBody, workerMarkerStart) {
		return
	}
	gh, err := m.GitHub.Installation(repo.Installation)
	if err != nil {
		m.Log.Warn("permission lookup failed; the marker's author has no write access (fail closed)", "login", r.Author, "repo", repo.FullName, "err", err)
		return
	}
	owner, name, _ := strings.Cut(repo.FullName, "/")
	role, err := m.Perms.Role(ctx, gh, owner, name, r.Author)
	if err != nil {
		m.Log.Warn("permission lookup failed; the marker's author has no write access (fail closed)", "login", r.Author, "repo", repo.FullName, "err", err)
		return
	}
	switch role {
	case "write", "maintain", "admin":
		r.HasWrite = true
	}
}

// claimMarkerLogin is the login that posted the trusted claim marker of the
// item's current grant (owner and fence match), "" when none is recorded.
func (m *Mirror) claimMarkerLogin(ctx context.Context, repoID int64, it *Item) (string, error) {
	trail, err := m.Ledger.TrailComments(ctx, repoID, it.ID)
	if err != nil {
		return "", err
	}
	for _, r := range trail {
		if !r.IsAgent && !r.IsWarden && !r.HasWrite {
			continue
		}
		mk, st := gating.ParseMarker(r.EarliestBody, it.ID)
		if st == gating.MarkerValid && mk.Kind == gating.KindClaim && mk.Owner == it.Grant.Owner && mk.Fence == it.Fence.Token {
			return r.Author, nil
		}
	}
	return "", nil
}
