package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/wardenhq/warden/gating"
)

// The claim path's summary of an item's history (ledger_summaries,
// trailSummaryMigrations): what gating.Claimable reads of the grant log,
// the comment trail, the pushes and the epoch (the attempts, the collision
// hold) is kept per item as a gating.TrailSummary, so that a claim reads one
// row instead of the whole history, whatever its length.
//
// A summary is only ever what the whole history gives:
//
//   - it is computed from the whole history (gating.SummarizeTrail) when a
//     claim's judgement finds none it may trust (missing, of another rules
//     version, another generation or fence, another epoch), and written
//     then ("lazily on first read": a database an older version migrated
//     needs no back-fill);
//   - a writer that changes the history and can extend the summary exactly
//     (gating.TrailSummary's With steps: a grant, a release, a comment, a
//     push) writes the extended one in the same transaction; one that cannot
//     writes nothing, and the next judgement reads the whole history;
//   - every change to the history bumps the item's generation by trigger
//     (whoever makes it), and a summary of another generation is not read.
//
// Renew writes nothing here: the lease is no input of the summary.

// summaryFullReads counts the items whose history a judgement read whole
// (tests: a claim on a summarised item reads none).
var summaryFullReads atomic.Int64

// lockSummary takes item n's generation row lock on PostgreSQL (creating
// the row), which every trigger on the item's history also takes: from here
// to the commit no other transaction changes what the summary is computed
// from. A writer takes it before it reads the summary or the history. On
// SQLite the write transaction already excludes every other writer.
func (l *Ledger) lockSummary(ctx context.Context, q Querier, repoID int64, n int) error {
	if !l.pg {
		return nil
	}
	if _, err := q.ExecContext(ctx, `INSERT INTO ledger_summaries (repo_id, number, gen) VALUES ($1, $2, 0)
		ON CONFLICT (repo_id, number) DO UPDATE SET gen = ledger_summaries.gen`, repoID, n); err != nil {
		return fmt.Errorf("lock the history of %s: %w", gating.IDFor(n), err)
	}
	return nil
}

// summarySelect reads the summaries that are still true: of this rules
// version, at the item's generation and fence, for the item's epoch.
var summarySelect = `SELECT s.number, s.state, COALESCE(e.epoch_start, 0), COALESCE(e.resolved_at, 0)
	FROM ledger_summaries s
	JOIN ledger_items i ON i.repo_id = s.repo_id AND i.number = s.number AND i.fence = s.fence
	LEFT JOIN item_epochs e ON e.repo_id = s.repo_id AND e.number = s.number
	WHERE s.repo_id = $1 AND s.version = ` + strconv.Itoa(gating.TrailSummaryVersion) + ` AND s.summary_gen = s.gen`

// readSummaries returns the true summaries of the items numbered nums (one
// that does not decode, or disagrees with its row, is left out: the history
// is read instead).
func readSummaries(ctx context.Context, q Querier, repoID int64, nums []int) (map[int]gating.TrailSummary, error) {
	out := map[int]gating.TrailSummary{}
	err := eachChunk(ctx, q, repoID, nums, summarySelect, "s.number", func(rows *sql.Rows) error {
		var n int
		var state string
		var start, resolved int64
		if err := rows.Scan(&n, &state, &start, &resolved); err != nil {
			return err
		}
		if s, ok := decodeSummary(state, start, resolved); ok {
			out[n] = s
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read the history summaries: %w", err)
	}
	return out, nil
}

// decodeSummary decodes a stored summary, true only when it decodes and is
// of the epoch the item has (epoch columns in unix ms, 0: none).
func decodeSummary(state string, start, resolved int64) (gating.TrailSummary, bool) {
	var s gating.TrailSummary
	if json.Unmarshal([]byte(state), &s) != nil || !s.EpochStart.Equal(epochTime(start)) || !s.CollisionResolvedAt.Equal(epochTime(resolved)) {
		return gating.TrailSummary{}, false
	}
	return s, true
}

// readSummary is item n's true summary, if it has one.
func readSummary(ctx context.Context, q Querier, repoID int64, n int) (gating.TrailSummary, bool, error) {
	m, err := readSummaries(ctx, q, repoID, []int{n})
	s, ok := m[n]
	return s, ok, err
}

// epochTime is an epoch column's time (0: never).
func epochTime(ms int64) time.Time {
	if ms <= 0 {
		return time.Time{}
	}
	return msTime(ms)
}

// writeSummary stores s as item n's summary at the item's generation now.
// The caller holds the generation lock (lockSummary) and has made all its
// own changes to the history: the generation it stores is theirs. Nothing is
// written when the item's fence is not s's.
func writeSummary(ctx context.Context, q Querier, repoID int64, n int, s gating.TrailSummary) error {
	b, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("write the history summary of %s: %w", gating.IDFor(n), err)
	}
	_, err = q.ExecContext(ctx, `INSERT INTO ledger_summaries (repo_id, number, gen, summary_gen, version, fence, state)
		SELECT i.repo_id, i.number, 0, 0, $3, i.fence, $4 FROM ledger_items i WHERE i.repo_id = $1 AND i.number = $2 AND i.fence = $5
		ON CONFLICT (repo_id, number) DO UPDATE SET summary_gen = ledger_summaries.gen, version = excluded.version,
			fence = excluded.fence, state = excluded.state`,
		repoID, n, gating.TrailSummaryVersion, string(b), s.Fence)
	if err != nil {
		return fmt.Errorf("write the history summary of %s: %w", gating.IDFor(n), err)
	}
	return nil
}

// extendSummary writes what step makes of item n's true summary read
// before the caller's change (had false: none), when the step knows it
// exactly; otherwise nothing, and the next judgement reads the history.
func extendSummary(ctx context.Context, q Querier, repoID int64, n int, s gating.TrailSummary, had bool, step func(gating.TrailSummary) (gating.TrailSummary, bool)) error {
	if !had {
		return nil
	}
	next, ok := step(s)
	if !ok {
		return nil
	}
	return writeSummary(ctx, q, repoID, n, next)
}

// trailInput is what gating.EvaluateTrail reads of one item.
func trailInput(it *Item, trail []TrailRecord, grants []Grant, now time.Time, x trailExtra) gating.TrailInput {
	sortTrail(trail)
	cs := make([]gating.TrailComment, len(trail))
	for i, r := range trail {
		cs[i] = r.TrailComment()
	}
	tags := append([]string(nil), it.Tags...)
	return gating.TrailInput{Item: it.ID, Comments: cs, Grants: grantEntries(grants), Fence: it.Fence.Token, Tags: tags, Now: now,
		EpochStart: x.Epoch.Start, CollisionResolvedAt: x.Epoch.ResolvedAt, Pushes: x.Pushes}
}

// judging makes loadSnapshot read for a claim's judgement: each item's
// attempts and collision hold from its summary where it has a true one
// (its grant log, trail and pushes are then not read), else from its whole
// history, whose summary is then written when write allows it (on SQLite,
// every item: the write transaction excludes every other writer; on
// PostgreSQL, the claimed item, whose generation lock the claim holds). The
// snapshot it gives has no trail findings and no grant logs: it is for
// gating.Claimable only.
type judging struct {
	write func(n int) bool
	sums  map[int]gating.TrailSummary // each item's summary as judged
	// inputs are the whole histories read (of the items without a true
	// summary), so a claim that cannot extend a summary computes its next
	// one without reading again.
	inputs map[int]gating.TrailInput
}

// judgeSnapshot is the partial snapshot gating.Claimable judges cand on
// (claimSnapshot's items), read through the summaries, with how it judged
// them.
func (l *Ledger) judgeSnapshot(ctx context.Context, q Querier, repo Repo, set gating.Settings, cand *Item) (gating.Snapshot, *judging, error) {
	n := cand.ID.Number()
	j := &judging{write: func(m int) bool { return !l.pg || m == n }}
	rs, err := l.claimSnapshotWith(ctx, q, repo, set, cand, j)
	if err != nil {
		return gating.Snapshot{}, nil, err
	}
	return rs.Snapshot, j, nil
}

// summaryAfterGrant writes item n's summary after grant g, extending the
// one judged (had: there was one) when it can, else, when the judgement
// read the whole history (hist), computing it from that history and g
// without reading again. Otherwise it writes nothing.
func summaryAfterGrant(ctx context.Context, q Querier, repoID int64, n int, s gating.TrailSummary, had bool, hist *gating.TrailInput, g gating.GrantEntry) error {
	if next, ok := s.WithGrant(g); had && ok {
		return writeSummary(ctx, q, repoID, n, next)
	}
	if hist == nil {
		return nil
	}
	in := *hist
	in.Grants = append(append([]gating.GrantEntry(nil), in.Grants...), g)
	in.Fence = g.Fence
	return writeSummary(ctx, q, repoID, n, gating.SummarizeTrail(in))
}

// historyNums are the items of byNum whose whole history a judgement reads:
// those without a true summary, and those whose fence no grant owns (the
// trail names its holder).
func (j *judging) historyNums(byNum map[int]*Item) []int {
	out := []int{}
	for n, it := range byNum {
		if _, ok := j.sums[n]; !ok || it.Fence.Token > 0 && it.Grant == nil {
			delete(j.sums, n)
			out = append(out, n)
		}
	}
	summaryFullReads.Add(int64(len(out)))
	return out
}

// judge fills cand from item n's summary, computing it from the whole
// history (in) when there is none, and writing that when it may.
func (j *judging) judge(ctx context.Context, q Querier, repoID int64, n int, cand *gating.Candidate, in func() gating.TrailInput) error {
	s, ok := j.sums[n]
	if !ok {
		hist := in()
		s = gating.SummarizeTrail(hist)
		j.sums[n] = s
		if j.inputs == nil {
			j.inputs = map[int]gating.TrailInput{}
		}
		j.inputs[n] = hist
		if j.write(n) {
			if err := writeSummary(ctx, q, repoID, n, s); err != nil {
				return err
			}
		}
	}
	cand.Attempts, cand.CollisionHold = s.CandidateAttempts(), s.CollisionHold
	return nil
}
