package ghsim

import (
	"fmt"
	"net/url"
	"sort"
	"strings"
)

// Renderers for the issue side: issues (and the issue form of pull
// requests), labels, comments, issue events, reactions. Like render.go they
// emit every field GitHub's OpenAPI description marks required, with null
// where GitHub has nothing, and run under s.mu.

// reactionContents are the reactions GitHub accepts, in rollup order.
var reactionContents = []string{"+1", "-1", "laugh", "hooray", "confused", "heart", "rocket", "eyes"}

func validReaction(c string) bool {
	for _, v := range reactionContents {
		if v == c {
			return true
		}
	}
	return false
}

// nullable renders "" as JSON null.
func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// issueRepoLocked is the repository an issue belongs to.
func (s *Sim) issueRepoLocked(i *Issue) *Repo {
	if i.Repo != nil {
		return i.Repo
	}
	for _, r := range s.repos {
		if r.Issues[i.Number] == i {
			i.Repo = r
			return r
		}
	}
	return nil
}

func issueAPI(repo *Repo, n int) string {
	return fmt.Sprintf("%s/repos/%s/issues/%d", apiBase, repo.FullName, n)
}

func issueHTML(repo *Repo, i *Issue) string {
	kind := "issues"
	if i.IsPull {
		kind = "pull"
	}
	return fmt.Sprintf("%s/%s/%s/%d", webBase, repo.FullName, kind, i.Number)
}

// performedVia is the App object for an act the App performed, else null.
func (s *Sim) performedVia(viaApp bool) any {
	if !viaApp {
		return nil
	}
	return s.appJSON()
}

// associationLocked is a user's author_association with a repository.
func (s *Sim) associationLocked(repo *Repo, u *User) string {
	if u == nil {
		return "NONE"
	}
	if strings.EqualFold(u.Login, repo.Owner.Login) {
		return "OWNER"
	}
	if repo.Collaborators[strings.ToLower(u.Login)] != "" {
		return "COLLABORATOR"
	}
	return "NONE"
}

func (s *Sim) labelJSON(repo *Repo, l *Label) map[string]any {
	return map[string]any{
		"id": l.ID, "node_id": nodeID("LA", l.ID), "url": apiBase + "/repos/" + repo.FullName + "/labels/" + url.PathEscape(l.Name),
		"name": l.Name, "color": l.Color, "default": l.Default, "description": nullable(l.Description),
	}
}

func (s *Sim) labelsJSON(repo *Repo, ls []*Label) []any {
	out := make([]any, 0, len(ls))
	for _, l := range ls {
		out = append(out, s.labelJSON(repo, l))
	}
	return out
}

func reactionRollup(api string, rs []*Reaction) map[string]any {
	m := map[string]any{"url": api + "/reactions", "total_count": len(rs)}
	for _, c := range reactionContents {
		m[c] = 0
	}
	for _, r := range rs {
		m[r.Content] = m[r.Content].(int) + 1
	}
	return m
}

// subIssuesSummary counts an issue's sub-issues; closed ones are completed.
func subIssuesSummary(i *Issue) map[string]any {
	total, done := 0, 0
	for _, c := range i.SubIssues {
		total++
		if c.State == "closed" {
			done++
		}
	}
	pct := 0
	if total > 0 {
		pct = done * 100 / total
	}
	return map[string]any{"total": total, "completed": done, "percent_completed": pct}
}

// issueJSON renders an issue, or the issue form of a pull request (with its
// pull_request key), as REST and webhooks return it.
func (s *Sim) issueJSON(repo *Repo, i *Issue) map[string]any {
	if repo == nil {
		repo = s.issueRepoLocked(i)
	}
	api := issueAPI(repo, i.Number)
	var closedBy any
	if i.ClosedBy != nil && i.State == "closed" {
		closedBy = s.userJSON(i.ClosedBy)
	}
	var body any
	if i.Body != "" {
		body = i.Body
	}
	var parentURL any
	if i.Parent != nil {
		parentURL = issueAPI(s.issueRepoLocked(i.Parent), i.Parent.Number)
	}
	m := map[string]any{
		"id": i.ID, "node_id": nodeID("IS", i.ID), "url": api, "repository_url": apiBase + "/repos/" + repo.FullName,
		"labels_url": api + "/labels{/name}", "comments_url": api + "/comments", "events_url": api + "/events",
		"html_url": issueHTML(repo, i), "timeline_url": api + "/timeline",
		"number": i.Number, "state": i.State, "state_reason": nullable(i.StateReason), "title": i.Title, "body": body,
		"user": s.userJSON(i.User), "labels": s.labelsJSON(repo, i.Labels),
		"milestone": nil, "locked": i.Locked, "active_lock_reason": nil,
		"comments": len(i.CommentIDs), "created_at": ts(i.CreatedAt), "updated_at": ts(i.UpdatedAt),
		"closed_at": tsPtr(i.ClosedAt), "closed_by": closedBy, "author_association": s.associationLocked(repo, i.User),
		"reactions": reactionRollup(api, i.Reactions), "performed_via_github_app": s.performedVia(i.ViaApp),
		"sub_issues_summary": subIssuesSummary(i), "parent_issue_url": parentURL, "type": nil, "pinned_comment": nil,
	}
	s.assigneesJSON(i, m)
	if i.IsPull {
		pr := map[string]any{
			"url": apiBase + "/repos/" + repo.FullName + fmt.Sprintf("/pulls/%d", i.Number), "html_url": issueHTML(repo, i),
			"diff_url": issueHTML(repo, i) + ".diff", "patch_url": issueHTML(repo, i) + ".patch", "merged_at": nil,
		}
		if p := repo.Pulls[i.Number]; p != nil {
			pr["merged_at"] = tsPtr(p.MergedAt)
			m["draft"] = p.Draft
		}
		m["pull_request"] = pr
	}
	return m
}

func (s *Sim) commentJSON(repo *Repo, c *Comment) map[string]any {
	api := fmt.Sprintf("%s/repos/%s/issues/comments/%d", apiBase, repo.FullName, c.ID)
	return map[string]any{
		"id": c.ID, "node_id": nodeID("IC", c.ID), "url": api,
		"html_url":  fmt.Sprintf("%s#issuecomment-%d", issueHTML(repo, c.Issue), c.ID),
		"issue_url": issueAPI(repo, c.Issue.Number), "body": c.Body, "user": s.userJSON(c.User),
		"created_at": ts(c.CreatedAt), "updated_at": ts(c.UpdatedAt),
		"author_association":       s.associationLocked(repo, c.User),
		"performed_via_github_app": s.performedVia(c.ViaApp), "reactions": reactionRollup(api, c.Reactions),
	}
}

func (s *Sim) reactionJSON(r *Reaction) map[string]any {
	return map[string]any{"id": r.ID, "node_id": nodeID("RE", r.ID), "user": s.userJSON(r.User),
		"content": r.Content, "created_at": ts(r.CreatedAt)}
}

// issueEventJSON renders a row of GET /issues/{n}/events (withIssue adds
// the issue, as the repository-wide list does).
func (s *Sim) issueEventJSON(repo *Repo, i *Issue, e *IssueEvent, withIssue bool) map[string]any {
	m := map[string]any{
		"id": e.ID, "node_id": nodeID("IE", e.ID), "url": fmt.Sprintf("%s/repos/%s/issues/events/%d", apiBase, repo.FullName, e.ID),
		"actor": s.userJSON(e.Actor), "event": e.Event, "commit_id": nullable(e.CommitID), "commit_url": nil,
		"created_at": ts(e.CreatedAt), "performed_via_github_app": s.performedVia(e.ViaApp),
	}
	if e.CommitID != "" {
		m["commit_url"] = fmt.Sprintf("%s/repos/%s/commits/%s", apiBase, repo.FullName, e.CommitID)
	}
	switch e.Event {
	case "labeled", "unlabeled":
		if e.Label != nil {
			m["label"] = map[string]any{"name": e.Label.Name, "color": e.Label.Color}
		}
	case "renamed":
		m["rename"] = map[string]any{"from": e.RenameFrom, "to": e.RenameTo}
	case "closed", "reopened":
		m["state_reason"] = nullable(e.StateReason)
	case "assigned", "unassigned":
		m["assignee"] = s.userJSON(e.Assignee)
		m["assigner"] = s.userJSON(e.Actor)
	}
	if withIssue {
		m["issue"] = s.issueJSON(repo, i)
	}
	return m
}

// sortLabels orders labels by name, case-insensitively, as GitHub lists
// them.
func sortLabels(ls []*Label) {
	sort.SliceStable(ls, func(a, b int) bool {
		x, y := strings.ToLower(ls[a].Name), strings.ToLower(ls[b].Name)
		if x != y {
			return x < y
		}
		return ls[a].Name < ls[b].Name
	})
}
