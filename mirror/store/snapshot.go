package store

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/wardenhq/warden/gating"
)

// Snapshot is one repository's backlog at one instant: the snapshot the
// ready set's rules read (gating.Snapshot), and beside it what the API and
// the report show (the items as stored, each item's grant log).
type Snapshot struct {
	Repo     Repo
	Settings gating.Settings
	Snapshot gating.Snapshot
	// Items are the items as stored (with their current grant), by id.
	Items map[gating.ItemID]*Item
	// Grants is each item's grant log, oldest first (empty when never
	// claimed).
	Grants map[gating.ItemID][]Grant
	// Trails is what each item's comment trail establishes (absent for an
	// item with no comment, no grant and no fence).
	Trails map[gating.ItemID]gating.TrailResult
	// StaleAnchors are each item's stale anchoredTo links (dangling ones
	// included), by path; absent for an item with none.
	StaleAnchors map[gating.ItemID][]AnchorState
	// RepoDefects are the repository's findings that no item carries
	// (Config.RepoFindings), reported with the ready set's defects.
	RepoDefects []gating.Defect
}

// CleanReclaims lists every clean re-claim in the snapshot's grant logs
// (same-owner re-claims of a lapsed claim: no attempt, but reported), by
// item then time.
func (rs *Snapshot) CleanReclaims() []gating.CleanReclaim {
	out := []gating.CleanReclaim{}
	for _, c := range rs.Snapshot.Items {
		out = append(out, CleanReclaims(c.Item.ID, rs.Grants[c.Item.ID])...)
	}
	return out
}

// settingsFor returns a repository's settings with the fields the ready set
// needs filled from the defaults when empty.
func (l *Ledger) settingsFor(ctx context.Context, r Repo) gating.Settings {
	def := gating.DefaultSettings()
	s := def
	if l.cfg.Settings != nil {
		s = l.cfg.Settings(ctx, r)
	}
	if s.AdmissionLabel == "" {
		s.AdmissionLabel = def.AdmissionLabel
	}
	if s.PoisonThreshold <= 0 {
		s.PoisonThreshold = def.PoisonThreshold
	}
	return s
}

// Snapshot loads one repository's whole backlog in one read transaction,
// with a fixed handful of queries whatever its size: the items with their
// current grant and its evidence, the tags, the links, the grant log, the
// recorded admissions and the issues' labels. A repository warden does not
// serve is ErrNotFound.
func (l *Ledger) Snapshot(ctx context.Context, repoID int64) (*Snapshot, error) {
	var out *Snapshot
	err := l.readTx(ctx, func(tx *sql.Tx) error {
		repo, err := servedRepo(ctx, tx, repoID)
		if err != nil {
			return err
		}
		out, err = l.loadSnapshot(ctx, tx, repo, l.settingsFor(ctx, repo), nil, nil)
		return err
	})
	if err != nil {
		return nil, err
	}
	if l.cfg.RepoFindings != nil {
		out.RepoDefects = l.cfg.RepoFindings(ctx, out.Repo)
	}
	return out, nil
}

// Attempts returns an item's attempts in the current epoch (the poison
// threshold's count: the trail's, floored by the grant log) and over its
// life.
func (rs *Snapshot) Attempts(id gating.ItemID) (epoch, lifetime int) {
	for i := range rs.Snapshot.Items {
		if rs.Snapshot.Items[i].Item.ID == id {
			epoch = rs.Snapshot.Items[i].Attempts
			break
		}
	}
	lifetime = max(epoch, Attempts(rs.Grants[id]))
	if tr, ok := rs.Trails[id]; ok {
		lifetime = max(lifetime, tr.LifetimeAttempts)
	}
	return epoch, lifetime
}

// Ready is the ready set of the snapshot (gating.ComputeReady), with the
// repository's own findings among its defects.
func (rs *Snapshot) Ready() gating.Result {
	r := gating.ComputeReady(rs.Snapshot)
	r.Defects = append(r.Defects, rs.RepoDefects...)
	return r
}

// Report is the "where are we" report of the snapshot (gating.BuildReport
// over its ready set), with the clean re-claims filled from the grant log.
func (rs *Snapshot) Report(r gating.Result) gating.Report {
	rep := gating.BuildReport(rs.Snapshot, r)
	rep.CleanReclaims = rs.CleanReclaims()
	return rep
}

// ClaimSnapshot loads the partial snapshot gating.Claimable judges the item
// on (without the rest of the repository), in one read transaction. A
// missing item is ErrNotFound.
func (l *Ledger) ClaimSnapshot(ctx context.Context, repoID int64, id gating.ItemID) (*Snapshot, error) {
	n, err := parseNumber(id)
	if err != nil {
		return nil, err
	}
	var out *Snapshot
	err = l.readTx(ctx, func(tx *sql.Tx) error {
		repo, err := servedRepo(ctx, tx, repoID)
		if err != nil {
			return err
		}
		it, err := l.loadItem(ctx, tx, lockNone, repoID, n)
		if err != nil {
			return err
		}
		if it == nil {
			return fmt.Errorf("%s in repository %d: %w", id, repoID, ErrNotFound)
		}
		out, err = l.claimSnapshot(ctx, tx, repo, l.settingsFor(ctx, repo), it)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// claimSnapshot is the partial snapshot for judging cand (read with its
// tags and links) through q: the candidate, its blockedBy targets, the epics
// it is partOf (an epic's threshold:N tag sets its members' poison
// threshold) or integrates, the items partOf or integrating it or the
// grouping it integrates, and every item in flight (a claim neither released
// nor superseded: held, lapsed or abandoned).
func (l *Ledger) claimSnapshot(ctx context.Context, q Querier, repo Repo, set gating.Settings, cand *Item) (*Snapshot, error) {
	return l.claimSnapshotWith(ctx, q, repo, set, cand, nil)
}

// claimSnapshotWith is claimSnapshot, read for a judgement when j is set
// (loadSnapshot).
func (l *Ledger) claimSnapshotWith(ctx context.Context, q Querier, repo Repo, set gating.Settings, cand *Item, j *judging) (*Snapshot, error) {
	want := map[int]bool{cand.ID.Number(): true}
	groups := []string{string(cand.ID)}
	for _, lk := range cand.Links {
		switch lk.Rel {
		case gating.BlockedBy, gating.PartOf, gating.Integrates:
			if n, err := gating.ParseID(lk.Target); err == nil {
				want[n] = true
			}
			if lk.Rel == gating.Integrates {
				groups = append(groups, lk.Target)
			}
		}
	}
	// Members and integrators of the candidate and of what it integrates.
	args := []any{repo.ID, string(gating.PartOf), string(gating.Integrates)}
	ph := make([]string, len(groups))
	for i, g := range groups {
		args = append(args, g)
		ph[i] = "$" + strconv.Itoa(len(args))
	}
	// ... and every item in flight, in the same query.
	if err := collectNumbers(ctx, q, want, `SELECT number FROM ledger_links WHERE repo_id = $1 AND (rel = $2 OR rel = $3)
		AND target IN (`+strings.Join(ph, ", ")+`)
		UNION SELECT number FROM ledger_items WHERE repo_id = $1 AND fence > released`, args...); err != nil {
		return nil, fmt.Errorf("read the grouping of %s and the items in flight: %w", cand.ID, err)
	}
	nums := make([]int, 0, len(want))
	for n := range want {
		nums = append(nums, n)
	}
	slices.Sort(nums)
	return l.loadSnapshot(ctx, q, repo, set, nums, j)
}

func collectNumbers(ctx context.Context, q Querier, into map[int]bool, query string, args ...any) error {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var n int
		if err := rows.Scan(&n); err != nil {
			return err
		}
		into[n] = true
	}
	return rows.Err()
}

// snapshotSelect is itemSelect with the current grant's recorded evidence.
const snapshotSelect = `SELECT i.number, i.title, i.body, i.author, i.provenance, i.created_at, i.updated_at, i.fence, i.released,
	g.owner, g.region, g.branch, g.purpose, g.granted_at, g.lease_expires_at, g.released_at, e.last_at, e.kind, e.detail
	FROM ledger_items i
	LEFT JOIN ledger_grants g ON g.repo_id = i.repo_id AND g.number = i.number AND g.fence = i.fence
	LEFT JOIN ledger_evidence e ON e.repo_id = i.repo_id AND e.number = i.number AND e.fence = i.fence`

// chunk is how many item numbers one filtered query names (well under every
// backend's limit on bound parameters).
const chunk = 500

// eachChunk runs query (which ends in a WHERE clause on repo_id = $1) once
// for the whole repository when nums is nil, else once per chunk of nums
// with "AND <col> IN (...)" appended, calling scan for every row.
func eachChunk(ctx context.Context, q Querier, repoID int64, nums []int, query, col string, scan func(*sql.Rows) error) error {
	run := func(query string, args ...any) error { return eachRow(ctx, q, query, args, scan) }
	if nums == nil {
		return run(query, repoID)
	}
	for start := 0; start < len(nums); start += chunk {
		part := nums[start:min(start+chunk, len(nums))]
		args := make([]any, 0, len(part)+1)
		args = append(args, repoID)
		ph := make([]string, len(part))
		for i, n := range part {
			args = append(args, n)
			ph[i] = "$" + strconv.Itoa(i+2)
		}
		if err := run(query+" AND "+col+" IN ("+strings.Join(ph, ", ")+")", args...); err != nil {
			return err
		}
	}
	return nil
}

// loadSnapshot reads the items numbered nums (nil: every item of the
// repository) and what the ready set needs of them, through q. With j (a
// claim's judgement; nums set), an item's grant log, trail and pushes are
// read only when it has no true summary (judging).
func (l *Ledger) loadSnapshot(ctx context.Context, q Querier, repo Repo, set gating.Settings, nums []int, j *judging) (*Snapshot, error) {
	rs := &Snapshot{Repo: repo, Settings: set, Items: map[gating.ItemID]*Item{}, Grants: map[gating.ItemID][]Grant{},
		Trails: map[gating.ItemID]gating.TrailResult{}, StaleAnchors: map[gating.ItemID][]AnchorState{}}
	byNum := map[int]*Item{}
	evidence := map[int]evidenceRow{}
	err := eachChunk(ctx, q, repo.ID, nums, snapshotSelect+` WHERE i.repo_id = $1`, "i.number", func(rows *sql.Rows) error {
		var ev sql.NullInt64
		var kind, detail sql.NullString
		it, err := scanItem(rows, repo.ID, &ev, &kind, &detail)
		if err != nil {
			return err
		}
		n := it.ID.Number()
		byNum[n] = it
		if ev.Valid {
			evidence[n] = evidenceRow{at: ev.Int64, kind: kind.String, detail: detail.String}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("snapshot of %s: items: %w", repo.FullName, err)
	}
	err = eachChunk(ctx, q, repo.ID, nums, `SELECT number, tag FROM ledger_tags WHERE repo_id = $1`, "number", func(rows *sql.Rows) error {
		var n int
		var tag string
		if err := rows.Scan(&n, &tag); err != nil {
			return err
		}
		if it := byNum[n]; it != nil {
			it.Tags = append(it.Tags, tag)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("snapshot of %s: tags: %w", repo.FullName, err)
	}
	err = eachChunk(ctx, q, repo.ID, nums, `SELECT number, rel, target FROM ledger_links WHERE repo_id = $1`, "number", func(rows *sql.Rows) error {
		var n int
		var lk gating.Link
		if err := rows.Scan(&n, &lk.Rel, &lk.Target); err != nil {
			return err
		}
		if it := byNum[n]; it != nil {
			it.Links = append(it.Links, lk)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("snapshot of %s: links: %w", repo.FullName, err)
	}
	histNums := nums // the items whose history is read
	f := newItemFacts()
	if j != nil {
		// One query for the admissions, labels, epochs and summaries.
		if err := j.readFacts(ctx, q, repo.ID, nums, set, f); err != nil {
			return nil, fmt.Errorf("snapshot of %s: admissions, labels, epochs, summaries: %w", repo.FullName, err)
		}
		histNums = j.historyNums(byNum)
	} else if err := l.readFacts(ctx, q, repo, nums, set, f); err != nil {
		return nil, err
	}
	grants := map[int][]Grant{}
	err = eachChunk(ctx, q, repo.ID, histNums, `SELECT number, fence, owner, region, branch, purpose, granted_at, lease_expires_at, released_at
		FROM ledger_grants WHERE repo_id = $1`, "number", func(rows *sql.Rows) error {
		var n int
		var g Grant
		var granted, expires int64
		var released sql.NullInt64
		if err := rows.Scan(&n, &g.Fence, &g.Owner, &g.Region, &g.Branch, &g.Purpose, &granted, &expires, &released); err != nil {
			return err
		}
		if byNum[n] == nil {
			return nil // the grant log of a forgotten item
		}
		g.GrantedAt, g.LeaseExpiresAt = msTime(granted), msTime(expires)
		if released.Valid {
			t := msTime(released.Int64)
			g.ReleasedAt = &t
		}
		grants[n] = append(grants[n], g)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("snapshot of %s: grant log: %w", repo.FullName, err)
	}

	trails := map[int][]TrailRecord{}
	err = eachChunk(ctx, q, repo.ID, histNums, trailSelect+` WHERE repo_id = $1`, "number", func(rows *sql.Rows) error {
		n, r, err := scanTrail(rows)
		if err != nil {
			return err
		}
		if byNum[n] != nil {
			trails[n] = append(trails[n], r)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("snapshot of %s: comment trail: %w", repo.FullName, err)
	}
	pushes := map[int][]gating.BranchPush{}
	err = eachChunk(ctx, q, repo.ID, histNums, `SELECT number, branch, at, login, rewrite FROM ledger_pushes WHERE repo_id = $1`, "number", func(rows *sql.Rows) error {
		var n int
		var p gating.BranchPush
		var at int64
		if err := rows.Scan(&n, &p.Branch, &at, &p.Login, &p.Rewrite); err != nil {
			return err
		}
		p.At = msTime(at)
		pushes[n] = append(pushes[n], p)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("snapshot of %s: branch pushes: %w", repo.FullName, err)
	}
	labelFindings := map[int][]gating.Defect{}
	err = eachChunk(ctx, q, repo.ID, nums, `SELECT number, code, detail, count, actor FROM label_findings WHERE repo_id = $1 AND open = 1`, "number", func(rows *sql.Rows) error {
		var n, count int
		var code, detail, actor string
		if err := rows.Scan(&n, &code, &detail, &count, &actor); err != nil {
			return err
		}
		if count > 1 {
			detail = fmt.Sprintf("%s (%d times; last by %s)", detail, count, actor)
		}
		labelFindings[n] = append(labelFindings[n], gating.Defect{Code: code, Item: gating.IDFor(n), Detail: detail})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("snapshot of %s: label findings: %w", repo.FullName, err)
	}
	err = eachChunk(ctx, q, repo.ID, nums, `SELECT number, code, detail FROM item_divergences WHERE repo_id = $1`, "number", func(rows *sql.Rows) error {
		var n int
		var code, detail string
		if err := rows.Scan(&n, &code, &detail); err != nil {
			return err
		}
		labelFindings[n] = append(labelFindings[n], gating.Defect{Code: code, Item: gating.IDFor(n), Detail: detail})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("snapshot of %s: divergences: %w", repo.FullName, err)
	}
	if err := loadTransitionFindings(ctx, q, repo.ID, nums, labelFindings); err != nil {
		return nil, fmt.Errorf("snapshot of %s: %w", repo.FullName, err)
	}
	if err := loadDispatchFindings(ctx, q, repo.ID, nums, labelFindings); err != nil {
		return nil, fmt.Errorf("snapshot of %s: %w", repo.FullName, err)
	}
	anchors, err := loadAnchorStates(ctx, q, repo.ID, nums, true)
	if err != nil {
		return nil, fmt.Errorf("snapshot of %s: anchors: %w", repo.FullName, err)
	}
	now := l.cfg.Now().UTC()

	order := make([]int, 0, len(byNum))
	for n := range byNum {
		order = append(order, n)
	}
	slices.Sort(order)
	cands := make([]gating.Candidate, 0, len(order))
	for _, n := range order {
		it := byNum[n]
		slices.Sort(it.Tags)
		sortLinks(it.Links)
		gs := grants[n]
		slices.SortFunc(gs, func(a, b Grant) int { return cmp.Compare(a.Fence, b.Fence) })
		if gs == nil {
			gs = []Grant{}
		}
		rs.Items[it.ID] = it
		rs.Grants[it.ID] = gs
		// An issue whose labels warden never saw is taken to carry the
		// admission label: fail closed.
		label, known := f.gated[n]
		// The trail in its order (the query's rows come in the database's):
		// which marker holds an adopted fence must not depend on it.
		sortTrail(trails[n])
		if it.Grant == nil {
			it.Grant = trailHolder(it.ID, it.Fence, trails[n]) // a fence adopted from the trail
		}
		cand := gating.Candidate{
			Item:              it.Snapshot(),
			Claim:             evidence[n].view(it),
			AdmissionLabel:    label || !known,
			AdmissionRecorded: f.admitted[n],
		}
		x := trailExtra{Epoch: f.epochs[n], Pushes: pushes[n]}
		if j != nil {
			// A judgement: the same attempts and hold, from the summary.
			if err := j.judge(ctx, q, repo.ID, n, &cand, func() gating.TrailInput { return trailInput(it, trails[n], gs, now, x) }); err != nil {
				return nil, fmt.Errorf("snapshot of %s: %w", repo.FullName, err)
			}
		} else {
			cand.Attempts = EpochAttempts(gs, f.epochs[n].Start)
		}
		// The comment trail, read against the grant log (CONTRACT.md §6):
		// attempts counted from the trail and floored by the grant log,
		// takeover collisions, and the trail's findings. An item with no
		// comment, no grant and no fence has nothing to read.
		if j == nil && (len(trails[n]) > 0 || len(gs) > 0 || it.Fence.Token > 0) {
			tr := trailEval(it, trails[n], gs, now, x)
			rs.Trails[it.ID] = tr
			cand.Attempts = max(cand.Attempts, tr.Attempts)
			cand.CollisionHold = tr.CollisionHold
			for _, f := range tr.Findings {
				cand.Findings = append(cand.Findings, f.Defect())
			}
		}
		cand.Findings = append(cand.Findings, labelFindings[n]...)
		// Re-gated after admission: not admitted while the finding is open,
		// even if the label is not back (its write failed, or dry run).
		cand.SpecChanged = slices.ContainsFunc(labelFindings[n], func(d gating.Defect) bool { return d.Code == gating.CodeSpecChangedByAgent })
		// Out of the backlog: the issue lacks the item label as recorded,
		// and a removal of it is on record (a person's act a delivery
		// showed, or what the census read). A payload of the same second
		// as a re-labelling, handled late, shows no such act.
		if f.unlabeled[n] && slices.ContainsFunc(labelFindings[n], func(d gating.Defect) bool { return d.Code == gating.ExItemLabelRemoved }) {
			cand.ItemLabelRemoved = true
		}
		if st, ds := currentAnchorFindings(it, repo.DefaultBranch, anchors[n]); len(st) > 0 {
			rs.StaleAnchors[it.ID] = st
			cand.Findings = append(cand.Findings, ds...)
		}
		cands = append(cands, cand)
	}
	rs.Snapshot = gating.Snapshot{Items: cands, Now: now, Region: l.cfg.Region, DefaultBranch: repo.DefaultBranch,
		Quarantine: l.cfg.Quarantine, PoisonThreshold: set.PoisonThreshold}
	return rs, nil
}
