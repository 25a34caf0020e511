package mirror

import (
	"context"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/mirror/store"
)

// DashboardSink keeps each repository's "Backlog dashboard" issue
// (Dashboards).
type DashboardSink interface {
	Sync(ctx context.Context, repo store.Repo, body string, dryRun bool) (string, error)
}

// syncDashboard renders the repository's dashboard (CONTRACT.md §2
// `dashboard: true`): the "where are we" report of §9 and the
// repository-wide findings (the ready set's, the settings', pull requests
// linking no item), and keeps its issue in step. On by default (the
// settings opt out with `dashboard: false`).
func (m *Mirror) syncDashboard(ctx context.Context, repo store.Repo, set gating.Settings, rs *store.Snapshot, ready gating.Result) (string, error) {
	if !set.Dashboard || m.Dashboards == nil {
		return "", nil
	}
	var repoFindings []gating.Defect
	for _, d := range ready.Defects {
		if d.Item == "" {
			repoFindings = append(repoFindings, d)
		}
	}
	rd, err := m.Ledger.RepoDivergences(ctx, repo.ID)
	if err != nil {
		return "", err
	}
	repoFindings = append(repoFindings, rd...)
	body := gating.RenderDashboard(repo.FullName, m.HTMLBase, rs.Report(ready), repoFindings, m.StatusHint)
	return m.Dashboards.Sync(ctx, repo, body, set.DryRun)
}
