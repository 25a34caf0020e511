package mirror

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/mirror/store"
)

// Label-act findings (CONTRACT.md §5), kept in label_findings.
const (
	CodeAgentRemovedAdmission = "agent-removed-admission"
	CodeAgentRemovedPark      = "agent-removed-park"
	CodeParkLabelWithoutTag   = "park-label-without-tag"
	CodeItemLabelRemoved      = "item-label-removed"
	CodeParkWithoutQuestion   = "park-without-question"
	CodeSharedIdentity        = "shared-identity"
)

// issuesLabelAct handles a labeled or unlabeled delivery on an item's issue
// (CONTRACT.md §5): the admission label, the parked label and the item
// label. Acts on the admission and parked labels are first confirmed
// against the issue's label events (one read); the last event decides, not
// the delivery, so deliveries may arrive in any order.
func (m *Mirror) issuesLabelAct(ctx context.Context, ev Event, repo store.Repo, set gating.Settings, p *issuesPayload, it *store.Item) (string, error) {
	label := p.Label.Name
	n := p.Issue.Number
	switch {
	case strings.EqualFold(label, set.AdmissionLabel):
		if ev.Action == "labeled" {
			// Re-adding only narrows: always allowed, nothing to do.
			return fmt.Sprintf("%s: %s added (not admitted until a human removes it)", it.ID, label), nil
		}
		return m.admissionRemoved(ctx, repo, set, n, it, payloadSpec(p.Issue.Title, p.Issue.Body, p.Issue.UpdatedAt))
	case strings.EqualFold(label, set.ParkedLabel):
		if ev.Action == "labeled" {
			return m.parkedLabelAdded(ctx, repo, set, n, it)
		}
		return m.parkedLabelRemoved(ctx, repo, set, n, it)
	case strings.EqualFold(label, set.ItemLabel) && ev.Action == "unlabeled":
		return m.itemLabelRemoved(ctx, repo, set, p, it)
	case strings.EqualFold(label, set.ItemLabel):
		if err := m.Acts.CloseLabelFinding(ctx, repo.ID, n, CodeItemLabelRemoved); err != nil {
			return "", err
		}
		return "item exists", nil
	}
	return fmt.Sprintf("%s: label %s %s", it.ID, label, ev.Action), nil
}

// labelCalls are the GitHub label writes warden makes on an issue.
type labelCalls interface {
	// addLabels adds labels to issue n (GitHub creates one the repository
	// lacks).
	addLabels(ctx context.Context, n int, labels []string) error
	// removeLabel takes label off issue n; a label already gone (404) is
	// no error.
	removeLabel(ctx context.Context, n int, label string) error
}

// gateCalls are the GitHub calls of the gate on label acts: the confirming
// read of the label events and the label writes (a revert).
type gateCalls interface {
	labelEventCalls
	labelCalls
}

// confirmed is a label act confirmed against the issue's label events: the
// last event for the label, who did it, and the calls that read it.
type confirmed struct {
	calls gateCalls
	act   labelAct
	who   person
}

// confirm reads the label's last event (one read) and judges its actor. ok
// is false when the issue no longer shows what the delivery said (the label
// is back, or gone again, or no event names it), or when the last act was
// warden's own: then there is nothing to do.
func (m *Mirror) confirm(ctx context.Context, repo store.Repo, n int, label string, present bool) (c confirmed, ok bool, err error) {
	if c.calls, err = m.callsFor(repo); err != nil {
		return c, false, err
	}
	if c.act, err = m.lastLabelAct(ctx, c.calls, repo, n, label); err != nil {
		return c, false, err
	}
	if !c.act.Known || c.act.Present != present {
		return c, false, nil
	}
	if bot := m.botLogin(); bot != "" && strings.EqualFold(c.act.Actor, bot) {
		// The last act was warden's own (a /backlog admit or unpark it
		// carried out, a label it put back): a late delivery about an
		// earlier act must not undo it.
		return c, false, nil
	}
	c.who = m.judge(ctx, repo, c.act.Actor, c.act.ActorType)
	return c, true, nil
}

// revert puts back a label someone other than a human with triage+ removed,
// and reports it under code (the event's id counts the repeat once).
func (m *Mirror) revert(ctx context.Context, c confirmed, repo store.Repo, set gating.Settings, n int, label, code, detail string) (string, error) {
	if err := m.addLabel(ctx, c.calls, repo, set, n, label); err != nil {
		return "", err
	}
	if _, err := m.Acts.NoteLabelFinding(ctx, repo.ID, n, code, c.act.Actor, detail, c.act.eventKey(), c.act.At); err != nil {
		return "", err
	}
	if set.DryRun {
		return fmt.Sprintf("%s: %s removed by %s (%s): would be re-added (dry run)", gating.IDFor(n), label, c.act.Actor, c.who.Why), nil
	}
	return fmt.Sprintf("%s: %s removed by %s (%s): re-added", gating.IDFor(n), label, c.act.Actor, c.who.Why), nil
}

// admissionRemoved: a human with triage+ admits (spec: the issue's text
// as the delivery showed it); anyone else's removal is reverted and
// reported (repeats counted, reported once).
func (m *Mirror) admissionRemoved(ctx context.Context, repo store.Repo, set gating.Settings, n int, it *store.Item, spec gating.SpecState) (string, error) {
	c, ok, err := m.confirm(ctx, repo, n, set.AdmissionLabel, false)
	if err != nil || !ok {
		return fmt.Sprintf("%s: %s is on the issue again; nothing to do", it.ID, set.AdmissionLabel), err
	}
	return m.admissionRemovedBy(ctx, c, repo, set, n, it, spec)
}

// admissionRemovedBy acts on a confirmed removal of the admission label: a
// human with triage+ admits the text spec, anyone else's removal is
// reverted and reported.
func (m *Mirror) admissionRemovedBy(ctx context.Context, c confirmed, repo store.Repo, set gating.Settings, n int, it *store.Item, spec gating.SpecState) (string, error) {
	if c.who.Human {
		if err := m.admit(ctx, repo, n, c.who.Login, c.act.At, "removed "+set.AdmissionLabel, spec); err != nil {
			return "", err
		}
		return fmt.Sprintf("%s admitted by %s (removed %s)", it.ID, c.who.Login, set.AdmissionLabel), nil
	}
	return m.revert(ctx, c, repo, set, n, set.AdmissionLabel, CodeAgentRemovedAdmission,
		fmt.Sprintf("%s (%s) removed the admission label %s; warden re-added it. Only a human with triage or more admits an item", c.act.Actor, c.who.Why, set.AdmissionLabel))
}

// admit records an admission act by a human, with spec, the text the
// human admitted (the issue's title and body as the act showed them), and
// closes the findings it settles: agent-removed-admission, and
// spec-changed-by-agent when spec covers the issue's recorded text.
func (m *Mirror) admit(ctx context.Context, repo store.Repo, n int, by string, at time.Time, how string, spec gating.SpecState) error {
	if err := m.Acts.RecordAdmission(ctx, repo.ID, n, store.Admission{By: by, At: at, How: how, Spec: spec}); err != nil {
		return err
	}
	if err := m.Acts.CloseLabelFinding(ctx, repo.ID, n, CodeAgentRemovedAdmission); err != nil {
		return err
	}
	return m.closeSpecFinding(ctx, repo, n, spec)
}

// parkedLabelRemoved: a human with triage+ unparks (tags removed, a new
// epoch); anyone else's removal of a parked item's label is reverted and
// reported. On an item that is not parked, the label's removal settles a
// park-label-without-tag.
func (m *Mirror) parkedLabelRemoved(ctx context.Context, repo store.Repo, set gating.Settings, n int, it *store.Item) (string, error) {
	if !it.HasTag("state:parked") {
		if err := m.Acts.CloseLabelFinding(ctx, repo.ID, n, CodeParkLabelWithoutTag); err != nil {
			return "", err
		}
		return fmt.Sprintf("%s: %s removed from an item that is not parked", it.ID, set.ParkedLabel), nil
	}
	c, ok, err := m.confirm(ctx, repo, n, set.ParkedLabel, false)
	if err != nil || !ok {
		return fmt.Sprintf("%s: %s is on the issue again; nothing to do", it.ID, set.ParkedLabel), err
	}
	if c.who.Human {
		return m.unpark(ctx, repo, n, c.who.Login, c.act.At, "removed "+set.ParkedLabel)
	}
	return m.revert(ctx, c, repo, set, n, set.ParkedLabel, CodeAgentRemovedPark,
		fmt.Sprintf("%s (%s) removed the parked label %s from a parked item; warden re-added it. Only a human with triage or more unparks", c.act.Actor, c.who.Why, set.ParkedLabel))
}

// parkedLabelAdded: on a parked item the label follows the tag (nothing to
// do); a human with triage+ adding it parks the item with a manual route;
// anyone else's label is not a park (park-label-without-tag), and nothing
// is written.
func (m *Mirror) parkedLabelAdded(ctx context.Context, repo store.Repo, set gating.Settings, n int, it *store.Item) (string, error) {
	if it.HasTag("state:parked") {
		return fmt.Sprintf("%s: %s follows its state:parked tag", it.ID, set.ParkedLabel), nil
	}
	c, ok, err := m.confirm(ctx, repo, n, set.ParkedLabel, true)
	if err != nil || !ok {
		return fmt.Sprintf("%s: %s is no longer on the issue; nothing to do", it.ID, set.ParkedLabel), err
	}
	if c.who.Human {
		return m.manualPark(ctx, repo, set, n, c.who.Login, c.who.Login, "manual-park", "", c.act.At)
	}
	detail := fmt.Sprintf("%s (%s) added the label %s to an item that is not parked: it is not a park (another bot's stale label never is); nothing was written", c.act.Actor, c.who.Why, set.ParkedLabel)
	if _, err := m.Acts.NoteLabelFinding(ctx, repo.ID, n, CodeParkLabelWithoutTag, c.act.Actor, detail, c.act.eventKey(), c.act.At); err != nil {
		return "", err
	}
	return fmt.Sprintf("%s: %s added by %s (%s): not a park", it.ID, set.ParkedLabel, c.act.Actor, c.who.Why), nil
}

// itemLabelRemoved: an agent's removal of the item label is reverted and
// reported; a human's is reported (item-label-removed) and the item stays,
// since forgetting an item is explicit (DELETE /items/{id}).
func (m *Mirror) itemLabelRemoved(ctx context.Context, repo store.Repo, set gating.Settings, p *issuesPayload, it *store.Item) (string, error) {
	n := p.Issue.Number
	login, typ := p.Sender.Login, p.Sender.Type
	who, err := m.who(ctx, repo, login, typ, false)
	if err != nil {
		return "", err
	}
	isAgent := who.agent()
	key := "delivery:" + p.Issue.UpdatedAt + ":" + login
	if isAgent {
		c, err := m.callsFor(repo)
		if err != nil {
			return "", err
		}
		if err := m.addLabel(ctx, c, repo, set, n, set.ItemLabel); err != nil {
			return "", err
		}
		detail := fmt.Sprintf("%s (an agent) removed the item label %s; warden re-added it. An agent cannot drop an item", login, set.ItemLabel)
		if _, err := m.Acts.NoteLabelFinding(ctx, repo.ID, n, CodeItemLabelRemoved, login, detail, key, m.now()); err != nil {
			return "", err
		}
		if set.DryRun {
			return fmt.Sprintf("%s: item label removed by agent %s: would be re-added (dry run)", it.ID, login), nil
		}
		return fmt.Sprintf("%s: item label removed by agent %s: re-added", it.ID, login), nil
	}
	detail := fmt.Sprintf("%s removed the item label %s; the item stays in the ledger (forgetting an item is explicit: DELETE /items/%s, or add the label back)", login, set.ItemLabel, it.ID)
	if _, err := m.Acts.NoteLabelFinding(ctx, repo.ID, n, CodeItemLabelRemoved, login, detail, key, m.now()); err != nil {
		return "", err
	}
	return fmt.Sprintf("%s: item label removed by %s: reported, the item stays", it.ID, login), nil
}

// addLabel adds a label warden needs (the label is created first when
// the repository lacks it). Nothing is written in dry_run.
func (m *Mirror) addLabel(ctx context.Context, c labelCalls, repo store.Repo, set gating.Settings, n int, label string) error {
	if set.DryRun {
		// Not noted as on the issue: it is not.
		m.heldWrite(repo, "add label", "issue", n, "label", label)
		return nil
	}
	if err := c.addLabels(ctx, n, []string{label}); err != nil {
		return fmt.Errorf("add %q to %s#%d: %w", label, repo.FullName, n, err)
	}
	return m.Ledger.NoteLabel(ctx, repo.ID, n, label, true, m.now())
}

// removeLabel removes a label (404, the issue lacks it, is success).
// Nothing is written in dry_run.
func (m *Mirror) removeLabel(ctx context.Context, c labelCalls, repo store.Repo, set gating.Settings, n int, label string) error {
	if set.DryRun {
		m.heldWrite(repo, "remove label", "issue", n, "label", label)
		return nil
	}
	if err := c.removeLabel(ctx, n, label); err != nil {
		return fmt.Errorf("remove %q from %s#%d: %w", label, repo.FullName, n, err)
	}
	return m.Ledger.NoteLabel(ctx, repo.ID, n, label, false, m.now())
}
