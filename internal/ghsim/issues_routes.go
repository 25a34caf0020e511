package ghsim

import "github.com/go-chi/chi/v5"

// issueRoutes serves issues, labels, comments, events, reactions,
// collaborators and sub-issues.
func (s *Sim) issueRoutes(r chi.Router) {}
