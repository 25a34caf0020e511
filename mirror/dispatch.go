package mirror

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/mirror/store"
)

// Dispatch by assignment (issue 20): assigning an item to an agent is a
// claim. On issues.assigned of a dispatched agent (gating.DispatchedAgent)
// warden takes the item's claim through the ledger's Claim, the path the
// agent API takes, so gating.Claimable and every refusal are the ledger's:
// granted, it posts the claim marker for the agent (whatever post_markers
// says: these agents do not know the protocol) and records the dispatch;
// refused, it removes the assignee, records the refusal (listed as
// agent-dispatch-refused in the item's report comment) and counts it. On
// issues.unassigned of the agent, its live dispatch claim is released and
// the outcome marker result=released posted. Every step is idempotent on a
// redelivery: the claim carries the delivery id as its requestId, the
// dispatch is recorded under it, and a marker the trail already holds is
// not posted again.

// dispatchCalls are the GitHub calls of a refused dispatch.
type dispatchCalls interface {
	// removeAssignees removes logins from issue n's assignees.
	removeAssignees(ctx context.Context, n int, logins []string) error
}

// assignPayload is what an issues.assigned or issues.unassigned delivery
// says about the assignment.
type assignPayload struct {
	Assignee *struct {
		Login string `json:"login"`
		Type  string `json:"type"`
	} `json:"assignee"`
}

// dispatchStep handles an assigned or unassigned delivery about item n.
// It returns "" when the assignee is no dispatched agent (nothing to do).
func (m *Mirror) dispatchStep(ctx context.Context, ev Event, repo store.Repo, set gating.Settings, n int) (string, error) {
	var p assignPayload
	if err := json.Unmarshal(ev.Payload, &p); err != nil {
		return "", payloadErr("issues.%s payload: %w", ev.Action, err)
	}
	if p.Assignee == nil || !gating.DispatchedAgent(p.Assignee.Login, p.Assignee.Type, m.Agents, set.AgentAssignees) {
		return "", nil
	}
	login := p.Assignee.Login
	switch ev.Action {
	case "assigned":
		return m.dispatchAssigned(ctx, ev, repo, set, n, login)
	case "unassigned":
		return m.dispatchEnd(ctx, ev.DeliveryID, repo, set, n, login, "unassigned")
	}
	return "", nil
}

// dispatchActor is the ledger actor warden claims, renews and releases a
// dispatched agent's claim as: a worker named for the agent, so the
// owner's rules, the claim cap and the trail are the ones a worker meets.
func dispatchActor(login string) store.Actor {
	return store.Actor{Role: gating.RoleWorker, Name: gating.DispatchAgentName(login)}
}

// dispatchLease is the lease asked for a dispatch: agent_lease, or its
// default when the settings in effect predate it. The ledger clamps it to
// the deployment's ceiling.
func dispatchLease(set gating.Settings) float64 {
	if set.AgentLease <= 0 {
		return gating.DefaultAgentLease.Seconds()
	}
	return set.AgentLease.Seconds()
}

// dispatchAssigned takes the claim for login assigned to item n, or undoes
// the assignment and says why.
func (m *Mirror) dispatchAssigned(ctx context.Context, ev Event, repo store.Repo, set gating.Settings, n int, login string) (string, error) {
	id := gating.IDFor(n)
	owner := gating.DispatchOwner(login, n)
	if prev, err := m.Acts.DispatchByDelivery(ctx, repo.ID, n, ev.DeliveryID); err == nil {
		// A redelivery: what the first delivery did stands. A granted
		// dispatch's marker is posted if the trail still lacks it.
		if prev.Outcome == store.DispatchRefused {
			return fmt.Sprintf("dispatch of %s to %s already refused (%s)", id, login, prev.Reason), nil
		}
		out := fmt.Sprintf("dispatch: %s already handled for %s (fence %d, %s)", id, prev.Owner, prev.Fence, prev.Outcome)
		if prev.Live() {
			posted, err := m.dispatchMarker(ctx, repo, id, gating.KindClaim, prev.Fence, func() (string, error) {
				return m.postDispatchClaimMarker(ctx, repo, id, prev.Fence)
			})
			if err != nil {
				return "", fmt.Errorf("dispatch %s to %s: %w", id, login, err)
			}
			if posted != "" {
				out += "; " + posted
			}
		}
		return out, nil
	} else if !errors.Is(err, store.ErrNotFound) {
		return "", err
	}
	live, err := m.Acts.LiveDispatches(ctx, repo.ID, n)
	if err != nil {
		return "", err
	}
	for _, d := range live {
		if d.Owner == owner {
			// The same agent under another of its logins, or assigned again:
			// the custody it holds continues.
			return fmt.Sprintf("dispatch: %s already holds %s (fence %d)", owner, id, d.Fence), nil
		}
	}
	if set.DryRun {
		return m.dispatchDry(ctx, repo, n, login, owner)
	}
	// Another agent's live dispatch: a reassignment (dispatch_custody.go).
	held, released, err := m.reassign(ctx, ev, repo, n, live, owner)
	if err != nil {
		return "", err
	}
	if held != "" {
		return m.dispatchRefused(ctx, ev, repo, n, login, owner, gating.ExHeld,
			fmt.Sprintf("a human forced its dispatch to %s with /backlog dispatch; unassign that agent first", held))
	}
	lease := dispatchLease(set)
	req := store.ClaimRequest{Owner: owner, LeaseSeconds: &lease, RequestID: ev.DeliveryID}
	res, err := m.Ledger.Claim(ctx, repo.ID, id, req, dispatchActor(login))
	var ref *gating.Refusal
	if errors.As(err, &ref) {
		return m.dispatchRefused(ctx, ev, repo, n, login, owner, gating.DispatchRefusalReason(ref.Reason, ""), ref.Detail)
	} else if err != nil {
		return "", fmt.Errorf("dispatch %s to %s: claim: %w", id, login, err)
	}
	if !res.Granted || res.FencingToken == nil {
		reason, excl := "", ""
		if res.Reason != nil {
			reason = *res.Reason
		}
		if res.Exclusion != nil {
			excl = *res.Exclusion
		}
		return m.dispatchRefused(ctx, ev, repo, n, login, owner, gating.DispatchRefusalReason(reason, excl), "")
	}
	fence := *res.FencingToken
	out := fmt.Sprintf("dispatch: %s claimed for %s (fence %d, lease %.0fs)", id, owner, fence, derefSeconds(res.LeaseSeconds))
	for _, r := range released {
		out = r + "; " + out
	}
	posted, err := m.dispatchMarker(ctx, repo, id, gating.KindClaim, fence, func() (string, error) {
		return m.postDispatchClaimMarker(ctx, repo, id, fence)
	})
	if err != nil {
		return "", fmt.Errorf("dispatch %s to %s: %w", id, login, err)
	}
	if posted != "" {
		out += "; " + posted
	}
	d := store.Dispatch{Number: n, Delivery: ev.DeliveryID, Login: login, Owner: owner, Fence: fence, AssignedAt: m.now(), Outcome: store.DispatchGranted}
	if _, _, err := m.Acts.RecordDispatch(ctx, repo.ID, d); err != nil {
		return "", err
	}
	m.Log.Info("dispatch granted", "repo", repo.FullName, "item", id, "owner", owner, "fence", fence, "replayed", res.Replayed)
	return out, nil
}

func derefSeconds(p *float64) float64 {
	if p == nil {
		return 0
	}
	return *p
}

// dispatchRefused removes login from item n's assignees, records the
// refusal (the report line) and counts it; a redelivery removes the
// assignee again (harmless) but neither records nor counts twice.
func (m *Mirror) dispatchRefused(ctx context.Context, ev Event, repo store.Repo, n int, login, owner, code, why string) (string, error) {
	id := gating.IDFor(n)
	c, err := m.callsFor(repo)
	if err != nil {
		return "", err
	}
	dc, ok := c.(dispatchCalls)
	if !ok {
		return "", fmt.Errorf("dispatch of %s to %s refused (%s), and the assignee cannot be removed: these GitHub calls cannot remove assignees", id, login, code)
	}
	if err := dc.removeAssignees(ctx, n, []string{login}); err != nil && !errors.Is(err, errNotFound) {
		return "", fmt.Errorf("dispatch of %s to %s refused (%s): remove the assignee: %w", id, login, code, err)
	}
	at := m.now()
	d := store.Dispatch{Number: n, Delivery: ev.DeliveryID, Login: login, Owner: owner, AssignedAt: at, Outcome: store.DispatchRefused,
		Reason: code, Detail: gating.DispatchRefusedDetail(login, n, code, why, at, false)}
	_, fresh, err := m.Acts.RecordDispatch(ctx, repo.ID, d)
	if err != nil {
		return "", err
	}
	if fresh {
		m.Dispatch.refused(code)
	}
	m.Log.Info("dispatch refused", "repo", repo.FullName, "item", id, "assignee", login, "reason", code)
	return fmt.Sprintf("dispatch of %s to %s refused (%s): assignee removed", id, login, code), nil
}

// dispatchDry says what a dispatch would do under dry_run, writing
// nothing: the ledger is read (gating.Claimable on the claim's own
// snapshot), neither claimed nor recorded, and GitHub is not called.
func (m *Mirror) dispatchDry(ctx context.Context, repo store.Repo, n int, login, owner string) (string, error) {
	id := gating.IDFor(n)
	rs, err := m.Ledger.ClaimSnapshot(ctx, repo.ID, id)
	if err != nil {
		return "", fmt.Errorf("dispatch %s to %s (dry run): %w", id, login, err)
	}
	code := ""
	if c, ok := rs.Snapshot.Candidate(id); ok && c.Claim.Owner != owner && gating.ClaimStateOf(c.Claim, m.now(), rs.Snapshot.Quarantine) == gating.StateHeld {
		code = gating.ExHeld // what the ledger answers contended
	} else if ok, ex := gating.Claimable(rs.Snapshot, id, owner); !ok {
		code = gating.DispatchRefusalReason(store.ReasonNotReady, ex.Reason)
	}
	if code == "" {
		m.heldWrite(repo, "dispatch claim", "item", id, "owner", owner)
		return fmt.Sprintf("dispatch: %s would be claimed for %s and the claim marker posted (dry run)", id, owner), nil
	}
	m.heldWrite(repo, "dispatch refusal", "item", id, "assignee", login, "reason", code)
	return fmt.Sprintf("dispatch of %s to %s would be refused (%s): the assignee would be removed (dry run)", id, login, code), nil
}

// dispatchEnd ends login's live dispatch claim on item n (the agent
// unassigned, or its pull request closed unmerged: why): released as the
// agent, the outcome marker result=released posted, the dispatch marked
// released. Nothing live: nothing to do. Under dry_run nothing is written.
func (m *Mirror) dispatchEnd(ctx context.Context, requestID string, repo store.Repo, set gating.Settings, n int, login, why string) (string, error) {
	id := gating.IDFor(n)
	owner := gating.DispatchOwner(login, n)
	live, err := m.Acts.LiveDispatches(ctx, repo.ID, n)
	if err != nil {
		return "", err
	}
	var outs []string
	for _, d := range live {
		if d.Owner != owner {
			continue
		}
		if set.DryRun {
			m.heldWrite(repo, "dispatch release", "item", id, "owner", owner, "fence", d.Fence)
			outs = append(outs, fmt.Sprintf("dispatch: %s's claim on %s (fence %d) would be released (%s; dry run)", owner, id, d.Fence, why))
			continue
		}
		out, err := m.releaseDispatch(ctx, requestID, repo, id, d, why)
		if err != nil {
			return "", err
		}
		outs = append(outs, out)
	}
	return strings.Join(outs, "; "), nil
}

// releaseDispatch releases dispatch d's claim (its fence), posts the
// outcome marker unless the trail holds one for the fence, and ends d.
func (m *Mirror) releaseDispatch(ctx context.Context, requestID string, repo store.Repo, id gating.ItemID, d store.Dispatch, why string) (string, error) {
	// The release is keyed by the delivery and the item (a delivery may end
	// several items' dispatches: a pull request linking two), so a
	// redelivery is answered with the first release's answer.
	req := store.ReleaseRequest{FencingToken: d.Fence}
	if key := requestID + ":" + string(id); requestID != "" && store.CheckRequestID(key) == nil {
		req.RequestID = key
	}
	rel, err := m.Ledger.ReleaseWith(ctx, repo.ID, id, req, dispatchActor(d.Login))
	if err != nil {
		return "", fmt.Errorf("release %s's dispatch claim on %s (fence %d): %w", d.Owner, id, d.Fence, err)
	}
	what := "released"
	if !rel.Released {
		what = "already ended"
		if rel.Reason != nil {
			what += " (" + *rel.Reason + ")"
		}
	}
	out := fmt.Sprintf("dispatch: %s's claim on %s (fence %d) %s (%s)", d.Owner, id, d.Fence, what, why)
	if d.Forced() || !rel.Released {
		// A maintenance claim posts no marker, outcome included (CONTRACT.md
		// §8); a claim that had already ended (taken over under a newer
		// fence, released elsewhere) gets none of warden's either: a marker
		// naming the prior claim after a takeover would be the prior
		// owner's activity, a takeover collision.
		if _, err := m.Acts.EndDispatch(ctx, repo.ID, id.Number(), d.Fence, store.DispatchReleased, m.now()); err != nil {
			return "", err
		}
		m.Log.Info("dispatch ended without a marker", "forced", d.Forced(), "repo", repo.FullName, "item", id, "owner", d.Owner, "fence", d.Fence, "why", why)
		return out, nil
	}
	posted, err := m.dispatchMarker(ctx, repo, id, gating.KindOutcome, d.Fence, func() (string, error) {
		c, err := m.callsFor(repo)
		if err != nil {
			return "", err
		}
		body := gating.DispatchOutcomeMarker(id, d.Owner, d.Fence, "released") + "\n" +
			fmt.Sprintf("warden released this claim for `%s`: %s.", d.Login, dispatchEndProse(why))
		if _, err := c.createComment(ctx, id.Number(), body); err != nil {
			return "", fmt.Errorf("post the outcome marker on %s#%d: %w", repo.FullName, id.Number(), err)
		}
		return fmt.Sprintf("outcome marker posted for fence %d", d.Fence), nil
	})
	if err != nil {
		return "", err
	}
	if posted != "" {
		out += "; " + posted
	}
	if _, err := m.Acts.EndDispatch(ctx, repo.ID, id.Number(), d.Fence, store.DispatchReleased, m.now()); err != nil {
		return "", err
	}
	m.Log.Info("dispatch ended", "repo", repo.FullName, "item", id, "owner", d.Owner, "fence", d.Fence, "why", why)
	return out, nil
}

func dispatchEndProse(why string) string {
	switch why {
	case "unassigned":
		return "the agent was unassigned from the issue"
	case "pull request closed":
		return "the agent's pull request was closed without being merged"
	case "lease lapsed":
		return "the claim's lease lapsed with no evidence of work from the agent"
	case "reassigned":
		return "the item was assigned to another agent, which takes custody of it"
	}
	return why
}

// dispatchMarker posts a marker of kind for fence with post, unless the
// item's trail already holds one (a redelivery after the post).
func (m *Mirror) dispatchMarker(ctx context.Context, repo store.Repo, id gating.ItemID, kind gating.MarkerKind, fence int64, post func() (string, error)) (string, error) {
	rs, err := m.Ledger.ClaimSnapshot(ctx, repo.ID, id)
	if err != nil {
		return "", fmt.Errorf("read the trail of %s: %w", id, err)
	}
	if tr, ok := rs.Trails[id]; ok {
		for _, b := range tr.Backed {
			if b.Marker.Kind == kind && b.Marker.Fence == fence {
				return "", nil
			}
		}
	}
	return post()
}
