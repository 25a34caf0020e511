package ghsim

import (
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"
)

// ReviewComment is a pull request review comment (a comment on a line of
// its diff), or a reply to one.
type ReviewComment struct {
	ID        int64
	Pull      *Pull
	User      *User
	Body      string
	Path      string
	CommitID  string
	InReplyTo int64 // 0: a new thread
	CreatedAt time.Time
	UpdatedAt time.Time
}

// reviewCommentRoutes serves creating review comments and replies to them
// (POST /pulls/{n}/comments, POST /pulls/{n}/comments/{id}/replies); each
// sends pull_request_review_comment.created.
func (s *Sim) reviewCommentRoutes(r interface {
	Post(pattern string, h http.HandlerFunc)
}) {
	r.Post("/pulls/{pull_number}/comments", s.createReviewComment)
	r.Post("/pulls/{pull_number}/comments/{comment_id}/replies", s.replyReviewComment)
}

func checkReviewBody(body string) *GitError {
	if strings.TrimSpace(body) == "" {
		return gitErr(http.StatusUnprocessableEntity, "Validation Failed: body is missing")
	}
	if utf8.RuneCountInString(body) > maxBodyChars {
		return gitErr(http.StatusUnprocessableEntity, "Validation Failed: body is too long (maximum is 65536 characters)")
	}
	return nil
}

func (s *Sim) createReviewComment(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Body      string `json:"body"`
		CommitID  string `json:"commit_id"`
		Path      string `json:"path"`
		InReplyTo int64  `json:"in_reply_to"`
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
	c, e := s.reviewCommentLocked(repo, p, s.actorOf(r), in.Body, in.Path, in.CommitID, in.InReplyTo)
	if e != nil {
		writeGitError(w, e)
		return
	}
	writeJSON(w, http.StatusCreated, s.reviewCommentJSON(repo, c))
}

func (s *Sim) replyReviewComment(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Body string `json:"body"`
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
	id, ok := intParam(r, "comment_id")
	if !ok {
		writeError(w, http.StatusNotFound, "Not Found")
		return
	}
	c, e := s.reviewCommentLocked(repo, p, s.actorOf(r), in.Body, "", "", id)
	if e != nil {
		writeGitError(w, e)
		return
	}
	writeJSON(w, http.StatusCreated, s.reviewCommentJSON(repo, c))
}

// reviewCommentLocked adds a review comment on path at commit (the PR's
// head when ""), or a reply to comment replyTo (its thread's path and
// commit), as by, and sends pull_request_review_comment.created.
func (s *Sim) reviewCommentLocked(repo *Repo, p *Pull, by *User, body, path, commit string, replyTo int64) (*ReviewComment, *GitError) {
	if e := checkReviewBody(body); e != nil {
		return nil, e
	}
	if replyTo != 0 {
		parent := repo.ReviewComments[replyTo]
		if parent == nil || parent.Pull != p {
			return nil, gitErr(http.StatusNotFound, "Not Found")
		}
		for parent.InReplyTo != 0 && repo.ReviewComments[parent.InReplyTo] != nil {
			parent = repo.ReviewComments[parent.InReplyTo] // replies join the thread's first comment
		}
		path, commit, replyTo = parent.Path, parent.CommitID, parent.ID
	}
	if path == "" {
		return nil, gitErr(http.StatusUnprocessableEntity, "Validation Failed: path is missing")
	}
	if commit == "" {
		commit = p.HeadSHA
	}
	if repo.Commits[commit] == nil {
		return nil, gitErr(http.StatusUnprocessableEntity, "Validation Failed: commit_id is not part of the pull request")
	}
	now := s.now()
	c := &ReviewComment{ID: s.newID(), Pull: p, User: by, Body: body, Path: path, CommitID: commit, InReplyTo: replyTo, CreatedAt: now, UpdatedAt: now}
	repo.ReviewComments[c.ID] = c
	if repo.Install != nil {
		s.emitLocked("pull_request_review_comment", "created", nil, repo, by, map[string]any{
			"comment": s.reviewCommentJSON(repo, c), "pull_request": s.pullJSON(repo, p, false, false)})
	}
	return c, nil
}

// reviewCommentJSON renders a review comment as GitHub does.
func (s *Sim) reviewCommentJSON(repo *Repo, c *ReviewComment) map[string]any {
	api := fmt.Sprintf("%s/pulls/comments/%d", repoAPI(repo), c.ID)
	n := fmt.Sprint(c.Pull.Issue.Number)
	html := fmt.Sprintf("%s/pull/%s#discussion_r%d", repoWeb(repo), n, c.ID)
	prAPI := repoAPI(repo) + "/pulls/" + n
	m := map[string]any{
		"url": api, "id": c.ID, "node_id": nodeID("PRRC", c.ID), "pull_request_review_id": c.ID + 1,
		"diff_hunk": "@@ -1 +1 @@", "path": c.Path, "commit_id": c.CommitID, "original_commit_id": c.CommitID,
		"user": s.userJSON(c.User), "body": c.Body, "created_at": ts(c.CreatedAt), "updated_at": ts(c.UpdatedAt),
		"html_url": html, "pull_request_url": prAPI, "author_association": s.associationLocked(repo, c.User),
		"position": 1, "original_position": 1, "line": 1, "original_line": 1, "side": "RIGHT",
		"_links": map[string]any{"self": map[string]any{"href": api}, "html": map[string]any{"href": html},
			"pull_request": map[string]any{"href": prAPI}},
	}
	if c.InReplyTo != 0 {
		m["in_reply_to_id"] = c.InReplyTo
	}
	return m
}
