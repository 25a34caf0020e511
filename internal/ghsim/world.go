package ghsim

import (
	"strings"
)

// AddRepo creates owner/name with one commit on defaultBranch, adds it to
// the installation and sends installation_repositories.added. The owner
// becomes an admin collaborator.
func (s *Sim) AddRepo(in *Installation, fullName, defaultBranch string) *Repo {
	s.mu.Lock()
	defer s.mu.Unlock()
	owner, name, _ := strings.Cut(fullName, "/")
	r := &Repo{ID: s.newID(), Owner: s.addUserLocked(owner, TypeOrg), Name: name, FullName: fullName,
		DefaultBranch: defaultBranch, Install: in, CreatedAt: s.now(),
		Labels: map[string]*Label{}, Issues: map[int]*Issue{}, Comments: map[int64]*Comment{},
		Collaborators: map[string]string{}, Branches: map[string]string{}, Commits: map[string]*Commit{},
		Pulls: map[int]*Pull{}, ReviewComments: map[int64]*ReviewComment{}, CheckSuites: map[int64]*CheckSuite{}, CheckRuns: map[int64]*CheckRun{}}
	s.repos[strings.ToLower(fullName)] = r
	s.reposByID[r.ID] = r
	s.initGitLocked(r)
	if in != nil {
		in.Repos[r.ID] = r
		s.emitLocked("installation_repositories", "added", in, nil, s.addUserLocked(in.Account.Login, in.Account.Type), map[string]any{
			"installation":         s.installationJSON(in, true),
			"repository_selection": "selected",
			"repositories_added":   []any{map[string]any{"id": r.ID, "node_id": nodeID("R", r.ID), "name": r.Name, "full_name": r.FullName, "private": r.Private}},
			"repositories_removed": []any{},
			"requester":            nil,
		})
	}
	return r
}

// Repo returns a repository by full name, or nil.
func (s *Sim) Repo(fullName string) *Repo {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.repos[strings.ToLower(fullName)]
}

// SetRole gives login a role on the repository: read, triage, write,
// maintain, admin, or "" to remove it.
func (s *Sim) SetRole(r *Repo, login, role string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if role == "" {
		delete(r.Collaborators, strings.ToLower(login))
		return
	}
	r.Collaborators[strings.ToLower(login)] = role
}

// Locked runs f with the simulator's state locked, for tests that inspect or
// arrange state directly.
func (s *Sim) Locked(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f()
}
