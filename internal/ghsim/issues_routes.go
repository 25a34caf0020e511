package ghsim

import "github.com/go-chi/chi/v5"

// issueRoutes serves issues, labels, comments, events, reactions,
// collaborators and sub-issues (under /repos/{owner}/{repo}).
//
// Label names arrive path-escaped ("needs%2Ftriage"): chi routes on the
// escaped path when the request has one, so {name} holds one segment, and
// labelNameParam unescapes it.
func (s *Sim) issueRoutes(r chi.Router) {
	r.Get("/issues", s.listIssues)
	r.Post("/issues", s.createIssue)

	r.Get("/issues/comments", s.listRepoComments)
	r.Get("/issues/comments/{comment_id}", s.getComment)
	r.Patch("/issues/comments/{comment_id}", s.patchComment)
	r.Delete("/issues/comments/{comment_id}", s.deleteComment)
	r.Get("/issues/comments/{comment_id}/reactions", s.listReactions)
	r.Post("/issues/comments/{comment_id}/reactions", s.createReaction)
	r.Delete("/issues/comments/{comment_id}/reactions/{reaction_id}", s.deleteReaction)

	r.Get("/issues/events", s.listRepoIssueEvents)
	r.Get("/issues/events/{event_id}", s.getRepoIssueEvent)

	r.Get("/issues/{issue_number}", s.getIssue)
	r.Patch("/issues/{issue_number}", s.patchIssue)
	r.Get("/issues/{issue_number}/comments", s.listIssueComments)
	r.Post("/issues/{issue_number}/comments", s.createIssueComment)
	r.Get("/issues/{issue_number}/events", s.listIssueEvents)
	r.Get("/issues/{issue_number}/timeline", s.listIssueTimeline)
	r.Post("/issues/{issue_number}/assignees", s.addAssignees)
	r.Delete("/issues/{issue_number}/assignees", s.removeAssignees)

	r.Get("/issues/{issue_number}/labels", s.listIssueLabels)
	r.Post("/issues/{issue_number}/labels", s.addIssueLabels)
	r.Put("/issues/{issue_number}/labels", s.setIssueLabels)
	r.Delete("/issues/{issue_number}/labels", s.removeAllIssueLabels)
	r.Delete("/issues/{issue_number}/labels/{name}", s.removeIssueLabel)

	r.Get("/issues/{issue_number}/reactions", s.listReactions)
	r.Post("/issues/{issue_number}/reactions", s.createReaction)
	r.Delete("/issues/{issue_number}/reactions/{reaction_id}", s.deleteReaction)

	r.Get("/issues/{issue_number}/sub_issues", s.listSubIssues)
	r.Post("/issues/{issue_number}/sub_issues", s.addSubIssue)
	r.Patch("/issues/{issue_number}/sub_issues/priority", s.reprioritizeSubIssue)
	r.Delete("/issues/{issue_number}/sub_issue", s.removeSubIssue)
	r.Get("/issues/{issue_number}/parent", s.getParentIssue)

	r.Get("/labels", s.listRepoLabels)
	r.Post("/labels", s.createRepoLabel)
	r.Get("/labels/{name}", s.getRepoLabel)
	r.Patch("/labels/{name}", s.patchRepoLabel)
	r.Delete("/labels/{name}", s.deleteRepoLabel)

	r.Get("/collaborators/{username}", s.checkCollaborator)
	r.Get("/collaborators/{username}/permission", s.getCollaboratorPermission)
}
