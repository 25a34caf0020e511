package ghsim

import (
	"net/http"
)

// listInstallationRepos is GET /installation/repositories: the repositories
// the token's installation can reach, by id, paged (per_page, page, Link),
// with total_count and repository_selection as GitHub answers. Like every
// GET it carries an ETag and answers a matching If-None-Match with a free
// 304 (observe).
func (s *Sim) listInstallationRepos(w http.ResponseWriter, r *http.Request) {
	in := callerOf(r).inst
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := sortedRepoIDs(in.Repos)
	lo, hi := paginate(w, r, len(ids))
	repos := []any{}
	for _, id := range ids[lo:hi] {
		repos = append(repos, s.repoJSON(in.Repos[id]))
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"total_count": len(ids), "repository_selection": "selected", "repositories": repos,
	})
}

// RemoveFromInstallation takes the repository out of the installation's
// selected repositories, as its owner does in the installation's settings,
// and sends installation_repositories.removed. The installation's tokens no
// longer reach it (404); the repository itself stays.
func (s *Sim) RemoveFromInstallation(in *Installation, r *Repo) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if in.Repos[r.ID] == nil {
		return
	}
	delete(in.Repos, r.ID)
	if r.Install == in {
		r.Install = nil
	}
	s.emitLocked("installation_repositories", "removed", in, nil, s.addUserLocked(in.Account.Login, in.Account.Type), map[string]any{
		"installation":         s.installationJSON(in, true),
		"repository_selection": "selected",
		"repositories_added":   []any{},
		"repositories_removed": []any{map[string]any{"id": r.ID, "node_id": nodeID("R", r.ID), "name": r.Name, "full_name": r.FullName, "private": r.Private}},
		"requester":            nil,
	})
}
