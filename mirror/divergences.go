package mirror

import (
	"context"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/mirror/store"
)

// divergences computes the repository's divergences from what warden
// recorded (gating.Divergences), storing nothing.
func (m *Mirror) divergences(ctx context.Context, repo store.Repo) ([]gating.Defect, error) {
	f, err := m.repoFacts(ctx, repo)
	if err != nil {
		return nil, err
	}
	return gating.Divergences(f), nil
}

// repoFacts gathers what the divergences read from warden's records: the
// snapshot, the issues' states, the open and merged pull requests with
// their links, the heads last read green, and the merged pull requests a
// human ruled did not deliver an item (/backlog undelivered).
func (m *Mirror) repoFacts(ctx context.Context, repo store.Repo) (gating.RepoFacts, error) {
	var f gating.RepoFacts
	rs, err := m.Ledger.Snapshot(ctx, repo.ID)
	if err != nil {
		return f, err
	}
	issues, err := m.Ledger.IssueFacts(ctx, repo.ID)
	if err != nil {
		return f, err
	}
	open, err := m.Ledger.OpenPulls(ctx, repo.ID)
	if err != nil {
		return f, err
	}
	merged, err := m.Ledger.MergedPulls(ctx, repo.ID)
	if err != nil {
		return f, err
	}
	greens, err := m.Ledger.Greens(ctx, repo.ID)
	if err != nil {
		return f, err
	}
	disowned, err := m.Ledger.DisownedPRs(ctx, repo.ID)
	if err != nil {
		return f, err
	}
	f = gating.RepoFacts{Snapshot: rs.Snapshot, RepoFullName: repo.FullName, Issues: issues, Green: greens,
		Links: map[int][]gating.PRLink{}, Disowned: disowned}
	for _, p := range open {
		f.OpenPRs = append(f.OpenPRs, p.PullRequest)
		f.Links[p.Number] = gating.PRLinks(p.PullRequest, repo.FullName, rs.Snapshot)
	}
	for _, p := range merged {
		f.MergedPRs = append(f.MergedPRs, p.PullRequest)
		f.Links[p.Number] = gating.PRLinks(p.PullRequest, repo.FullName, rs.Snapshot)
	}
	return f, nil
}

// refreshDivergences recomputes the repository's divergences from what
// warden recorded, stores them, and returns the items whose findings
// changed (their report comments are the caller's to settle). No GitHub
// call.
func (m *Mirror) refreshDivergences(ctx context.Context, repo store.Repo) ([]int, error) {
	ds, err := m.divergences(ctx, repo)
	if err != nil {
		return nil, err
	}
	return m.Ledger.ReplaceDivergences(ctx, repo.ID, ds)
}

// reconcileItems re-derives the divergences after a change that bears on
// some items (a pull request merged or closed, an item completed or
// released), and settles each item whose findings changed (its report
// comment). The whole set is recomputed from the ledger.
func (m *Mirror) reconcileItems(ctx context.Context, repo store.Repo) error {
	changed, err := m.refreshDivergences(ctx, repo)
	if err != nil {
		return err
	}
	for _, n := range changed {
		if _, err := m.settleItem(ctx, repo, n); err != nil {
			return err
		}
	}
	return nil
}
