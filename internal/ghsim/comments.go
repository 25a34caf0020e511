package ghsim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"unicode/utf8"
)

func checkCommentBody(body string) *issueErr {
	if strings.TrimSpace(body) == "" {
		return errValidation("IssueComment", "body", "missing_field", "")
	}
	if utf8.RuneCountInString(body) > maxBodyChars {
		return errBodyTooLong("IssueComment")
	}
	return nil
}

func (s *Sim) emitCommentLocked(repo *Repo, c *Comment, action string, by *User, extra map[string]any) {
	if repo.Install == nil {
		return
	}
	body := map[string]any{"comment": s.commentJSON(repo, c), "issue": s.issueJSON(repo, c.Issue)}
	for k, v := range extra {
		body[k] = v
	}
	s.emitLocked("issue_comment", action, nil, repo, by, body)
}

// createCommentLocked comments on an issue (or pull request) as by.
func (s *Sim) createCommentLocked(repo *Repo, i *Issue, by *User, body string) (*Comment, *issueErr) {
	if e := checkCommentBody(body); e != nil {
		return nil, e
	}
	now := s.now()
	c := &Comment{ID: s.newID(), Issue: i, User: by, Body: body, CreatedAt: now, UpdatedAt: now, ViaApp: by == s.bot}
	repo.Comments[c.ID] = c
	i.CommentIDs = append(i.CommentIDs, c.ID)
	i.UpdatedAt = now
	s.emitCommentLocked(repo, c, "created", by, nil)
	return c, nil
}

// editCommentLocked replaces a comment's body; issue_comment.edited carries
// the previous body in changes.body.from. An unchanged body changes nothing.
func (s *Sim) editCommentLocked(repo *Repo, c *Comment, by *User, body string) *issueErr {
	if e := checkCommentBody(body); e != nil {
		return e
	}
	if body == c.Body {
		return nil
	}
	from := c.Body
	now := s.now()
	c.Body, c.UpdatedAt = body, now
	c.Issue.UpdatedAt = now
	s.emitCommentLocked(repo, c, "edited", by, map[string]any{"changes": map[string]any{"body": map[string]any{"from": from}}})
	return nil
}

func (s *Sim) deleteCommentLocked(repo *Repo, c *Comment, by *User) {
	delete(repo.Comments, c.ID)
	ids := c.Issue.CommentIDs[:0]
	for _, id := range c.Issue.CommentIDs {
		if id != c.ID {
			ids = append(ids, id)
		}
	}
	c.Issue.CommentIDs = ids
	c.Issue.UpdatedAt = s.now()
	s.emitCommentLocked(repo, c, "deleted", by, nil)
}

// commentLocked finds a comment of the repository.
func commentLocked(repo *Repo, id int64) (*Comment, *issueErr) {
	c := repo.Comments[id]
	if c == nil || c.Issue.Deleted {
		return nil, errNotFound()
	}
	return c, nil
}

func commentParam(r *http.Request) (*Comment, *issueErr) {
	id, ok := intParam(r, "comment_id")
	if !ok {
		return nil, errNotFound()
	}
	return commentLocked(repoOf(r), id)
}

// readCommentBody reads {"body": "..."} (body required).
func readCommentBody(w http.ResponseWriter, r *http.Request) (string, bool) {
	var req map[string]json.RawMessage
	if !readJSON(w, r, &req) {
		return "", false
	}
	raw, ok := req["body"]
	if !ok || isNull(raw) {
		errSchema(`"body" wasn't supplied.`).write(w)
		return "", false
	}
	body, ok := rawString(raw, false)
	if !ok {
		errSchema(fmt.Sprintf("For 'properties/body', %s is not a string.", raw)).write(w)
		return "", false
	}
	return body, true
}

// --- REST handlers ---

func (s *Sim) listIssueComments(w http.ResponseWriter, r *http.Request) {
	since, e := parseSince(r)
	if e != nil {
		e.write(w)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	i, e := s.issueParam(r)
	if e != nil {
		e.write(w)
		return
	}
	repo := repoOf(r)
	var list []*Comment
	for _, id := range i.CommentIDs { // ascending id
		if c := repo.Comments[id]; c != nil && !c.UpdatedAt.Before(since) {
			list = append(list, c)
		}
	}
	lo, hi := paginate(w, r, len(list))
	out := []any{}
	for _, c := range list[lo:hi] {
		out = append(out, s.commentJSON(repo, c))
	}
	writeJSON(w, http.StatusOK, out)
}

// listRepoComments is GET /issues/comments: by ascending id, or by sort
// (created or updated; direction defaults to desc when sort is given).
func (s *Sim) listRepoComments(w http.ResponseWriter, r *http.Request) {
	since, e := parseSince(r)
	if e != nil {
		e.write(w)
		return
	}
	q := r.URL.Query()
	sortBy, dir := q.Get("sort"), q.Get("direction")
	if sortBy != "" && sortBy != "created" && sortBy != "updated" {
		errValidation("IssueComment", "sort", "invalid", "").write(w)
		return
	}
	if dir != "" && dir != "asc" && dir != "desc" {
		errValidation("IssueComment", "direction", "invalid", "").write(w)
		return
	}
	if sortBy == "" {
		dir = "asc"
	} else if dir == "" {
		dir = "desc"
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	repo := repoOf(r)
	var list []*Comment
	for _, c := range repo.Comments {
		if !c.Issue.Deleted && !c.UpdatedAt.Before(since) {
			list = append(list, c)
		}
	}
	key := func(c *Comment) int64 {
		switch sortBy {
		case "created":
			return c.CreatedAt.UnixNano()
		case "updated":
			return c.UpdatedAt.UnixNano()
		}
		return c.ID
	}
	sort.Slice(list, func(a, b int) bool {
		ka, kb := key(list[a]), key(list[b])
		if ka == kb {
			ka, kb = list[a].ID, list[b].ID
		}
		if dir == "asc" {
			return ka < kb
		}
		return ka > kb
	})
	lo, hi := paginate(w, r, len(list))
	out := []any{}
	for _, c := range list[lo:hi] {
		out = append(out, s.commentJSON(repo, c))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Sim) createIssueComment(w http.ResponseWriter, r *http.Request) {
	body, ok := readCommentBody(w, r)
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	i, e := s.issueParam(r)
	if e != nil {
		e.write(w)
		return
	}
	repo := repoOf(r)
	c, e := s.createCommentLocked(repo, i, s.actorOf(r), body)
	if e != nil {
		e.write(w)
		return
	}
	j := s.commentJSON(repo, c)
	w.Header().Set("Location", j["url"].(string))
	writeJSON(w, http.StatusCreated, j)
}

func (s *Sim) getComment(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, e := commentParam(r)
	if e != nil {
		e.write(w)
		return
	}
	writeJSON(w, http.StatusOK, s.commentJSON(repoOf(r), c))
}

func (s *Sim) patchComment(w http.ResponseWriter, r *http.Request) {
	body, ok := readCommentBody(w, r)
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c, e := commentParam(r)
	if e == nil {
		e = s.editCommentLocked(repoOf(r), c, s.actorOf(r), body)
	}
	if e != nil {
		e.write(w)
		return
	}
	writeJSON(w, http.StatusOK, s.commentJSON(repoOf(r), c))
}

func (s *Sim) deleteComment(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, e := commentParam(r)
	if e != nil {
		e.write(w)
		return
	}
	s.deleteCommentLocked(repoOf(r), c, s.actorOf(r))
	w.WriteHeader(http.StatusNoContent)
}
