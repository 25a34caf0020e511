package ghsim

import (
	"fmt"
	"maps"
	"net/http"
	"strings"
)

// Git-side acts of a person (or another bot), with the webhooks GitHub
// sends for them. Errors are *GitError where GitHub would refuse.

// FileCommit is one commit of a multi-commit push: path -> content, an
// empty content deleting the path.
type FileCommit struct {
	Message string
	Files   map[string]string
}

// Push commits files (path -> content; "" deletes the path) on branch and
// pushes it. from starts a new branch: an existing branch or a SHA ("" = the
// default branch); for an existing branch it must be "" (or name the
// branch's own head). It returns the new head.
func (a *Actor) Push(repo *Repo, branch, from string, files map[string]string, message string) (string, error) {
	return a.PushCommits(repo, branch, from, []FileCommit{{Message: message, Files: files}})
}

// PushCommits pushes several commits at once (one push event listing them).
func (a *Actor) PushCommits(repo *Repo, branch, from string, commits []FileCommit) (string, error) {
	s := a.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(commits) == 0 {
		return "", fmt.Errorf("ghsim: Push with no commits")
	}
	if err := validBranchName(branch); err != nil {
		return "", err
	}
	before, exists := repo.Branches[branch]
	start := before
	if !exists {
		if from == "" {
			from = repo.DefaultBranch
		}
		c := resolveLocked(repo, from)
		if c == nil {
			return "", gitErr(http.StatusNotFound, "ghsim: no branch or commit "+from)
		}
		start = c.SHA
	} else if from != "" {
		if c := resolveLocked(repo, from); c == nil || c.SHA != before {
			return "", fmt.Errorf("ghsim: branch %s exists; push to it with from \"\" or use ForcePush", branch)
		}
	}
	tip := repo.Commits[start]
	for _, fc := range commits {
		files := maps.Clone(tip.Files)
		for p, content := range fc.Files {
			p = strings.Trim(p, "/")
			if p == "" {
				return "", fmt.Errorf("ghsim: empty path")
			}
			if content == "" {
				delete(files, p)
			} else {
				files[p] = content
			}
		}
		tip = s.newCommitLocked(repo, []string{tip.SHA}, files, fc.Message, a.user, a.user, s.now())
	}
	s.pushLocked(repo, a.user, branch, before, tip.SHA, false)
	return tip.SHA, nil
}

func validBranchName(b string) error {
	if b == "" || strings.HasPrefix(b, "/") || strings.HasSuffix(b, "/") || strings.Contains(b, "..") ||
		strings.ContainsAny(b, " ~^:?*[\\") {
		return fmt.Errorf("ghsim: invalid branch name %q", b)
	}
	return nil
}

// CreateBranch points a new branch at from (a branch or SHA; "" = the
// default branch) without a new commit, and pushes it.
func (a *Actor) CreateBranch(repo *Repo, branch, from string) (string, error) {
	s := a.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := validBranchName(branch); err != nil {
		return "", err
	}
	if _, ok := repo.Branches[branch]; ok {
		return "", gitErr(http.StatusUnprocessableEntity, "Reference already exists")
	}
	if from == "" {
		from = repo.DefaultBranch
	}
	c := resolveLocked(repo, from)
	if c == nil {
		return "", gitErr(http.StatusNotFound, "ghsim: no branch or commit "+from)
	}
	s.pushLocked(repo, a.user, branch, "", c.SHA, false)
	return c.SHA, nil
}

// Rename moves oldPath to newPath on branch in one commit and pushes it
// (the push lists it as removed + added; compare shows a rename).
func (a *Actor) Rename(repo *Repo, branch, oldPath, newPath, message string) (string, error) {
	s := a.s
	s.mu.Lock()
	head, ok := repo.Branches[branch]
	var content string
	if ok {
		content, ok = repo.Commits[head].Files[oldPath]
	}
	s.mu.Unlock()
	if !ok {
		return "", fmt.Errorf("ghsim: no %s on %s", oldPath, branch)
	}
	return a.Push(repo, branch, "", map[string]string{oldPath: "", newPath: content}, message)
}

// ForcePush points branch at toSHA (creating the branch if missing) and
// pushes; forced is set when the old head is not an ancestor of toSHA.
func (a *Actor) ForcePush(repo *Repo, branch, toSHA string) error {
	s := a.s
	s.mu.Lock()
	defer s.mu.Unlock()
	c := resolveLocked(repo, toSHA)
	if c == nil {
		return gitErr(http.StatusNotFound, "ghsim: no commit "+toSHA)
	}
	before, exists := repo.Branches[branch]
	if exists && before == c.SHA {
		return nil
	}
	if !exists {
		if err := validBranchName(branch); err != nil {
			return err
		}
	}
	forced := exists && !ancestorsLocked(repo, c.SHA)[before]
	s.pushLocked(repo, a.user, branch, before, c.SHA, forced)
	return nil
}

// DeleteBranch deletes a branch (not the default one): push with deleted
// true, and open pull requests from or into it are closed.
func (a *Actor) DeleteBranch(repo *Repo, branch string) error {
	s := a.s
	s.mu.Lock()
	defer s.mu.Unlock()
	before, ok := repo.Branches[branch]
	if !ok {
		return gitErr(http.StatusUnprocessableEntity, "Reference does not exist")
	}
	if branch == repo.DefaultBranch {
		return gitErr(http.StatusUnprocessableEntity, "Cannot delete the default branch")
	}
	s.pushLocked(repo, a.user, branch, before, "", false)
	return nil
}

func (a *Actor) pull(repo *Repo, number int) (*Pull, error) {
	p := repo.Pulls[number]
	if p == nil {
		return nil, gitErr(http.StatusNotFound, "Not Found")
	}
	return p, nil
}

// OpenPR opens a pull request from head ("branch" or "owner:branch") into
// base: pull_request.opened.
func (a *Actor) OpenPR(repo *Repo, head, base, title, body string, draft bool) (*Pull, error) {
	s := a.s
	s.mu.Lock()
	defer s.mu.Unlock()
	p, e := s.openPullLocked(repo, a.user, head, base, title, body, draft, true)
	if e != nil {
		return nil, e
	}
	return p, nil
}

// EditPR changes the title and/or body (nil: unchanged): pull_request.edited.
func (a *Actor) EditPR(repo *Repo, number int, title, body *string) error {
	s := a.s
	s.mu.Lock()
	defer s.mu.Unlock()
	p, err := a.pull(repo, number)
	if err != nil {
		return err
	}
	if e := s.editPullLocked(repo, a.user, p, title, body, nil, nil); e != nil {
		return e
	}
	return nil
}

// RetargetPR changes the base branch: pull_request.edited with changes.base.
func (a *Actor) RetargetPR(repo *Repo, number int, base string) error {
	s := a.s
	s.mu.Lock()
	defer s.mu.Unlock()
	p, err := a.pull(repo, number)
	if err != nil {
		return err
	}
	if e := s.editPullLocked(repo, a.user, p, nil, nil, &base, nil); e != nil {
		return e
	}
	return nil
}

// ClosePR closes without merging: pull_request.closed (merged false).
func (a *Actor) ClosePR(repo *Repo, number int) error { return a.setPRState(repo, number, "closed") }

// ReopenPR reopens: pull_request.reopened.
func (a *Actor) ReopenPR(repo *Repo, number int) error { return a.setPRState(repo, number, "open") }

func (a *Actor) setPRState(repo *Repo, number int, state string) error {
	s := a.s
	s.mu.Lock()
	defer s.mu.Unlock()
	p, err := a.pull(repo, number)
	if err != nil {
		return err
	}
	if e := s.editPullLocked(repo, a.user, p, nil, nil, nil, &state); e != nil {
		return e
	}
	return nil
}

// MarkReady marks a draft ready for review: pull_request.ready_for_review.
func (a *Actor) MarkReady(repo *Repo, number int) error { return a.setDraft(repo, number, false) }

// ConvertToDraft: pull_request.converted_to_draft.
func (a *Actor) ConvertToDraft(repo *Repo, number int) error { return a.setDraft(repo, number, true) }

func (a *Actor) setDraft(repo *Repo, number int, draft bool) error {
	s := a.s
	s.mu.Lock()
	defer s.mu.Unlock()
	p, err := a.pull(repo, number)
	if err != nil {
		return err
	}
	if e := s.setDraftLocked(repo, p, a.user, draft); e != nil {
		return e
	}
	return nil
}

// MergePR merges with method merge, squash or rebase ("" = merge) and
// returns the merge commit: pull_request.closed (merged), push to the base,
// check_suite.requested, and issues.closed for closing keywords when the
// base is the default branch. A *GitError carries GitHub's refusal (405 not
// mergeable or draft).
func (a *Actor) MergePR(repo *Repo, number int, method string) (string, error) {
	s := a.s
	s.mu.Lock()
	defer s.mu.Unlock()
	p, err := a.pull(repo, number)
	if err != nil {
		return "", err
	}
	sha, e := s.mergePullLocked(repo, a.user, p, method, "", "", "")
	if e != nil {
		return "", e
	}
	return sha, nil
}

// SetMergeable pins what GitHub reports as the pull request's mergeable
// (nil: still computing, null in the API). Merging is refused (405) while it
// is pinned false. No webhook.
func (a *Actor) SetMergeable(repo *Repo, number int, mergeable *bool) error {
	s := a.s
	s.mu.Lock()
	defer s.mu.Unlock()
	p, err := a.pull(repo, number)
	if err != nil {
		return err
	}
	p.MergeableSet = true
	p.Mergeable = nil
	if mergeable != nil {
		v := *mergeable
		p.Mergeable = &v
	}
	return nil
}

// RerequestCheckSuite is a person clicking "Re-run all checks": the suite is
// queued again and, if it is the App's, check_suite.rerequested is sent.
func (a *Actor) RerequestCheckSuite(repo *Repo, suiteID int64) error {
	s := a.s
	s.mu.Lock()
	defer s.mu.Unlock()
	cs := repo.CheckSuites[suiteID]
	if cs == nil {
		return gitErr(http.StatusNotFound, "Not Found")
	}
	s.rerequestSuiteLocked(repo, cs, a.user)
	return nil
}

// RerequestCheckRun is a person clicking "Re-run" on a completed check run:
// check_run.rerequested, to the App that owns the run.
func (a *Actor) RerequestCheckRun(repo *Repo, runID int64) error {
	s := a.s
	s.mu.Lock()
	defer s.mu.Unlock()
	run := repo.CheckRuns[runID]
	if run == nil {
		return gitErr(http.StatusNotFound, "Not Found")
	}
	if e := s.rerequestRunLocked(repo, run, a.user); e != nil {
		return e
	}
	return nil
}

// ExternalCheck posts another CI's (GitHub Actions') completed check run on
// sha: check_run.created and completed, and check_suite.completed when its
// suite completes. conclusion "" leaves the run in progress.
func (a *Actor) ExternalCheck(repo *Repo, sha, name, conclusion string) (*CheckRun, error) {
	s := a.s
	s.mu.Lock()
	defer s.mu.Unlock()
	c := resolveLocked(repo, sha)
	if c == nil {
		return nil, gitErr(http.StatusUnprocessableEntity, "No commit found for SHA: "+sha)
	}
	in := checkRunInput{Name: &name, HeadSHA: &c.SHA}
	if conclusion != "" {
		in.Conclusion = &conclusion
	} else {
		st := "in_progress"
		in.Status = &st
	}
	run, e := s.createCheckRunLocked(repo, actionsApp, actionsBot, in)
	if e != nil {
		return nil, e
	}
	return run, nil
}

// ExternalStatus posts a commit status (error, failure, pending, success)
// for context on sha, as another CI using the statuses API does. The App is
// not subscribed to status events, so no webhook is sent.
func (a *Actor) ExternalStatus(repo *Repo, sha, context, state string) (*CommitStatus, error) {
	s := a.s
	s.mu.Lock()
	defer s.mu.Unlock()
	c := resolveLocked(repo, sha)
	if c == nil {
		return nil, gitErr(http.StatusUnprocessableEntity, "No commit found for SHA: "+sha)
	}
	switch state {
	case "error", "failure", "pending", "success":
	default:
		return nil, gitInvalid("Status", "state", "custom", "state is not included in the list")
	}
	if context == "" {
		context = "default"
	}
	now := s.now()
	st := &CommitStatus{ID: s.newID(), SHA: c.SHA, State: state, Context: context, Creator: a.user, CreatedAt: now, UpdatedAt: now}
	repo.Statuses = append(repo.Statuses, st)
	return st, nil
}

// ReviewComment comments on path at the pull request's head:
// pull_request_review_comment.created.
func (a *Actor) ReviewComment(repo *Repo, number int, path, body string) (*ReviewComment, error) {
	s := a.s
	s.mu.Lock()
	defer s.mu.Unlock()
	p := repo.Pulls[number]
	if p == nil {
		return nil, gitErr(http.StatusNotFound, "Not Found")
	}
	c, e := s.reviewCommentLocked(repo, p, a.user, body, path, "", 0)
	if e != nil {
		return nil, e
	}
	return c, nil
}

// ReplyToReviewComment replies in the thread of review comment id:
// pull_request_review_comment.created.
func (a *Actor) ReplyToReviewComment(repo *Repo, number int, id int64, body string) (*ReviewComment, error) {
	s := a.s
	s.mu.Lock()
	defer s.mu.Unlock()
	p := repo.Pulls[number]
	if p == nil {
		return nil, gitErr(http.StatusNotFound, "Not Found")
	}
	c, e := s.reviewCommentLocked(repo, p, a.user, body, "", "", id)
	if e != nil {
		return nil, e
	}
	return c, nil
}
