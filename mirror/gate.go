package mirror

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/google/go-github/v66/github"

	"github.com/wardenhq/warden/gating"
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

// person is who did an act, as far as warden could tell, and whether the
// act counts as a human's with triage or more (§4); Why says why not.
type person struct {
	Login string
	Human bool
	Why   string
}

// judge decides whether login (of account type typ) acting on repo is a
// human with triage or more (CONTRACT.md §4): not a Bot, not ghost, not a
// configured or recorded agent, and triage+ by role_name (looked up,
// cached; a failed lookup refuses). A recorded agent attempting a human act
// is recorded (once) as a shared identity and refused.
func (m *Mirror) judge(ctx context.Context, repo Repo, login, typ string) person {
	p := person{Login: login}
	if strings.EqualFold(login, m.botLogin()) && login != "" {
		p.Why = "warden itself"
		return p
	}
	recorded, err := m.Acts.IsRecorded(ctx, repo.ID, login, AgentRecorded)
	if err != nil {
		p.Why = "who-is-who lookup failed"
		m.Log.Warn("recorded-agent lookup failed; the act is not a human's (fail closed)", "login", login, "err", err)
		return p
	}
	if recorded {
		p.Why = "a login recorded as an agent (it posted backlog-worker markers)"
		if typ == "User" {
			if _, err := m.Acts.RecordAgent(ctx, repo.ID, login, SharedIdentity,
				fmt.Sprintf("%s posted backlog-worker markers and then acted as a human", login), m.now()); err != nil {
				m.Log.Warn("recording a shared identity failed", "login", login, "err", err)
			}
			p.Why = "a login seen acting as both an agent and a human (shared-identity)"
		}
		return p
	}
	p.Human, p.Why = m.isHumanTriagePlus(ctx, repo, login, typ)
	return p
}

// botLogin is warden's own bot login, when known.
func (m *Mirror) botLogin() string {
	if m.Bot == nil {
		return ""
	}
	return m.Bot()
}

// issuesLabelAct handles a labeled or unlabeled delivery on an item's issue
// (CONTRACT.md §5): the admission label, the parked label and the item
// label. Acts on the admission and parked labels are first confirmed
// against the issue's label events (one read); the last event decides, not
// the delivery, so deliveries may arrive in any order.
func (m *Mirror) issuesLabelAct(ctx context.Context, ev Event, repo Repo, set RepoSettings, p *issuesPayload, it *Item) (string, error) {
	label := p.Label.Name
	n := p.Issue.Number
	switch {
	case strings.EqualFold(label, set.AdmissionLabel):
		if ev.Action == "labeled" {
			// Re-adding only narrows: always allowed, nothing to do.
			return fmt.Sprintf("%s: %s added (not admitted until a human removes it)", it.ID, label), nil
		}
		return m.admissionRemoved(ctx, repo, set, n, it)
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

// admissionRemoved: a human with triage+ admits; anyone else's removal is
// reverted and reported (repeats counted, reported once).
func (m *Mirror) admissionRemoved(ctx context.Context, repo Repo, set RepoSettings, n int, it *Item) (string, error) {
	gh, err := m.GitHub.Installation(repo.Installation)
	if err != nil {
		return "", err
	}
	act, err := m.lastLabelAct(ctx, gh, repo, n, set.AdmissionLabel)
	if err != nil {
		return "", err
	}
	if !act.Known || act.Present {
		return fmt.Sprintf("%s: %s is on the issue again; nothing to do", it.ID, set.AdmissionLabel), nil
	}
	who := m.judge(ctx, repo, act.Actor, act.ActorType)
	if who.Human {
		if err := m.admit(ctx, repo, n, who.Login, act.At, "removed "+set.AdmissionLabel); err != nil {
			return "", err
		}
		return fmt.Sprintf("%s admitted by %s (removed %s)", it.ID, who.Login, set.AdmissionLabel), nil
	}
	if err := m.addLabel(ctx, gh, repo, set, n, set.AdmissionLabel); err != nil {
		return "", err
	}
	detail := fmt.Sprintf("%s (%s) removed the admission label %s; warden re-added it. Only a human with triage or more admits an item", act.Actor, who.Why, set.AdmissionLabel)
	if _, err := m.Acts.NoteLabelFinding(ctx, repo.ID, n, CodeAgentRemovedAdmission, act.Actor, detail, act.eventKey(), act.At); err != nil {
		return "", err
	}
	return fmt.Sprintf("%s: %s removed by %s (%s): re-added", it.ID, set.AdmissionLabel, act.Actor, who.Why), nil
}

// admit records an admission act by a human and closes the findings it
// settles.
func (m *Mirror) admit(ctx context.Context, repo Repo, n int, by string, at time.Time, how string) error {
	if err := m.Acts.RecordAdmission(ctx, repo.ID, n, Admission{By: by, At: at, How: how}); err != nil {
		return err
	}
	return m.Acts.CloseLabelFinding(ctx, repo.ID, n, CodeAgentRemovedAdmission)
}

// parkedLabelRemoved: a human with triage+ unparks (tags removed, a new
// epoch); anyone else's removal of a parked item's label is reverted and
// reported. On an item that is not parked, the label's removal settles a
// park-label-without-tag.
func (m *Mirror) parkedLabelRemoved(ctx context.Context, repo Repo, set RepoSettings, n int, it *Item) (string, error) {
	if !it.hasTag("state:parked") {
		if err := m.Acts.CloseLabelFinding(ctx, repo.ID, n, CodeParkLabelWithoutTag); err != nil {
			return "", err
		}
		return fmt.Sprintf("%s: %s removed from an item that is not parked", it.ID, set.ParkedLabel), nil
	}
	gh, err := m.GitHub.Installation(repo.Installation)
	if err != nil {
		return "", err
	}
	act, err := m.lastLabelAct(ctx, gh, repo, n, set.ParkedLabel)
	if err != nil {
		return "", err
	}
	if !act.Known || act.Present {
		return fmt.Sprintf("%s: %s is on the issue again; nothing to do", it.ID, set.ParkedLabel), nil
	}
	who := m.judge(ctx, repo, act.Actor, act.ActorType)
	if who.Human {
		out, err := m.unpark(ctx, repo, n, who.Login, act.At, "removed "+set.ParkedLabel)
		if err != nil {
			return "", err
		}
		return out, nil
	}
	if err := m.addLabel(ctx, gh, repo, set, n, set.ParkedLabel); err != nil {
		return "", err
	}
	detail := fmt.Sprintf("%s (%s) removed the parked label %s from a parked item; warden re-added it. Only a human with triage or more unparks", act.Actor, who.Why, set.ParkedLabel)
	if _, err := m.Acts.NoteLabelFinding(ctx, repo.ID, n, CodeAgentRemovedPark, act.Actor, detail, act.eventKey(), act.At); err != nil {
		return "", err
	}
	return fmt.Sprintf("%s: %s removed by %s (%s): re-added", it.ID, set.ParkedLabel, act.Actor, who.Why), nil
}

// parkedLabelAdded: on a parked item the label follows the tag (nothing to
// do); a human with triage+ adding it parks the item with a manual route;
// anyone else's label is not a park (park-label-without-tag), and nothing
// is written.
func (m *Mirror) parkedLabelAdded(ctx context.Context, repo Repo, set RepoSettings, n int, it *Item) (string, error) {
	if it.hasTag("state:parked") {
		return fmt.Sprintf("%s: %s follows its state:parked tag", it.ID, set.ParkedLabel), nil
	}
	gh, err := m.GitHub.Installation(repo.Installation)
	if err != nil {
		return "", err
	}
	act, err := m.lastLabelAct(ctx, gh, repo, n, set.ParkedLabel)
	if err != nil {
		return "", err
	}
	if !act.Known || !act.Present {
		return fmt.Sprintf("%s: %s is no longer on the issue; nothing to do", it.ID, set.ParkedLabel), nil
	}
	who := m.judge(ctx, repo, act.Actor, act.ActorType)
	if who.Human {
		return m.manualPark(ctx, repo, set, n, who.Login, who.Login, "manual-park", "", act.At)
	}
	detail := fmt.Sprintf("%s (%s) added the label %s to an item that is not parked: it is not a park (another bot's stale label never is); nothing was written", act.Actor, who.Why, set.ParkedLabel)
	if _, err := m.Acts.NoteLabelFinding(ctx, repo.ID, n, CodeParkLabelWithoutTag, act.Actor, detail, act.eventKey(), act.At); err != nil {
		return "", err
	}
	return fmt.Sprintf("%s: %s added by %s (%s): not a park", it.ID, set.ParkedLabel, act.Actor, who.Why), nil
}

// itemLabelRemoved: an agent's removal of the item label is reverted and
// reported; a human's is reported (item-label-removed) and the item stays,
// since forgetting an item is explicit (DELETE /items/{id}).
func (m *Mirror) itemLabelRemoved(ctx context.Context, repo Repo, set RepoSettings, p *issuesPayload, it *Item) (string, error) {
	n := p.Issue.Number
	login, typ := p.Sender.Login, p.Sender.Type
	agents := m.agentsOf(ctx, repo)
	isAgent := gating.IsAgent(gating.Actor{Login: login, Type: typ}, agents)
	if !isAgent {
		if rec, err := m.Acts.IsRecorded(ctx, repo.ID, login, AgentRecorded); err != nil {
			return "", err
		} else if rec {
			isAgent = true
		}
	}
	key := "delivery:" + p.Issue.UpdatedAt + ":" + login
	if isAgent {
		gh, err := m.GitHub.Installation(repo.Installation)
		if err != nil {
			return "", err
		}
		if err := m.addLabel(ctx, gh, repo, set, n, set.ItemLabel); err != nil {
			return "", err
		}
		detail := fmt.Sprintf("%s (an agent) removed the item label %s; warden re-added it. An agent cannot drop an item", login, set.ItemLabel)
		if _, err := m.Acts.NoteLabelFinding(ctx, repo.ID, n, CodeItemLabelRemoved, login, detail, key, m.now()); err != nil {
			return "", err
		}
		return fmt.Sprintf("%s: item label removed by agent %s: re-added", it.ID, login), nil
	}
	detail := fmt.Sprintf("%s removed the item label %s; the item stays in the ledger (forgetting an item is explicit: DELETE /items/%s, or add the label back)", login, set.ItemLabel, it.ID)
	if _, err := m.Acts.NoteLabelFinding(ctx, repo.ID, n, CodeItemLabelRemoved, login, detail, key, m.now()); err != nil {
		return "", err
	}
	return fmt.Sprintf("%s: item label removed by %s: reported, the item stays", it.ID, login), nil
}

// agentsOf is WARDEN_AGENTS plus the repository's agents: setting.
func (m *Mirror) agentsOf(ctx context.Context, repo Repo) []string {
	return append(append([]string(nil), m.Agents...), m.settings(ctx, repo).Agents...)
}

// addLabel adds a label warden needs (the label is created first when the
// repository lacks it). Nothing is written in dry_run.
func (m *Mirror) addLabel(ctx context.Context, gh *github.Client, repo Repo, set RepoSettings, n int, label string) error {
	if set.DryRun {
		return nil
	}
	owner, name, _ := strings.Cut(repo.FullName, "/")
	if _, _, err := gh.Issues.AddLabelsToIssue(ctx, owner, name, n, []string{label}); err != nil {
		return fmt.Errorf("add %q to %s#%d: %w", label, repo.FullName, n, err)
	}
	return m.Ledger.NoteLabel(ctx, repo.ID, n, label, true, m.now())
}

// removeLabel removes a label (404, the issue lacks it, is success).
func (m *Mirror) removeLabel(ctx context.Context, gh *github.Client, repo Repo, set RepoSettings, n int, label string) error {
	if set.DryRun {
		return nil
	}
	owner, name, _ := strings.Cut(repo.FullName, "/")
	resp, err := gh.Issues.RemoveLabelForIssue(ctx, owner, name, n, label)
	if err != nil && (resp == nil || resp.StatusCode != 404) {
		return fmt.Errorf("remove %q from %s#%d: %w", label, repo.FullName, n, err)
	}
	return m.Ledger.NoteLabel(ctx, repo.ID, n, label, false, m.now())
}

// hasTag reports whether the item carries tag exactly.
func (it *Item) hasTag(tag string) bool {
	for _, t := range it.Tags {
		if t == tag {
			return true
		}
	}
	return false
}
