package store

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/wardenhq/warden/gating"
)

// Validate makes the checks Create would make, through a read snapshot,
// writing nothing. in.Number may be 0 when the issue is not opened yet:
// then the existence check is skipped.
func (l *Ledger) Validate(ctx context.Context, repoID int64, in NewItem, actor Actor, o WriteOptions) error {
	if err := l.precheckCreate(in, actor, true); err != nil {
		return err
	}
	return l.readTx(ctx, func(tx *sql.Tx) error {
		_, err := l.checkCreate(ctx, tx, lockNone, repoID, in, actor, o)
		return err
	})
}

// Create writes a new item for issue in.Number. It returns ErrExists when
// the item exists.
func (l *Ledger) Create(ctx context.Context, repoID int64, in NewItem, actor Actor, o WriteOptions) (Item, error) {
	if err := l.precheckCreate(in, actor, false); err != nil {
		return Item{}, err
	}
	var out Item
	err := l.writeTx(ctx, func(tx *sql.Tx) error {
		after, err := l.checkCreate(ctx, tx, lockShare, repoID, in, actor, o)
		if err != nil {
			return err
		}
		// A number forgotten and re-created continues from its old
		// high-water mark (released), so no token is ever shared.
		var hw int64
		if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(fence), 0) FROM ledger_grants WHERE repo_id = $1 AND number = $2`,
			repoID, in.Number).Scan(&hw); err != nil {
			return fmt.Errorf("create %s: read grant log: %w", after.ID, err)
		}
		now := l.nowMs()
		res, err := tx.ExecContext(ctx, `INSERT INTO ledger_items (repo_id, number, title, body, author, provenance, created_at, updated_at, fence, released)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $7, $8, $8) ON CONFLICT (repo_id, number) DO NOTHING`,
			repoID, in.Number, in.Title, in.Body, in.Author, in.Provenance, now, hw)
		if err != nil {
			return fmt.Errorf("create %s: %w", after.ID, err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return fmt.Errorf("create %s: %w", after.ID, err)
		} else if n == 0 {
			return fmt.Errorf("%s: %w", after.ID, ErrExists)
		}
		if err := writeTagsLinks(ctx, tx, repoID, in.Number, after.Tags, after.Links, nil, nil); err != nil {
			return fmt.Errorf("create %s: %w", after.ID, err)
		}
		out = Item{RepoID: repoID, ID: after.ID, Title: in.Title, Body: in.Body, Author: in.Author, Provenance: in.Provenance,
			CreatedAt: msTime(now), UpdatedAt: msTime(now), Tags: after.Tags, Links: after.Links,
			Fence: gating.Fence{Token: hw, Released: hw}}
		if hw > 0 {
			g, err := l.grant(ctx, tx, repoID, in.Number, hw)
			if err != nil {
				return err
			}
			out.Grant = g
			if g != nil {
				out.Fence.Region = g.Region
			}
		}
		return nil
	})
	if err != nil {
		return Item{}, err
	}
	return out, nil
}

// precheckCreate is every check of a create that reads nothing.
func (l *Ledger) precheckCreate(in NewItem, actor Actor, validating bool) error {
	if err := checkActor(actor); err != nil {
		return err
	}
	if !gating.Authors(actor.Role) {
		return refusal(ReasonRoleNotAllowed, "only pm, human and warden create items; this token is %s", actor.Role)
	}
	if in.Number < 0 || (in.Number == 0 && !validating) || in.Number > 9999999999 {
		return refusal(ReasonInvalidRequest, "issue number %d is not a positive issue number", in.Number)
	}
	for _, f := range []struct {
		name, v string
		max     int
	}{{"title", in.Title, maxTitle}, {"body", in.Body, maxBody}, {"author", in.Author, maxAuthor}, {"provenance", in.Provenance, maxProvenance}} {
		if err := checkText(f.name, f.v, f.max); err != nil {
			return err
		}
	}
	return checkTagsAndLinks(in.Tags, in.Links)
}

// checkCreate makes the create's checks that read: the repository is
// served, the item does not exist (when numbered), and gating.CheckWrite
// over q's view. It returns the item as the rules saw it.
func (l *Ledger) checkCreate(ctx context.Context, q Querier, m lockMode, repoID int64, in NewItem, actor Actor, o WriteOptions) (*gating.Item, error) {
	repo, err := servedRepo(ctx, q, repoID)
	if err != nil {
		return nil, err
	}
	after := &gating.Item{ID: gating.IDFor(in.Number), Title: in.Title, Body: in.Body, Author: in.Author, Provenance: in.Provenance,
		CreatedAt: l.cfg.Now().UTC(), Tags: tagSet(in.Tags), Links: linkSet(in.Links)}
	if in.Number > 0 {
		var n int
		if err := q.QueryRowContext(ctx, `SELECT COUNT(*) FROM ledger_items WHERE repo_id = $1 AND number = $2`, repoID, in.Number).Scan(&n); err != nil {
			return nil, fmt.Errorf("create %s: %w", after.ID, err)
		}
		if n > 0 {
			return nil, fmt.Errorf("%s: %w", after.ID, ErrExists)
		}
	}
	deps, err := dependents(ctx, q, repoID, after.ID)
	if err != nil {
		return nil, err
	}
	var lookupErr error
	w := gating.Write{Kind: gating.Create, After: after, Role: actor.Role, DefaultBranch: repo.DefaultBranch,
		Lookup: l.lookup(ctx, q, m, repoID, after, &lookupErr), Dependents: deps,
		CompletionProven: o.CompletionProven, CompletionReason: o.CompletionReason, CompletionDetail: o.CompletionDetail}
	r := gating.CheckWrite(w)
	if lookupErr != nil {
		return nil, lookupErr
	}
	if r != nil {
		return nil, r
	}
	return after, nil
}

// writeTagsLinks inserts addTags/addLinks and deletes delTags/delLinks.
func writeTagsLinks(ctx context.Context, tx *sql.Tx, repoID int64, n int, addTags []string, addLinks []gating.Link, delTags []string, delLinks []gating.Link) error {
	for _, t := range delTags {
		if _, err := tx.ExecContext(ctx, `DELETE FROM ledger_tags WHERE repo_id = $1 AND number = $2 AND tag = $3`, repoID, n, t); err != nil {
			return fmt.Errorf("remove tag %s: %w", t, err)
		}
	}
	for _, lk := range delLinks {
		if _, err := tx.ExecContext(ctx, `DELETE FROM ledger_links WHERE repo_id = $1 AND number = $2 AND rel = $3 AND target = $4`,
			repoID, n, string(lk.Rel), lk.Target); err != nil {
			return fmt.Errorf("remove link %s %s: %w", lk.Rel, lk.Target, err)
		}
	}
	for _, t := range addTags {
		if _, err := tx.ExecContext(ctx, `INSERT INTO ledger_tags (repo_id, number, tag) VALUES ($1, $2, $3)
			ON CONFLICT (repo_id, number, tag) DO NOTHING`, repoID, n, t); err != nil {
			return fmt.Errorf("add tag %s: %w", t, err)
		}
	}
	for _, lk := range addLinks {
		if _, err := tx.ExecContext(ctx, `INSERT INTO ledger_links (repo_id, number, rel, target) VALUES ($1, $2, $3, $4)
			ON CONFLICT (repo_id, number, rel, target) DO NOTHING`, repoID, n, string(lk.Rel), lk.Target); err != nil {
			return fmt.Errorf("add link %s %s: %w", lk.Rel, lk.Target, err)
		}
	}
	return nil
}

// Update applies p to an item, all or nothing: new tags = (old − RemoveTags)
// + AddTags, the same for links, scalars replaced when non-nil. The write is
// admitted by the fence (gating.Admit), then by role, then by gating's
// rules.
func (l *Ledger) Update(ctx context.Context, repoID int64, id gating.ItemID, p Patch, actor Actor, o WriteOptions) (Item, error) {
	n, err := parseNumber(id)
	if err != nil {
		return Item{}, err
	}
	if err := checkActor(actor); err != nil {
		return Item{}, err
	}
	for _, f := range []struct {
		name string
		v    *string
		max  int
	}{{"title", p.Title, maxTitle}, {"body", p.Body, maxBody}, {"author", p.Author, maxAuthor}, {"provenance", p.Provenance, maxProvenance}} {
		if f.v != nil {
			if err := checkText(f.name, *f.v, f.max); err != nil {
				return Item{}, err
			}
		}
	}
	if err := checkTagsAndLinks(p.AddTags, p.AddLinks); err != nil {
		return Item{}, err
	}
	var out Item
	err = l.writeTx(ctx, func(tx *sql.Tx) error {
		repo, err := servedRepo(ctx, tx, repoID)
		if err != nil {
			return err
		}
		it, err := l.loadItem(ctx, tx, lockUpdate, repoID, n)
		if err != nil {
			return err
		}
		if it == nil {
			return fmt.Errorf("%s in repository %d: %w", id, repoID, ErrNotFound)
		}
		if v := gating.Admit(it.Fence, p.FencingToken, l.cfg.Region, nil); v != gating.Accepted {
			return &FenceError{Verdict: v, Item: it.ID, Presented: p.FencingToken, Current: it.Fence.Token}
		}
		// Admitted with a token means: the token is the current fence of a
		// live claim taken in this region.
		if actor.Role == gating.RoleWorker && (p.FencingToken == nil || it.Grant == nil || !gating.OwnedBy(it.Grant.Owner, actor.Name)) {
			holder := "no live claim"
			if it.Grant != nil && it.Fence.Claimed() {
				holder = "the claim of " + it.Grant.Owner
			}
			return refusal(ReasonOwnerNotAllowed, "worker %s writes only under its own live claim (owner %s/...) with its token; %s has %s",
				actor.Name, actor.Name, it.ID, holder)
		}
		before := it.Snapshot()
		after := it.Snapshot()
		if p.Title != nil {
			after.Title = *p.Title
		}
		if p.Body != nil {
			after.Body = *p.Body
		}
		if p.Author != nil {
			after.Author = *p.Author
		}
		if p.Provenance != nil {
			after.Provenance = *p.Provenance
		}
		after.Tags = applyTags(before.Tags, p.RemoveTags, p.AddTags)
		after.Links = applyLinks(before.Links, p.RemoveLinks, p.AddLinks)
		addsComplete := !before.HasTag("state:complete") && after.HasTag("state:complete")
		// The resume block, and completion, are written only by the holder of
		// the live claim under its current token (admitted above).
		underClaim := p.FencingToken != nil && it.Fence.Claimed() && *p.FencingToken == it.Fence.Token
		if (p.Body != nil || addsComplete) && !underClaim {
			return &FenceError{Verdict: gating.ClaimRequired, Item: it.ID, Current: it.Fence.Token}
		}
		deps, err := dependents(ctx, tx, repoID, it.ID)
		if err != nil {
			return err
		}
		var lookupErr error
		w := gating.Write{Kind: gating.Update, Before: before, After: after, Role: actor.Role, DefaultBranch: repo.DefaultBranch,
			Lookup: l.lookup(ctx, tx, lockShare, repoID, after, &lookupErr), Dependents: deps,
			CompletionProven: o.CompletionProven, CompletionReason: o.CompletionReason, CompletionDetail: o.CompletionDetail}
		r := gating.CheckWrite(w)
		if lookupErr != nil {
			return lookupErr
		}
		if r != nil {
			return r
		}
		now := l.nowMs()
		if _, err := tx.ExecContext(ctx, `UPDATE ledger_items SET title = $1, body = $2, author = $3, provenance = $4, updated_at = $5
			WHERE repo_id = $6 AND number = $7`, after.Title, after.Body, after.Author, after.Provenance, now, repoID, n); err != nil {
			return fmt.Errorf("update %s: %w", it.ID, err)
		}
		addT, delT := gating.Diff(before.Tags, after.Tags)
		addL, delL := gating.Diff(before.Links, after.Links)
		if err := writeTagsLinks(ctx, tx, repoID, n, addT, addL, delT, delL); err != nil {
			return fmt.Errorf("update %s: %w", it.ID, err)
		}
		out = *it
		out.Title, out.Body, out.Author, out.Provenance = after.Title, after.Body, after.Author, after.Provenance
		out.Tags, out.Links = after.Tags, after.Links
		out.UpdatedAt = msTime(now)
		return nil
	})
	if err != nil {
		return Item{}, err
	}
	return out, nil
}

func applyTags(old, remove, add []string) []string {
	rm := map[string]bool{}
	for _, t := range remove {
		rm[t] = true
	}
	var out []string
	for _, t := range old {
		if !rm[t] {
			out = append(out, t)
		}
	}
	return tagSet(append(out, add...))
}

func applyLinks(old, remove, add []gating.Link) []gating.Link {
	rm := map[gating.Link]bool{}
	for _, l := range remove {
		rm[l] = true
	}
	var out []gating.Link
	for _, l := range old {
		if !rm[l] {
			out = append(out, l)
		}
	}
	return linkSet(append(out, add...))
}

// Forget deletes an item (pm, human or warden), admitted by the fence like
// any write and refused while any item is blockedBy or partOf it. The grant
// log stays: the number's fencing high-water mark survives.
func (l *Ledger) Forget(ctx context.Context, repoID int64, id gating.ItemID, token *int64, actor Actor) error {
	n, err := parseNumber(id)
	if err != nil {
		return err
	}
	if err := checkActor(actor); err != nil {
		return err
	}
	if !gating.Authors(actor.Role) {
		return refusal(ReasonRoleNotAllowed, "only pm, human and warden forget items; this token is %s", actor.Role)
	}
	err = l.writeTx(ctx, func(tx *sql.Tx) error {
		if _, err := servedRepo(ctx, tx, repoID); err != nil {
			return err
		}
		it, err := l.loadItem(ctx, tx, lockUpdate, repoID, n)
		if err != nil {
			return err
		}
		if it == nil {
			return fmt.Errorf("%s in repository %d: %w", id, repoID, ErrNotFound)
		}
		if v := gating.Admit(it.Fence, token, l.cfg.Region, nil); v != gating.Accepted {
			return &FenceError{Verdict: v, Item: it.ID, Presented: token, Current: it.Fence.Token}
		}
		deps, err := dependents(ctx, tx, repoID, it.ID)
		if err != nil {
			return err
		}
		var lookupErr error
		r := gating.CheckWrite(gating.Write{Kind: gating.Delete, Before: it.Snapshot(), Role: actor.Role,
			Lookup: l.lookup(ctx, tx, lockShare, repoID, nil, &lookupErr), Dependents: deps})
		if lookupErr != nil {
			return lookupErr
		}
		if r != nil {
			return r
		}
		for _, q := range []string{
			`DELETE FROM ledger_tags WHERE repo_id = $1 AND number = $2`,
			`DELETE FROM ledger_links WHERE repo_id = $1 AND number = $2`,
			`DELETE FROM ledger_items WHERE repo_id = $1 AND number = $2`,
		} {
			if _, err := tx.ExecContext(ctx, q, repoID, n); err != nil {
				return fmt.Errorf("forget %s: %w", it.ID, err)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	l.wake(itemKey{repoID, n}) // waiters see "missing"
	return nil
}
