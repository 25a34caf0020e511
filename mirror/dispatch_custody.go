package mirror

import (
	"context"
	"fmt"
	"strconv"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/mirror/store"
)

// Custody changes (issue 20): reassigning an item from one agent to another
// is a custody change, an attempt like any other. Whichever of the two
// deliveries (the first agent unassigned, the second assigned) comes
// first, the first agent's dispatch claim is released and the second's is
// taken with the takeover marker naming it, which warden can vouch for:
// both claims are its own. Three custody changes park the item as any three
// attempts do.

// reassign releases the live dispatches on item n of agents other than
// owner before owner's claim is taken (the second agent assigned before the
// first was unassigned). A dispatch a human forced (a maintenance claim) is
// not released by an assignment: the assignment is refused as held, and
// the human's act stands until the agent is unassigned.
func (m *Mirror) reassign(ctx context.Context, ev Event, repo store.Repo, n int, live []store.Dispatch, owner string) (held string, outs []string, err error) {
	id := gating.IDFor(n)
	for _, d := range live {
		if d.Owner == owner {
			continue
		}
		if d.Forced() {
			return d.Owner, nil, nil
		}
		// One release per fence: a delivery may end more than one.
		out, err := m.releaseDispatch(ctx, ev.DeliveryID+":reassign-"+strconv.FormatInt(d.Fence, 10), repo, id, d, "reassigned")
		if err != nil {
			return "", nil, fmt.Errorf("reassign %s: %w", id, err)
		}
		outs = append(outs, out)
	}
	return "", outs, nil
}

// dispatchPrior is the claim a dispatch claim with fence takes custody
// from, when warden can vouch for it: the grant just before it is another
// agent's dispatch claim (not a maintenance claim) that warden recorded.
// nil when there is none, or when the trail names a prior itself.
func (m *Mirror) dispatchPrior(ctx context.Context, repo store.Repo, id gating.ItemID, fence int64) (*gating.PriorClaim, error) {
	grants, err := m.Ledger.Grants(ctx, repo.ID, id)
	if err != nil {
		return nil, fmt.Errorf("read the grant log of %s: %w", id, err)
	}
	var prev, cur *store.Grant
	for i := range grants {
		if grants[i].Fence == fence {
			cur = &grants[i]
			break
		}
		prev = &grants[i]
	}
	if cur == nil || prev == nil || prev.Purpose == "maintenance" || prev.Owner == cur.Owner {
		return nil, nil
	}
	ds, err := m.Acts.Dispatches(ctx, repo.ID, id.Number())
	if err != nil {
		return nil, err
	}
	for _, d := range ds {
		if d.Fence == prev.Fence && d.Owner == prev.Owner && d.Outcome != store.DispatchRefused && !d.Forced() {
			return &gating.PriorClaim{Owner: prev.Owner, Fence: prev.Fence}, nil
		}
	}
	return nil, nil
}

// postDispatchClaimMarker posts the claim marker of dispatch claim fence:
// the takeover form when it takes custody from another agent's dispatch
// (dispatchPrior), else the marker postClaimMarker writes from the trail.
func (m *Mirror) postDispatchClaimMarker(ctx context.Context, repo store.Repo, id gating.ItemID, fence int64) (string, error) {
	prior, err := m.dispatchPrior(ctx, repo, id, fence)
	if err != nil || prior == nil {
		if err != nil {
			return "", err
		}
		return m.postClaimMarker(ctx, repo, id, fence, false)
	}
	grants, err := m.Ledger.Grants(ctx, repo.ID, id)
	if err != nil {
		return "", fmt.Errorf("read the grant log of %s: %w", id, err)
	}
	for _, g := range grants {
		if g.Fence != fence {
			continue
		}
		c, err := m.callsFor(repo)
		if err != nil {
			return "", err
		}
		body := gating.ClaimMarker(string(id), g.Owner, g.Region, g.Fence, g.GrantedAt, prior)
		if _, err := c.createComment(ctx, id.Number(), body); err != nil {
			return "", fmt.Errorf("post the takeover marker on %s#%d: %w", repo.FullName, id.Number(), err)
		}
		return fmt.Sprintf("takeover marker posted for fence %d (%s, from %s's fence %d)", g.Fence, g.Owner, prior.Owner, prior.Fence), nil
	}
	return "", fmt.Errorf("no grant with fence %d in the grant log of %s", fence, id)
}
