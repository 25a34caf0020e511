package store

import (
	"testing"
	"time"

	"github.com/wardenhq/warden/gating"
)

// TestAdoptedFenceHolderIsTheTrailsFirstClaim: a fence adopted from the
// trail (no grant row) is held by the first claim marker, in the trail's
// order (time, then comment id), naming it — not by whichever row the
// database returns first. Two markers name fence 5; the later one has the
// lower comment id, so the rows come back in the other order.
func TestAdoptedFenceHolderIsTheTrailsFirstClaim(t *testing.T) {
	e := newEnv(t, openSQLiteLedger)
	e.create(1, tags())
	id := gating.IDFor(1)
	t0 := e.clock.Now().Add(-time.Hour)
	for _, r := range []TrailRecord{
		{CommentID: 100, Author: "later-bot[bot]", AuthorType: "Bot", IsAgent: true, CreatedAt: t0.Add(time.Minute)},
		{CommentID: 200, Author: "first-bot[bot]", AuthorType: "Bot", IsAgent: true, CreatedAt: t0},
	} {
		owner := map[int64]string{100: "later/run", 200: "first/run"}[r.CommentID]
		r.EarliestBody = gating.ClaimMarker(string(id), owner, testRegion, 5, r.CreatedAt, nil)
		r.CurrentBody, r.EarliestAt, r.CurrentAt = r.EarliestBody, r.CreatedAt, r.CreatedAt
		if _, err := e.l.RecordTrailComment(e.ctx, e.repo, 1, r); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.l.AdoptFence(e.ctx, e.repo, 1, 5); err != nil {
		t.Fatal(err)
	}
	for _, read := range []struct {
		name string
		snap func() (*Snapshot, error)
	}{
		{"snapshot", func() (*Snapshot, error) { return e.l.Snapshot(e.ctx, e.repo) }},
		{"claim snapshot", func() (*Snapshot, error) { return e.l.ClaimSnapshot(e.ctx, e.repo, id) }},
	} {
		s, err := read.snap()
		if err != nil {
			t.Fatal(err)
		}
		g := s.Items[id].Grant
		if g == nil || g.Fence != 5 || g.Owner != "first/run" {
			t.Fatalf("%s: adopted fence held by %+v, want fence 5 held by first/run (the earlier marker)", read.name, g)
		}
	}
}
