package mirror

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/google/go-github/v66/github"
	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/mirror/store"
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
	for _, rr := range repos {
		owner, name, ok := strings.Cut(rr.FullName, "/")
		if !ok || rr.ID == 0 {
			return "", fmt.Errorf("installation names a repository without an id or owner: %q", rr.FullName)
		}
		gh, err := m.repoClient(store.Repo{ID: rr.ID, FullName: rr.FullName, Installation: inst})
		if err != nil {
			return "", err
		}
		repo, _, err := gh.Repositories.Get(ctx, owner, name)
		if err != nil {
			return "", fmt.Errorf("read %s: %w", rr.FullName, err)
		}
		r := store.Repo{ID: rr.ID, FullName: repo.GetFullName(), Installation: inst, DefaultBranch: repo.GetDefaultBranch()}
		if m.SettingsStore != nil {
			// The file on the default branch takes effect as it is: there is
			// no push to judge. Its labels are the ones created below. It is
			// read before the repository is served, so no delivery about the
			// repository is handled (and no write made) before warden knows
			// whether the file says dry_run.
			if _, err := m.SettingsStore.Load(ctx, r); err != nil {
				return "", err
			}
		}
		if err := m.Ledger.PutRepo(ctx, r); err != nil {
			return "", err
		}
		if err := m.ensureLabels(ctx, r); err != nil {
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
// In dry_run it lists the labels and creates none: it logs each one it
// would create.
func (m *Mirror) ensureLabels(ctx context.Context, r store.Repo) error {
	gh, err := m.repoClient(r)
	if err != nil {
		return err
	}
	set := m.settings(ctx, r)
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
	for _, l := range labelSpecs(set) {
		if have[strings.ToLower(l.name)] {
			continue
		}
		if set.DryRun {
			m.heldWrite(r, "create label", "label", l.name)
			continue
		}
		_, resp, err := gh.Issues.CreateLabel(ctx, owner, name, &github.Label{Name: &l.name, Color: &l.color, Description: &l.description})
		if err != nil && (resp == nil || resp.StatusCode != http.StatusUnprocessableEntity) {
			return fmt.Errorf("create label %q on %s: %w", l.name, r.FullName, err)
		}
	}
	return nil
}

// labelSpec is a label warden needs, with the colour and description it
// creates it with.
type labelSpec struct{ name, color, description string }

func labelSpecs(s gating.Settings) []labelSpec {
	return []labelSpec{
		{s.ItemLabel, "0e8a16", "A backlog item (warden keeps it honest)"},
		{s.AdmissionLabel, "fbca04", "Awaiting a human's admission: remove this label to admit the item"},
		{s.ParkedLabel, "b60205", "Parked: a human's ruling is needed before more attempts"},
	}
}
