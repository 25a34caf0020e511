package mirror

import (
	"context"
	"fmt"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/mirror/store"
)

// The agent API's writes bring GitHub in step through these hooks
// (agentapi.WriteObserver). They run after the ledger's write has
// committed and cannot undo it: a failure is logged, and the timer pass
// (Sweep) or the next delivery about the item finishes the job.

// AfterClaim posts the claim marker for a custody-changing grant warden
// made, when the repository's post_markers is on (CONTRACT.md §6): the
// takeover form when the prior grant was another owner's and neither
// released nor closed; never for a maintenance claim, nor for a same-owner
// re-claim of its own lapsed claim (no attempt, no new marker).
func (m *Mirror) AfterClaim(ctx context.Context, repo store.Repo, id gating.ItemID, res store.ClaimResult, purpose string) {
	set := m.settings(ctx, repo)
	if !set.PostMarkers || purpose == "maintenance" || res.FencingToken == nil {
		return
	}
	if out, err := m.postClaimMarker(ctx, repo, id, *res.FencingToken, set.DryRun); err != nil {
		m.Log.Warn("post_markers: the claim marker was not posted", "repo", repo.FullName, "item", id, "err", err)
	} else if out != "" {
		m.Log.Info("post_markers", "repo", repo.FullName, "item", id, "outcome", out)
	}
}

// claimMarkerCalls are the GitHub calls of the API's writes: the claim
// marker, and the parked label a human token's unpark takes off.
type claimMarkerCalls interface {
	labelCalls
	// createComment posts body on issue n and returns the comment's id.
	createComment(ctx context.Context, n int, body string) (int64, error)
}

// postClaimMarker posts the claim marker for the grant with fence when the
// trail counts that grant as a custody change of the work (none for a
// same-owner re-claim, across maintenance claims too: the protocol posts
// none, and a second marker is duplicate-claim-marker), in the takeover form
// naming the claim it took; dry (dry_run) logs it and posts nothing. The
// judgement is gating.EvaluateTrail's, over the item's whole trail, so a
// claim closed by an outcome marker or an unpark between makes it an attempt
// here exactly as it does in the count.
func (m *Mirror) postClaimMarker(ctx context.Context, repo store.Repo, id gating.ItemID, fence int64, dry bool) (string, error) {
	grants, err := m.Ledger.Grants(ctx, repo.ID, id)
	if err != nil {
		return "", err
	}
	cur := -1
	for i, g := range grants {
		if g.Fence == fence {
			cur = i
		}
	}
	if cur < 0 {
		return "", fmt.Errorf("no grant with fence %d in the grant log of %s", fence, id)
	}
	g := grants[cur]
	rs, err := m.Ledger.ClaimSnapshot(ctx, repo.ID, id)
	if err != nil {
		return "", fmt.Errorf("read the trail of %s: %w", id, err)
	}
	tr, ok := rs.Trails[id]
	if !ok {
		return "", fmt.Errorf("the snapshot of %s has no trail: no marker posted", id)
	}
	attempt, prior := tr.Custody(fence)
	if !attempt {
		return "same-owner re-claim: custody did not change, no marker", nil
	}
	body := gating.ClaimMarker(string(id), g.Owner, g.Region, g.Fence, g.GrantedAt, prior)
	if dry {
		m.heldWrite(repo, "claim marker", "item", id, "body", body)
		return fmt.Sprintf("claim marker for fence %d (%s) not posted (dry run)", g.Fence, g.Owner), nil
	}
	c, err := m.callsFor(repo)
	if err != nil {
		return "", err
	}
	if _, err := c.createComment(ctx, id.Number(), body); err != nil {
		return "", fmt.Errorf("post the claim marker on %s#%d: %w", repo.FullName, id.Number(), err)
	}
	return fmt.Sprintf("claim marker posted for fence %d (%s)", g.Fence, g.Owner), nil
}

// AfterRelease settles the item: a release that leaves it poisoned this
// epoch parks it now, rather than at the next timer pass.
func (m *Mirror) AfterRelease(ctx context.Context, repo store.Repo, id gating.ItemID) {
	// A released item with a green PR is resumable; divergences follow.
	if err := m.reconcileItems(ctx, repo); err != nil {
		m.Log.Warn("after a release", "repo", repo.FullName, "item", id, "err", err)
	}
	if out, err := m.settleItem(ctx, repo, id.Number()); err != nil {
		m.Log.Warn("after a release", "repo", repo.FullName, "item", id, "err", err)
	} else if out != "" {
		m.Log.Info("after a release", "repo", repo.FullName, "item", id, "outcome", out)
	}
}

// AfterUpdate follows a tag write made through the API: a human token that
// removed state:parked unparked the item (a new epoch; the parked label
// comes off); state:parked written by any token gets its label (the tag is
// the half that has effect). Then the item is settled.
func (m *Mirror) AfterUpdate(ctx context.Context, repo store.Repo, before, after store.Item, actor store.Actor) {
	n := after.ID.Number()
	err := func() error {
		if before.HasTag("state:parked") && !after.HasTag("state:parked") && actor.Role == gating.RoleHuman {
			if err := m.unparked(ctx, repo, n, m.now(), actor.Name); err != nil {
				return err
			}
			c, err := m.callsFor(repo)
			if err != nil {
				return err
			}
			set := m.settings(ctx, repo)
			if err := m.removeLabel(ctx, c, repo, set, n, set.ParkedLabel); err != nil {
				return err
			}
		}
		// Completion, pr: tags, baseBranch: and edges change divergences.
		if err := m.reconcileItems(ctx, repo); err != nil {
			return err
		}
		_, err := m.settleItem(ctx, repo, n)
		return err
	}()
	if err != nil {
		m.Log.Warn("after an API write", "repo", repo.FullName, "item", after.ID, "err", err)
	}
}

// AfterPark follows a park an API write made with its question (a worker's
// park must carry one): the park is recorded, at the writer's fence, with
// its route and question, then finished like warden's own parks — the
// parked label, then the park comment naming the question. A failure
// leaves the record for the timer pass (Sweep) to finish.
func (m *Mirror) AfterPark(ctx context.Context, repo store.Repo, it store.Item, fence int64, actor store.Actor, question string) {
	n := it.ID.Number()
	snap := it.Snapshot()
	owner, _ := snap.Tag("ruling-owner")
	topic, _ := snap.Tag("ruling-topic")
	rec := &store.ParkRecord{Fence: fence, RulingOwner: owner, RulingTopic: topic, Question: question, Stage: store.ParkTagged, At: m.now()}
	err := func() error {
		if err := m.Acts.PutParkRecord(ctx, repo.ID, n, *rec); err != nil {
			return err
		}
		if err := m.Acts.CloseLabelFinding(ctx, repo.ID, n, CodeParkLabelWithoutTag); err != nil {
			return err
		}
		return m.finishPark(ctx, repo, m.settings(ctx, repo), n, rec)
	}()
	if err != nil {
		m.Log.Warn("after an API park: the park comment was not posted yet", "repo", repo.FullName, "item", it.ID, "by", actor.Name, "err", err)
	}
}
