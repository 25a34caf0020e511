package ghsim

import (
	"net/http"
	"sort"
)

// listIssueEvents is GET /issues/{n}/events, oldest first.
func (s *Sim) listIssueEvents(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i, e := s.issueParam(r)
	if e != nil {
		e.write(w)
		return
	}
	repo := repoOf(r)
	lo, hi := paginate(w, r, len(i.Events))
	out := []any{}
	for _, ev := range i.Events[lo:hi] {
		out = append(out, s.issueEventJSON(repo, i, ev, false))
	}
	writeJSON(w, http.StatusOK, out)
}

type repoEvent struct {
	issue *Issue
	ev    *IssueEvent
}

func repoEventsLocked(repo *Repo) []repoEvent {
	var all []repoEvent
	for _, i := range repo.Issues {
		if i.Deleted {
			continue
		}
		for _, ev := range i.Events {
			all = append(all, repoEvent{i, ev})
		}
	}
	return all
}

// listRepoIssueEvents is GET /issues/events, newest first, each row with its
// issue.
func (s *Sim) listRepoIssueEvents(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	repo := repoOf(r)
	all := repoEventsLocked(repo)
	sort.Slice(all, func(a, b int) bool { return all[a].ev.ID > all[b].ev.ID })
	lo, hi := paginate(w, r, len(all))
	out := []any{}
	for _, x := range all[lo:hi] {
		out = append(out, s.issueEventJSON(repo, x.issue, x.ev, true))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Sim) getRepoIssueEvent(w http.ResponseWriter, r *http.Request) {
	id, ok := intParam(r, "event_id")
	s.mu.Lock()
	defer s.mu.Unlock()
	repo := repoOf(r)
	if ok {
		for _, x := range repoEventsLocked(repo) {
			if x.ev.ID == id {
				writeJSON(w, http.StatusOK, s.issueEventJSON(repo, x.issue, x.ev, true))
				return
			}
		}
	}
	errNotFound().write(w)
}

// listIssueTimeline is GET /issues/{n}/timeline: the issue's events and its
// comments ("commented"), oldest first.
func (s *Sim) listIssueTimeline(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i, e := s.issueParam(r)
	if e != nil {
		e.write(w)
		return
	}
	repo := repoOf(r)
	type row struct {
		id   int64
		json func() map[string]any
	}
	var rows []row
	for _, ev := range i.Events {
		ev := ev
		rows = append(rows, row{ev.ID, func() map[string]any { return s.issueEventJSON(repo, i, ev, false) }})
	}
	for _, id := range i.CommentIDs {
		c := repo.Comments[id]
		if c == nil {
			continue
		}
		rows = append(rows, row{c.ID, func() map[string]any {
			m := s.commentJSON(repo, c)
			m["event"] = "commented"
			m["actor"] = s.userJSON(c.User)
			return m
		}})
	}
	// Ids come from one counter, so they order the rows by creation.
	sort.Slice(rows, func(a, b int) bool { return rows[a].id < rows[b].id })
	lo, hi := paginate(w, r, len(rows))
	out := []any{}
	for _, x := range rows[lo:hi] {
		out = append(out, x.json())
	}
	writeJSON(w, http.StatusOK, out)
}
