package mirror

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/mirror/store"
)

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
		Title       string `json:"title"`
		Body        string `json:"body"`
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
		return "", payloadErr("issue_comment payload: %w", err)
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
	if errors.Is(err, store.ErrNotFound) {
		return "repository not served", nil
	} else if err != nil {
		return "", err
	}
	if p.Issue.PullRequest != nil {
		// A pull request's conversation: /backlog recheck, and evidence of
		// work when a holder's login comments there.
		if ev.FromSelf {
			return OutcomeIgnored, nil
		}
		ev2 := ""
		if at, ok := parseGHTime(p.Comment.UpdatedAt); ok && ev.Action != "deleted" {
			if ev2, err = m.commentActivity(ctx, repo, p.Comment.User.Login, 0, p.Issue.Number, at); err != nil {
				return "", err
			}
		}
		out, err := m.handleCommand(ctx, ev, repo, &p, true)
		if err != nil || out != "" {
			return out + ev2, err
		}
		return "a pull request's comment: " + OutcomeIgnored + ev2, nil
	}
	// The payload carries the issue's labels as of its updated_at: recorded
	// like an issues delivery's (an older one never overwrites a newer), so
	// a label change whose own delivery was lost is seen here.
	if t, ok := parseGHTime(p.Issue.UpdatedAt); ok && p.Issue.State != "" {
		st := store.IssueState{State: p.Issue.State, UpdatedAt: t, Labels: make([]string, 0, len(p.Issue.Labels))}
		for _, l := range p.Issue.Labels {
			st.Labels = append(st.Labels, l.Name)
		}
		if _, err := m.Ledger.RecordIssueState(ctx, repo.ID, p.Issue.Number, st); err != nil {
			return "", err
		}
	}
	id := gating.IDFor(p.Issue.Number)
	_, err = m.Ledger.Get(ctx, repo.ID, id)
	if errors.Is(err, store.ErrNotFound) {
		out := ""
		if at, ok := parseGHTime(p.Comment.UpdatedAt); ok && ev.Action != "deleted" && !ev.FromSelf {
			if out, err = m.commentActivity(ctx, repo, p.Comment.User.Login, 0, 0, at); err != nil {
				return "", err
			}
		}
		return "not an item: " + OutcomeIgnored + out, nil
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
	r := store.TrailRecord{CommentID: p.Comment.ID, Author: p.Comment.User.Login, AuthorType: p.Comment.User.Type, CreatedAt: created,
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
	if ev.Action != "deleted" && !ev.FromSelf {
		// A comment by a login acting for a holder is evidence of its work.
		out, err := m.commentActivity(ctx, repo, p.Comment.User.Login, n, 0, updated)
		if err != nil {
			return "", err
		}
		outcome += out
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
	// A mention that summons an agent (dispatch_mention.go).
	mentionOut, err := m.dispatchMentions(ctx, ev, repo, n, p.Comment.Body, p.Comment.User.Login, p.Comment.User.Type, created)
	if err != nil {
		return "", err
	}
	if mentionOut != "" {
		outcome += "; " + mentionOut
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
func (m *Mirror) trust(ctx context.Context, ev Event, repo store.Repo, p *issueCommentPayload, r *store.TrailRecord) {
	m.trustAuthor(ctx, repo, r, ev.FromSelf && strings.EqualFold(p.Sender.Login, r.Author))
}

// trustAuthor fills a comment's author trust (see trust); isWarden says the
// author is warden's own bot.
func (m *Mirror) trustAuthor(ctx context.Context, repo store.Repo, r *store.TrailRecord, isWarden bool) {
	r.IsWarden = isWarden
	if isWarden {
		r.IsAgent = gating.IsAgent(gating.Actor{Login: r.Author, Type: r.AuthorType}, m.agents(ctx, repo))
		return
	}
	who, err := m.who(ctx, repo, r.Author, r.AuthorType, false)
	if err != nil {
		// Logged by who; the author is trusted no further than its type
		// and the configured agents show (fail closed).
		r.IsAgent = gating.IsAgent(who.Actor, m.agents(ctx, repo))
	} else {
		r.IsAgent = who.agent()
	}
	if r.IsAgent || !strings.HasPrefix(r.EarliestBody, store.WorkerMarkerStart) && !strings.HasPrefix(r.CurrentBody, store.WorkerMarkerStart) {
		return
	}
	role, err := m.role(ctx, repo, r.Author)
	if err != nil {
		m.Log.Warn("permission lookup failed; the marker's author has no write access (fail closed)", "login", r.Author, "repo", repo.FullName, "err", err)
		return
	}
	r.HasWrite = gating.HasWrite(role)
}

// commentActivity records a comment by login (on item n, on pull request
// pr, or elsewhere when both are 0) as evidence of work for the claims whose
// holder it acts for (store.RecordActivity), saying so ("" when none).
func (m *Mirror) commentActivity(ctx context.Context, repo store.Repo, login string, n, pr int, at time.Time) (string, error) {
	res, err := m.Ledger.RecordActivity(ctx, repo.ID, store.Activity{Kind: store.ActivityComment, Login: login, Item: n, PR: pr, At: at})
	if err != nil {
		return "", err
	}
	out := ""
	for _, e := range res.Evidence {
		out += fmt.Sprintf("; evidence of work for %s fence %d", e.Item, e.Fence)
	}
	if n > 0 {
		// A dispatched agent's comment on the item renews its claim
		// (dispatch_renew.go).
		renewed, err := m.dispatchEvidence(ctx, repo, login, []int{n}, "its comment")
		if err != nil {
			return "", err
		}
		if renewed != "" {
			out += "; " + renewed
		}
	}
	return out, nil
}
