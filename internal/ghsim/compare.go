package ghsim

import (
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"
)

// Commits, branches, refs and compare.

func (s *Sim) serveCommitRef(w http.ResponseWriter, r *http.Request, ref, suffix string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	repo := repoOf(r)
	c := resolveLocked(repo, ref)
	if c == nil {
		if suffix == "" {
			writeError(w, http.StatusUnprocessableEntity, "No commit found for SHA: "+ref)
		} else {
			writeError(w, http.StatusNotFound, "No commit found for SHA: "+ref)
		}
		return
	}
	switch suffix {
	case "":
		writeJSON(w, http.StatusOK, s.commitJSON(repo, c, true))
	case "/check-runs":
		s.listRunsForRefLocked(w, r, repo, c)
	case "/check-suites":
		s.listSuitesForRefLocked(w, r, repo, c)
	case "/status":
		s.combinedStatusLocked(w, r, repo, c)
	case "/statuses":
		s.listStatusesLocked(w, r, repo, c)
	case "/pulls":
		s.listCommitPullsLocked(w, r, repo, c)
	}
}

// listCommits answers GET /commits: newest first from sha (default: the
// default branch), filtered by path, author, since and until.
func (s *Sim) listCommits(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var since, until time.Time
	for _, x := range []struct {
		name string
		t    *time.Time
	}{{"since", &since}, {"until", &until}} {
		if v := q.Get(x.name); v != "" {
			t, err := time.Parse(time.RFC3339, v)
			if err != nil {
				writeError(w, http.StatusBadRequest, "Invalid date: "+v)
				return
			}
			*x.t = t
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	repo := repoOf(r)
	ref := q.Get("sha")
	if ref == "" {
		ref = repo.DefaultBranch
	}
	head := resolveLocked(repo, ref)
	if head == nil {
		writeError(w, http.StatusNotFound, "No commit found for SHA: "+ref)
		return
	}
	var all []*Commit
	for sha := range ancestorsLocked(repo, head.SHA) {
		all = append(all, repo.Commits[sha])
	}
	sort.Slice(all, func(i, j int) bool { return all[i].Seq > all[j].Seq })
	p := strings.Trim(q.Get("path"), "/")
	author := q.Get("author")
	var out []*Commit
	for _, c := range all {
		if !since.IsZero() && c.Time.Before(since) || !until.IsZero() && c.Time.After(until) {
			continue
		}
		if author != "" && (c.Author == nil || !strings.EqualFold(c.Author.Login, author)) {
			continue
		}
		if p != "" && !touches(diffTrees(parentFilesLocked(repo, c), c.Files, false), p) {
			continue
		}
		out = append(out, c)
	}
	lo, hi := paginate(w, r, len(out))
	res := []any{}
	for _, c := range out[lo:hi] {
		res = append(res, s.commitJSON(repo, c, false))
	}
	writeJSON(w, http.StatusOK, res)
}

// touches reports whether a change is at p or under the directory p.
func touches(changes []fileChange, p string) bool {
	for _, fc := range changes {
		if fc.Path == p || strings.HasPrefix(fc.Path, p+"/") {
			return true
		}
	}
	return false
}

func (s *Sim) listBranches(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	repo := repoOf(r)
	if r.URL.Query().Get("protected") == "true" {
		paginate(w, r, 0)
		writeJSON(w, http.StatusOK, []any{})
		return
	}
	names := sortedBranches(repo)
	lo, hi := paginate(w, r, len(names))
	out := []any{}
	for _, b := range names[lo:hi] {
		sha := repo.Branches[b]
		out = append(out, map[string]any{"name": b, "protected": false,
			"commit": map[string]any{"sha": sha, "url": repoAPI(repo) + "/commits/" + sha}})
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Sim) getBranch(w http.ResponseWriter, r *http.Request, branch string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	repo := repoOf(r)
	if _, ok := repo.Branches[branch]; !ok {
		writeError(w, http.StatusNotFound, "Branch not found")
		return
	}
	writeJSON(w, http.StatusOK, s.branchJSON(repo, branch))
}

func (s *Sim) getRef(w http.ResponseWriter, r *http.Request) {
	ref := strings.TrimPrefix(wildcard(r), "refs/")
	s.mu.Lock()
	defer s.mu.Unlock()
	repo := repoOf(r)
	branch, ok := strings.CutPrefix(ref, "heads/")
	if !ok || repo.Branches[branch] == "" {
		writeError(w, http.StatusNotFound, "Not Found")
		return
	}
	writeJSON(w, http.StatusOK, s.refJSON(repo, branch))
}

func (s *Sim) matchingRefs(w http.ResponseWriter, r *http.Request) {
	prefix := "refs/" + strings.TrimPrefix(wildcard(r), "refs/")
	s.mu.Lock()
	defer s.mu.Unlock()
	repo := repoOf(r)
	var names []string
	for _, b := range sortedBranches(repo) {
		if strings.HasPrefix("refs/heads/"+b, prefix) {
			names = append(names, b)
		}
	}
	lo, hi := paginate(w, r, len(names))
	out := []any{}
	for _, b := range names[lo:hi] {
		out = append(out, s.refJSON(repo, b))
	}
	writeJSON(w, http.StatusOK, out)
}

// compareStatus classifies head against base.
func compareStatus(ahead, behind int) string {
	switch {
	case ahead == 0 && behind == 0:
		return "identical"
	case behind == 0:
		return "ahead"
	case ahead == 0:
		return "behind"
	}
	return "diverged"
}

// compare answers GET /compare/{base}...{head}: the three-dot comparison
// (commits on head since the merge base, chronological; files changed
// between the merge base and head).
func (s *Sim) compare(w http.ResponseWriter, r *http.Request, basehead string) {
	baseRef, headRef, ok := strings.Cut(basehead, "...")
	if !ok || baseRef == "" || headRef == "" {
		writeError(w, http.StatusNotFound, "Not Found")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	repo := repoOf(r)
	strip := func(ref string) (string, bool) {
		if owner, rest, ok := strings.Cut(ref, ":"); ok {
			return rest, strings.EqualFold(owner, repo.Owner.Login)
		}
		return ref, true
	}
	b, okb := strip(baseRef)
	h, okh := strip(headRef)
	base, head := resolveLocked(repo, b), resolveLocked(repo, h)
	if !okb || !okh || base == nil || head == nil {
		writeError(w, http.StatusNotFound, "Not Found")
		return
	}
	mb := mergeBaseLocked(repo, base.SHA, head.SHA)
	if mb == nil {
		writeError(w, http.StatusNotFound, fmt.Sprintf("No common ancestor between %s and %s.", baseRef, headRef))
		return
	}
	ahead := onlyInLocked(repo, head.SHA, base.SHA)
	behind := onlyInLocked(repo, base.SHA, head.SHA)
	q := r.URL.Query()
	paged := q.Get("per_page") != "" || q.Get("page") != ""
	commits := ahead
	firstPage := true
	if paged {
		lo, hi := paginate(w, r, len(ahead))
		commits = ahead[lo:hi]
		_, pg := page(r)
		firstPage = pg == 1
	} else if len(commits) > 250 {
		commits = commits[len(commits)-250:]
	}
	list := []any{}
	for _, c := range commits {
		list = append(list, s.commitJSON(repo, c, false))
	}
	files := []any{}
	if firstPage {
		files, _, _ = s.diffEntriesJSON(repo, head.SHA, diffTrees(mb.Files, head.Files, true))
	}
	api, web := repoAPI(repo), repoWeb(repo)
	bh := url.PathEscape(baseRef) + "..." + url.PathEscape(headRef)
	owner := repo.Owner.Login
	writeJSON(w, http.StatusOK, map[string]any{
		"url": api + "/compare/" + bh, "html_url": web + "/compare/" + bh,
		"permalink_url": web + "/compare/" + owner + ":" + base.SHA[:7] + "..." + owner + ":" + head.SHA[:7],
		"diff_url":      web + "/compare/" + bh + ".diff", "patch_url": web + "/compare/" + bh + ".patch",
		"base_commit": s.commitJSON(repo, base, false), "merge_base_commit": s.commitJSON(repo, mb, false),
		"status": compareStatus(len(ahead), len(behind)), "ahead_by": len(ahead), "behind_by": len(behind),
		"total_commits": len(ahead), "commits": list, "files": files,
	})
}
