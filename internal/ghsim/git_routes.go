package ghsim

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/go-chi/chi/v5"
)

// gitRoutes serves pull requests, commits, compare, contents and checks.
// Refs may contain slashes ("feature/x"), so the commit, branch, ref,
// compare and contents routes also have a catch-all form.
func (s *Sim) gitRoutes(r chi.Router) {
	r.Get("/pulls", s.listPulls)
	r.Post("/pulls", s.createPull)
	r.Get("/pulls/{pull_number}", s.getPull)
	r.Patch("/pulls/{pull_number}", s.updatePull)
	r.Get("/pulls/{pull_number}/commits", s.listPullCommits)
	r.Get("/pulls/{pull_number}/files", s.listPullFiles)
	r.Get("/pulls/{pull_number}/merge", s.checkMerged)
	r.Put("/pulls/{pull_number}/merge", s.mergePull)
	s.reviewCommentRoutes(r)

	r.Get("/commits", s.listCommits)
	for _, suffix := range commitSuffixes {
		suffix := suffix
		r.Get("/commits/{ref}"+suffix, func(w http.ResponseWriter, r *http.Request) {
			s.serveCommitRef(w, r, pathParam(r, "ref"), suffix)
		})
	}
	r.Get("/commits/*", func(w http.ResponseWriter, r *http.Request) {
		rest := wildcard(r)
		for _, suffix := range commitSuffixes[1:] {
			if ref, ok := strings.CutSuffix(rest, suffix); ok && ref != "" {
				attributeTo(r, "/commits/{ref}"+suffix)
				s.serveCommitRef(w, r, ref, suffix)
				return
			}
		}
		s.serveCommitRef(w, r, rest, "")
	})
	r.Get("/branches", s.listBranches)
	r.Get("/branches/{branch}", func(w http.ResponseWriter, r *http.Request) { s.getBranch(w, r, pathParam(r, "branch")) })
	r.Get("/branches/*", func(w http.ResponseWriter, r *http.Request) { s.getBranch(w, r, wildcard(r)) })
	r.Get("/git/ref/*", s.getRef)
	r.Get("/git/matching-refs/*", s.matchingRefs)
	r.Get("/compare/{basehead}", func(w http.ResponseWriter, r *http.Request) { s.compare(w, r, pathParam(r, "basehead")) })
	r.Get("/compare/*", func(w http.ResponseWriter, r *http.Request) { s.compare(w, r, wildcard(r)) })
	r.Get("/contents/*", s.getContents)

	r.Post("/check-runs", s.createCheckRun)
	r.Get("/check-runs/{check_run_id}", s.getCheckRun)
	r.Patch("/check-runs/{check_run_id}", s.updateCheckRun)
	r.Post("/check-runs/{check_run_id}/rerequest", s.rerequestCheckRun)
	r.Get("/check-runs/{check_run_id}/annotations", s.listAnnotations)
	r.Get("/check-suites/{check_suite_id}", s.getCheckSuite)
	r.Post("/check-suites/{check_suite_id}/rerequest", s.rerequestCheckSuite)
	r.Get("/check-suites/{check_suite_id}/check-runs", s.listSuiteRuns)
}

// commitSuffixes are the sub-resources of /commits/{ref} ("" is the commit).
var commitSuffixes = []string{"", "/check-runs", "/check-suites", "/status", "/statuses", "/pulls"}

// attributeTo records the answer of a catch-all route under the route it
// stands for (a ref with slashes: /commits/feature/x/check-runs answers as
// /commits/{ref}/check-runs), for the observers.
func attributeTo(r *http.Request, pattern string) {
	if rc := chi.RouteContext(r.Context()); rc != nil && len(rc.RoutePatterns) > 0 {
		rc.RoutePatterns[len(rc.RoutePatterns)-1] = pattern
	}
}

// wildcard is the catch-all part of the path, unescaped.
func wildcard(r *http.Request) string {
	v := chi.URLParam(r, "*")
	if u, err := url.PathUnescape(v); err == nil {
		v = u
	}
	return strings.Trim(v, "/")
}

// initGitLocked gives a new repository its first commit on the default
// branch: a README.md by the owner.
func (s *Sim) initGitLocked(r *Repo) {
	if r.Branches == nil {
		r.Branches = map[string]string{}
	}
	if r.Commits == nil {
		r.Commits = map[string]*Commit{}
	}
	if r.Pulls == nil {
		r.Pulls = map[int]*Pull{}
	}
	if r.CheckSuites == nil {
		r.CheckSuites = map[int64]*CheckSuite{}
	}
	if r.CheckRuns == nil {
		r.CheckRuns = map[int64]*CheckRun{}
	}
	if r.DefaultBranch == "" {
		r.DefaultBranch = "main"
	}
	c := s.newCommitLocked(r, nil, map[string]string{"README.md": "# " + r.Name + "\n"}, "Initial commit", r.Owner, r.Owner, r.CreatedAt)
	r.Branches[r.DefaultBranch] = c.SHA
}
