package mirror

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/google/go-github/v66/github"
	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/mirror/store"
)

// client is the installation's client for repo behind the dry-run guard
// (dryrun.go): no write reaches a repository whose settings say dry_run,
// whatever decided it.
func (r *Reports) client(repo store.Repo) (*github.Client, error) {
	gh, err := r.gh.Installation(repo.Installation)
	if err != nil {
		return nil, fmt.Errorf("installation %d client: %w", repo.Installation, err)
	}
	return guardedClient(gh, repo, func(ctx context.Context) (bool, error) { return r.settings(ctx, repo).DryRun, nil }, r.log), nil
}

// write makes the decided write on GitHub and records it.
func (r *Reports) write(ctx context.Context, p *reportWrite) (string, error) {
	id, out, err := r.post(ctx, p)
	if err != nil {
		// post turns an edit's 404 into a create, so a 404 or 410 here is the
		// create's: the issue is gone (deleted, transferred).
		gone := isStatus(err, http.StatusNotFound) || isStatus(err, http.StatusGone)
		if rerr := r.recordFailure(ctx, p, gone); rerr != nil {
			return "", fmt.Errorf("report comment of %s in %s: %w", gating.IDFor(p.number), p.repo.FullName, errors.Join(err, rerr))
		}
		if gone {
			r.log.Warn("report not written: the issue is gone", "repo", p.repo.FullName, "item", gating.IDFor(p.number), "err", err)
			return ReportIssueGone, nil
		}
		return "", fmt.Errorf("report comment of %s in %s: %w", gating.IDFor(p.number), p.repo.FullName, err)
	}
	dup, err := r.record(ctx, p, id, out != ReportEdited)
	if err != nil {
		return "", err
	}
	if dup != 0 {
		// Another writer created the item's comment while this one did (its
		// lease lapsed): keep the first, delete this one.
		if derr := r.deleteComment(ctx, p.repo, dup); derr != nil {
			r.log.Warn("report: duplicate comment not deleted", "repo", p.repo.FullName, "item", gating.IDFor(p.number), "comment", dup, "err", derr)
		}
		return ReportBusy, nil
	}
	r.log.Info("report", "repo", p.repo.FullName, "item", gating.IDFor(p.number), "comment", id, "outcome", out)
	return out, nil
}

// post creates or edits the comment; an edit of a comment that is gone
// (404) creates a new one.
func (r *Reports) post(ctx context.Context, p *reportWrite) (int64, string, error) {
	client, err := r.client(p.repo)
	if err != nil {
		return 0, "", err
	}
	owner, name, _ := strings.Cut(p.repo.FullName, "/")
	body := p.body
	out := ReportCreated
	if p.commentID != 0 {
		_, _, err := client.Issues.EditComment(ctx, owner, name, p.commentID, &github.IssueComment{Body: &body})
		if err == nil {
			return p.commentID, ReportEdited, nil
		}
		if !isStatus(err, http.StatusNotFound) {
			return 0, "", fmt.Errorf("edit comment %d: %w", p.commentID, err)
		}
		out = ReportRecreated
	}
	if p.commentID == 0 && p.lookSince.IsZero() && r.Trail != nil {
		// No row names a comment: a database that is new or was restored
		// may not know the one warden made. The trail does.
		found, text, err := r.Trail.OwnComment(ctx, p.repo.ID, p.number, gating.ReportPrefix)
		if err != nil {
			return 0, "", err
		}
		if found != 0 && text == body {
			return found, ReportEdited, nil // it says this already
		}
		if found != 0 {
			_, _, err := client.Issues.EditComment(ctx, owner, name, found, &github.IssueComment{Body: &body})
			if err == nil {
				return found, ReportEdited, nil
			}
			if !isStatus(err, http.StatusNotFound) {
				return 0, "", fmt.Errorf("edit comment %d: %w", found, err)
			}
		}
	}
	if !p.lookSince.IsZero() {
		found, err := r.findReport(ctx, client, owner, name, p.number, p.commentID, p.lookSince)
		if err != nil {
			return 0, "", err
		}
		if found != 0 {
			if _, _, err := client.Issues.EditComment(ctx, owner, name, found, &github.IssueComment{Body: &body}); err != nil {
				return 0, "", fmt.Errorf("edit comment %d: %w", found, err)
			}
			return found, ReportEdited, nil
		}
	}
	c, _, err := client.Issues.CreateComment(ctx, owner, name, p.number, &github.IssueComment{Body: &body})
	if err != nil {
		return 0, "", fmt.Errorf("create comment on issue %d: %w", p.number, err)
	}
	if c.GetID() == 0 {
		return 0, "", fmt.Errorf("create comment on issue %d: no comment id in the answer", p.number)
	}
	return c.GetID(), out, nil
}

// findReport looks on GitHub for warden's report comment on issue n made
// since a writer that stopped before recording it began (other than the
// recorded one, gone).
func (r *Reports) findReport(ctx context.Context, client *github.Client, owner, name string, n int, not int64, since time.Time) (int64, error) {
	bot := ""
	if r.Bot != nil {
		bot = r.Bot()
	}
	id, err := findOwnComment(ctx, newGitHubCalls(client, owner+"/"+name), n, bot, gating.ReportPrefix, since, not)
	if err != nil {
		return 0, fmt.Errorf("look for an unrecorded report comment: %w", err)
	}
	return id, nil
}

func (r *Reports) deleteComment(ctx context.Context, repo store.Repo, id int64) error {
	client, err := r.client(repo)
	if err != nil {
		return err
	}
	owner, name, _ := strings.Cut(repo.FullName, "/")
	if _, err := client.Issues.DeleteComment(ctx, owner, name, id); err != nil && !isStatus(err, http.StatusNotFound) {
		return fmt.Errorf("delete comment %d: %w", id, err)
	}
	return nil
}

// record stores a successful write: the comment id, what was written and
// when; the lease is released; an edit stays pending when the desired body
// changed meanwhile. dup is a comment this write created (created) although
// another writer's comment was recorded meanwhile (to delete).
func (r *Reports) record(ctx context.Context, p *reportWrite, id int64, created bool) (dup int64, err error) {
	err = r.rows.Update(ctx, p.repo, p.number, false, r.now, func(w *store.ReportRow, now int64) (bool, error) {
		if w == nil {
			return false, fmt.Errorf("report comment of %s: row vanished during the write", gating.IDFor(p.number))
		}
		if created && w.CommentID != p.commentID && w.CommentID != 0 {
			dup = id
		} else {
			w.CommentID, w.WrittenHash, w.WrittenAt = id, hashBody(p.body), now
		}
		if w.LeaseOwner == p.token {
			w.LeaseOwner, w.LeaseUntil = "", 0
		}
		w.Pending = w.Body != "" && hashBody(w.Body) != w.WrittenHash
		if w.Pending {
			w.DueAt = w.WrittenAt + ReportInterval.Milliseconds()
		}
		return true, nil
	})
	if err != nil {
		return 0, fmt.Errorf("report comment of %s: record comment %d: %w", gating.IDFor(p.number), id, err)
	}
	return dup, nil
}

// recordFailure releases the lease after a failed write. The edit stays
// pending and is retried after reportRetry, unless the issue is gone: then
// nothing is pending and no comment is recorded (the next Publish tries
// again, with a new comment).
func (r *Reports) recordFailure(ctx context.Context, p *reportWrite, gone bool) error {
	err := r.rows.Update(ctx, p.repo, p.number, false, r.now, func(w *store.ReportRow, now int64) (bool, error) {
		if w == nil {
			return false, nil
		}
		if w.LeaseOwner == p.token {
			w.LeaseOwner, w.LeaseUntil = "", 0
		}
		w.Pending, w.DueAt = !gone, now+reportRetry.Milliseconds()
		if gone && w.CommentID == p.commentID {
			w.CommentID, w.WrittenHash = 0, ""
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("record failed write: %w", err)
	}
	return nil
}
