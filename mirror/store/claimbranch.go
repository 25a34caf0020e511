package store

import (
	"context"
	"fmt"

	"github.com/wardenhq/warden/gating"
)

// checkClaimBranch refuses (nested-epic-branch) a claim whose branch nests
// under or over the item's baseBranch: or its epics' branches
// (gating.CheckClaimBranch), reading each epic's tags in tx. it carries its
// tags and links.
func checkClaimBranch(ctx context.Context, tx Querier, repoID int64, it *Item, branch string) error {
	if branch == "" {
		return nil
	}
	epics := map[gating.ItemID]*gating.Item{}
	for _, t := range (&gating.Item{Links: it.Links}).Targets(gating.PartOf) {
		n, err := gating.ParseID(t)
		if err != nil {
			continue // a malformed target is the write rules' concern
		}
		e := &Item{ID: gating.IDFor(n)}
		if err := loadTagsLinks(ctx, tx, repoID, n-1, n, map[int]*Item{n: e}); err != nil {
			return fmt.Errorf("claim %s: read epic %s: %w", it.ID, e.ID, err)
		}
		epics[e.ID] = e.Snapshot()
	}
	lookup := func(id gating.ItemID) (*gating.Item, bool) {
		e, ok := epics[id]
		return e, ok
	}
	if r := gating.CheckClaimBranch(branch, it.Snapshot(), lookup); r != nil {
		return r
	}
	return nil
}
