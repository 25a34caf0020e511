package mirror

import (
	"context"
	"strings"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/mirror/store"
)

// dispatchPullClosed ends the dispatch claims of a dispatched agent's pull
// request closed without being merged: each item the pull request links
// whose live dispatch the pull request's author holds is released as on an
// unassignment (dispatchEnd), with the outcome marker result=released. A
// pull request by anyone else, or merged, ends nothing here.
func (m *Mirror) dispatchPullClosed(ctx context.Context, ev Event, repo store.Repo, rec store.PullRecord, authorType string) (string, error) {
	if rec.Merged || rec.State != "closed" {
		return "", nil
	}
	set := m.settings(ctx, repo)
	if !gating.DispatchedAgent(rec.Author, authorType, m.Agents, set.AgentAssignees) {
		return "", nil
	}
	if live, err := m.Acts.AnyLiveDispatch(ctx, repo.ID); err != nil || !live {
		return "", err
	}
	rs, err := m.Ledger.Snapshot(ctx, repo.ID)
	if err != nil {
		return "", err
	}
	var outs []string
	for _, l := range gating.PRLinks(rec.PullRequest, repo.FullName, rs.Snapshot) {
		out, err := m.dispatchEnd(ctx, ev.DeliveryID, repo, set, l.Item.Number(), rec.Author, "pull request closed")
		if err != nil {
			return "", err
		}
		if out != "" {
			outs = append(outs, out)
		}
	}
	return strings.Join(outs, "; "), nil
}
