package mirror

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/wardenhq/warden/gating"
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
	rows *store.DashboardRows
	gh   Clients
	log  *slog.Logger

	// Now is the clock of the write lease (time.Now when nil).
	Now func() time.Time
	// Bot returns warden's own bot login ("<slug>[bot]"): a dashboard issue
	// warden has no record of is looked for among the open issues it
	// created. Nil or "": among open issues created by any bot account.
	Bot func() string
	// Settings returns a repository's settings (`dashboard`, `dry_run`);
	// nil: the defaults, under which the dashboard is on (`dashboard: false` turns it off).
	Settings func(ctx context.Context, r store.Repo) gating.Settings
}

// OpenDashboards returns the keeper over the store's dashboard rows.
func OpenDashboards(st *store.Store, gh Clients, log *slog.Logger) (*Dashboards, error) {
	if st == nil {
		return nil, errors.New("open dashboards: no store")
	}
	if st.Dashboards == nil {
		return nil, errors.New("open dashboards: the store has no dashboard rows")
	}
	if gh == nil {
		return nil, errors.New("open dashboards: no GitHub clients")
	}
	if log == nil {
		log = slog.Default()
	}
	return &Dashboards{rows: st.Dashboards, gh: gh, log: log.With("component", "dashboards")}, nil
}

func (d *Dashboards) now() time.Time {
	if d.Now != nil {
		return d.Now()
	}
	return time.Now()
}

// nowMs is the lease clock in unix milliseconds (the rows' clock).
func (d *Dashboards) nowMs() int64 { return d.now().UnixMilli() }

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
	w, found, err := d.rows.Get(ctx, repo.ID)
	if err != nil {
		return "", err
	}
	if found && w.Number != 0 && w.Hash == hash && !w.Leased(d.nowMs()) {
		return DashboardUnchanged, nil
	}
	if dryRun || settings.DryRun {
		number := 0
		if found && w != nil {
			number = w.Number
		}
		d.log.Info("dry run: dashboard issue (not written)", "repo", repo.FullName, "issue", number, "body", cut(body, 300))
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
		w, found, err := d.rows.Get(ctx, repo.ID)
		if err != nil {
			return err
		}
		if !found || !w.Leased(d.nowMs()) {
			return nil
		}
	}
}

// decide looks at the row under the write transaction: nothing to do, busy
// (another writer holds the lease), or a write to make (the lease is then
// taken).
func (d *Dashboards) decide(ctx context.Context, repo store.Repo, body, hash string) (out string, plan *dashPlan, busy bool, err error) {
	err = d.rows.Update(ctx, repo.ID, d.nowMs, func(w *store.DashboardRow, now int64) error {
		switch {
		case w.Leased(now):
			busy = true
			return nil
		case w.Number != 0 && w.Hash == hash:
			out = DashboardUnchanged
			return nil
		}
		w.LeaseOwner, w.LeaseUntil = leaseToken(), now+dashboardLease.Milliseconds()
		plan = &dashPlan{repo: repo, number: w.Number, body: body, hash: hash, token: w.LeaseOwner}
		return nil
	})
	if err != nil {
		return "", nil, false, err
	}
	return out, plan, busy, nil
}

// Number returns the repository's dashboard issue number as warden recorded
// it (0: none), so that handlers can tell the dashboard from other issues.
func (d *Dashboards) Number(ctx context.Context, repoID int64) (int, error) {
	w, found, err := d.rows.Get(ctx, repoID)
	if err != nil || !found {
		return 0, err
	}
	return w.Number, nil
}

// Invalidate forgets what warden last wrote to the repository's dashboard
// (not which issue it is), so the next Sync edits it even when its content
// did not change: for a dashboard a human edited, renamed or closed.
func (d *Dashboards) Invalidate(ctx context.Context, repoID int64) error {
	return d.rows.Invalidate(ctx, repoID, d.nowMs())
}
