package mirror

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/mirror/store"
)

// The transitions an API write (PATCH /items/{id}) makes visible on GitHub
// (CONTRACT.md §2 close_on_complete, §9): a partOf added or removed moves
// the item's issue under (or out of) its epic's issue as a native
// sub-issue; a recorded state:complete closes the issue as completed; a
// blockedBy or partOf edge a pm token removed is recorded and reported
// (edge-removed). Each is recorded before the ledger write (Transition), so
// a crash between the two leaves a record the timer pass (Sweep) finishes,
// or drops when the ledger does not show the write.

// transitionGrace is how long a record written before a ledger write is
// left to the request that wrote it before the timer pass takes it up.
const transitionGrace = 2 * time.Minute

// Backoff of the timer pass's retries of a transition.
const (
	transitionRetryMin = 30 * time.Second
	transitionRetryMax = 10 * time.Minute
)

// transitionBatch bounds the records one timer pass takes up per kind and
// repository.
const transitionBatch = 50

func transitionBackoff(tries int) time.Duration {
	d := transitionRetryMin
	for i := 0; i < tries && d < transitionRetryMax; i++ {
		d *= 2
	}
	return min(d, transitionRetryMax)
}

// Transition is what BeforeUpdate recorded for one PATCH, handed back to
// UpdateCommitted or UpdateRefused.
type Transition struct {
	number int
	// The partOf change: the epic issues before and after (0: none).
	moved    bool
	from, to int
	planned  time.Time // the sub-issue record's version
	synced   bool      // GitHub was brought to `to` before the ledger write
	// Edge removals recorded for a pm token.
	removals []store.EdgeRemoval
	// A completion being recorded (its record's version), or zero.
	completing time.Time
	actor      store.Actor
	restored   []gating.Link
}

// SubIssueError is a sub-issue write that did not happen: GitHub (422) or
// warden (a parent it did not set) refused it, or the call failed.
type SubIssueError struct {
	Issue, Epic int    // the child and the parent it was to get (0: removal)
	From        int    // the parent it was to leave (0: none)
	Refused     bool   // refused (retrying does not help), not failed
	Msg         string // GitHub's or warden's words
	Err         error  // the call's error, when it failed
}

func (e *SubIssueError) Error() string {
	what := fmt.Sprintf("attach #%d as a sub-issue of #%d", e.Issue, e.Epic)
	if e.Epic == 0 {
		what = fmt.Sprintf("detach #%d from #%d", e.Issue, e.From)
	}
	if e.Refused {
		return "GitHub sub-issues: " + what + " refused: " + e.Msg
	}
	return "GitHub sub-issues: " + what + ": " + e.Msg
}

func (e *SubIssueError) Unwrap() error { return e.Err }

// epicNumber is the issue number of the epic links name (partOf), or 0.
func epicNumber(links []gating.Link) int {
	for _, l := range links {
		if l.Rel == gating.PartOf {
			return gating.ItemID(l.Target).Number()
		}
	}
	return 0
}

// patchedLinks is links after p's removals and additions.
func patchedLinks(links []gating.Link, p store.Patch) []gating.Link {
	out := []gating.Link{}
	for _, l := range links {
		if !slices.Contains(p.RemoveLinks, l) {
			out = append(out, l)
		}
	}
	for _, l := range p.AddLinks {
		if !slices.Contains(out, l) {
			out = append(out, l)
		}
	}
	return out
}

// BeforeUpdate records, before the ledger writes p on before, what GitHub
// must follow if the write commits, and mirrors a partOf change at once
// (the create path's order: GitHub's sub-issue first, then the ledger), so
// that a sub-issue GitHub refuses refuses the write. An error means the
// write must not be made; a *SubIssueError says what GitHub did not do.
func (m *Mirror) BeforeUpdate(ctx context.Context, repo store.Repo, before store.Item, p store.Patch, actor store.Actor) (*Transition, error) {
	n := before.ID.Number()
	now := m.now()
	t := &Transition{number: n, actor: actor}
	for _, l := range p.RemoveLinks {
		if slices.Contains(before.Links, l) && !slices.Contains(p.AddLinks, l) && gating.EdgeRemovalReported(actor.Role, l.Rel) {
			t.removals = append(t.removals, store.EdgeRemoval{Rel: l.Rel, Target: l.Target, Actor: actor.Name, Role: actor.Role, RemovedAt: now})
		}
	}
	for _, l := range p.AddLinks {
		if l.Rel == gating.BlockedBy || l.Rel == gating.PartOf {
			t.restored = append(t.restored, l)
		}
	}
	if slices.Contains(p.AddTags, "state:complete") && !slices.Contains(p.RemoveTags, "state:complete") && !before.HasTag("state:complete") {
		t.completing = now
	}
	t.from, t.to = epicNumber(before.Links), epicNumber(patchedLinks(before.Links, p))
	t.moved = t.from != t.to

	if len(t.removals) > 0 {
		if err := m.Acts.PlanEdgeRemovals(ctx, repo.ID, n, t.removals); err != nil {
			return nil, err
		}
	}
	if !t.completing.IsZero() {
		if err := m.Acts.PlanCompleteClose(ctx, repo.ID, n, t.completing, now.Add(transitionGrace)); err != nil {
			return nil, err
		}
	}
	if !t.moved {
		return t, nil
	}
	t.planned = now
	if err := m.Acts.PlanSubIssueSync(ctx, repo.ID, n, t.from, t.to, now, now.Add(transitionGrace)); err != nil {
		return nil, err
	}
	if m.settings(ctx, repo).DryRun {
		m.heldWrite(repo, "sub-issue change", "item", before.ID, "from", t.from, "to", t.to)
		return t, nil
	}
	if t.to != 0 {
		// A partOf to what is not an item is the ledger's to refuse (with
		// its own reason); GitHub is not touched for it.
		if _, err := m.Ledger.Get(ctx, repo.ID, gating.IDFor(t.to)); errors.Is(err, store.ErrNotFound) {
			return t, nil
		} else if err != nil {
			m.UpdateRefused(ctx, repo, t, false)
			return nil, err
		}
	}
	if err := m.syncParent(ctx, repo, n, t.to, []int{t.from, t.to}); err != nil {
		var se *SubIssueError
		if errors.As(err, &se) && se.Refused {
			// GitHub is as it was, and so stays the ledger.
			if derr := m.Acts.DoneSubIssueSync(ctx, repo.ID, n, t.planned); derr != nil {
				m.Log.Warn("sub-issues: the refused change's record was not cleared; the timer pass checks it", "repo", repo.FullName, "item", before.ID, "err", derr)
			}
		}
		m.UpdateRefused(ctx, repo, t, false)
		return nil, err
	}
	t.synced = true
	return t, nil
}

// UpdateRefused undoes what BeforeUpdate recorded when the ledger refused
// the write (or BeforeUpdate's own sub-issue write failed: subIssues
// false): the edge removals and the pending close are dropped, and a
// sub-issue already moved is moved back to what the ledger says (now, or by
// the timer pass).
func (m *Mirror) UpdateRefused(ctx context.Context, repo store.Repo, t *Transition, subIssues bool) {
	if t == nil {
		return
	}
	n := t.number
	var errs []error
	if len(t.removals) > 0 {
		errs = append(errs, m.Acts.DropEdgeRemovals(ctx, repo.ID, n, t.removals))
	}
	if !t.completing.IsZero() {
		errs = append(errs, m.Acts.DropCompleteClose(ctx, repo.ID, n, t.completing))
	}
	if subIssues && t.moved {
		if !t.synced {
			errs = append(errs, m.Acts.DoneSubIssueSync(ctx, repo.ID, n, t.planned))
		} else if err := m.syncParent(ctx, repo, n, t.from, []int{t.from, t.to}); err != nil {
			errs = append(errs, fmt.Errorf("move #%d back to the ledger's parent #%d (the timer pass retries): %w", n, t.from, err))
		} else {
			errs = append(errs, m.Acts.DoneSubIssueSync(ctx, repo.ID, n, t.planned))
		}
	}
	if err := errors.Join(errs...); err != nil {
		m.Log.Warn("after a refused API write", "repo", repo.FullName, "item", gating.IDFor(n), "err", err)
	}
}

// UpdateCommitted finishes what BeforeUpdate recorded once the ledger
// wrote the patch (after): the sub-issue record is cleared when GitHub
// already agrees, edges written again acknowledge their removal, and a
// recorded completion closes the issue. A failure is logged and left to the
// timer pass.
func (m *Mirror) UpdateCommitted(ctx context.Context, repo store.Repo, t *Transition, after store.Item) {
	if t == nil {
		return
	}
	n := t.number
	var errs []error
	if t.moved && t.synced {
		errs = append(errs, m.Acts.DoneSubIssueSync(ctx, repo.ID, n, t.planned))
	}
	for _, l := range t.restored {
		if slices.Contains(after.Links, l) {
			_, err := m.Acts.AckEdgeRemovals(ctx, repo.ID, n, l.Rel, l.Target, t.actor.Name, "restored", m.now())
			errs = append(errs, err)
		}
	}
	if !t.completing.IsZero() && after.HasTag("state:complete") {
		if out, err := m.closeCompleted(ctx, repo, n, t.completing); err != nil {
			errs = append(errs, err)
		} else if out != "" {
			m.Log.Info("close_on_complete", "repo", repo.FullName, "item", after.ID, "outcome", out)
		}
	}
	if err := errors.Join(errs...); err != nil {
		m.Log.Warn("after an API write: a transition is left to the timer pass", "repo", repo.FullName, "item", after.ID, "err", err)
	}
}

// syncParent brings issue n under parent want (0: no parent) with one read
// of the issue and at most one write, touching only a parent in ours (the
// ones warden set or meant to set).
func (m *Mirror) syncParent(ctx context.Context, repo store.Repo, n, want int, ours []int) error {
	c, err := m.callsFor(repo)
	if err != nil {
		return err
	}
	tc, err := m.transitionCallsFor(c)
	if err != nil {
		return err
	}
	iss, err := tc.issueLink(ctx, n)
	if err != nil {
		return &SubIssueError{Issue: n, Epic: want, Msg: fmt.Sprintf("read issue #%d: %v", n, err), Err: err}
	}
	mv := gating.PlanSubIssue(want, iss.Parent, ours)
	switch {
	case mv.Refuse != "":
		return &SubIssueError{Issue: n, Epic: want, Refused: true, Msg: mv.Refuse}
	case mv.Add != 0:
		if err := tc.addSubIssue(ctx, mv.Add, iss.ID, mv.Replace); err != nil {
			return &SubIssueError{Issue: n, Epic: mv.Add, From: max(iss.Parent, 0), Refused: errors.Is(err, errUnprocessable), Msg: err.Error(), Err: err}
		}
		m.Log.Info("sub-issues: attached", "repo", repo.FullName, "issue", n, "parent", mv.Add, "replaced", mv.Replace)
	case mv.Remove != 0:
		if err := tc.removeSubIssue(ctx, mv.Remove, iss.ID); err != nil {
			return &SubIssueError{Issue: n, From: mv.Remove, Refused: errors.Is(err, errUnprocessable), Msg: err.Error(), Err: err}
		}
		m.Log.Info("sub-issues: detached", "repo", repo.FullName, "issue", n, "parent", mv.Remove)
	}
	return nil
}

// closeCompleted decides and makes the close of issue n for the completion
// recorded at completedAt (gating.CompletionClose): one write when the
// issue is recorded open, none when it is closed, one read first when its
// state is unknown. dry_run holds it (the record stays pending).
func (m *Mirror) closeCompleted(ctx context.Context, repo store.Repo, n int, completedAt time.Time) (string, error) {
	set := m.settings(ctx, repo)
	state := ""
	if st, err := m.Ledger.IssueState(ctx, repo.ID, n); err != nil {
		return "", err
	} else if st != nil {
		state = st.State
	}
	decision := gating.CompletionClose(set.CloseOnComplete, set.DryRun, state)
	var c transitionCalls
	if decision == gating.CloseReadFirst || decision == gating.CloseIssue {
		rc, err := m.callsFor(repo)
		if err != nil {
			return "", err
		}
		if c, err = m.transitionCallsFor(rc); err != nil {
			return "", err
		}
	}
	if decision == gating.CloseReadFirst {
		iss, err := c.issueLink(ctx, n)
		if errors.Is(err, errNotFound) {
			decision = gating.CloseSkipGone
		} else if err != nil {
			return "", fmt.Errorf("read issue #%d before closing it: %w", n, err)
		} else {
			if _, err := m.Ledger.RecordIssueState(ctx, repo.ID, n, store.IssueState{State: iss.State, Labels: iss.Labels, UpdatedAt: iss.UpdatedAt}); err != nil {
				return "", err
			}
			if decision = gating.CompletionClose(set.CloseOnComplete, set.DryRun, iss.State); decision == gating.CloseReadFirst {
				return "", fmt.Errorf("issue #%d reads state %q: not closed", n, iss.State)
			}
		}
	}
	switch decision {
	case gating.CloseHeldByDryRun:
		m.heldWrite(repo, "close the issue as completed", "issue", n)
		return "", nil
	case gating.CloseIssue:
		iss, err := c.closeCompleted(ctx, n)
		if err != nil {
			return "", fmt.Errorf("close issue #%d as completed: %w", n, err)
		}
		// Bookkeeping, as for labels warden writes: the closed delivery
		// (warden's own) records the same.
		if _, err := m.Ledger.RecordIssueState(ctx, repo.ID, n, store.IssueState{State: iss.State, Labels: iss.Labels, UpdatedAt: iss.UpdatedAt}); err != nil {
			return "", err
		}
		if _, err := m.Acts.DecideCompleteClose(ctx, repo.ID, n, completedAt, gating.CloseIssue, m.now()); err != nil {
			return "", err
		}
		return fmt.Sprintf("issue #%d closed as completed", n), nil
	}
	if _, err := m.Acts.DecideCompleteClose(ctx, repo.ID, n, completedAt, decision, time.Time{}); err != nil {
		return "", err
	}
	return fmt.Sprintf("issue #%d not closed: %s", n, decision), nil
}

// noteIssueStateAct records an issues delivery's reopening or close of an
// item's issue against its completion's close: a reopening by anyone but
// warden after the completion closed the issue (or found it closed) is
// reported as reopened-after-complete, a later close ends that report.
// warden never closes the issue again for that completion.
func (m *Mirror) noteIssueStateAct(ctx context.Context, ev Event, repo store.Repo, p *issuesPayload) error {
	at := p.issueState(ev.Action).UpdatedAt
	if at.IsZero() {
		at = m.now()
	}
	switch ev.Action {
	case "reopened":
		if ev.FromSelf {
			return nil
		}
		_, err := m.Acts.NoteReopened(ctx, repo.ID, p.Issue.Number, p.Sender.Login, at)
		return err
	case "closed":
		return m.Acts.NoteReclosed(ctx, repo.ID, p.Issue.Number, at)
	}
	return nil
}

// sweepTransitions is the timer pass's part for the transitions on one
// repository: sub-issue changes and completion closes whose request did not
// finish them (a failure, a crash) are finished, or dropped when the ledger
// does not show the write they were recorded for. Nothing is done under
// dry_run. It returns what it did.
func (m *Mirror) sweepTransitions(ctx context.Context, repo store.Repo) ([]string, error) {
	if m.Acts == nil || m.settings(ctx, repo).DryRun {
		return nil, nil
	}
	now := m.now()
	var outs []string
	var errs []error
	syncs, err := m.Acts.SubIssueSyncs(ctx, repo.ID, now, transitionBatch)
	if err != nil {
		return nil, err
	}
	for _, s := range syncs {
		want := 0
		it, err := m.Ledger.Get(ctx, repo.ID, gating.IDFor(s.Number))
		switch {
		case err == nil:
			want = epicNumber(it.Links)
		case !errors.Is(err, store.ErrNotFound):
			errs = append(errs, err)
			continue
		}
		if err := m.syncParent(ctx, repo, s.Number, want, []int{s.FromParent, s.ToParent}); err != nil {
			m.Log.Warn("sub-issues: the issue's parent is not the ledger's yet; retrying", "repo", repo.FullName, "issue", s.Number,
				"want", want, "tries", s.Tries+1, "err", err)
			errs = append(errs, m.Acts.RetrySubIssueSync(ctx, repo.ID, s.Number, s.CreatedAt, err.Error(), now.Add(transitionBackoff(s.Tries))))
			continue
		}
		errs = append(errs, m.Acts.DoneSubIssueSync(ctx, repo.ID, s.Number, s.CreatedAt))
		outs = append(outs, fmt.Sprintf("#%d: sub-issue parent brought to #%d", s.Number, want))
	}
	closes, err := m.Acts.PendingCompleteCloses(ctx, repo.ID, now, transitionBatch)
	if err != nil {
		return outs, errors.Join(append(errs, err)...)
	}
	for _, c := range closes {
		it, err := m.Ledger.Get(ctx, repo.ID, gating.IDFor(c.Number))
		if errors.Is(err, store.ErrNotFound) || (err == nil && !it.HasTag("state:complete")) {
			errs = append(errs, m.Acts.DropCompleteClose(ctx, repo.ID, c.Number, c.CompletedAt))
			continue
		} else if err != nil {
			errs = append(errs, err)
			continue
		}
		out, err := m.closeCompleted(ctx, repo, c.Number, c.CompletedAt)
		if err != nil {
			m.Log.Warn("close_on_complete: the issue is not closed yet; retrying", "repo", repo.FullName, "issue", c.Number, "tries", c.Tries+1, "err", err)
			errs = append(errs, m.Acts.RetryCompleteClose(ctx, repo.ID, c.Number, c.CompletedAt, err.Error(), now.Add(transitionBackoff(c.Tries))))
			continue
		}
		if out != "" {
			outs = append(outs, out)
		}
	}
	return outs, errors.Join(errs...)
}
