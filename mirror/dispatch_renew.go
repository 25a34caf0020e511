package mirror

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/mirror/store"
)

// dispatchEvidence renews, by agent_lease, the live dispatch claims on
// items that an act of login shows alive: login is the agent the claim was
// taken for (gating.DispatchOwner gives it the claim's owner), and what it
// did (its comment on the item, activity on its pull request linking the
// item) is the agent's evidence of work. The agent never renews a claim it
// does not know it holds, so warden does, as the agent. Renewing is done
// under dry_run too: it is the ledger's bookkeeping, not a GitHub write.
func (m *Mirror) dispatchEvidence(ctx context.Context, repo store.Repo, login string, items []int, what string) (string, error) {
	if login == "" || len(items) == 0 {
		return "", nil
	}
	set := m.settings(ctx, repo)
	lease := dispatchLease(set)
	var outs []string
	for _, n := range items {
		live, err := m.Acts.LiveDispatches(ctx, repo.ID, n)
		if err != nil {
			return "", err
		}
		for _, d := range live {
			if d.Owner != gating.DispatchOwner(login, n) {
				continue
			}
			id := gating.IDFor(n)
			res, err := m.Ledger.RenewWith(ctx, repo.ID, id, store.RenewRequest{FencingToken: d.Fence, LeaseSeconds: &lease}, dispatchActor(d.Login))
			var ref *gating.Refusal
			switch {
			case errors.As(err, &ref):
				m.Log.Info("dispatch claim not renewed", "repo", repo.FullName, "item", id, "owner", d.Owner, "reason", ref.Reason, "detail", ref.Detail)
				continue
			case err != nil:
				return "", fmt.Errorf("renew %s's dispatch claim on %s: %w", d.Owner, id, err)
			case !res.Granted:
				reason := ""
				if res.Reason != nil {
					reason = *res.Reason
				}
				m.Log.Info("dispatch claim not renewed", "repo", repo.FullName, "item", id, "owner", d.Owner, "reason", reason)
				continue
			}
			outs = append(outs, fmt.Sprintf("dispatch: %s's claim on %s (fence %d) renewed on %s", d.Owner, id, d.Fence, what))
		}
	}
	return strings.Join(outs, "; "), nil
}

// dispatchPullEvidence is dispatchEvidence for activity on a pull request
// a dispatched agent opened: every item it links.
func (m *Mirror) dispatchPullEvidence(ctx context.Context, repo store.Repo, rec store.PullRecord, authorType, action string) (string, error) {
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
	var items []int
	for _, l := range gating.PRLinks(rec.PullRequest, repo.FullName, rs.Snapshot) {
		items = append(items, l.Item.Number())
	}
	return m.dispatchEvidence(ctx, repo, rec.Author, items, fmt.Sprintf("its pull request #%d (%s)", rec.Number, action))
}
