package mirror

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/mirror/store"
)

// dispatchPullMerged completes the dispatch claims a dispatched agent's
// merged pull request proves: for each item it links whose live dispatch
// the pull request's author holds, warden writes state:complete and
// pr:<n> under the claim's fence, as the agent, when gating.ProveCompletion
// (the agent API's completion proof) holds — the pull request merged into
// the item's baseBranch: among them — then posts the outcome marker
// result=complete and releases the claim. A proof that does not hold
// records nothing: the claim stays, and the reconcile's merged-not-complete
// says what a human must decide. A research item's findings and a design-
// integration item's DAGs are not read here, so the proof refuses those
// (fail closed): their completion stays the agent API's.
func (m *Mirror) dispatchPullMerged(ctx context.Context, ev Event, repo store.Repo, rec store.PullRecord, authorType string) (string, error) {
	if !rec.Merged {
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
		n := l.Item.Number()
		live, err := m.Acts.LiveDispatches(ctx, repo.ID, n)
		if err != nil {
			return "", err
		}
		for _, d := range live {
			if d.Owner != gating.DispatchOwner(rec.Author, n) {
				continue
			}
			if set.DryRun {
				m.heldWrite(repo, "dispatch completion", "item", l.Item, "owner", d.Owner, "pr", rec.Number)
				outs = append(outs, fmt.Sprintf("dispatch: %s would be completed with pr:%d (dry run)", l.Item, rec.Number))
				continue
			}
			out, err := m.completeDispatch(ctx, ev, repo, rs, d, rec)
			if err != nil {
				return "", err
			}
			outs = append(outs, out)
		}
	}
	return strings.Join(outs, "; "), nil
}

// completeDispatch proves and records the completion of dispatch d by the
// merged pull request rec, then ends the claim (outcome marker
// result=complete, release).
func (m *Mirror) completeDispatch(ctx context.Context, ev Event, repo store.Repo, rs *store.Snapshot, d store.Dispatch, rec store.PullRecord) (string, error) {
	id := gating.IDFor(d.Number)
	before, err := m.Ledger.Get(ctx, repo.ID, id)
	if err != nil {
		return "", fmt.Errorf("complete %s for %s: %w", id, d.Owner, err)
	}
	fence := d.Fence
	add := []string{"state:complete", fmt.Sprintf("pr:%d", rec.Number)}
	p := store.Patch{FencingToken: &fence}
	for _, t := range add {
		if !before.HasTag(t) {
			p.AddTags = append(p.AddTags, t)
		}
	}
	after := before.Snapshot()
	after.Tags = append(slices.Clone(after.Tags), p.AddTags...)
	in := gating.CompletionInput{Item: after, Token: &fence, PRs: map[int]*gating.PullRequest{rec.Number: &rec.PullRequest},
		DefaultBranch: repo.DefaultBranch, RepoFullName: repo.FullName}
	if before.Grant != nil {
		g := before.Grant
		in.Claim = gating.ClaimView{Fence: before.Fence.Token, Released: before.Fence.Released, Owner: g.Owner, GrantedAt: g.GrantedAt, Purpose: g.Purpose, Branch: g.Branch}
	}
	for oid, it := range rs.Items {
		if oid != id {
			in.Items = append(in.Items, it.Snapshot())
		}
	}
	v := gating.ProveCompletion(in)
	if !v.Proven {
		m.Log.Info("dispatch completion not proven", "repo", repo.FullName, "item", id, "pr", rec.Number, "reason", v.Reason, "detail", v.Detail)
		return fmt.Sprintf("dispatch: %s not completed by #%d (%s: %s)", id, rec.Number, v.Reason, v.Detail), nil
	}
	actor := dispatchActor(d.Login)
	if len(p.AddTags) > 0 {
		tr, err := m.BeforeUpdate(ctx, repo, before, p, actor)
		if err != nil {
			return "", fmt.Errorf("complete %s for %s: %w", id, d.Owner, err)
		}
		it, err := m.Ledger.Update(ctx, repo.ID, id, p, actor, store.WriteOptions{CompletionProven: true})
		var ref *gating.Refusal
		if errors.As(err, &ref) {
			m.UpdateRefused(ctx, repo, tr, true)
			m.Log.Info("dispatch completion refused", "repo", repo.FullName, "item", id, "pr", rec.Number, "reason", ref.Reason, "detail", ref.Detail)
			return fmt.Sprintf("dispatch: completing %s by #%d refused (%s: %s)", id, rec.Number, ref.Reason, ref.Detail), nil
		} else if err != nil {
			m.UpdateRefused(ctx, repo, tr, true)
			return "", fmt.Errorf("complete %s for %s: %w", id, d.Owner, err)
		}
		m.UpdateCommitted(ctx, repo, tr, it)
		m.AfterUpdate(ctx, repo, before, it, actor)
	}
	out := fmt.Sprintf("dispatch: %s completed by #%d under %s (fence %d)", id, rec.Number, d.Owner, fence)
	// A maintenance claim (a forced dispatch) posts no marker (CONTRACT.md §8).
	posted, err := "", error(nil)
	if !d.Forced() {
		posted, err = m.completeMarker(ctx, repo, id, d, fence, rec)
	}
	if err != nil {
		return "", err
	}
	if posted != "" {
		out += "; " + posted
	}
	req := store.ReleaseRequest{FencingToken: fence}
	if key := ev.DeliveryID + ":" + string(id); ev.DeliveryID != "" && store.CheckRequestID(key) == nil {
		req.RequestID = key
	}
	if _, err := m.Ledger.ReleaseWith(ctx, repo.ID, id, req, actor); err != nil {
		return "", fmt.Errorf("release %s's dispatch claim on %s after its completion: %w", d.Owner, id, err)
	}
	if _, err := m.Acts.EndDispatch(ctx, repo.ID, d.Number, fence, store.DispatchComplete, m.now()); err != nil {
		return "", err
	}
	m.Log.Info("dispatch completed", "repo", repo.FullName, "item", id, "owner", d.Owner, "fence", fence, "pr", rec.Number)
	return out, nil
}

// completeMarker posts dispatch d's outcome marker result=complete for
// fence, unless the trail holds one.
func (m *Mirror) completeMarker(ctx context.Context, repo store.Repo, id gating.ItemID, d store.Dispatch, fence int64, rec store.PullRecord) (string, error) {
	return m.dispatchMarker(ctx, repo, id, gating.KindOutcome, fence, func() (string, error) {
		c, err := m.callsFor(repo)
		if err != nil {
			return "", err
		}
		body := gating.DispatchOutcomeMarker(id, d.Owner, fence, "complete") + "\n" +
			fmt.Sprintf("warden recorded `state:complete` for `%s`: its pull request #%d merged into `%s`.", d.Login, rec.Number, rec.BaseRef)
		if _, err := c.createComment(ctx, d.Number, body); err != nil {
			return "", fmt.Errorf("post the outcome marker on %s#%d: %w", repo.FullName, d.Number, err)
		}
		return fmt.Sprintf("outcome marker posted for fence %d", fence), nil
	})
}
