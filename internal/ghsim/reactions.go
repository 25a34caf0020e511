package ghsim

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// reactLocked adds by's reaction to list: created is false (GitHub's 200)
// when by already reacted with that content. Reactions send no webhook and
// leave updated_at alone.
func (s *Sim) reactLocked(list *[]*Reaction, by *User, content string) (*Reaction, bool, *issueErr) {
	if !validReaction(content) {
		return nil, false, errValidation("Reaction", "content", "invalid", "")
	}
	for _, x := range *list {
		if x.User == by && x.Content == content {
			return x, false, nil
		}
	}
	x := &Reaction{ID: s.newID(), User: by, Content: content, CreatedAt: s.now()}
	*list = append(*list, x)
	return x, true, nil
}

func unreact(list *[]*Reaction, id int64) bool {
	for k, x := range *list {
		if x.ID == id {
			*list = append((*list)[:k:k], (*list)[k+1:]...)
			return true
		}
	}
	return false
}

// reactionTarget resolves the issue or comment of a reactions route.
func (s *Sim) reactionTarget(r *http.Request) (*[]*Reaction, *issueErr) {
	if _, ok := intParam(r, "comment_id"); ok {
		c, e := commentParam(r)
		if e != nil {
			return nil, e
		}
		return &c.Reactions, nil
	}
	i, e := s.issueParam(r)
	if e != nil {
		return nil, e
	}
	return &i.Reactions, nil
}

func (s *Sim) listReactions(w http.ResponseWriter, r *http.Request) {
	content := r.URL.Query().Get("content")
	if content != "" && !validReaction(content) {
		errValidation("Reaction", "content", "invalid", "").write(w)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	list, e := s.reactionTarget(r)
	if e != nil {
		e.write(w)
		return
	}
	var rs []*Reaction
	for _, x := range *list {
		if content == "" || x.Content == content {
			rs = append(rs, x)
		}
	}
	lo, hi := paginate(w, r, len(rs))
	out := []any{}
	for _, x := range rs[lo:hi] {
		out = append(out, s.reactionJSON(x))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Sim) createReaction(w http.ResponseWriter, r *http.Request) {
	var req map[string]json.RawMessage
	if !readJSON(w, r, &req) {
		return
	}
	raw, ok := req["content"]
	if !ok || isNull(raw) {
		errSchema(`"content" wasn't supplied.`).write(w)
		return
	}
	content, ok := rawString(raw, false)
	if !ok {
		errSchema(fmt.Sprintf("For 'properties/content', %s is not a string.", raw)).write(w)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	list, e := s.reactionTarget(r)
	if e != nil {
		e.write(w)
		return
	}
	x, created, e := s.reactLocked(list, s.actorOf(r), content)
	if e != nil {
		e.write(w)
		return
	}
	code := http.StatusOK
	if created {
		code = http.StatusCreated
	}
	writeJSON(w, code, s.reactionJSON(x))
}

func (s *Sim) deleteReaction(w http.ResponseWriter, r *http.Request) {
	id, ok := intParam(r, "reaction_id")
	s.mu.Lock()
	defer s.mu.Unlock()
	list, e := s.reactionTarget(r)
	if e != nil {
		e.write(w)
		return
	}
	if !ok || !unreact(list, id) {
		errNotFound().write(w)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
