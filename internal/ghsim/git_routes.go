package ghsim

import "github.com/go-chi/chi/v5"

// gitRoutes serves pull requests, commits, compare, contents and checks.
func (s *Sim) gitRoutes(r chi.Router) {}

// initGitLocked gives a new repository its first commit on the default branch.
func (s *Sim) initGitLocked(r *Repo) {}
