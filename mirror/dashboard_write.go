package mirror

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"

	"github.com/google/go-github/v66/github"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/mirror/store"
)

// client is the installation's client for repo behind the dry-run guard
// (dryrun.go): no write reaches a repository whose settings say dry_run,
// whatever decided it.
func (d *Dashboards) client(repo store.Repo) (*github.Client, error) {
	gh, err := d.gh.Installation(repo.Installation)
	if err != nil {
		return nil, fmt.Errorf("installation %d client: %w", repo.Installation, err)
	}
	return guardedClient(gh, repo, func(ctx context.Context) (bool, error) { return d.settings(ctx, repo).DryRun, nil }, d.log), nil
}

// write makes the decided write on GitHub and records it; on failure the
// lease is released and the error returned (the next Sync tries again).
func (d *Dashboards) write(ctx context.Context, p *dashPlan) (string, error) {
	number, created, out, err := d.post(ctx, p)
	if err != nil {
		if rerr := d.release(ctx, p); rerr != nil {
			err = errors.Join(err, rerr)
		}
		return "", fmt.Errorf("dashboard of %s: %w", p.repo.FullName, err)
	}
	dup, err := d.record(ctx, p, number, created)
	if err != nil {
		return "", err
	}
	if dup {
		// Another writer recorded its dashboard while this one created
		// another (this writer's lease had lapsed): keep the first.
		d.closeDuplicate(ctx, p.repo, number)
		return DashboardBusy, nil
	}
	d.log.Info("dashboard", "repo", p.repo.FullName, "issue", number, "outcome", out)
	return out, nil
}

// post edits, finds or creates the dashboard issue; created reports
// whether a new issue was opened.
func (d *Dashboards) post(ctx context.Context, p *dashPlan) (number int, created bool, out string, err error) {
	client, err := d.client(p.repo)
	if err != nil {
		return 0, false, "", err
	}
	owner, name, _ := strings.Cut(p.repo.FullName, "/")
	if p.number != 0 {
		err := d.edit(ctx, client, owner, name, p.number, p.body)
		switch {
		case err == nil:
			return p.number, false, DashboardUpdated, nil
		case !dashGone(err):
			return 0, false, "", err
		}
		n, err := d.create(ctx, client, owner, name, p.body)
		if err != nil {
			return 0, false, "", err
		}
		return n, true, fmt.Sprintf("dashboard recreated #%d (the previous one was deleted)", n), nil
	}
	found, err := d.find(ctx, client, p.repo, owner, name)
	if err != nil {
		return 0, false, "", err
	}
	if found != nil {
		n := found.GetNumber()
		if found.GetBody() == p.body && found.GetTitle() == DashboardTitle {
			return n, false, fmt.Sprintf("dashboard found #%d", n), nil
		}
		err := d.edit(ctx, client, owner, name, n, p.body)
		if err == nil {
			return n, false, fmt.Sprintf("dashboard found #%d and updated", n), nil
		}
		if !dashGone(err) {
			return 0, false, "", err
		}
	}
	n, err := d.create(ctx, client, owner, name, p.body)
	if err != nil {
		return 0, false, "", err
	}
	return n, true, fmt.Sprintf("dashboard created #%d", n), nil
}

// edit sets the issue's title, body and state (open: a dashboard closed by
// hand is reopened) in one call.
func (d *Dashboards) edit(ctx context.Context, client *github.Client, owner, name string, number int, body string) error {
	_, _, err := client.Issues.Edit(ctx, owner, name, number, &github.IssueRequest{
		Title: github.String(DashboardTitle), Body: github.String(body), State: github.String("open"),
	})
	if err != nil {
		return fmt.Errorf("edit issue %d: %w", number, err)
	}
	return nil
}

func (d *Dashboards) create(ctx context.Context, client *github.Client, owner, name, body string) (int, error) {
	i, _, err := client.Issues.Create(ctx, owner, name, &github.IssueRequest{
		Title: github.String(DashboardTitle), Body: github.String(body),
	})
	if err != nil {
		return 0, fmt.Errorf("create the dashboard issue: %w", err)
	}
	if i.GetNumber() <= 0 {
		return 0, errors.New("create the dashboard issue: no issue number in the answer")
	}
	return i.GetNumber(), nil
}

// find lists the repository's open issues created by warden's bot (every
// page) and returns the oldest whose body starts with the dashboard marker;
// any other such issue is closed as a duplicate. Nil: none.
func (d *Dashboards) find(ctx context.Context, client *github.Client, repo store.Repo, owner, name string) (*github.Issue, error) {
	bot := d.bot()
	opts := &github.IssueListByRepoOptions{State: "open", Creator: bot, Sort: "created", Direction: "asc",
		ListOptions: github.ListOptions{PerPage: dashboardPage}}
	var hits []*github.Issue
	for {
		page, resp, err := client.Issues.ListByRepo(ctx, owner, name, opts)
		if err != nil {
			return nil, fmt.Errorf("list open issues: %w", err)
		}
		for _, i := range page {
			if i.IsPullRequest() || !strings.HasPrefix(i.GetBody(), gating.DashboardMarker) {
				continue
			}
			login, typ := i.GetUser().GetLogin(), i.GetUser().GetType()
			if (bot != "" && !strings.EqualFold(login, bot)) || (bot == "" && typ != "Bot") {
				continue
			}
			hits = append(hits, i)
		}
		if resp == nil || resp.NextPage == 0 {
			break
		}
		opts.Page = resp.NextPage
	}
	if len(hits) == 0 {
		return nil, nil
	}
	sort.Slice(hits, func(a, b int) bool { return hits[a].GetNumber() < hits[b].GetNumber() })
	for _, i := range hits[1:] {
		d.closeDuplicate(ctx, repo, i.GetNumber())
	}
	return hits[0], nil
}

// closeDuplicate closes a second dashboard issue (best effort: logged).
func (d *Dashboards) closeDuplicate(ctx context.Context, repo store.Repo, number int) {
	client, err := d.client(repo)
	if err == nil {
		owner, name, _ := strings.Cut(repo.FullName, "/")
		_, _, err = client.Issues.Edit(ctx, owner, name, number, &github.IssueRequest{
			State: github.String("closed"), StateReason: github.String("not_planned"),
		})
	}
	if err != nil && !dashGone(err) {
		d.log.Warn("dashboard: duplicate issue not closed", "repo", repo.FullName, "issue", number, "err", err)
		return
	}
	d.log.Info("dashboard: duplicate issue closed", "repo", repo.FullName, "issue", number)
}

// record stores a successful write and releases the lease. dup: this write
// created an issue although another writer's dashboard was recorded
// meanwhile (to close).
func (d *Dashboards) record(ctx context.Context, p *dashPlan, number int, created bool) (dup bool, err error) {
	err = d.rows.UpdateExisting(ctx, p.repo.ID, d.nowMs, func(w *store.DashboardRow, _ int64) error {
		ours := w.LeaseOwner == p.token
		switch {
		case w.Number == 0 || w.Number == p.number || w.Number == number:
			// No other writer recorded another dashboard meanwhile.
			w.Number, w.Hash = number, p.hash
			if !ours {
				// This writer's lease lapsed and another one may have
				// written since, in either order: what GitHub holds is
				// unknown, so the next Sync writes again.
				w.Hash = ""
			}
		case created:
			// Another writer (this one's lease had lapsed) recorded its
			// own dashboard: this issue is the second.
			dup = true
		}
		if ours {
			w.LeaseOwner, w.LeaseUntil = "", 0
		}
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("dashboard of %s: record issue %d: %w", p.repo.FullName, number, err)
	}
	return dup, nil
}

// release gives the lease back after a failed write, if this writer still
// holds it.
func (d *Dashboards) release(ctx context.Context, p *dashPlan) error {
	return d.rows.Release(ctx, p.repo.ID, p.token, d.nowMs())
}

// dashGone reports whether err is GitHub's answer for an issue that is no more
// (404: never there or no access; 410: deleted).
func dashGone(err error) bool {
	return isStatus(err, http.StatusNotFound) || isStatus(err, http.StatusGone)
}
