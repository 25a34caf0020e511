package mirror

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/google/go-github/v66/github"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/internal/db"
	"github.com/wardenhq/warden/mirror/store"
)

// DashboardTitle is the title of a repository's dashboard issue
// (CONTRACT.md §2 `dashboard: true`).
const DashboardTitle = "Backlog dashboard"

// Outcomes of Sync (besides "dashboard created #N", "dashboard recreated
// #N (the previous one was deleted)", "dashboard found #N" and "dashboard
// found #N and updated").
const (
	DashboardOff       = "dashboard off"
	DashboardUnchanged = "dashboard unchanged"
	DashboardUpdated   = "dashboard updated"
	DashboardDryRun    = "dashboard rendered; nothing written (dry_run)"
	DashboardBusy      = "dashboard being written elsewhere; not written"
)

const (
	// dashboardLease is how long one writer owns a repository's dashboard
	// while it writes to GitHub (a list, a create or an edit). It outlasts
	// any single API call; a writer that dies holding it is taken over once
	// it lapses.
	dashboardLease = 2 * time.Minute
	// dashboardWait bounds how long Sync waits for another writer's lease
	// before it gives up (DashboardBusy, no error: the next Sync catches up).
	dashboardWait = 30 * time.Second
	// dashboardPoll is how often a waiting Sync looks at the lease again.
	dashboardPoll = 25 * time.Millisecond
	// dashboardPage is the page size of the one listing that looks for a
	// dashboard issue warden does not know the number of.
	dashboardPage = 100
)

// Dashboards keeps each repository's "Backlog dashboard" issue (CONTRACT.md
// §2 `dashboard: true`), the way Renovate keeps its Dependency Dashboard:
// one issue per repository, created once and edited in place, its body
// rewritten only when its content changed. It is safe for concurrent use,
// also by several replicas over one database: a write lease on the
// repository's row makes one writer at a time, so a repository never gets
// two dashboard issues.
//
// A human who closes the dashboard issue does not turn it off (the
// `dashboard` setting does): every edit warden makes also sets the issue
// open, so a closed dashboard is reopened at its next change (or at the next
// Sync after Invalidate). A deleted one is created anew.
type Dashboards struct {
	db  *db.DB
	gh  Clients
	log *slog.Logger
	pg  bool

	// Now is the clock of the write lease (time.Now when nil).
	Now func() time.Time
	// Bot returns warden's own bot login ("<slug>[bot]"): a dashboard issue
	// warden has no record of is looked for among the open issues it
	// created. Nil or "": among open issues created by any bot account.
	Bot func() string
	// Settings returns a repository's settings (`dashboard`, `dry_run`);
	// nil: the defaults, under which the dashboard is off.
	Settings func(ctx context.Context, r store.Repo) gating.Settings
}

// OpenDashboards returns the keeper over the store's dashboard rows.
func OpenDashboards(st *store.Store, gh Clients, log *slog.Logger) (*Dashboards, error) {
	if st == nil {
		return nil, errors.New("open dashboards: no store")
	}
	d := st.DB
	if gh == nil {
		return nil, errors.New("open dashboards: no GitHub clients")
	}
	if log == nil {
		log = slog.Default()
	}
	return &Dashboards{db: d, gh: gh, log: log.With("component", "dashboards"), pg: d.Dialect == db.Postgres}, nil
}

func (d *Dashboards) now() time.Time {
	if d.Now != nil {
		return d.Now()
	}
	return time.Now()
}

func (d *Dashboards) settings(ctx context.Context, repo store.Repo) gating.Settings {
	if d.Settings != nil {
		return d.Settings(ctx, repo)
	}
	return gating.DefaultSettings()
}

func (d *Dashboards) bot() string {
	if d.Bot != nil {
		return strings.TrimSpace(d.Bot())
	}
	return ""
}

// dashRow is a repository's dashboard record.
type dashRow struct {
	number     int
	hash       string
	leaseOwner string
	leaseUntil int64 // unix ms
}

func (w *dashRow) leased(now int64) bool { return w.leaseOwner != "" && w.leaseUntil > now }

// dashPlan is a write to GitHub decided under the lease.
type dashPlan struct {
	repo   store.Repo
	number int // 0: find or create
	body   string
	hash   string
	token  string
}

// Sync brings the repository's dashboard issue in step with body (rendered
// by gating.RenderDashboard; it must start with gating.DashboardMarker).
//
// With the repository's `dashboard` setting off it does nothing
// (DashboardOff; an existing dashboard issue is left as it is). With dryRun
// or the `dry_run` setting it reads warden's record and writes nothing,
// neither to GitHub nor to the database (DashboardDryRun, or
// DashboardUnchanged when GitHub already has body). Otherwise:
//
//   - GitHub already has body (the hash of the body last written matches):
//     nothing is written, and no GitHub call is made (DashboardUnchanged).
//   - warden knows the issue: one edit sets its title, body and state open
//     (DashboardUpdated); an issue that is gone (404, 410: deleted) is
//     created anew.
//   - warden knows no issue (a first run, a new database): one listing,
//     paged, of the repository's open issues created by warden's bot finds
//     one whose body starts with the marker (the oldest; any other is closed
//     as a duplicate); it is edited only when it differs. Else the issue is
//     created.
//
// The decision is taken under a write lease on the repository's row, so
// concurrent calls (goroutines, replicas) never create two issues: a call
// that finds another writer's lease waits for it (up to dashboardWait, then
// DashboardBusy without error), then decides again.
func (d *Dashboards) Sync(ctx context.Context, repo store.Repo, body string, dryRun bool) (string, error) {
	if repo.ID == 0 || repo.Installation == 0 || !strings.Contains(repo.FullName, "/") {
		return "", fmt.Errorf("dashboard: repository %d %q (installation %d) is incomplete", repo.ID, repo.FullName, repo.Installation)
	}
	if !strings.HasPrefix(body, gating.DashboardMarker) {
		return "", fmt.Errorf("dashboard of %s: the body does not start with %s", repo.FullName, gating.DashboardMarker)
	}
	if len(body) > gating.MaxDashboardBytes {
		return "", fmt.Errorf("dashboard of %s: the body has %d bytes, more than %d", repo.FullName, len(body), gating.MaxDashboardBytes)
	}
	settings := d.settings(ctx, repo)
	if !settings.Dashboard {
		return DashboardOff, nil
	}
	hash := hashBody(body)

	// A read answers the common case: nothing changed.
	w, found, err := d.load(ctx, d.db.Read, repo.ID, false)
	if err != nil {
		return "", err
	}
	if found && w.number != 0 && w.hash == hash && !w.leased(d.now().UnixMilli()) {
		return DashboardUnchanged, nil
	}
	if dryRun || settings.DryRun {
		return DashboardDryRun, nil
	}

	deadline := time.Now().Add(dashboardWait)
	for {
		out, plan, busy, err := d.decide(ctx, repo, body, hash)
		switch {
		case err != nil:
			return "", err
		case plan != nil:
			return d.write(ctx, plan)
		case !busy:
			return out, nil
		}
		if err := d.awaitLease(ctx, repo, deadline); err != nil {
			if errors.Is(err, errDashboardBusy) {
				return DashboardBusy, nil
			}
			return "", err
		}
	}
}

var errDashboardBusy = errors.New("dashboard lease still held")

// awaitLease waits, reading (not writing) the row, until nobody holds the
// repository's lease, or the deadline passes (errDashboardBusy).
func (d *Dashboards) awaitLease(ctx context.Context, repo store.Repo, deadline time.Time) error {
	t := time.NewTicker(dashboardPoll)
	defer t.Stop()
	for {
		if time.Now().After(deadline) {
			return errDashboardBusy
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("dashboard of %s: %w", repo.FullName, ctx.Err())
		case <-t.C:
		}
		w, found, err := d.load(ctx, d.db.Read, repo.ID, false)
		if err != nil {
			return err
		}
		if !found || !w.leased(d.now().UnixMilli()) {
			return nil
		}
	}
}

// decide looks at the row under the write transaction: nothing to do, busy
// (another writer holds the lease), or a write to make (the lease is then
// taken).
func (d *Dashboards) decide(ctx context.Context, repo store.Repo, body, hash string) (out string, plan *dashPlan, busy bool, err error) {
	err = d.writeTx(ctx, func(tx *sql.Tx) error {
		now := d.now().UnixMilli()
		w, found, err := d.load(ctx, tx, repo.ID, true)
		if err != nil {
			return err
		}
		if !found {
			if _, err := tx.ExecContext(ctx, `INSERT INTO dashboards (repo_id, updated_at) VALUES ($1, $2)
				ON CONFLICT (repo_id) DO NOTHING`, repo.ID, now); err != nil {
				return fmt.Errorf("dashboard of %s: insert: %w", repo.FullName, err)
			}
			if w, found, err = d.load(ctx, tx, repo.ID, true); err != nil {
				return err
			} else if !found {
				return fmt.Errorf("dashboard of %s: row vanished", repo.FullName)
			}
		}
		switch {
		case w.leased(now):
			busy = true
			return nil
		case w.number != 0 && w.hash == hash:
			out = DashboardUnchanged
			return nil
		}
		w.leaseOwner, w.leaseUntil = leaseToken(), now+dashboardLease.Milliseconds()
		plan = &dashPlan{repo: repo, number: w.number, body: body, hash: hash, token: w.leaseOwner}
		return d.save(ctx, tx, repo.ID, w, now)
	})
	if err != nil {
		return "", nil, false, err
	}
	return out, plan, busy, nil
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
	client, err := d.gh.Installation(p.repo.Installation)
	if err != nil {
		return 0, false, "", fmt.Errorf("installation %d client: %w", p.repo.Installation, err)
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
	client, err := d.gh.Installation(repo.Installation)
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
	err = d.writeTx(ctx, func(tx *sql.Tx) error {
		now := d.now().UnixMilli()
		w, found, err := d.load(ctx, tx, p.repo.ID, true)
		if err != nil {
			return err
		}
		if !found {
			return errors.New("row vanished during the write")
		}
		ours := w.leaseOwner == p.token
		switch {
		case w.number == 0 || w.number == p.number || w.number == number:
			// No other writer recorded another dashboard meanwhile.
			w.number, w.hash = number, p.hash
			if !ours {
				// This writer's lease lapsed and another one may have
				// written since, in either order: what GitHub holds is
				// unknown, so the next Sync writes again.
				w.hash = ""
			}
		case created:
			// Another writer (this one's lease had lapsed) recorded its
			// own dashboard: this issue is the second.
			dup = true
		}
		if ours {
			w.leaseOwner, w.leaseUntil = "", 0
		}
		return d.save(ctx, tx, p.repo.ID, w, now)
	})
	if err != nil {
		return false, fmt.Errorf("dashboard of %s: record issue %d: %w", p.repo.FullName, number, err)
	}
	return dup, nil
}

// release gives the lease back after a failed write.
func (d *Dashboards) release(ctx context.Context, p *dashPlan) error {
	err := d.writeTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE dashboards SET lease_owner = '', lease_until = 0, updated_at = $3
			WHERE repo_id = $1 AND lease_owner = $2`, p.repo.ID, p.token, d.now().UnixMilli())
		return err
	})
	if err != nil {
		return fmt.Errorf("release the lease: %w", err)
	}
	return nil
}

// Number returns the repository's dashboard issue number as warden recorded
// it (0: none), so that handlers can tell the dashboard from other issues.
func (d *Dashboards) Number(ctx context.Context, repoID int64) (int, error) {
	w, found, err := d.load(ctx, d.db.Read, repoID, false)
	if err != nil || !found {
		return 0, err
	}
	return w.number, nil
}

// Invalidate forgets what warden last wrote to the repository's dashboard
// (not which issue it is), so the next Sync edits it even when its content
// did not change: for a dashboard a human edited, renamed or closed.
func (d *Dashboards) Invalidate(ctx context.Context, repoID int64) error {
	if _, err := d.db.Write.ExecContext(ctx, `UPDATE dashboards SET body_hash = '', updated_at = $2 WHERE repo_id = $1`,
		repoID, d.now().UnixMilli()); err != nil {
		return fmt.Errorf("dashboard of repository %d: invalidate: %w", repoID, err)
	}
	return nil
}

// writeTx runs fn in one write transaction and commits when it returns nil.
func (d *Dashboards) writeTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := d.db.Write.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("dashboards: begin: %w", err)
	}
	defer tx.Rollback()
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("dashboards: commit: %w", err)
	}
	return nil
}

// load reads a repository's row; lock takes its row lock on PostgreSQL (on
// SQLite the write transaction already excludes other writers).
func (d *Dashboards) load(ctx context.Context, q store.Querier, repoID int64, lock bool) (*dashRow, bool, error) {
	query := `SELECT issue_number, body_hash, lease_owner, lease_until FROM dashboards WHERE repo_id = $1`
	if lock && d.pg {
		query += " FOR UPDATE"
	}
	w := &dashRow{}
	err := q.QueryRowContext(ctx, query, repoID).Scan(&w.number, &w.hash, &w.leaseOwner, &w.leaseUntil)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("dashboard of repository %d: read: %w", repoID, err)
	}
	return w, true, nil
}

func (d *Dashboards) save(ctx context.Context, tx *sql.Tx, repoID int64, w *dashRow, now int64) error {
	if _, err := tx.ExecContext(ctx, `UPDATE dashboards SET issue_number = $2, body_hash = $3, lease_owner = $4,
		lease_until = $5, updated_at = $6 WHERE repo_id = $1`,
		repoID, w.number, w.hash, w.leaseOwner, w.leaseUntil, now); err != nil {
		return fmt.Errorf("dashboard of repository %d: write: %w", repoID, err)
	}
	return nil
}

// dashGone reports whether err is GitHub's answer for an issue that is no more
// (404: never there or no access; 410: deleted).
func dashGone(err error) bool {
	return isStatus(err, http.StatusNotFound) || isStatus(err, http.StatusGone)
}
