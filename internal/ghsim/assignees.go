package ghsim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// Assignees, as GitHub keeps them: an issue (or pull request) has at most
// maxAssignees of them, in the order they were added. A login that cannot be
// assigned — an unknown account, one without write access to the
// repository, the App's own bot — is silently ignored, as GitHub ignores it
// (no error, no delivery); so is a login beyond the tenth. GitHub's coding
// agent is assignable on every repository, under either of the logins GitHub
// accepts for it (CodingAgentLogin, CodingAgentAccount); whether it then
// acts on the assignment is Sim.EnableCodingAgent's business
// (codingagent.go).
//
// Every change is made first, then the deliveries go out: one
// issues.assigned (pull_request.assigned for a pull request) per login
// added, one issues.unassigned per login removed, each with `assignee` (the
// user) and the issue as it ends up, the sender being whoever did it.

// maxAssignees is GitHub's limit on assignees per issue.
const maxAssignees = 10

// assignableLocked is the account login names if it can be assigned on repo,
// else nil.
func (s *Sim) assignableLocked(repo *Repo, login string) *User {
	if isCodingAgentLogin(login) {
		return s.codingAgentUserLocked()
	}
	u := s.userLocked(login)
	if u == nil || u == s.bot || u.Type == TypeOrg {
		return nil
	}
	if roleRank[s.roleLocked(repo, u)] < roleRank["write"] {
		return nil
	}
	return u
}

// assigneeIndex is the position of u among i's assignees, or -1.
func assigneeIndex(i *Issue, u *User) int {
	for k, a := range i.Assignees {
		if a == u {
			return k
		}
	}
	return -1
}

// addAssigneesLocked adds the assignable logins i lacks, up to the limit,
// records an assigned event for each, and returns the users added (no
// deliveries: emitAssigneeChangesLocked sends them).
func (s *Sim) addAssigneesLocked(repo *Repo, i *Issue, by *User, logins []string) []*User {
	var added []*User
	for _, l := range logins {
		u := s.assignableLocked(repo, l)
		if u == nil || assigneeIndex(i, u) >= 0 || len(i.Assignees) >= maxAssignees {
			continue
		}
		i.Assignees = append(i.Assignees, u)
		added = append(added, u)
		s.recordEventLocked(i, &IssueEvent{Event: "assigned", Actor: by, Assignee: u})
	}
	if len(added) > 0 {
		i.UpdatedAt = s.now()
	}
	return added
}

// removeAssigneesLocked removes the named assignees (logins i does not have
// are ignored), records an unassigned event for each, and returns the users
// removed.
func (s *Sim) removeAssigneesLocked(repo *Repo, i *Issue, by *User, logins []string) []*User {
	var removed []*User
	for _, l := range logins {
		u := s.userLocked(l)
		if isCodingAgentLogin(l) {
			u = s.codingAgentUserLocked()
		}
		k := -1
		if u != nil {
			k = assigneeIndex(i, u)
		}
		if k < 0 {
			continue
		}
		i.Assignees = append(i.Assignees[:k:k], i.Assignees[k+1:]...)
		removed = append(removed, u)
		s.recordEventLocked(i, &IssueEvent{Event: "unassigned", Actor: by, Assignee: u})
	}
	if len(removed) > 0 {
		i.UpdatedAt = s.now()
	}
	return removed
}

// replaceAssigneesLocked makes the assignable logins i's assignee set (PATCH
// /issues/{n} with assignees): the ones not named go, the new ones come.
func (s *Sim) replaceAssigneesLocked(repo *Repo, i *Issue, by *User, logins []string) (removed, added []*User) {
	keep := map[*User]bool{}
	for _, l := range logins {
		if u := s.assignableLocked(repo, l); u != nil {
			keep[u] = true
		}
	}
	var drop []string
	for _, a := range i.Assignees {
		if !keep[a] {
			drop = append(drop, a.Login)
		}
	}
	removed = s.removeAssigneesLocked(repo, i, by, drop)
	added = s.addAssigneesLocked(repo, i, by, logins)
	return removed, added
}

// emitAssigneeChangesLocked sends issues.unassigned per user removed, then
// issues.assigned per user added (pull_request.* for a pull request), and
// lets the coding agent react to its own assignment or unassignment.
func (s *Sim) emitAssigneeChangesLocked(repo *Repo, i *Issue, by *User, removed, added []*User) {
	for _, u := range removed {
		s.emitIssueLocked(repo, i, "unassigned", by, map[string]any{"assignee": s.userJSON(u)})
	}
	for _, u := range added {
		s.emitIssueLocked(repo, i, "assigned", by, map[string]any{"assignee": s.userJSON(u)})
	}
	s.codingAgentReactLocked(repo, i, by, removed, added)
}

// assigneesJSON renders an issue's assignee (the first, or null) and
// assignees into m.
func (s *Sim) assigneesJSON(i *Issue, m map[string]any) {
	list := make([]any, 0, len(i.Assignees))
	for _, u := range i.Assignees {
		list = append(list, s.userJSON(u))
	}
	m["assignees"] = list
	m["assignee"] = nil
	if len(i.Assignees) > 0 {
		m["assignee"] = s.userJSON(i.Assignees[0])
	}
}

// hasAssignee reports whether i is assigned to login (any case); "*" asks
// for any assignee and "none" for none, as ?assignee= does.
func hasAssignee(i *Issue, login string) bool {
	switch login {
	case "":
		return true
	case "*":
		return len(i.Assignees) > 0
	case "none":
		return len(i.Assignees) == 0
	}
	for _, a := range i.Assignees {
		if strings.EqualFold(a.Login, login) || (a.Login == CodingAgentLogin && isCodingAgentLogin(login)) {
			return true
		}
	}
	return false
}

// parseAssigneeList reads an assignees array: logins, or objects with a
// login (the form the REST description also allows for POST).
func parseAssigneeList(raw json.RawMessage, objects bool) ([]string, *issueErr) {
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, errSchema(fmt.Sprintf("For 'properties/assignees', %s is not an array.", raw))
	}
	logins := make([]string, 0, len(items))
	for _, it := range items {
		var l string
		if json.Unmarshal(it, &l) == nil {
			logins = append(logins, l)
			continue
		}
		var obj struct {
			Login *string `json:"login"`
		}
		if !objects || json.Unmarshal(it, &obj) != nil || obj.Login == nil {
			return nil, errSchema(fmt.Sprintf("For 'items', %s is not a string.", it))
		}
		logins = append(logins, *obj.Login)
	}
	return logins, nil
}

// readAssignees reads {"assignees": [...]}; required is DELETE's rule.
func readAssignees(w http.ResponseWriter, r *http.Request, required, objects bool) ([]string, bool) {
	var req map[string]json.RawMessage
	if !readJSON(w, r, &req) {
		return nil, false
	}
	raw, ok := req["assignees"]
	if !ok || isNull(raw) {
		if required {
			errSchema(`"assignees" wasn't supplied.`).write(w)
			return nil, false
		}
		return nil, true
	}
	logins, e := parseAssigneeList(raw, objects)
	if e != nil {
		e.write(w)
		return nil, false
	}
	return logins, true
}

// changeAssignees serves POST and DELETE /issues/{n}/assignees. Without
// push access the caller's assignees are silently ignored, as the REST
// description says; the answer is the issue either way.
func (s *Sim) changeAssignees(w http.ResponseWriter, r *http.Request, add bool) {
	logins, ok := readAssignees(w, r, !add, add)
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
	repo, by := repoOf(r), s.actorOf(r)
	if s.mayLocked(repo, by, "write") {
		var removed, added []*User
		if add {
			added = s.addAssigneesLocked(repo, i, by, logins)
		} else {
			removed = s.removeAssigneesLocked(repo, i, by, logins)
		}
		s.emitAssigneeChangesLocked(repo, i, by, removed, added)
	}
	status := http.StatusOK
	if add {
		status = http.StatusCreated
	}
	writeJSON(w, status, s.issueJSON(repo, i))
}

func (s *Sim) addAssignees(w http.ResponseWriter, r *http.Request) { s.changeAssignees(w, r, true) }

func (s *Sim) removeAssignees(w http.ResponseWriter, r *http.Request) { s.changeAssignees(w, r, false) }

// Assign assigns logins to an issue or pull request, as a person does from
// the sidebar (triage or more): issues.assigned (pull_request.assigned) per
// login added. Logins that cannot be assigned are ignored, as GitHub
// ignores them; the returned issue shows who ended up assigned.
func (a *Actor) Assign(repo *Repo, number int, logins ...string) (*Issue, error) {
	return a.assigning(repo, number, func(i *Issue) (removed, added []*User) {
		return nil, a.s.addAssigneesLocked(repo, i, a.user, logins)
	})
}

// Unassign removes assignees from an issue or pull request (triage or
// more): issues.unassigned (pull_request.unassigned) per login removed.
// Logins that are not assigned are ignored.
func (a *Actor) Unassign(repo *Repo, number int, logins ...string) (*Issue, error) {
	return a.assigning(repo, number, func(i *Issue) (removed, added []*User) {
		return a.s.removeAssigneesLocked(repo, i, a.user, logins), nil
	})
}

func (a *Actor) assigning(repo *Repo, number int, f func(i *Issue) (removed, added []*User)) (*Issue, error) {
	a.s.mu.Lock()
	defer a.s.mu.Unlock()
	i, err := a.issue(repo, number)
	if err != nil {
		return nil, err
	}
	if e := a.s.requireLocked(repo, a.user, "triage", "assign issues"); e != nil {
		return nil, e
	}
	removed, added := f(i)
	a.s.emitAssigneeChangesLocked(repo, i, a.user, removed, added)
	return i, nil
}
