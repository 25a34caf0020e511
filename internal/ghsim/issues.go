package ghsim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// maxBodyChars is GitHub's limit on issue and comment bodies.
const maxBodyChars = 65536

// issueErr is a REST error an issue-side operation ends in. Actor helpers
// return it as their error.
type issueErr struct {
	code int
	msg  string
	errs []map[string]any
}

func (e *issueErr) Error() string {
	if len(e.errs) > 0 {
		return fmt.Sprintf("ghsim: %d %s %v", e.code, e.msg, e.errs)
	}
	return fmt.Sprintf("ghsim: %d %s", e.code, e.msg)
}

func (e *issueErr) write(w http.ResponseWriter) {
	writeJSON(w, e.code, errorBody{Message: e.msg, Errors: e.errs, DocumentationURL: docs, Status: strconv.Itoa(e.code)})
}

// asError turns a possibly nil *issueErr into an error without the typed-nil
// trap.
func asError(e *issueErr) error {
	if e == nil {
		return nil
	}
	return e
}

func errNotFound() *issueErr { return &issueErr{code: http.StatusNotFound, msg: "Not Found"} }

func errIssueGone() *issueErr { return &issueErr{code: http.StatusGone, msg: "This issue was deleted"} }

func errValidation(resource, field, code, message string) *issueErr {
	e := map[string]any{"resource": resource, "field": field, "code": code}
	if message != "" {
		e["message"] = message
	}
	return &issueErr{code: http.StatusUnprocessableEntity, msg: "Validation Failed", errs: []map[string]any{e}}
}

// errSchema is the 422 GitHub answers when a request body does not match
// the operation's JSON schema ("Invalid request.\n\n...").
func errSchema(detail string) *issueErr {
	return &issueErr{code: http.StatusUnprocessableEntity, msg: "Invalid request.\n\n" + detail}
}

func errForbidden(msg string) *issueErr { return &issueErr{code: http.StatusForbidden, msg: msg} }

func errBodyTooLong(resource string) *issueErr {
	return errValidation(resource, "body", "custom", fmt.Sprintf("body is too long (maximum is %d characters)", maxBodyChars))
}

// Roles, lowest first.
var roleRank = map[string]int{"read": 1, "triage": 2, "write": 3, "maintain": 4, "admin": 5}

// roleLocked is a user's role on a repository ("" for none): the owner
// account is admin, the App's bot acts with the App's permissions (issues:
// write), everyone else has the role SetRole gave them.
func (s *Sim) roleLocked(repo *Repo, u *User) string {
	switch {
	case u == nil:
		return ""
	case u == s.bot:
		return "write"
	case strings.EqualFold(u.Login, repo.Owner.Login):
		return "admin"
	}
	return repo.Collaborators[strings.ToLower(u.Login)]
}

// mayLocked reports whether u has at least role on repo. Anyone may read a
// public repository.
func (s *Sim) mayLocked(repo *Repo, u *User, role string) bool {
	have := s.roleLocked(repo, u)
	if have == "" && !repo.Private {
		have = "read"
	}
	return roleRank[have] >= roleRank[role]
}

func (s *Sim) requireLocked(repo *Repo, u *User, role, what string) *issueErr {
	if s.mayLocked(repo, u, role) {
		return nil
	}
	return errForbidden(fmt.Sprintf("%s needs %s access to %s to %s", u.Login, role, repo.FullName, what))
}

// issueLocked finds issue n: 404 when missing, 410 when deleted.
func (s *Sim) issueLocked(repo *Repo, n int) (*Issue, *issueErr) {
	i := repo.Issues[n]
	if i == nil {
		return nil, errNotFound()
	}
	if i.Deleted {
		return nil, errIssueGone()
	}
	if i.Repo == nil {
		i.Repo = repo
	}
	return i, nil
}

// issueParam resolves {issue_number}.
func (s *Sim) issueParam(r *http.Request) (*Issue, *issueErr) {
	n, ok := intParam(r, "issue_number")
	if !ok || n > 1<<31 {
		return nil, errNotFound()
	}
	return s.issueLocked(repoOf(r), int(n))
}

// emitIssueLocked sends issues.<action> (pull_request.<action> for a pull
// request) with the issue as it is now.
func (s *Sim) emitIssueLocked(repo *Repo, i *Issue, action string, sender *User, extra map[string]any) {
	if repo.Install == nil {
		return
	}
	body := map[string]any{}
	for k, v := range extra {
		body[k] = v
	}
	if i.IsPull {
		body["number"] = i.Number
		body["pull_request"] = s.pullForIssueEventLocked(repo, i)
		s.emitLocked("pull_request", action, nil, repo, sender, body)
		return
	}
	body["issue"] = s.issueJSON(repo, i)
	s.emitLocked("issues", action, nil, repo, sender, body)
}

// pullForIssueEventLocked renders the pull_request object of the
// pull_request webhooks that Issues-API changes to a pull request cause
// (labels, title, body, state), with the pull-request side's renderer.
func (s *Sim) pullForIssueEventLocked(repo *Repo, i *Issue) map[string]any {
	if p := repo.Pulls[i.Number]; p != nil {
		return s.pullJSON(repo, p, true, false)
	}
	m := s.issueJSON(repo, i)
	delete(m, "pull_request")
	m["url"] = fmt.Sprintf("%s/repos/%s/pulls/%d", apiBase, repo.FullName, i.Number)
	return m
}

func (s *Sim) recordEventLocked(i *Issue, e *IssueEvent) {
	e.ID = s.newID()
	if e.CreatedAt.IsZero() {
		e.CreatedAt = s.now()
	}
	e.ViaApp = e.Actor == s.bot
	i.Events = append(i.Events, e)
}

func labelCopy(l *Label) *Label { return &Label{ID: l.ID, Name: l.Name, Color: l.Color} }

// createIssueLocked opens an issue as by, with labels (created when the
// repository lacks them): issues.opened, then issues.labeled per label.
func (s *Sim) createIssueLocked(repo *Repo, by *User, title, body string, labels []string) (*Issue, *issueErr) {
	if strings.TrimSpace(title) == "" {
		return nil, errValidation("Issue", "title", "missing_field", "")
	}
	if utf8.RuneCountInString(body) > maxBodyChars {
		return nil, errBodyTooLong("Issue")
	}
	if e := checkLabelNames(labels); e != nil {
		return nil, e
	}
	now := s.now()
	repo.lastNumber++
	i := &Issue{ID: s.newID(), Number: repo.lastNumber, Title: title, Body: body, User: by, State: "open",
		CreatedAt: now, UpdatedAt: now, ViaApp: by == s.bot, Repo: repo}
	repo.Issues[i.Number] = i
	var added []*Label
	for _, name := range labels {
		l := s.ensureLabelLocked(repo, name, by)
		if !hasLabel(i, l) {
			i.Labels = append(i.Labels, l)
			added = append(added, l)
		}
	}
	sortLabels(i.Labels)
	for _, l := range added {
		s.recordEventLocked(i, &IssueEvent{Event: "labeled", Actor: by, Label: labelCopy(l), CreatedAt: now})
	}
	s.emitIssueLocked(repo, i, "opened", by, nil)
	for _, l := range added {
		s.emitIssueLocked(repo, i, "labeled", by, map[string]any{"label": s.labelJSON(repo, l)})
	}
	return i, nil
}

// issuePatch is a PATCH /issues/{n}: nil fields are left alone.
type issuePatch struct {
	Title, Body        *string
	State, StateReason *string
	Labels             *[]string
	// Assignees replaces the assignee set (logins that cannot be assigned
	// are ignored, as GitHub ignores them).
	Assignees *[]string
}

var closeReasons = map[string]bool{"completed": true, "not_planned": true, "duplicate": true}

// editIssueLocked applies a patch as by. Every change is made first, then
// the deliveries go out (edited, closed or reopened, unlabeled, labeled),
// each with the issue as it ends up, as one GitHub transaction would.
func (s *Sim) editIssueLocked(repo *Repo, i *Issue, by *User, p issuePatch) *issueErr {
	if p.Title != nil && strings.TrimSpace(*p.Title) == "" {
		return errValidation("Issue", "title", "missing_field", "")
	}
	if p.Body != nil && utf8.RuneCountInString(*p.Body) > maxBodyChars {
		return errBodyTooLong("Issue")
	}
	if p.State != nil && *p.State != "open" && *p.State != "closed" {
		return errValidation("Issue", "state", "invalid", "")
	}
	if p.StateReason != nil && *p.StateReason != "" && !closeReasons[*p.StateReason] && *p.StateReason != "reopened" {
		return errValidation("Issue", "state_reason", "invalid", "")
	}
	if p.State != nil && *p.State == "closed" && i.State == "open" && p.StateReason != nil && *p.StateReason == "reopened" {
		return errValidation("Issue", "state_reason", "invalid", "")
	}
	if p.Labels != nil {
		if e := checkLabelNames(*p.Labels); e != nil {
			return e
		}
	}
	if pr := repo.Pulls[i.Number]; i.IsPull && pr != nil {
		// A pull request's title, body and state belong to the pull-request
		// side (pull_request.edited, closed, reopened); labels stay here.
		if ge := s.editPullLocked(repo, by, pr, p.Title, p.Body, nil, p.State); ge != nil {
			return &issueErr{code: ge.Status, msg: ge.Message, errs: ge.Errors}
		}
		if p.Labels != nil {
			removed, added := s.replaceLabelsLocked(repo, i, by, *p.Labels, s.now())
			s.emitLabelChangesLocked(repo, i, by, removed, added)
		}
		if p.Assignees != nil {
			removed, added := s.replaceAssigneesLocked(repo, i, by, *p.Assignees)
			s.emitAssigneeChangesLocked(repo, i, by, removed, added)
		}
		return nil
	}
	now := s.now()
	changes := map[string]any{}
	if p.Title != nil && *p.Title != i.Title {
		changes["title"] = map[string]any{"from": i.Title}
		s.recordEventLocked(i, &IssueEvent{Event: "renamed", Actor: by, RenameFrom: i.Title, RenameTo: *p.Title, CreatedAt: now})
		i.Title = *p.Title
	}
	if p.Body != nil && *p.Body != i.Body {
		changes["body"] = map[string]any{"from": i.Body}
		i.Body = *p.Body
	}
	stateAction := ""
	if p.State != nil && *p.State != i.State {
		if *p.State == "closed" {
			reason := "completed"
			if p.StateReason != nil && *p.StateReason != "" {
				reason = *p.StateReason
			}
			i.State, i.StateReason, i.ClosedAt, i.ClosedBy = "closed", reason, &now, by
			stateAction = "closed"
		} else {
			i.State, i.StateReason, i.ClosedAt, i.ClosedBy = "open", "reopened", nil, nil
			stateAction = "reopened"
		}
		s.recordEventLocked(i, &IssueEvent{Event: stateAction, Actor: by, StateReason: i.StateReason, CreatedAt: now})
	}
	var removed, added []*Label
	if p.Labels != nil {
		removed, added = s.replaceLabelsLocked(repo, i, by, *p.Labels, now)
	}
	var unassigned, assigned []*User
	if p.Assignees != nil {
		unassigned, assigned = s.replaceAssigneesLocked(repo, i, by, *p.Assignees)
	}
	if len(changes) > 0 || stateAction != "" || len(removed) > 0 || len(added) > 0 {
		i.UpdatedAt = now
	}
	if len(changes) > 0 {
		s.emitIssueLocked(repo, i, "edited", by, map[string]any{"changes": changes})
	}
	if stateAction != "" {
		s.emitIssueLocked(repo, i, stateAction, by, nil)
		if i.Parent != nil {
			i.Parent.UpdatedAt = now
		}
	}
	s.emitLabelChangesLocked(repo, i, by, removed, added)
	s.emitAssigneeChangesLocked(repo, i, by, unassigned, assigned)
	return nil
}

// deleteIssueLocked deletes an issue (GitHub lets admins do it, in the UI
// or GraphQL): its comments go, it leaves its parent and its sub-issues,
// GET answers 410 from then on; issues.deleted carries it as it was.
func (s *Sim) deleteIssueLocked(repo *Repo, i *Issue, by *User) *issueErr {
	if i.IsPull {
		return errForbidden("pull requests cannot be deleted")
	}
	payload := s.issueJSON(repo, i)
	now := s.now()
	for _, id := range i.CommentIDs {
		delete(repo.Comments, id)
	}
	if p := i.Parent; p != nil {
		p.SubIssues = removeIssue(p.SubIssues, i)
		p.UpdatedAt = now
		i.Parent = nil
	}
	for _, c := range i.SubIssues {
		c.Parent = nil
		c.UpdatedAt = now
	}
	i.SubIssues = nil
	i.Deleted = true
	if repo.Install != nil {
		s.emitLocked("issues", "deleted", nil, repo, by, map[string]any{"issue": payload})
	}
	return nil
}

func removeIssue(list []*Issue, x *Issue) []*Issue {
	out := list[:0]
	for _, v := range list {
		if v != x {
			out = append(out, v)
		}
	}
	return out
}

// --- REST handlers ---

// rawString decodes a JSON string (or, with numbers true, a number, as
// GitHub accepts for titles).
func rawString(raw json.RawMessage, numbers bool) (string, bool) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, true
	}
	if numbers {
		var n json.Number
		if json.Unmarshal(raw, &n) == nil {
			return n.String(), true
		}
	}
	return "", false
}

func isNull(raw json.RawMessage) bool { return strings.TrimSpace(string(raw)) == "null" }

// parseSince reads ?since= (ISO 8601); bad values are a 422.
func parseSince(r *http.Request) (time.Time, *issueErr) {
	v := r.URL.Query().Get("since")
	if v == "" {
		return time.Time{}, nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02"} {
		if t, err := time.Parse(layout, v); err == nil {
			return t, nil
		}
	}
	return time.Time{}, errValidation("Issue", "since", "invalid", "")
}

func (s *Sim) listIssues(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	state := q.Get("state")
	if state == "" {
		state = "open"
	}
	if state != "open" && state != "closed" && state != "all" {
		errValidation("Issue", "state", "invalid", "").write(w)
		return
	}
	sortBy, dir := q.Get("sort"), q.Get("direction")
	if sortBy == "" {
		sortBy = "created"
	}
	if dir == "" {
		dir = "desc"
	}
	if (sortBy != "created" && sortBy != "updated" && sortBy != "comments") || (dir != "asc" && dir != "desc") {
		errValidation("Issue", "sort", "invalid", "").write(w)
		return
	}
	since, e := parseSince(r)
	if e != nil {
		e.write(w)
		return
	}
	var want []string
	for _, l := range strings.Split(q.Get("labels"), ",") {
		if l = strings.TrimSpace(l); l != "" {
			want = append(want, strings.ToLower(l))
		}
	}
	creator, assignee, milestone := q.Get("creator"), q.Get("assignee"), q.Get("milestone")
	s.mu.Lock()
	defer s.mu.Unlock()
	repo := repoOf(r)
	var list []*Issue
	for _, i := range repo.Issues {
		if i.Deleted || (state != "all" && i.State != state) || i.UpdatedAt.Before(since) {
			continue
		}
		if creator != "" && (i.User == nil || !strings.EqualFold(i.User.Login, creator)) {
			continue
		}
		// Nothing is milestoned in the simulator.
		if !hasAssignee(i, assignee) || (milestone != "" && milestone != "none") {
			continue
		}
		ok := true
		for _, l := range want {
			if repo.Labels[l] == nil || !hasLabel(i, repo.Labels[l]) {
				ok = false
			}
		}
		if ok {
			list = append(list, i)
		}
	}
	key := func(i *Issue) int64 {
		switch sortBy {
		case "updated":
			return i.UpdatedAt.UnixNano()
		case "comments":
			return int64(len(i.CommentIDs))
		}
		return i.CreatedAt.UnixNano()
	}
	sort.Slice(list, func(a, b int) bool {
		ka, kb := key(list[a]), key(list[b])
		if ka == kb {
			ka, kb = int64(list[a].Number), int64(list[b].Number)
		}
		if dir == "asc" {
			return ka < kb
		}
		return ka > kb
	})
	lo, hi := paginate(w, r, len(list))
	out := []any{}
	for _, i := range list[lo:hi] {
		out = append(out, s.issueJSON(repo, i))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Sim) createIssue(w http.ResponseWriter, r *http.Request) {
	var req map[string]json.RawMessage
	if !readJSON(w, r, &req) {
		return
	}
	raw, ok := req["title"]
	if !ok || isNull(raw) {
		errSchema(`"title" wasn't supplied.`).write(w)
		return
	}
	title, ok := rawString(raw, true)
	if !ok {
		errSchema(fmt.Sprintf("For 'properties/title', %s is not a string or integer.", raw)).write(w)
		return
	}
	var body string
	if raw, ok := req["body"]; ok && !isNull(raw) {
		if body, ok = rawString(raw, false); !ok {
			errSchema(fmt.Sprintf("For 'properties/body', %s is not a string.", raw)).write(w)
			return
		}
	}
	var labels, assignees []string
	if raw, ok := req["labels"]; ok && !isNull(raw) {
		var e *issueErr
		if labels, e = parseLabelList(raw, "labels"); e != nil {
			e.write(w)
			return
		}
	}
	if raw, ok := req["assignees"]; ok && !isNull(raw) {
		var e *issueErr
		if assignees, e = parseAssigneeList(raw, false); e != nil {
			e.write(w)
			return
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	repo, by := repoOf(r), s.actorOf(r)
	i, e := s.createIssueLocked(repo, by, title, body, labels)
	if e != nil {
		e.write(w)
		return
	}
	if len(assignees) > 0 {
		// After issues.opened and issues.labeled: issues.assigned per login.
		s.emitAssigneeChangesLocked(repo, i, by, nil, s.addAssigneesLocked(repo, i, by, assignees))
	}
	w.Header().Set("Location", issueAPI(repo, i.Number))
	writeJSON(w, http.StatusCreated, s.issueJSON(repo, i))
}

func (s *Sim) getIssue(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i, e := s.issueParam(r)
	if e != nil {
		e.write(w)
		return
	}
	writeJSON(w, http.StatusOK, s.issueJSON(repoOf(r), i))
}

func (s *Sim) patchIssue(w http.ResponseWriter, r *http.Request) {
	var req map[string]json.RawMessage
	if !readJSON(w, r, &req) {
		return
	}
	var p issuePatch
	str := func(field string, numbers bool) (*string, bool) {
		raw, ok := req[field]
		if !ok {
			return nil, true
		}
		if isNull(raw) {
			if field == "body" || field == "state_reason" {
				empty := ""
				return &empty, true
			}
			return nil, true
		}
		v, ok := rawString(raw, numbers)
		if !ok {
			errSchema(fmt.Sprintf("For 'properties/%s', %s is not a string.", field, raw)).write(w)
			return nil, false
		}
		return &v, true
	}
	var ok bool
	if p.Title, ok = str("title", true); !ok {
		return
	}
	if p.Body, ok = str("body", false); !ok {
		return
	}
	if p.State, ok = str("state", false); !ok {
		return
	}
	if p.StateReason, ok = str("state_reason", false); !ok {
		return
	}
	if raw, has := req["labels"]; has {
		names := []string{}
		if !isNull(raw) {
			var e *issueErr
			if names, e = parseLabelList(raw, "labels"); e != nil {
				e.write(w)
				return
			}
		}
		p.Labels = &names
	}
	if raw, has := req["assignees"]; has {
		logins := []string{}
		if !isNull(raw) {
			var e *issueErr
			if logins, e = parseAssigneeList(raw, false); e != nil {
				e.write(w)
				return
			}
		}
		p.Assignees = &logins
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	i, e := s.issueParam(r)
	if e != nil {
		e.write(w)
		return
	}
	repo := repoOf(r)
	if e := s.editIssueLocked(repo, i, s.actorOf(r), p); e != nil {
		e.write(w)
		return
	}
	writeJSON(w, http.StatusOK, s.issueJSON(repo, i))
}
