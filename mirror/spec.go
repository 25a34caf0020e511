package mirror

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/go-github/v66/github"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/mirror/store"
)

// The gate holds after admission (gating.JudgeSpec): an agent that rewrites
// an admitted item's specification (its issue's title or body) has
// authorised its own work one step later, so the item is gated again. The
// admitted text's digest is recorded with the admission act; every
// `issues.edited` delivery that touches the title or body is logged with
// its editor; every settle of an admitted item compares the issue's
// recorded text with the admitted one, and only a difference costs
// anything more (one read of the issue before warden acts).

// specCalls is the GitHub read the gate after admission confirms a
// re-gating with.
type specCalls interface {
	// issue reads issue n as it is now.
	issue(ctx context.Context, n int) (*github.Issue, error)
}

func (g githubCalls) issue(ctx context.Context, n int) (*github.Issue, error) {
	is, resp, err := g.gh.Issues.Get(ctx, g.owner, g.name, n)
	return is, marked(resp, err)
}

// specDigest is the digest of an issue's title and body, "" when the
// object carried no title (no issue text at all: GitHub requires a title).
func specDigest(title, body string) string {
	if title == "" {
		return ""
	}
	return gating.SpecDigest(title, body)
}

// payloadSpec is the specification a payload's issue object shows, as of
// its updated_at (zero when it shows none).
func payloadSpec(title, body, updatedAt string) gating.SpecState {
	d := specDigest(title, body)
	t, ok := parseGHTime(updatedAt)
	if d == "" || !ok {
		return gating.SpecState{}
	}
	return gating.SpecState{Digest: d, At: t}
}

// recordSpecEdit logs an `issues.edited` delivery that changed the title
// or the body (labels, milestone and assignees are judged by their own
// rules): when, by whom (judged as everywhere, CONTRACT.md §4; the role is
// not looked up, since it does not make an agent), and the text's digest
// after and before it. A who-is-who lookup that failed is an error: the
// delivery is retried rather than guessed.
func (m *Mirror) recordSpecEdit(ctx context.Context, ev Event, repo store.Repo, p *issuesPayload) error {
	if ev.Action != "edited" || p.Changes == nil || (p.Changes.Title == nil && p.Changes.Body == nil) {
		return nil
	}
	at, ok := parseGHTime(p.Issue.UpdatedAt)
	if !ok {
		return payloadErr("issues.edited: updated_at %q is no time", p.Issue.UpdatedAt)
	}
	title, body := p.Issue.Title, p.Issue.Body
	if p.Changes.Title != nil {
		title = p.Changes.Title.From
	}
	if p.Changes.Body != nil {
		body = p.Changes.Body.From
	}
	e := gating.SpecEdit{At: at, Editor: p.Sender.Login, Digest: gating.SpecDigest(p.Issue.Title, p.Issue.Body),
		Prior: gating.SpecDigest(title, body), Delivery: ev.DeliveryID}
	if e.Delivery == "" {
		e.Delivery = "edit:" + p.Issue.UpdatedAt + ":" + p.Sender.Login + ":" + e.Digest
	}
	if ev.FromSelf {
		e.Standing, e.Why = gating.SpecEditorWarden, "warden itself"
	} else {
		who, err := m.who(ctx, repo, p.Sender.Login, p.Sender.Type, false)
		if err != nil {
			return err
		}
		e.Standing = gating.SpecEditor(who.Identity, m.agents(ctx, repo))
		switch e.Standing {
		case gating.SpecEditorAgent, gating.SpecEditorWarden:
			e.Why = who.Why
		case gating.SpecEditorUnknown:
			e.Why = "an account warden cannot judge"
		}
	}
	_, err := m.Acts.RecordSpecEdit(ctx, repo.ID, p.Issue.Number, e)
	return err
}

// specAsOf is issue n's text as of at, from what warden recorded: the text
// before the first logged edit at or after at, else the recorded text
// (gating.SpecAsOf). It is what a human admitted at at when no payload
// shows it (the label-events repair).
func (m *Mirror) specAsOf(ctx context.Context, repo store.Repo, n int, at time.Time) (gating.SpecState, error) {
	cur, err := m.Acts.IssueSpec(ctx, repo.ID, n)
	if err != nil {
		return gating.SpecState{}, err
	}
	edits, err := m.Acts.SpecEdits(ctx, repo.ID, n)
	if err != nil {
		return gating.SpecState{}, err
	}
	return gating.SpecAsOf(cur, edits, at), nil
}

// closeSpecFinding closes spec-changed-by-agent after a human's admission
// whose text covers what warden knows the issue says: the same text, or a
// text at least as new. An act about older text (a late delivery, a
// command posted before the agent's edit) leaves it open: the human has not
// seen the text the agent wrote.
func (m *Mirror) closeSpecFinding(ctx context.Context, repo store.Repo, n int, spec gating.SpecState) error {
	if ok, err := m.specCovers(ctx, repo, n, spec); err != nil || !ok {
		return err
	}
	return m.Acts.CloseLabelFinding(ctx, repo.ID, n, gating.CodeSpecChangedByAgent)
}

// specCovers reports whether a human who admitted the text spec has seen
// issue n's text as recorded: the same text, or one at least as new (or
// either unknown).
func (m *Mirror) specCovers(ctx context.Context, repo store.Repo, n int, spec gating.SpecState) (bool, error) {
	cur, err := m.Acts.IssueSpec(ctx, repo.ID, n)
	if err != nil {
		return false, err
	}
	return spec.Digest == "" || cur.Digest == "" || spec.Digest == cur.Digest || !spec.At.Before(cur.At), nil
}

// specStep is the gate after admission for one item of a snapshot: while
// it is admitted, the issue's recorded text is compared with the admitted
// one (gating.JudgeSpec). A human's (or warden's) edit becomes the admitted
// text; an agent's, or one warden did not see, is confirmed with one read
// of the issue (recorded) and then re-gates it (regate). An item re-gated
// earlier whose admission label is not on the issue gets it back (the
// label write failed after the finding was opened). reread says the ledger
// changed: the caller judges the item again before publishing.
func (m *Mirror) specStep(ctx context.Context, repo store.Repo, set gating.Settings, rs *store.Snapshot, id gating.ItemID) (out string, reread bool, err error) {
	var c *gating.Candidate
	for i := range rs.Snapshot.Items {
		if rs.Snapshot.Items[i].Item.ID == id {
			c = &rs.Snapshot.Items[i]
		}
	}
	n := id.Number()
	switch {
	case c == nil || c.AdmissionLabel || !c.AdmissionRecorded:
		return "", false, nil
	case c.SpecChanged:
		if set.DryRun {
			return "", false, nil // the label stays off: the finding holds the item
		}
		return m.regateLabel(ctx, repo, set, rs.Items[id])
	}
	f, ok, err := m.Acts.SpecFacts(ctx, repo.ID, n)
	if err != nil || !ok || f.Current.Digest == "" {
		return "", false, err
	}
	in := gating.SpecInput{Admitted: true, Accepted: f.Accepted, AdmittedAt: f.AdmittedAt, Current: f.Current}
	if f.Accepted.Digest != "" && (f.Current.Digest == f.Accepted.Digest || f.Current.At.Before(f.Accepted.At)) {
		return "", false, nil // the admitted text, or older news: no edit to read
	}
	if in.Edits, err = m.Acts.SpecEdits(ctx, repo.ID, n); err != nil {
		return "", false, err
	}
	v := gating.JudgeSpec(in)
	if err := m.acceptSpec(ctx, repo, n, v); err != nil {
		return "", false, err
	}
	switch v.Action {
	case gating.SpecKeep:
		return "", false, nil
	case gating.SpecAccept:
		return fmt.Sprintf("%s: specification edited by %s: the edited text is the admitted one", id, v.Edit.Editor), false, nil
	}
	// Confirm against GitHub before acting: one read of the issue, whose
	// answer is recorded (deliveries come late and out of order).
	calls, err := m.callsFor(repo)
	if err != nil {
		return "", false, err
	}
	read := m.now()
	is, err := calls.issue(ctx, n)
	if errors.Is(err, errNotFound) {
		return fmt.Sprintf("%s: the issue is gone; its specification is not judged", id), false, nil
	} else if err != nil {
		return "", false, fmt.Errorf("read %s#%d to confirm its specification: %w", repo.FullName, n, err)
	}
	st := store.IssueState{State: is.GetState(), UpdatedAt: is.GetUpdatedAt().UTC(), SpecDigest: specDigest(is.GetTitle(), is.GetBody()),
		Labels: make([]string, 0, len(is.Labels))}
	for _, l := range is.Labels {
		st.Labels = append(st.Labels, l.GetName())
	}
	if _, err := m.Ledger.RecordIssueStateRead(ctx, repo.ID, n, st, read); err != nil {
		return "", false, err
	}
	in.Admitted = !store.HasLabel(st.Labels, set.AdmissionLabel)
	in.Current = gating.SpecState{Digest: st.SpecDigest, At: st.UpdatedAt}
	if v.Record.Digest != "" {
		in.Accepted = v.Record
	}
	v = gating.JudgeSpec(in)
	if err := m.acceptSpec(ctx, repo, n, v); err != nil {
		return "", true, err
	}
	switch v.Action {
	case gating.SpecKeep:
		return fmt.Sprintf("%s: specification read: nothing to re-gate", id), true, nil
	case gating.SpecAccept:
		return fmt.Sprintf("%s: specification edited by %s: the edited text is the admitted one", id, v.Edit.Editor), true, nil
	}
	out, err = m.regate(ctx, calls, repo, set, n, v, is, st)
	return out, true, err
}

// regateLabel settles a re-gated item (spec-changed-by-agent open) whose
// admission label is off the issue as recorded, from the label's last event
// (one read): a human's removal with triage+ of the text as it is now
// admits it, anyone else's is reverted and reported, and a label the
// re-gate never got on (its write failed, or warden stopped before it; the
// last act is then the admission the agent's edit came after) or that
// warden took off for a command about older text is put back. The label on
// after all is noted.
func (m *Mirror) regateLabel(ctx context.Context, repo store.Repo, set gating.Settings, it *store.Item) (string, bool, error) {
	n := it.ID.Number()
	c, ok, err := m.confirm(ctx, repo, n, set.AdmissionLabel, false)
	if err != nil {
		return "", false, err
	}
	if ok {
		spec, err := m.specAsOf(ctx, repo, n, c.act.At)
		if err != nil {
			return "", true, err
		}
		covers, err := m.specCovers(ctx, repo, n, spec)
		if err != nil {
			return "", true, err
		}
		if !c.who.Human || covers {
			out, err := m.admissionRemovedBy(ctx, c, repo, set, n, it, spec)
			return out, true, err
		}
	}
	if c.act.Known && c.act.Present {
		return "", true, nil // on the issue after all (noted by the read)
	}
	if err := m.addLabel(ctx, c.calls, repo, set, n, set.AdmissionLabel); err != nil {
		return "", true, fmt.Errorf("re-gate %s: %w", it.ID, err)
	}
	return fmt.Sprintf("%s: %s put back (%s is open)", it.ID, set.AdmissionLabel, gating.CodeSpecChangedByAgent), true, nil
}

// acceptSpec records the admitted specification a verdict carries.
func (m *Mirror) acceptSpec(ctx context.Context, repo store.Repo, n int, v gating.SpecVerdict) error {
	if v.Record.Digest == "" {
		return nil
	}
	_, err := m.Acts.AcceptSpec(ctx, repo.ID, n, v.Record)
	return err
}

// regate gates an admitted item again whose specification an agent
// rewrote (or that changed unseen): spec-changed-by-agent is opened first,
// which keeps the item out of the ready set and claims whatever happens to
// the label, then the admission label is put back (held in dry run). A
// live claim is left to run out or be released.
func (m *Mirror) regate(ctx context.Context, calls labelCalls, repo store.Repo, set gating.Settings, n int, v gating.SpecVerdict, is *github.Issue, st store.IssueState) (string, error) {
	id := gating.IDFor(n)
	history := fmt.Sprintf("Who changed what is in the issue's edit history (the \"edited\" menu on its description): %s", is.GetHTMLURL())
	var actor, detail, key, by string
	at := st.UpdatedAt
	if e := v.Edit; e != nil {
		actor, key, at = e.Editor, "spec:"+e.Delivery, e.At
		by = fmt.Sprintf("%s (%s)", e.Editor, e.Why)
		detail = fmt.Sprintf("%s changed the specification (the issue's title or body) at %s, after a human admitted it; warden put the admission label %s back, "+
			"and the item is not offered until a human admits the new text. %s", by, at.UTC().Format(time.RFC3339), set.AdmissionLabel, history)
	} else {
		key, by = "spec:unseen:"+st.SpecDigest, "an editor warden did not see"
		detail = fmt.Sprintf("the specification (the issue's title or body) is not the text a human admitted, and warden did not see the edit "+
			"(its delivery was missed, or is late), so who changed it is unknown (read at %s); warden put the admission label %s back, "+
			"and the item is not offered until a human admits the text as it is. %s", at.UTC().Format(time.RFC3339), set.AdmissionLabel, history)
	}
	if err := m.Acts.NoteSpecFinding(ctx, repo.ID, n, actor, detail, key, at); err != nil {
		return "", err
	}
	if err := m.addLabel(ctx, calls, repo, set, n, set.AdmissionLabel); err != nil {
		return "", fmt.Errorf("re-gate %s: %w", id, err)
	}
	if set.DryRun {
		return fmt.Sprintf("%s: specification changed by %s after admission: not admitted; %s would be added (dry run)", id, by, set.AdmissionLabel), nil
	}
	return fmt.Sprintf("%s: specification changed by %s after admission: re-gated, %s added", id, by, set.AdmissionLabel), nil
}
