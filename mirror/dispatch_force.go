package mirror

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/mirror/store"
)

// A forced dispatch (issue 20): "/backlog dispatch @<agent>" by a human with
// triage or more hands an item to a dispatched agent whatever the ready set
// says. warden takes a maintenance claim for the agent (readiness skipped,
// as for a pm's repair; no marker and no attempt, CONTRACT.md §8), records
// it as the human's act (the dispatch's forced_by names them), and assigns
// the agent on GitHub. The claim then lives as any dispatch claim does:
// renewed by the agent's work, ended by its merge, its unassignment, its
// pull request's close or a lapse.

// addAssigneeCalls are the GitHub calls of a forced dispatch.
type addAssigneeCalls interface {
	// addAssignees adds logins to issue n's assignees (GitHub leaves one
	// already assigned as it is, and sends no delivery for it).
	addAssignees(ctx context.Context, n int, logins []string) error
}

// forceDispatch carries out /backlog dispatch @agent on item n for by (a
// human with triage or more, checked by runCommand). A *commandRefusal says
// why it was not done.
func (m *Mirror) forceDispatch(ctx context.Context, repo store.Repo, set gating.Settings, n int, agent, by string, at time.Time) (string, error) {
	id := gating.IDFor(n)
	typ := ""
	if strings.HasSuffix(strings.ToLower(agent), "[bot]") {
		typ = "Bot" // an app's account: GitHub gives only those the suffix
	}
	if !gating.DispatchedAgent(agent, typ, m.Agents, set.AgentAssignees) {
		return "", refuseCommand("@%s is not a dispatched agent: dispatch names GitHub's coding agent (@Copilot), a login in WARDEN_AGENTS or agent_assignees, or an app's [bot] account", agent)
	}
	owner := gating.DispatchOwner(agent, n)
	// The command's key: one command a minute per person and item, so the
	// author and the comment's instant name it. A retry (the command failed
	// after its claim, on a GitHub call) finds its own dispatch and goes on
	// from there; the claim's requestId replays the grant.
	key := fmt.Sprintf("command:%s:%d", strings.ToLower(by), at.UnixMilli())
	if store.CheckRequestID(key) != nil {
		key = fmt.Sprintf("command:%d", at.UnixMilli())
	}
	if prev, err := m.Acts.DispatchByDelivery(ctx, repo.ID, n, key); err == nil && prev.Live() {
		return m.forceAssign(ctx, repo, id, prev, "")
	} else if err != nil && !errors.Is(err, store.ErrNotFound) {
		return "", err
	}
	live, err := m.Acts.LiveDispatches(ctx, repo.ID, n)
	if err != nil {
		return "", err
	}
	for _, d := range live {
		if d.Owner == owner {
			return "", refuseCommand("%s already holds %s (fence %d): nothing to force", owner, id, d.Fence)
		}
	}
	if set.DryRun {
		m.heldWrite(repo, "forced dispatch", "item", id, "owner", owner, "by", by)
		return fmt.Sprintf("dispatch: %s would be claimed for %s by %s's /backlog dispatch (dry run)", id, owner, by), nil
	}
	lease := dispatchLease(set)
	req := store.ClaimRequest{Owner: owner, LeaseSeconds: &lease, Purpose: "maintenance", RequestID: key}
	res, err := m.Ledger.Claim(ctx, repo.ID, id, req, store.Actor{Role: gating.RoleHuman, Name: by})
	var ref *gating.Refusal
	if errors.As(err, &ref) {
		return "", refuseCommand("the ledger refused the claim for %s (%s: %s)", owner, ref.Reason, ref.Detail)
	} else if err != nil {
		return "", fmt.Errorf("force the dispatch of %s to %s: claim: %w", id, agent, err)
	}
	if !res.Granted || res.FencingToken == nil {
		return "", m.forceRefusal(ctx, repo, id, owner, res)
	}
	fence := *res.FencingToken
	d := store.Dispatch{Number: n, Delivery: key, Login: agent, Owner: owner, Fence: fence,
		AssignedAt: m.now(), Outcome: store.DispatchGranted, ForcedBy: by}
	if _, _, err := m.Acts.RecordDispatch(ctx, repo.ID, d); err != nil {
		return "", err
	}
	return m.forceAssign(ctx, repo, id, d, fmt.Sprintf(", lease %.0fs", derefSeconds(res.LeaseSeconds)))
}

// forceAssign assigns forced dispatch d's agent on GitHub (a retry assigns
// again: GitHub keeps one assignee once) and says what was done.
func (m *Mirror) forceAssign(ctx context.Context, repo store.Repo, id gating.ItemID, d store.Dispatch, lease string) (string, error) {
	c, err := m.callsFor(repo)
	if err != nil {
		return "", err
	}
	ac, ok := c.(addAssigneeCalls)
	if !ok {
		return "", fmt.Errorf("force the dispatch of %s to %s: these GitHub calls cannot add assignees", id, d.Login)
	}
	if err := ac.addAssignees(ctx, d.Number, []string{d.Login}); err != nil {
		return "", fmt.Errorf("force the dispatch of %s to %s: assign the agent: %w", id, d.Login, err)
	}
	m.Log.Info("dispatch forced", "repo", repo.FullName, "item", id, "owner", d.Owner, "fence", d.Fence, "by", d.ForcedBy)
	return fmt.Sprintf("dispatch: %s forced to %s by %s (maintenance claim, fence %d%s); %s assigned", id, d.Owner, d.ForcedBy, d.Fence, lease, d.Login), nil
}

// forceRefusal says why the ledger did not grant a forced dispatch's
// maintenance claim: the item missing, in another region, or held (by
// whom).
func (m *Mirror) forceRefusal(ctx context.Context, repo store.Repo, id gating.ItemID, owner string, res store.ClaimResult) error {
	reason := ""
	if res.Reason != nil {
		reason = *res.Reason
	}
	switch reason {
	case store.ReasonContended:
		it, err := m.Ledger.Get(ctx, repo.ID, id)
		if err == nil && it.Grant != nil {
			return refuseCommand("%s is held by %s (fence %d, lease until %s): a forced dispatch does not take over a held claim; it must be released or lapse first",
				id, it.Grant.Owner, it.Grant.Fence, it.Grant.LeaseExpiresAt.UTC().Format(time.RFC3339))
		}
		return refuseCommand("%s is held by another claim: a forced dispatch does not take over a held claim", id)
	case store.ReasonForeignRegion:
		return refuseCommand("%s's homeRegion is not this deployment's region; claim it where it lives", id)
	case store.ReasonMissing:
		return refuseCommand("%s is not in the ledger", id)
	}
	return refuseCommand("the ledger did not grant the claim for %s (%s)", owner, reason)
}
