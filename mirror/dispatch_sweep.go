package mirror

import (
	"context"
	"errors"
	"fmt"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/mirror/store"
)

// sweepDispatches is the timer pass over a repository's live dispatches
// (rs its snapshot): a dispatch claim whose lease lapsed is released as the
// agent, with the outcome marker result=released saying the lease lapsed
// with no evidence of work (the agent's evidence renews it:
// dispatch_renew.go); one whose claim already ended otherwise (released
// through the API or a command, or taken over under a newer fence) is
// marked ended without a marker of warden's. Under dry_run nothing is
// written.
func (m *Mirror) sweepDispatches(ctx context.Context, repo store.Repo, rs *store.Snapshot) ([]string, error) {
	if live, err := m.Acts.AnyLiveDispatch(ctx, repo.ID); err != nil || !live {
		return nil, err
	}
	ds, err := m.Acts.AllLiveDispatches(ctx, repo.ID)
	if err != nil {
		return nil, err
	}
	set := m.settings(ctx, repo)
	now := m.now()
	var outs []string
	var errs []error
	for _, d := range ds {
		id := gating.IDFor(d.Number)
		it := rs.Items[id]
		var g *store.Grant
		if it != nil {
			g = it.Grant
		}
		switch {
		case g != nil && g.Fence == d.Fence && g.ReleasedAt == nil && g.LeaseExpiresAt.After(now):
			continue // held
		case g != nil && g.Fence == d.Fence && g.ReleasedAt == nil:
			if set.DryRun {
				m.heldWrite(repo, "dispatch release", "item", id, "owner", d.Owner, "fence", d.Fence)
				continue
			}
			out, err := m.releaseDispatch(ctx, "", repo, id, d, "lease lapsed")
			if err != nil {
				errs = append(errs, fmt.Errorf("%s %s: %w", repo.FullName, id, err))
				continue
			}
			outs = append(outs, out)
			if _, err := m.settleItem(ctx, repo, d.Number); err != nil {
				errs = append(errs, fmt.Errorf("%s %s: %w", repo.FullName, id, err))
			}
		default:
			// Ended by someone else (or the item is gone): nothing of the
			// agent's to release.
			if set.DryRun {
				continue
			}
			if _, err := m.Acts.EndDispatch(ctx, repo.ID, d.Number, d.Fence, store.DispatchReleased, now); err != nil {
				errs = append(errs, err)
				continue
			}
			outs = append(outs, fmt.Sprintf("dispatch: %s's claim on %s (fence %d) ended elsewhere", d.Owner, id, d.Fence))
		}
	}
	return outs, errors.Join(errs...)
}
