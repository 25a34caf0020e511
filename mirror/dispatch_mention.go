package mirror

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/mirror/store"
)

// Mentions that summon an agent (issue 20): a new comment that @-mentions a
// dispatched agent on an item that is not claimable gets the
// agent-dispatch-refused line in the item's report comment, as an
// assignment warden undid does. There is no assignee to remove, and warden
// cannot stop an agent that reads mentions; the backlog check run fails
// the pull request it opens (gating.JudgeCheck: an agent's pull request for
// an item that is not claimable). A claimable item gets nothing: the agent
// holds no claim until it is assigned or claims through the API.

// dispatchMentions answers the agent mentions of a newly created comment c
// by author (a person: bots' and warden's own comments summon nobody) on
// item n. A comment that is a /backlog command is the command's business
// (/backlog dispatch @Copilot names the agent it forces).
func (m *Mirror) dispatchMentions(ctx context.Context, ev Event, repo store.Repo, n int, body, author, authorType string, at time.Time) (string, error) {
	if ev.Action != "created" || ev.FromSelf || authorType != "User" {
		return "", nil
	}
	if _, isCmd := gating.ParseCommand(body); isCmd {
		return "", nil
	}
	set := m.settings(ctx, repo)
	var agents []string
	seen := map[string]bool{}
	for _, l := range gating.Mentions(body) {
		typ := ""
		if strings.HasSuffix(strings.ToLower(l), "[bot]") {
			typ = "Bot"
		}
		name := gating.DispatchAgentName(l)
		if gating.DispatchedAgent(l, typ, m.Agents, set.AgentAssignees) && !seen[name] {
			seen[name] = true
			agents = append(agents, l)
		}
	}
	if len(agents) == 0 {
		return "", nil
	}
	id := gating.IDFor(n)
	rs, err := m.Ledger.ClaimSnapshot(ctx, repo.ID, id)
	if err != nil {
		return "", fmt.Errorf("mentions of agents on %s: %w", id, err)
	}
	var outs []string
	for _, login := range agents {
		owner := gating.DispatchOwner(login, n)
		code := ""
		if it := rs.Items[id]; it != nil && it.Grant != nil && it.Grant.ReleasedAt == nil && it.Grant.LeaseExpiresAt.After(m.now()) {
			if it.Grant.Owner == owner {
				continue // the agent holds the item: its own work
			}
			code = gating.ExHeld
		} else if ok, ex := gating.Claimable(rs.Snapshot, id, owner); !ok {
			code = gating.DispatchRefusalReason(store.ReasonNotReady, ex.Reason)
		}
		if code == "" {
			continue
		}
		if set.DryRun {
			m.heldWrite(repo, "mention refusal", "item", id, "agent", login, "reason", code)
			outs = append(outs, fmt.Sprintf("mention of %s on %s: not claimable (%s; dry run, nothing recorded)", login, id, code))
			continue
		}
		d := store.Dispatch{Number: n, Delivery: ev.DeliveryID + ":mention:" + gating.DispatchAgentName(login), Login: login, Owner: owner,
			AssignedAt: m.now(), Outcome: store.DispatchRefused, Reason: code, Detail: gating.DispatchMentionDetail(login, author, n, code, "", at)}
		if _, _, err := m.Acts.RecordDispatch(ctx, repo.ID, d); err != nil {
			return "", err
		}
		m.Log.Info("agent mention on an item that is not claimable", "repo", repo.FullName, "item", id, "agent", login, "by", author, "reason", code)
		outs = append(outs, fmt.Sprintf("mention of %s on %s refused (%s)", login, id, code))
	}
	return strings.Join(outs, "; "), nil
}
