package mirror

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/mirror/store"
)

type issuesPayload struct {
	Action string `json:"action"`
	Issue  struct {
		Number      int    `json:"number"`
		Title       string `json:"title"`
		Body        string `json:"body"` // null reads as ""
		HTMLURL     string `json:"html_url"`
		State       string `json:"state"`
		UpdatedAt   string `json:"updated_at"`
		PullRequest *struct {
			URL string `json:"url"`
		} `json:"pull_request"`
		User struct {
			Login string `json:"login"`
		} `json:"user"`
		Labels []struct {
			Name string `json:"name"`
		} `json:"labels"`
	} `json:"issue"`
	Label *struct {
		Name string `json:"name"`
	} `json:"label"`
	// Changes is what an edited delivery changed, with the prior values.
	Changes *struct {
		Title *struct {
			From string `json:"from"`
		} `json:"title"`
		Body *struct {
			From string `json:"from"`
		} `json:"body"`
	} `json:"changes"`
	Repository struct {
		ID            int64  `json:"id"`
		FullName      string `json:"full_name"`
		DefaultBranch string `json:"default_branch"`
	} `json:"repository"`
	Sender struct {
		Login string `json:"login"`
		Type  string `json:"type"`
	} `json:"sender"`
}

func (p *issuesPayload) hasLabel(name string) bool {
	for _, l := range p.Issue.Labels {
		if strings.EqualFold(l.Name, name) {
			return true
		}
	}
	return false
}

// issueState is the issue's state as the payload reports it, its text's
// digest included.
func (p *issuesPayload) issueState(action string) store.IssueState {
	st := store.IssueState{State: p.Issue.State, Labels: make([]string, 0, len(p.Issue.Labels)), SpecDigest: specDigest(p.Issue.Title, p.Issue.Body)}
	switch action {
	case "deleted":
		st.State = store.IssueDeleted
	case "transferred":
		st.State = store.IssueTransferred
	}
	for _, l := range p.Issue.Labels {
		st.Labels = append(st.Labels, l.Name)
	}
	if t, err := time.Parse(time.RFC3339, p.Issue.UpdatedAt); err == nil {
		st.UpdatedAt = t
	}
	return st
}

// HandleIssues records the issue's current labels and state (every action:
// the payload carries the full label set; an older payload never overwrites
// a newer one, see RecordIssueState), and makes an item of an issue that is
// opened with, or gains, the item label. An item made by a human with triage
// or more is admitted at creation (the act recorded); one made by anyone
// else carries the admission label (added if missing). Recording the state
// is bookkeeping, so warden's own deliveries (FromSelf) record it too, as is
// logging an edit of the title or body (recordSpecEdit), which settleItem
// judges for an admitted item (specStep).
func (m *Mirror) HandleIssues(ctx context.Context, ev Event) (string, error) {
	var p issuesPayload
	if err := json.Unmarshal(ev.Payload, &p); err != nil {
		return "", payloadErr("issues payload: %w", err)
	}
	if p.Issue.PullRequest != nil || p.Issue.Number <= 0 {
		return OutcomeIgnored, nil // pull requests are never items
	}
	repo, err := m.Ledger.RepoByID(ctx, p.Repository.ID)
	if errors.Is(err, store.ErrNotFound) {
		// Repositories are served from installation events; one warden no
		// longer serves (or never learned of) is left alone.
		return "repository not served", nil
	} else if err != nil {
		return "", err
	}
	applied, err := m.Ledger.RecordIssueState(ctx, repo.ID, p.Issue.Number, p.issueState(ev.Action))
	if err != nil {
		return "", err
	}
	if err := m.recordSpecEdit(ctx, ev, repo, &p); err != nil {
		return "", err
	}
	if err := m.noteIssueStateAct(ctx, ev, repo, &p); err != nil {
		return "", err
	}
	set := m.settings(ctx, repo)
	makesItem := (ev.Action == "opened" || ev.Action == "reopened" || ev.Action == "transferred") && p.hasLabel(set.ItemLabel) ||
		ev.Action == "labeled" && p.Label != nil && strings.EqualFold(p.Label.Name, set.ItemLabel)
	id := gating.IDFor(p.Issue.Number)
	it, err := m.Ledger.Get(ctx, repo.ID, id)
	isItem := err == nil
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return "", err
	}
	stateOutcome := OutcomeIssueState
	if !applied {
		stateOutcome = OutcomeIssueStateOlder
	}
	switch {
	case ev.FromSelf && (isItem || makesItem):
		// warden's own write (a label it added, an issue its API opened):
		// bookkeeping only; the API writes its items itself.
		return OutcomeRecorded, nil
	case !isItem && !makesItem:
		return stateOutcome, nil
	case !isItem:
		return m.makeItem(ctx, ev, repo, set, &p)
	}
	var outs []string
	if (ev.Action == "labeled" || ev.Action == "unlabeled") && p.Label != nil {
		out, err := m.issuesLabelAct(ctx, ev, repo, set, &p, &it)
		if err != nil {
			return "", err
		}
		outs = append(outs, out)
	} else {
		outs = append(outs, stateOutcome)
	}
	if ev.Action == "assigned" || ev.Action == "unassigned" {
		// Assigning an agent is a claim (dispatch.go).
		out, err := m.dispatchStep(ctx, ev, repo, set, p.Issue.Number)
		if err != nil {
			return "", err
		}
		if out != "" {
			outs = append(outs, out)
		}
	}
	if ev.Action != "deleted" && ev.Action != "transferred" {
		out, err := m.settleItem(ctx, repo, p.Issue.Number)
		if err != nil {
			return "", err
		}
		if out != "" {
			outs = append(outs, out)
		}
	}
	return strings.Join(outs, "; "), nil
}

// makeItem makes an item of an issue that was opened with, or gained, the
// item label (CONTRACT.md §5): admitted at creation when a human with
// triage or more made it, otherwise gated (the admission label added when
// GitHub's payload lacks it, as when it silently dropped labels on create).
func (m *Mirror) makeItem(ctx context.Context, ev Event, repo store.Repo, set gating.Settings, p *issuesPayload) (string, error) {
	id := gating.IDFor(p.Issue.Number)
	in := store.NewItem{Number: p.Issue.Number, Title: p.Issue.Title, Author: p.Issue.User.Login,
		Body:       ResumeBody(p.Issue.Number, p.Issue.HTMLURL, nil),
		Provenance: fmt.Sprintf("github: issues.%s by %s", ev.Action, p.Sender.Login), Tags: m.newItemTags(repo, set)}
	if _, err := m.Ledger.Create(ctx, repo.ID, in, store.Actor{Role: gating.RoleWarden, Name: "warden"}, store.WriteOptions{}); err != nil && !errors.Is(err, store.ErrExists) {
		return "", fmt.Errorf("make %s an item: %w", id, err)
	}
	if ev.Action != "opened" {
		// An existing issue: its comments may already hold a trail.
		if _, err := m.backfill(ctx, repo, set, p.Issue.Number); err != nil {
			return "", err
		}
	}
	who := m.judge(ctx, repo, p.Sender.Login, p.Sender.Type)
	if who.Human {
		err := m.Acts.RecordAdmission(ctx, repo.ID, p.Issue.Number, store.Admission{By: p.Sender.Login, At: m.now(), How: "made an item by a human with triage+",
			Spec: payloadSpec(p.Issue.Title, p.Issue.Body, p.Issue.UpdatedAt)})
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("item %s made by %s, admitted at creation", id, p.Sender.Login), nil
	}
	if p.hasLabel(set.AdmissionLabel) {
		return fmt.Sprintf("item %s made by %s (%s), gated", id, p.Sender.Login, who.Why), nil
	}
	c, err := m.callsFor(repo)
	if err != nil {
		return "", err
	}
	if err := m.addLabel(ctx, c, repo, set, p.Issue.Number, set.AdmissionLabel); err != nil {
		return "", fmt.Errorf("gate %s: %w", id, err)
	}
	if set.DryRun {
		return fmt.Sprintf("item %s made by %s (%s), not admitted: %s would be added (dry run)", id, p.Sender.Login, who.Why, set.AdmissionLabel), nil
	}
	return fmt.Sprintf("item %s made by %s (%s), gated: added %s", id, p.Sender.Login, who.Why, set.AdmissionLabel), nil
}

// ResumeBody is a new item's body: a pointer to the issue (which holds the
// specification, the human's) and the resume block, empty unless given.
func ResumeBody(number int, url string, given *string) string {
	ptr := fmt.Sprintf("See #%d", number)
	if url != "" {
		ptr += ": " + url
	}
	block := "lastLocation:\nresumeNote:"
	if given != nil && strings.TrimSpace(*given) != "" {
		block = *given
	}
	return ptr + "\n\n" + block
}
