package harness

import (
	"slices"
	"strings"
)

// Comment is a copy of one of an issue's comments in the simulator, with
// the reactions on it ("login:content").
type Comment struct {
	ID        int64
	Login     string
	Body      string
	Reactions []string
}

// Comments returns the issue's comments, oldest first (read under the
// simulator's lock).
func (e *Env) Comments(n int) []Comment {
	var out []Comment
	e.Sim.Locked(func() {
		i := e.Repo.Issues[n]
		if i == nil {
			return
		}
		for _, id := range i.CommentIDs {
			c := e.Repo.Comments[id]
			if c == nil {
				continue
			}
			cc := Comment{ID: c.ID, Login: c.User.Login, Body: c.Body}
			for _, r := range c.Reactions {
				cc.Reactions = append(cc.Reactions, r.User.Login+":"+r.Content)
			}
			out = append(out, cc)
		}
	})
	return out
}

// WardenComment returns the last of warden's comments on the issue whose
// body starts with prefix.
func (e *Env) WardenComment(n int, prefix string) (Comment, bool) {
	cs := e.Comments(n)
	for i := len(cs) - 1; i >= 0; i-- {
		if cs[i].Login == e.Sim.BotLogin() && strings.HasPrefix(cs[i].Body, prefix) {
			return cs[i], true
		}
	}
	return Comment{}, false
}

// WardenReactions returns warden's reactions on a comment of the issue.
func (e *Env) WardenReactions(n int, commentID int64) []string {
	for _, c := range e.Comments(n) {
		if c.ID != commentID {
			continue
		}
		var out []string
		for _, r := range c.Reactions {
			if login, content, _ := strings.Cut(r, ":"); login == e.Sim.BotLogin() {
				out = append(out, content)
			}
		}
		return out
	}
	return nil
}

// Labels returns the issue's labels, sorted.
func (e *Env) Labels(n int) []string {
	var out []string
	e.Sim.Locked(func() {
		if i := e.Repo.Issues[n]; i != nil {
			for _, l := range i.Labels {
				out = append(out, l.Name)
			}
		}
	})
	slices.Sort(out)
	return out
}
