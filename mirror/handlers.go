package mirror

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/google/go-github/v66/github"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/mirror/store"
)

// Clients gives warden's GitHub client for an installation.
type Clients interface {
	Installation(id int64) (*github.Client, error)
}

// Mirror keeps the ledger and GitHub in step: it records the repositories
// warden serves and turns issues that gain the item label into items.
type Mirror struct {
	Ledger *store.Ledger
	Acts   *store.Acts
	GitHub Clients
	Perms  *Permissions
	// Region is WARDEN_REGION (the homeRegion of items made here).
	Region string
	// Agents are the WARDEN_AGENTS logins.
	Agents []string
	// Settings returns a repository's backlog settings.
	Settings func(ctx context.Context, r store.Repo) gating.Settings
	Log      *slog.Logger
	Now      func() time.Time
	// SettingsStore follows .github/backlog.yml (nil: Settings alone).
	SettingsStore *SettingsStore
	// Dashboards keeps the dashboard issues (nil: none are written).
	Dashboards DashboardSink
	// HTMLBase is GitHub's web address (https://github.com), for links in
	// the dashboard; StatusHint points people to warden's status page.
	HTMLBase, StatusHint string
	// Reports keeps the report comments (nil: none are written).
	Reports ReportSink
	// Bot returns warden's own bot login ("<slug>[bot]"), known before any
	// delivery is processed; nil or "" when unknown.
	Bot func() string
}

// Event is a delivery as the mirror's handlers see it.
type Event struct {
	Name         string
	Action       string
	DeliveryID   string
	Installation int64
	Payload      []byte
	FromSelf     bool
}

func (m *Mirror) now() time.Time {
	if m.Now != nil {
		return m.Now()
	}
	return time.Now()
}

func (m *Mirror) settings(ctx context.Context, r store.Repo) gating.Settings {
	if m.Settings != nil {
		return m.Settings(ctx, r)
	}
	return gating.DefaultSettings()
}

// Outcomes recorded for deliveries.
const (
	OutcomeIgnored  = "ignored"
	OutcomeRecorded = "recorded"
	// OutcomeIssueState: an issues delivery that makes no item recorded the
	// issue's labels and state; OutcomeIssueStateOlder: its payload was older
	// than the state already recorded, and was not applied.
	OutcomeIssueState      = "issue state recorded"
	OutcomeIssueStateOlder = "issue state older than recorded; not applied"
)

type installationPayload struct {
	Installation struct {
		ID int64 `json:"id"`
	} `json:"installation"`
	Repositories        []repoRef `json:"repositories"`
	RepositoriesAdded   []repoRef `json:"repositories_added"`
	RepositoriesRemoved []repoRef `json:"repositories_removed"`
}

type repoRef struct {
	ID       int64  `json:"id"`
	FullName string `json:"full_name"`
}

// HandleInstallation records the repositories of a new installation (and
// creates the labels warden needs where they are missing), and forgets them
// when the App is uninstalled or suspended.
func (m *Mirror) HandleInstallation(ctx context.Context, ev Event) (string, error) {
	var p installationPayload
	if err := json.Unmarshal(ev.Payload, &p); err != nil {
		return "", fmt.Errorf("installation payload: %w", err)
	}
	switch ev.Action {
	case "created", "unsuspend", "new_permissions_accepted":
		return m.serve(ctx, p.Installation.ID, p.Repositories)
	case "deleted", "suspend":
		return m.unserveInstallation(ctx, p.Installation.ID)
	}
	return OutcomeIgnored, nil
}

// HandleInstallationRepositories follows repositories added to or removed
// from the installation.
func (m *Mirror) HandleInstallationRepositories(ctx context.Context, ev Event) (string, error) {
	var p installationPayload
	if err := json.Unmarshal(ev.Payload, &p); err != nil {
		return "", fmt.Errorf("installation_repositories payload: %w", err)
	}
	added, err := m.serve(ctx, p.Installation.ID, p.RepositoriesAdded)
	if err != nil {
		return "", err
	}
	removed, err := m.unserve(ctx, p.Installation.ID, p.RepositoriesRemoved)
	if err != nil {
		return "", err
	}
	switch {
	case len(p.RepositoriesRemoved) == 0:
		return added, nil
	case len(p.RepositoriesAdded) == 0:
		return removed, nil
	}
	return added + "; " + removed, nil
}

func repositories(n int) string {
	if n == 1 {
		return "1 repository"
	}
	return fmt.Sprintf("%d repositories", n)
}

func (m *Mirror) serve(ctx context.Context, inst int64, repos []repoRef) (string, error) {
	gh, err := m.GitHub.Installation(inst)
	if err != nil {
		return "", err
	}
	for _, rr := range repos {
		owner, name, ok := strings.Cut(rr.FullName, "/")
		if !ok || rr.ID == 0 {
			return "", fmt.Errorf("installation names a repository without an id or owner: %q", rr.FullName)
		}
		repo, _, err := gh.Repositories.Get(ctx, owner, name)
		if err != nil {
			return "", fmt.Errorf("read %s: %w", rr.FullName, err)
		}
		r := store.Repo{ID: rr.ID, FullName: repo.GetFullName(), Installation: inst, DefaultBranch: repo.GetDefaultBranch()}
		if err := m.Ledger.PutRepo(ctx, r); err != nil {
			return "", err
		}
		if m.SettingsStore != nil {
			// The file on the default branch takes effect as it is: there is
			// no push to judge. Its labels are the ones created below.
			if _, err := m.SettingsStore.Load(ctx, r); err != nil {
				return "", err
			}
		}
		if err := m.ensureLabels(ctx, gh, r); err != nil {
			return "", err
		}
		m.Log.Info("serving repository", "repo", r.FullName, "installation", inst, "default_branch", r.DefaultBranch)
	}
	return "serving " + repositories(len(repos)), nil
}

// unserveInstallation stops serving every repository of an installation
// (an uninstall or suspension names none of them).
func (m *Mirror) unserveInstallation(ctx context.Context, inst int64) (string, error) {
	all, err := m.Ledger.Repos(ctx)
	if err != nil {
		return "", err
	}
	var repos []repoRef
	for _, r := range all {
		if r.Installation == inst {
			repos = append(repos, repoRef{ID: r.ID, FullName: r.FullName})
		}
	}
	return m.unserve(ctx, inst, repos)
}

func (m *Mirror) unserve(ctx context.Context, inst int64, repos []repoRef) (string, error) {
	for _, rr := range repos {
		if err := m.Ledger.RemoveRepo(ctx, rr.ID); err != nil && !errors.Is(err, store.ErrNotFound) {
			return "", err
		}
		if m.SettingsStore != nil {
			// Served again later, the file on its default branch is read
			// afresh (a change made meanwhile is no agent's).
			if err := m.SettingsStore.Forget(ctx, rr.ID); err != nil {
				return "", err
			}
		}
		m.Log.Info("no longer serving repository", "repo", rr.FullName, "installation", inst)
	}
	return "stopped serving " + repositories(len(repos)), nil
}

// ensureLabels creates the labels warden needs that the repository lacks
// (one read; one write per missing label; 422 "already exists" is success).
func (m *Mirror) ensureLabels(ctx context.Context, gh *github.Client, r store.Repo) error {
	owner, name, _ := strings.Cut(r.FullName, "/")
	have := map[string]bool{}
	opt := &github.ListOptions{PerPage: 100}
	for {
		labels, resp, err := gh.Issues.ListLabels(ctx, owner, name, opt)
		if err != nil {
			return fmt.Errorf("list labels of %s: %w", r.FullName, err)
		}
		for _, l := range labels {
			have[strings.ToLower(l.GetName())] = true
		}
		if resp.NextPage == 0 {
			break
		}
		opt.Page = resp.NextPage
	}
	for _, l := range labelSpecs(m.settings(ctx, r)) {
		if have[strings.ToLower(l.name)] {
			continue
		}
		_, resp, err := gh.Issues.CreateLabel(ctx, owner, name, &github.Label{Name: &l.name, Color: &l.color, Description: &l.description})
		if err != nil && (resp == nil || resp.StatusCode != http.StatusUnprocessableEntity) {
			return fmt.Errorf("create label %q on %s: %w", l.name, r.FullName, err)
		}
	}
	return nil
}

type issuesPayload struct {
	Action string `json:"action"`
	Issue  struct {
		Number      int    `json:"number"`
		Title       string `json:"title"`
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

// issueState is the issue's state as the payload reports it.
func (p *issuesPayload) issueState(action string) store.IssueState {
	st := store.IssueState{State: p.Issue.State, Labels: make([]string, 0, len(p.Issue.Labels))}
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
// is bookkeeping, so warden's own deliveries (FromSelf) record it too.
func (m *Mirror) HandleIssues(ctx context.Context, ev Event) (string, error) {
	var p issuesPayload
	if err := json.Unmarshal(ev.Payload, &p); err != nil {
		return "", fmt.Errorf("issues payload: %w", err)
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
	tags := []string{"backlog", "priority:" + set.DefaultPriority, "phase:" + set.DefaultPhase,
		"homeRegion:" + m.Region, "baseBranch:" + repo.DefaultBranch}
	in := store.NewItem{Number: p.Issue.Number, Title: p.Issue.Title, Author: p.Issue.User.Login,
		Body:       ResumeBody(p.Issue.Number, p.Issue.HTMLURL, nil),
		Provenance: fmt.Sprintf("github: issues.%s by %s", ev.Action, p.Sender.Login), Tags: tags}
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
		err := m.Acts.RecordAdmission(ctx, repo.ID, p.Issue.Number, store.Admission{By: p.Sender.Login, At: m.now(), How: "made an item by a human with triage+"})
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("item %s made by %s, admitted at creation", id, p.Sender.Login), nil
	}
	if p.hasLabel(set.AdmissionLabel) {
		return fmt.Sprintf("item %s made by %s (%s), gated", id, p.Sender.Login, who.Why), nil
	}
	gh, err := m.GitHub.Installation(repo.Installation)
	if err != nil {
		return "", err
	}
	if err := m.addLabel(ctx, gh, repo, set, p.Issue.Number, set.AdmissionLabel); err != nil {
		return "", fmt.Errorf("gate %s: %w", id, err)
	}
	return fmt.Sprintf("item %s made by %s (%s), gated: added %s", id, p.Sender.Login, who.Why, set.AdmissionLabel), nil
}
