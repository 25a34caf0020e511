package ghsim

import (
	"fmt"
	"net/http"
	"sort"
	"strings"
)

// GitError is a refusal from the git side, as GitHub would answer it: the
// status code and message, and for 422 Validation Failed the errors list.
// Actor methods return it too.
type GitError struct {
	Status  int
	Message string
	Errors  []map[string]any
}

func (e *GitError) Error() string {
	if len(e.Errors) > 0 {
		return fmt.Sprintf("%d %s: %v", e.Status, e.Message, e.Errors)
	}
	return fmt.Sprintf("%d %s", e.Status, e.Message)
}

func gitErr(status int, msg string) *GitError { return &GitError{Status: status, Message: msg} }

// gitInvalid is 422 Validation Failed with one {resource, field, code} entry.
func gitInvalid(resource, field, code, msg string) *GitError {
	e := map[string]any{"resource": resource, "field": field, "code": code}
	if msg != "" {
		e["message"] = msg
	}
	return &GitError{Status: http.StatusUnprocessableEntity, Message: "Validation Failed", Errors: []map[string]any{e}}
}

// gitCustom is 422 Validation Failed with a {resource, code: custom, message} entry.
func gitCustom(resource, msg string) *GitError {
	return &GitError{Status: http.StatusUnprocessableEntity, Message: "Validation Failed",
		Errors: []map[string]any{{"resource": resource, "code": "custom", "message": msg}}}
}

func writeGitError(w http.ResponseWriter, e *GitError) {
	if len(e.Errors) > 0 {
		writeJSON(w, e.Status, errorBody{Message: e.Message, Errors: e.Errors, DocumentationURL: docs, Status: fmt.Sprint(e.Status)})
		return
	}
	writeError(w, e.Status, e.Message)
}

// parseHead accepts "branch" or "owner:branch" (the owner must be the
// repository's: forks are not simulated).
func parseHead(r *Repo, head string) (string, bool) {
	if owner, branch, ok := strings.Cut(head, ":"); ok {
		return branch, strings.EqualFold(owner, r.Owner.Login)
	}
	return head, true
}

// openPullLocked opens a pull request from head into base and sends
// pull_request.opened.
func (s *Sim) openPullLocked(r *Repo, actor *User, head, base, title, body string, draft, maintainerCanModify bool) (*Pull, *GitError) {
	branch, ok := parseHead(r, head)
	if head == "" || !ok || r.Branches[branch] == "" {
		return nil, gitInvalid("PullRequest", "head", "invalid", "")
	}
	if base == "" || r.Branches[base] == "" {
		return nil, gitInvalid("PullRequest", "base", "invalid", "")
	}
	if strings.TrimSpace(title) == "" {
		return nil, gitInvalid("PullRequest", "title", "missing_field", "")
	}
	headSHA, baseSHA := r.Branches[branch], r.Branches[base]
	if len(onlyInLocked(r, headSHA, baseSHA)) == 0 {
		return nil, gitCustom("PullRequest", fmt.Sprintf("No commits between %s and %s", base, branch))
	}
	for _, p := range r.Pulls {
		if p.Issue.State != "closed" && p.Head == branch && p.Base == base {
			return nil, gitCustom("PullRequest", fmt.Sprintf("A pull request already exists for %s:%s.", r.Owner.Login, branch))
		}
	}
	now := s.now()
	r.lastNumber++
	iss := &Issue{ID: s.newID(), Number: r.lastNumber, Title: title, Body: body, User: actor, State: "open",
		CreatedAt: now, UpdatedAt: now, IsPull: true, ViaApp: actor == s.bot, Repo: r}
	r.Issues[iss.Number] = iss
	p := &Pull{ID: s.newID(), Issue: iss, Head: branch, Base: base, HeadSHA: headSHA, BaseSHA: baseSHA, Draft: draft,
		MaintainerCanModify: maintainerCanModify}
	r.Pulls[iss.Number] = p
	s.emitGitLocked("pull_request", "opened", r, actor, map[string]any{"number": iss.Number, "pull_request": s.pullJSON(r, p, true, true)})
	return p, nil
}

// editPullLocked changes title, body, base and state (nil: unchanged) and
// sends pull_request.edited (with changes), closed or reopened.
func (s *Sim) editPullLocked(r *Repo, actor *User, p *Pull, title, body, base, state *string) *GitError {
	if state != nil && *state != "open" && *state != "closed" {
		return gitInvalid("PullRequest", "state", "invalid", "")
	}
	if base != nil && *base != p.Base {
		if r.Branches[*base] == "" {
			return gitInvalid("PullRequest", "base", "invalid", "Proposed base branch '"+*base+"' was not found")
		}
		if p.Issue.State == "closed" {
			return gitInvalid("PullRequest", "base", "invalid", "Cannot change the base branch of a closed pull request.")
		}
	}
	if title != nil && strings.TrimSpace(*title) == "" {
		return gitInvalid("PullRequest", "title", "missing_field", "")
	}
	if state != nil && *state == "open" && p.Issue.State == "closed" {
		if p.Merged {
			return gitInvalid("PullRequest", "state", "invalid", "state cannot be changed. The pull request has already been merged.")
		}
		if r.Branches[p.Head] == "" {
			return gitInvalid("PullRequest", "state", "invalid", "state cannot be changed. The "+p.Head+" branch has been deleted.")
		}
	}
	changes := map[string]any{}
	iss := p.Issue
	if title != nil && *title != iss.Title {
		changes["title"] = map[string]any{"from": iss.Title}
		e := s.addPullEventLocked(p, "renamed", actor, "")
		e.RenameFrom, e.RenameTo = iss.Title, *title
		iss.Title = *title
	}
	if body != nil && *body != iss.Body {
		changes["body"] = map[string]any{"from": iss.Body}
		iss.Body = *body
	}
	if base != nil && *base != p.Base {
		changes["base"] = map[string]any{"ref": map[string]any{"from": p.Base}, "sha": map[string]any{"from": p.BaseSHA}}
		s.addPullEventLocked(p, "base_ref_changed", actor, "")
		p.Base = *base
		p.BaseSHA = r.Branches[*base]
	}
	if len(changes) > 0 {
		iss.UpdatedAt = s.now()
		s.emitGitLocked("pull_request", "edited", r, actor, map[string]any{"number": iss.Number, "changes": changes,
			"pull_request": s.pullJSON(r, p, true, false)})
	}
	if state != nil && *state != iss.State {
		if *state == "closed" {
			s.closePullLocked(r, p, actor)
		} else {
			s.reopenPullLocked(r, p, actor)
		}
	}
	return nil
}

func (s *Sim) closePullLocked(r *Repo, p *Pull, actor *User) {
	now := s.now()
	iss := p.Issue
	iss.State = "closed"
	iss.StateReason = ""
	iss.ClosedAt = &now
	iss.ClosedBy = actor
	iss.UpdatedAt = now
	s.addPullEventLocked(p, "closed", actor, "")
	s.emitGitLocked("pull_request", "closed", r, actor, map[string]any{"number": iss.Number, "pull_request": s.pullJSON(r, p, true, false)})
}

func (s *Sim) reopenPullLocked(r *Repo, p *Pull, actor *User) {
	now := s.now()
	iss := p.Issue
	iss.State = "open"
	iss.StateReason = "reopened"
	iss.ClosedAt = nil
	iss.ClosedBy = nil
	iss.UpdatedAt = now
	p.HeadSHA = r.Branches[p.Head]
	if bs, ok := r.Branches[p.Base]; ok {
		p.BaseSHA = bs
	}
	s.addPullEventLocked(p, "reopened", actor, "").StateReason = "reopened"
	s.emitGitLocked("pull_request", "reopened", r, actor, map[string]any{"number": iss.Number, "pull_request": s.pullJSON(r, p, true, true)})
}

// setDraftLocked converts to draft or marks ready for review.
func (s *Sim) setDraftLocked(r *Repo, p *Pull, actor *User, draft bool) *GitError {
	if p.Issue.State == "closed" {
		return gitErr(http.StatusUnprocessableEntity, "Pull request is closed")
	}
	if p.Draft == draft {
		return nil
	}
	p.Draft = draft
	p.Issue.UpdatedAt = s.now()
	action, event := "ready_for_review", "ready_for_review"
	if draft {
		action, event = "converted_to_draft", "convert_to_draft"
	}
	s.addPullEventLocked(p, event, actor, "")
	s.emitGitLocked("pull_request", action, r, actor, map[string]any{"number": p.Issue.Number, "pull_request": s.pullJSON(r, p, true, false)})
	return nil
}

// mergePullLocked merges a pull request as GitHub's merge button does and
// returns the merge commit (for rebase, the last rebased commit). It sends
// pull_request.closed (merged), then the push to the base branch with what
// follows it, then issues.closed for the issues the body closes when the
// base is the default branch.
func (s *Sim) mergePullLocked(r *Repo, actor *User, p *Pull, method, sha, title, message string) (string, *GitError) {
	if method == "" {
		method = "merge"
	}
	if method != "merge" && method != "squash" && method != "rebase" {
		return "", gitInvalid("PullRequest", "merge_method", "invalid", "")
	}
	if p.Merged || p.Issue.State == "closed" {
		return "", gitErr(http.StatusMethodNotAllowed, "Pull Request is not mergeable")
	}
	if p.Draft {
		return "", gitErr(http.StatusMethodNotAllowed, "Pull Request is still a draft")
	}
	if sha != "" && sha != p.HeadSHA {
		return "", gitErr(http.StatusConflict, "Head branch was modified. Review and try the merge again.")
	}
	baseHead, ok := r.Branches[p.Base]
	if !ok {
		return "", gitErr(http.StatusMethodNotAllowed, "Pull Request is not mergeable")
	}
	if m := s.mergeableLocked(r, p); m != nil && !*m {
		return "", gitErr(http.StatusMethodNotAllowed, "Pull Request is not mergeable")
	}
	headC := r.Commits[p.HeadSHA]
	mb := mergeBaseLocked(r, baseHead, p.HeadSHA)
	from := map[string]string{}
	if mb != nil {
		from = mb.Files
	}
	merged, _ := mergeTrees(from, r.Commits[baseHead].Files, headC.Files)
	prCommits := onlyInLocked(r, p.HeadSHA, baseHead)
	n := p.Issue.Number
	now := s.now()
	var result *Commit
	switch method {
	case "merge":
		if title == "" {
			title = fmt.Sprintf("Merge pull request #%d from %s/%s", n, r.Owner.Login, p.Head)
		}
		if message == "" {
			message = p.Issue.Title
		}
		result = s.newCommitLocked(r, []string{baseHead, p.HeadSHA}, merged, title+"\n\n"+message, actor, nil, now)
	case "squash":
		if title == "" {
			title = fmt.Sprintf("%s (#%d)", p.Issue.Title, n)
		}
		if message == "" {
			var parts []string
			for _, c := range prCommits {
				parts = append(parts, "* "+c.Message)
			}
			message = strings.Join(parts, "\n\n")
		}
		full := title
		if message != "" {
			full += "\n\n" + message
		}
		result = s.newCommitLocked(r, []string{baseHead}, merged, full, p.Issue.User, nil, now)
	case "rebase":
		tip := r.Commits[baseHead]
		for _, c := range prCommits {
			if len(c.Parents) > 1 {
				return "", gitErr(http.StatusMethodNotAllowed, "This branch can't be rebased")
			}
		}
		var replayed []*Commit
		for _, c := range prCommits {
			files, conflicts := applyChanges(tip.Files, parentFilesLocked(r, c), c.Files)
			if len(conflicts) > 0 {
				for _, x := range replayed {
					delete(r.Commits, x.SHA)
				}
				return "", gitErr(http.StatusMethodNotAllowed, "This branch can't be rebased")
			}
			tip = s.newCommitLocked(r, []string{tip.SHA}, files, c.Message, c.Author, nil, now)
			replayed = append(replayed, tip)
		}
		result = tip
	}
	iss := p.Issue
	p.Merged = true
	p.MergedAt = &now
	p.MergedBy = actor
	p.MergeCommitSHA = result.SHA
	iss.State = "closed"
	iss.StateReason = ""
	iss.ClosedAt = &now
	iss.ClosedBy = actor
	iss.UpdatedAt = now
	s.addPullEventLocked(p, "merged", actor, result.SHA)
	s.addPullEventLocked(p, "closed", actor, result.SHA)
	s.emitGitLocked("pull_request", "closed", r, actor, map[string]any{"number": n, "pull_request": s.pullJSON(r, p, true, true)})
	s.pushLocked(r, actor, p.Base, baseHead, result.SHA, false)
	if p.Base == r.DefaultBranch {
		for _, k := range closingRefs(r, iss.Body, true) {
			s.closeIssueByCommitLocked(r, k, actor, result.SHA)
		}
	}
	return result.SHA, nil
}

// --- REST ---

func (s *Sim) pullOf(w http.ResponseWriter, r *http.Request) (*Repo, *Pull) {
	repo := repoOf(r)
	n, ok := intParam(r, "pull_number")
	if !ok {
		writeError(w, http.StatusNotFound, "Not Found")
		return nil, nil
	}
	p := repo.Pulls[int(n)]
	if p == nil {
		writeError(w, http.StatusNotFound, "Not Found")
		return nil, nil
	}
	return repo, p
}

func (s *Sim) listPulls(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	state := q.Get("state")
	if state == "" {
		state = "open"
	}
	if state != "open" && state != "closed" && state != "all" {
		writeValidation(w, "PullRequest", "state", "invalid", "")
		return
	}
	sortBy := q.Get("sort")
	if sortBy == "" {
		sortBy = "created"
	}
	dir := q.Get("direction")
	if dir == "" {
		dir = "desc"
		if q.Get("sort") != "" && sortBy != "created" {
			dir = "asc"
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	repo := repoOf(r)
	var headBranch string
	headFilter := q.Get("head") != ""
	headOK := true
	if headFilter {
		headBranch, headOK = parseHead(repo, q.Get("head"))
	}
	var out []*Pull
	for _, p := range repo.Pulls {
		if state != "all" && p.Issue.State != state {
			continue
		}
		if headFilter && (!headOK || p.Head != headBranch) {
			continue
		}
		if b := q.Get("base"); b != "" && p.Base != b {
			continue
		}
		out = append(out, p)
	}
	less := func(a, b *Pull) bool {
		switch sortBy {
		case "updated":
			if !a.Issue.UpdatedAt.Equal(b.Issue.UpdatedAt) {
				return a.Issue.UpdatedAt.Before(b.Issue.UpdatedAt)
			}
		case "popularity":
			if len(a.Issue.CommentIDs) != len(b.Issue.CommentIDs) {
				return len(a.Issue.CommentIDs) < len(b.Issue.CommentIDs)
			}
		case "long-running":
			// Open longest, not recently updated: by age.
			if !a.Issue.CreatedAt.Equal(b.Issue.CreatedAt) {
				return a.Issue.CreatedAt.After(b.Issue.CreatedAt)
			}
		}
		return a.Issue.Number < b.Issue.Number
	}
	sort.Slice(out, func(i, j int) bool {
		if dir == "asc" {
			return less(out[i], out[j])
		}
		return less(out[j], out[i])
	})
	lo, hi := paginate(w, r, len(out))
	res := []any{}
	for _, p := range out[lo:hi] {
		res = append(res, s.pullJSON(repo, p, false, false))
	}
	writeJSON(w, http.StatusOK, res)
}

func (s *Sim) getPull(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	repo, p := s.pullOf(w, r)
	if p == nil {
		return
	}
	writeJSON(w, http.StatusOK, s.pullJSON(repo, p, true, false))
}

func (s *Sim) createPull(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Title               *string `json:"title"`
		Head                string  `json:"head"`
		Base                string  `json:"base"`
		Body                *string `json:"body"`
		Draft               bool    `json:"draft"`
		MaintainerCanModify *bool   `json:"maintainer_can_modify"`
		Issue               *int    `json:"issue"`
	}
	if !readJSON(w, r, &in) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	repo := repoOf(r)
	title, body := "", ""
	if in.Title != nil {
		title = *in.Title
	}
	if in.Body != nil {
		body = *in.Body
	}
	if in.Issue != nil {
		writeValidation(w, "PullRequest", "issue", "invalid", "converting an issue into a pull request is not simulated")
		return
	}
	mcm := true
	if in.MaintainerCanModify != nil {
		mcm = *in.MaintainerCanModify
	}
	p, e := s.openPullLocked(repo, s.actorOf(r), in.Head, in.Base, title, body, in.Draft, mcm)
	if e != nil {
		writeGitError(w, e)
		return
	}
	w.Header().Set("Location", repoAPI(repo)+"/pulls/"+fmt.Sprint(p.Issue.Number))
	writeJSON(w, http.StatusCreated, s.pullJSON(repo, p, true, false))
}

func (s *Sim) updatePull(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Title               *string `json:"title"`
		Body                *string `json:"body"`
		State               *string `json:"state"`
		Base                *string `json:"base"`
		MaintainerCanModify *bool   `json:"maintainer_can_modify"`
	}
	if !readJSON(w, r, &in) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	repo, p := s.pullOf(w, r)
	if p == nil {
		return
	}
	if e := s.editPullLocked(repo, s.actorOf(r), p, in.Title, in.Body, in.Base, in.State); e != nil {
		writeGitError(w, e)
		return
	}
	if in.MaintainerCanModify != nil {
		p.MaintainerCanModify = *in.MaintainerCanModify
	}
	writeJSON(w, http.StatusOK, s.pullJSON(repo, p, true, false))
}

func (s *Sim) mergePull(w http.ResponseWriter, r *http.Request) {
	var in struct {
		CommitTitle   string `json:"commit_title"`
		CommitMessage string `json:"commit_message"`
		SHA           string `json:"sha"`
		MergeMethod   string `json:"merge_method"`
	}
	if r.ContentLength != 0 && !readJSON(w, r, &in) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	repo, p := s.pullOf(w, r)
	if p == nil {
		return
	}
	// GitHub asks an App for contents: write here; the simulated App (which
	// has contents: read) may merge anyway, so tests can merge through REST.
	sha, e := s.mergePullLocked(repo, s.actorOf(r), p, in.MergeMethod, in.SHA, in.CommitTitle, in.CommitMessage)
	if e != nil {
		writeGitError(w, e)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"sha": sha, "merged": true, "message": "Pull Request successfully merged"})
}

// checkMerged answers GET /pulls/{n}/merge: 204 when merged, else 404.
func (s *Sim) checkMerged(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, p := s.pullOf(w, r)
	if p == nil {
		return
	}
	if !p.Merged {
		writeError(w, http.StatusNotFound, "Not Found")
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Sim) listPullCommits(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	repo, p := s.pullOf(w, r)
	if p == nil {
		return
	}
	base, head := pullRange(p)
	cs := onlyInLocked(repo, head, base)
	if len(cs) > 250 {
		cs = cs[:250]
	}
	lo, hi := paginate(w, r, len(cs))
	out := []any{}
	for _, c := range cs[lo:hi] {
		out = append(out, s.commitJSON(repo, c, false))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Sim) listPullFiles(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	repo, p := s.pullOf(w, r)
	if p == nil {
		return
	}
	_, changes := s.pullStatsLocked(repo, p)
	if len(changes) > 3000 {
		changes = changes[:3000]
	}
	lo, hi := paginate(w, r, len(changes))
	out := []any{}
	for _, fc := range changes[lo:hi] {
		e, _, _ := s.diffEntriesJSON(repo, p.HeadSHA, []fileChange{fc})
		out = append(out, e...)
	}
	writeJSON(w, http.StatusOK, out)
}

// listCommitPulls answers GET /commits/{sha}/pulls: pull requests whose head
// contains the commit, or that it merged.
func (s *Sim) listCommitPullsLocked(w http.ResponseWriter, r *http.Request, repo *Repo, c *Commit) {
	var out []*Pull
	for _, p := range sortedPulls(repo) {
		if p.MergeCommitSHA == c.SHA || ancestorsLocked(repo, p.HeadSHA)[c.SHA] && !ancestorsLocked(repo, p.BaseSHA)[c.SHA] {
			out = append(out, p)
		}
	}
	lo, hi := paginate(w, r, len(out))
	res := []any{}
	for _, p := range out[lo:hi] {
		res = append(res, s.pullJSON(repo, p, false, false))
	}
	writeJSON(w, http.StatusOK, res)
}

// needPermission answers 403 "Resource not accessible by integration" when
// the App lacks perm at level (reads of public repositories need none).
func needPermission(w http.ResponseWriter, r *Repo, perm, level string) bool {
	have := appPermissions()[perm]
	if have == "write" || have == level || (level == "read" && !r.Private) {
		return true
	}
	w.Header().Set("X-Accepted-GitHub-Permissions", perm+"="+level)
	writeError(w, http.StatusForbidden, "Resource not accessible by integration")
	return false
}
