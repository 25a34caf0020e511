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

// settleItem brings one item's GitHub side in step with what its ledger
// record and comment trail establish, after any delivery that may have
// changed them (CONTRACT.md §5, §6): logins the trail shows acting as
// agents are recorded; an admission the label events hold is recorded; an
// admitted item whose specification an agent rewrote is gated again
// (specStep); an item poisoned this epoch is parked (or its
// interrupted park finished); state:parked without the parked label gets
// the label (unless a human removed it: then it is unparked); and the
// report comment is brought up to date. It reads the ledger only; GitHub is
// called only for a change (or to confirm one).
func (m *Mirror) settleItem(ctx context.Context, repo store.Repo, n int) (string, error) {
	id := gating.IDFor(n)
	rs, err := m.Ledger.ClaimSnapshot(ctx, repo.ID, id)
	if errors.Is(err, store.ErrNotFound) {
		return "", nil
	} else if err != nil {
		return "", err
	}
	it := rs.Items[id]
	set := m.settings(ctx, repo)
	var outs []string
	if tr, ok := rs.Trails[id]; ok {
		for _, login := range tr.NewAgents {
			fresh, err := m.Acts.RecordAgent(ctx, repo.ID, login, store.AgentRecorded,
				fmt.Sprintf("%s posted a backlog-worker marker on %s", login, id), m.now())
			if err != nil {
				return "", err
			}
			if fresh {
				outs = append(outs, "recorded agent "+login)
			}
		}
	}
	res := gating.ComputeReady(rs.Snapshot)
	if hasDefect(res.Defects, id, "admission-unrecorded") {
		// The admission label is off with no act on record, as this
		// snapshot has it: the label events decide (one read). Whatever the
		// repair found or did (the label on the issue after all, the read
		// noted; an act or the label recorded meanwhile; the admission it
		// recorded; the label it put back), the snapshot is older than what
		// warden now knows: the item is judged again before anything is
		// published from it.
		out, reread, err := m.repairAdmission(ctx, repo, set, n)
		if err != nil {
			return "", err
		}
		if out != "" {
			outs = append(outs, out)
		}
		if reread {
			if rs, err = m.Ledger.ClaimSnapshot(ctx, repo.ID, id); errors.Is(err, store.ErrNotFound) {
				return strings.Join(outs, "; "), nil // forgotten meanwhile
			} else if err != nil {
				return "", err
			}
			it, res = rs.Items[id], gating.ComputeReady(rs.Snapshot)
		}
	}
	// The gate after admission: an admitted item whose specification an
	// agent rewrote (or that changed unseen) is gated again.
	spec, reread, err := m.specStep(ctx, repo, set, rs, id)
	if err != nil {
		return "", err
	}
	if spec != "" {
		outs = append(outs, spec)
	}
	if reread {
		if rs, err = m.Ledger.ClaimSnapshot(ctx, repo.ID, id); errors.Is(err, store.ErrNotFound) {
			return strings.Join(outs, "; "), nil
		} else if err != nil {
			return "", err
		}
		it, res = rs.Items[id], gating.ComputeReady(rs.Snapshot)
	}
	park, err := m.parkStep(ctx, repo, set, rs, res, it)
	if err != nil {
		return "", err
	}
	if park != "" {
		outs = append(outs, park)
		// The report says what is true after the park, not before it.
		if rs, err = m.Ledger.ClaimSnapshot(ctx, repo.ID, id); errors.Is(err, store.ErrNotFound) {
			return strings.Join(outs, "; "), nil
		} else if err != nil {
			return "", err
		}
		res = gating.ComputeReady(rs.Snapshot)
	}
	rep, err := m.publishFindings(ctx, repo, n, res.Defects)
	if err != nil {
		return "", err
	}
	switch rep {
	case "", "report unchanged", "no report comment needed", "report edit not due":
	default:
		outs = append(outs, rep)
	}
	// The check runs of the PRs that link it: its admission, park, claim
	// or tags may have changed their verdict.
	checks, err := m.recheckPRsOf(ctx, repo, []gating.ItemID{id})
	if err != nil {
		return "", err
	}
	outs = append(outs, checks...)
	return strings.Join(outs, "; "), nil
}

// hasDefect reports whether defects hold one with code about item id.
func hasDefect(defects []gating.Defect, id gating.ItemID, code string) bool {
	for _, d := range defects {
		if d.Code == code && d.Item == id {
			return true
		}
	}
	return false
}

// parkStep is the parking ladder's step for one item of a computed ready
// set: park a poisoned item, finish a park left half-written, or give a
// parked item its label.
func (m *Mirror) parkStep(ctx context.Context, repo store.Repo, set gating.Settings, rs *store.Snapshot, res gating.Result, it *store.Item) (string, error) {
	if it == nil {
		return "", nil
	}
	n := it.ID.Number()
	if !it.HasTag("state:parked") {
		for _, d := range res.Defects {
			if d.Code == gating.ExPoisoned && d.Item == it.ID {
				attempts := 0
				for _, c := range rs.Snapshot.Items {
					if c.Item.ID == it.ID {
						attempts = c.Attempts
					}
				}
				return m.poisonPark(ctx, repo, set, rs, it.ID, attempts)
			}
		}
		return "", nil
	}
	rec, err := m.Acts.ParkRecord(ctx, repo.ID, n)
	if err != nil {
		return "", err
	}
	if rec != nil && rec.Stage != store.ParkCommented && !(rec.Stage == store.ParkLabeled && strings.TrimSpace(rec.Question) == "") {
		if err := m.finishPark(ctx, repo, set, n, rec); err != nil {
			return "", err
		}
		return fmt.Sprintf("%s: park finished (%s)", it.ID, rec.Stage), nil
	}
	st, err := m.Ledger.IssueState(ctx, repo.ID, n)
	if err != nil {
		return "", err
	}
	if st != nil && st.State != store.IssueDeleted && st.State != store.IssueTransferred && !st.HasLabel(set.ParkedLabel) {
		return m.repairParkLabel(ctx, repo, set, n)
	}
	return "", nil
}

// Sweep is warden's timer pass (CONTRACT.md §3: time re-evaluates claim
// states and the parking of poison items): for every served repository it
// parks the items poisoned this epoch whose claims ended, finishes parks
// left half-written and labels parked items, judges again the items whose
// report lists a finding no longer held, then writes the report edits that
// came due. It returns how many items it acted on.
func (m *Mirror) Sweep(ctx context.Context) (int, error) {
	repos, err := m.Ledger.Repos(ctx)
	if err != nil {
		return 0, err
	}
	acted := 0
	var errs []error
	for _, repo := range repos {
		outs, err := m.sweepRepo(ctx, repo)
		acted += len(outs)
		if err != nil {
			errs = append(errs, err)
		}
	}
	if n, err := m.flushReports(ctx); err != nil {
		errs = append(errs, err)
	} else {
		acted += n
	}
	return acted, errors.Join(errs...)
}

// sweepRepo is the timer pass over one repository: park the items poisoned
// this epoch, finish parks left half-written, label parked items, and
// settle again the items whose report lists a finding the repository's
// ready set no longer holds (rejudgeReports). It returns what it did.
func (m *Mirror) sweepRepo(ctx context.Context, repo store.Repo) ([]string, error) {
	rs, err := m.Ledger.Snapshot(ctx, repo.ID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	set := m.settings(ctx, repo)
	res := gating.ComputeReady(rs.Snapshot)
	poisoned := map[gating.ItemID]bool{}
	for _, d := range res.Defects {
		if d.Code == gating.ExPoisoned {
			poisoned[d.Item] = true
		}
	}
	var outs []string
	var errs []error
	settled := map[gating.ItemID]bool{}
	for _, c := range rs.Snapshot.Items {
		it := rs.Items[c.Item.ID]
		if !poisoned[it.ID] && !it.HasTag("state:parked") {
			continue
		}
		out, err := m.parkStep(ctx, repo, set, rs, res, it)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s %s: %w", repo.FullName, it.ID, err))
			continue
		}
		if out == "" {
			continue
		}
		outs = append(outs, out)
		m.Log.Info("sweep", "repo", repo.FullName, "item", it.ID, "outcome", out)
		settled[it.ID] = true
		if _, err := m.settleItem(ctx, repo, it.ID.Number()); err != nil {
			errs = append(errs, fmt.Errorf("%s %s: %w", repo.FullName, it.ID, err))
		}
	}
	tr, err := m.sweepTransitions(ctx, repo)
	outs = append(outs, tr...)
	if err != nil {
		errs = append(errs, fmt.Errorf("%s transitions: %w", repo.FullName, err))
	}
	dp, err := m.sweepDispatches(ctx, repo, rs) // dispatch_sweep.go
	outs = append(outs, dp...)
	if err != nil {
		errs = append(errs, fmt.Errorf("%s dispatches: %w", repo.FullName, err))
	}
	more, err := m.rejudgeReports(ctx, repo, rs, res, settled)
	outs = append(outs, more...)
	return outs, errors.Join(append(errs, err)...)
}

// reportLister is a ReportSink that says what each item's report lists
// (Reports does).
type reportLister interface {
	Listed(ctx context.Context, repo store.Repo) (map[int][]string, error)
}

// rejudgeReports settles again the items whose report lists a finding the
// ready set res (of the snapshot rs) no longer holds about them, except
// those in skip (settled already): a report written from a judgement
// something has since contradicted (an older warden's, or a writer's that
// raced a fresher one) is edited back on the next timer pass, not only when
// the item next changes. It returns what it did.
func (m *Mirror) rejudgeReports(ctx context.Context, repo store.Repo, rs *store.Snapshot, res gating.Result, skip map[gating.ItemID]bool) ([]string, error) {
	lister, ok := m.Reports.(reportLister)
	if !ok {
		return nil, nil
	}
	listed, err := lister.Listed(ctx, repo)
	if err != nil {
		return nil, err
	}
	var outs []string
	var errs []error
	for _, n := range staleReports(listed, res.Defects, rs.Items) {
		id := gating.IDFor(n)
		if skip[id] {
			continue
		}
		out, err := m.settleItem(ctx, repo, n)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s %s: %w", repo.FullName, id, err))
			continue
		}
		if out != "" {
			m.Log.Info("sweep: report judged again", "repo", repo.FullName, "item", id, "outcome", out)
			outs = append(outs, fmt.Sprintf("%s: report judged again: %s", id, out))
		}
	}
	return outs, errors.Join(errs...)
}

// staleReports returns, in ascending order, the items of items whose
// report lists (listed: codes by issue number) a code that defects hold
// about them no longer. Issues that are no items are left alone.
func staleReports(listed map[int][]string, defects []gating.Defect, items map[gating.ItemID]*store.Item) []int {
	held := map[gating.ItemID]map[string]bool{}
	for _, d := range defects {
		if held[d.Item] == nil {
			held[d.Item] = map[string]bool{}
		}
		held[d.Item][d.Code] = true
	}
	var out []int
	for n, codes := range listed {
		id := gating.IDFor(n)
		if items[id] == nil {
			continue
		}
		for _, c := range codes {
			if !held[id][c] {
				out = append(out, n)
				break
			}
		}
	}
	slices.Sort(out)
	return out
}

// ReportSink keeps each item's report comment (Reports).
type ReportSink interface {
	Publish(ctx context.Context, repo store.Repo, number int, findings []gating.ReportFinding) (string, error)
	Refuse(ctx context.Context, repo store.Repo, number int, line string) (string, error)
	Refresh(ctx context.Context, repo store.Repo, number int) (string, error)
	Flush(ctx context.Context) (int, error)
}

// publishFindings sets the item's report comment to its open findings: the
// ready set's defects about it (tags, edges, admission, poison, the trail,
// label acts).
func (m *Mirror) publishFindings(ctx context.Context, repo store.Repo, n int, defects []gating.Defect) (string, error) {
	if m.Reports == nil {
		return "", nil
	}
	id := gating.IDFor(n)
	var fs []gating.ReportFinding
	for _, d := range defects {
		if d.Item == id {
			fs = append(fs, gating.ReportFinding{Code: d.Code, Detail: d.Detail})
		}
	}
	return m.Reports.Publish(ctx, repo, n, fs)
}

// flushReports writes the report edits that came due.
func (m *Mirror) flushReports(ctx context.Context) (int, error) {
	if m.Reports == nil {
		return 0, nil
	}
	return m.Reports.Flush(ctx)
}
