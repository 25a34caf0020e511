package ghsim

import (
	"net/http"
	"strings"
)

// legacyPermission maps a repository role to the legacy base permission
// the permission field reports: maintain → write, triage → read.
func legacyPermission(role string) string {
	switch role {
	case "admin":
		return "admin"
	case "maintain", "write":
		return "write"
	case "triage", "read":
		return "read"
	}
	return "none"
}

// effectiveRoleLocked is the role GET …/collaborators/{u}/permission
// reports: the owner account is admin, collaborators have their role, and
// anyone else can read a public repository and do nothing with a private
// one.
func (s *Sim) effectiveRoleLocked(repo *Repo, u *User) string {
	role := ""
	if strings.EqualFold(u.Login, repo.Owner.Login) {
		role = "admin"
	} else {
		role = repo.Collaborators[strings.ToLower(u.Login)]
	}
	if role == "" {
		if repo.Private {
			return "none"
		}
		return "read"
	}
	return role
}

func (s *Sim) getCollaboratorPermission(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	repo := repoOf(r)
	u := s.userLocked(pathParam(r, "username"))
	if u == nil {
		errNotFound().write(w)
		return
	}
	role := s.effectiveRoleLocked(repo, u)
	perm := legacyPermission(role)
	user := s.userJSON(u)
	user["role_name"] = role
	rank := roleRank[role]
	user["permissions"] = map[string]bool{"admin": rank >= 5, "maintain": rank >= 4, "push": rank >= 3, "triage": rank >= 2, "pull": rank >= 1}
	writeJSON(w, http.StatusOK, map[string]any{"permission": perm, "role_name": role, "user": user})
}

// checkCollaborator is GET /collaborators/{username}: 204 for the owner and
// collaborators, 404 otherwise.
func (s *Sim) checkCollaborator(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	repo := repoOf(r)
	u := s.userLocked(pathParam(r, "username"))
	if u == nil || (!strings.EqualFold(u.Login, repo.Owner.Login) && repo.Collaborators[strings.ToLower(u.Login)] == "") {
		errNotFound().write(w)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
