package ghsim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// GitHub's sub-issue limits.
const (
	maxSubIssues   = 100
	maxIssueLevels = 8
)

// issueByIDLocked finds an issue by its id among the repositories of an
// owner (a sub-issue must belong to the parent's repository owner).
func (s *Sim) issueByIDLocked(owner *User, id int64) (*Repo, *Issue) {
	for _, r := range s.repos {
		if !strings.EqualFold(r.Owner.Login, owner.Login) {
			continue
		}
		for _, i := range r.Issues {
			if i.ID == id {
				if i.Repo == nil {
					i.Repo = r
				}
				return r, i
			}
		}
	}
	return nil, nil
}

func errSubIssue(msg string) *issueErr { return errValidation("Issue", "sub_issue_id", "custom", msg) }

// levels counts the levels of the tree below i, i included.
func levels(i *Issue) int {
	n := 0
	for _, c := range i.SubIssues {
		n = max(n, levels(c))
	}
	return n + 1
}

func (s *Sim) emitSubIssueLocked(added bool, parentRepo *Repo, parent *Issue, childRepo *Repo, child *Issue, by *User) {
	suffix := "added"
	if !added {
		suffix = "removed"
	}
	if parentRepo.Install != nil {
		s.emitLocked("sub_issues", "sub_issue_"+suffix, nil, parentRepo, by, map[string]any{
			"parent_issue_id": parent.ID, "parent_issue": s.issueJSON(parentRepo, parent),
			"sub_issue_id": child.ID, "sub_issue": s.issueJSON(childRepo, child), "sub_issue_repo": s.repoJSON(childRepo),
		})
	}
	if childRepo.Install != nil {
		s.emitLocked("sub_issues", "parent_issue_"+suffix, nil, childRepo, by, map[string]any{
			"sub_issue_id": child.ID, "sub_issue": s.issueJSON(childRepo, child),
			"parent_issue_id": parent.ID, "parent_issue": s.issueJSON(parentRepo, parent), "parent_issue_repo": s.repoJSON(parentRepo),
		})
	}
}

// addSubIssueLocked makes the issue with id childID a sub-issue of parent.
func (s *Sim) addSubIssueLocked(repo *Repo, parent *Issue, childID int64, by *User, replace bool) *issueErr {
	childRepo, child := s.issueByIDLocked(repo.Owner, childID)
	switch {
	case child == nil || child.Deleted:
		return errSubIssue("The provided sub-issue does not exist")
	case child.IsPull || parent.IsPull:
		return errSubIssue("Pull requests cannot be sub-issues or have sub-issues")
	case child == parent:
		return errSubIssue("An issue cannot be a sub-issue of itself")
	case child.Parent == parent:
		return errSubIssue("Issue is already a sub-issue of this parent")
	case child.Parent != nil && !replace:
		return errSubIssue("Issue may not contain duplicate sub-issues and Sub issue may only have one parent")
	case len(parent.SubIssues) >= maxSubIssues:
		return errSubIssue(fmt.Sprintf("Parent cannot have more than %d sub-issues", maxSubIssues))
	}
	depth := 1
	for a := parent; a != nil; a = a.Parent {
		if a == child {
			return errSubIssue("Sub-issue cannot be an ancestor of the parent issue")
		}
		if a != parent {
			depth++
		}
	}
	if depth+levels(child) > maxIssueLevels {
		return errSubIssue(fmt.Sprintf("Sub-issues cannot be nested more than %d levels", maxIssueLevels))
	}
	now := s.now()
	if old := child.Parent; old != nil {
		old.SubIssues = removeIssue(old.SubIssues, child)
		old.UpdatedAt = now
		child.Parent = nil
		s.emitSubIssueLocked(false, s.issueRepoLocked(old), old, childRepo, child, by)
	}
	parent.SubIssues = append(parent.SubIssues, child)
	child.Parent = parent
	parent.UpdatedAt, child.UpdatedAt = now, now
	s.emitSubIssueLocked(true, repo, parent, childRepo, child, by)
	return nil
}

func (s *Sim) removeSubIssueLocked(repo *Repo, parent *Issue, childID int64, by *User) *issueErr {
	var child *Issue
	for _, c := range parent.SubIssues {
		if c.ID == childID {
			child = c
		}
	}
	if child == nil {
		return errNotFound()
	}
	now := s.now()
	parent.SubIssues = removeIssue(parent.SubIssues, child)
	child.Parent = nil
	parent.UpdatedAt, child.UpdatedAt = now, now
	s.emitSubIssueLocked(false, repo, parent, s.issueRepoLocked(child), child, by)
	return nil
}

// readIssueID reads an integer id field of a request body: a string or any
// other non-integer is a 422.
func readIssueID(req map[string]json.RawMessage, field string, required bool) (int64, bool, *issueErr) {
	raw, ok := req[field]
	if !ok || isNull(raw) {
		if required {
			return 0, false, errSchema(fmt.Sprintf("%q wasn't supplied.", field))
		}
		return 0, false, nil
	}
	var id int64
	if err := json.Unmarshal(raw, &id); err != nil {
		return 0, false, errSchema(fmt.Sprintf("For 'properties/%s', %s is not an integer.", field, raw))
	}
	return id, true, nil
}

// --- REST handlers ---

func (s *Sim) addSubIssue(w http.ResponseWriter, r *http.Request) {
	var req map[string]json.RawMessage
	if !readJSON(w, r, &req) {
		return
	}
	id, _, e := readIssueID(req, "sub_issue_id", true)
	if e != nil {
		e.write(w)
		return
	}
	replace := false
	if raw, ok := req["replace_parent"]; ok && !isNull(raw) {
		if json.Unmarshal(raw, &replace) != nil {
			errSchema(fmt.Sprintf("For 'properties/replace_parent', %s is not a boolean.", raw)).write(w)
			return
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	parent, e := s.issueParam(r)
	if e == nil {
		e = s.addSubIssueLocked(repoOf(r), parent, id, s.actorOf(r), replace)
	}
	if e != nil {
		e.write(w)
		return
	}
	repo := repoOf(r)
	w.Header().Set("Location", issueAPI(repo, parent.Number)+"/sub_issues")
	writeJSON(w, http.StatusCreated, s.issueJSON(repo, parent))
}

func (s *Sim) removeSubIssue(w http.ResponseWriter, r *http.Request) {
	var req map[string]json.RawMessage
	if !readJSON(w, r, &req) {
		return
	}
	id, _, e := readIssueID(req, "sub_issue_id", true)
	if e != nil {
		e.write(w)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	parent, e := s.issueParam(r)
	if e == nil {
		e = s.removeSubIssueLocked(repoOf(r), parent, id, s.actorOf(r))
	}
	if e != nil {
		e.write(w)
		return
	}
	writeJSON(w, http.StatusOK, s.issueJSON(repoOf(r), parent))
}

func (s *Sim) listSubIssues(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	parent, e := s.issueParam(r)
	if e != nil {
		e.write(w)
		return
	}
	lo, hi := paginate(w, r, len(parent.SubIssues))
	out := []any{}
	for _, c := range parent.SubIssues[lo:hi] {
		out = append(out, s.issueJSON(s.issueRepoLocked(c), c))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Sim) getParentIssue(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i, e := s.issueParam(r)
	if e != nil {
		e.write(w)
		return
	}
	if i.Parent == nil {
		errNotFound().write(w)
		return
	}
	writeJSON(w, http.StatusOK, s.issueJSON(s.issueRepoLocked(i.Parent), i.Parent))
}

// reprioritizeSubIssue is PATCH /sub_issues/priority: moves a sub-issue
// after after_id or before before_id.
func (s *Sim) reprioritizeSubIssue(w http.ResponseWriter, r *http.Request) {
	var req map[string]json.RawMessage
	if !readJSON(w, r, &req) {
		return
	}
	id, _, e := readIssueID(req, "sub_issue_id", true)
	if e != nil {
		e.write(w)
		return
	}
	after, hasAfter, e := readIssueID(req, "after_id", false)
	if e != nil {
		e.write(w)
		return
	}
	before, hasBefore, e := readIssueID(req, "before_id", false)
	if e != nil {
		e.write(w)
		return
	}
	if hasAfter == hasBefore {
		errValidation("Issue", "after_id", "invalid", "Exactly one of after_id and before_id is required").write(w)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	parent, e := s.issueParam(r)
	if e != nil {
		e.write(w)
		return
	}
	find := func(id int64) *Issue {
		for _, c := range parent.SubIssues {
			if c.ID == id {
				return c
			}
		}
		return nil
	}
	child, anchorID := find(id), after
	if hasBefore {
		anchorID = before
	}
	anchor := find(anchorID)
	if child == nil || anchor == nil || anchor == child {
		errSubIssue("The provided sub-issue is not a sub-issue of this issue").write(w)
		return
	}
	list := removeIssue(parent.SubIssues, child)
	var out []*Issue
	for _, c := range list {
		if c == anchor && hasBefore {
			out = append(out, child)
		}
		out = append(out, c)
		if c == anchor && hasAfter {
			out = append(out, child)
		}
	}
	parent.SubIssues = out
	parent.UpdatedAt = s.now()
	writeJSON(w, http.StatusOK, s.issueJSON(repoOf(r), parent))
}
