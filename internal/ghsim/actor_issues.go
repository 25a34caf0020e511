package ghsim

import "errors"

// Issue-side acts of a person. Each runs as one GitHub transaction with the
// deliveries GitHub sends, with the actor as sender and as the actor of the
// issue events it records. Permissions are GitHub's: reading (commenting,
// reacting, opening issues) needs access to the repository (anyone, for a
// public one); labels, sub-issues and editing or closing someone else's
// issue need triage or more; editing or deleting someone else's comment and
// managing labels need write; deleting an issue needs admin. Labels given
// when opening an issue are dropped silently without push (write) access, as
// GitHub drops them. Give roles with Sim.SetRole; the owner account is admin.
//
// The objects returned are the simulator's own: read them under Sim.Locked
// while requests may be changing them.

var errNoRepo = errors.New("ghsim: nil repository")

func (a *Actor) issue(repo *Repo, number int) (*Issue, error) {
	if repo == nil {
		return nil, errNoRepo
	}
	i, e := a.s.issueLocked(repo, number)
	return i, asError(e)
}

// mayEditLocked: the issue's author, or triage and more.
func (a *Actor) mayEditLocked(repo *Repo, i *Issue, what string) error {
	if i.User == a.user && a.s.mayLocked(repo, a.user, "read") {
		return nil
	}
	return asError(a.s.requireLocked(repo, a.user, "triage", what))
}

// OpenIssue opens an issue: issues.opened, then issues.labeled per label
// (labels the repository lacks are created).
func (a *Actor) OpenIssue(repo *Repo, title, body string, labels ...string) (*Issue, error) {
	if repo == nil {
		return nil, errNoRepo
	}
	a.s.mu.Lock()
	defer a.s.mu.Unlock()
	if e := a.s.requireLocked(repo, a.user, "read", "open issues"); e != nil {
		return nil, e
	}
	if !a.s.mayLocked(repo, a.user, "write") {
		labels = nil
	}
	i, e := a.s.createIssueLocked(repo, a.user, title, body, labels)
	if e != nil {
		return nil, e
	}
	return i, nil
}

// EditIssue changes the title and/or body (nil leaves one alone):
// issues.edited with changes.
func (a *Actor) EditIssue(repo *Repo, number int, title, body *string) (*Issue, error) {
	return a.patch(repo, number, "edit issues", issuePatch{Title: title, Body: body})
}

// CloseIssue closes an issue with reason completed (the default, for ""),
// not_planned or duplicate: issues.closed.
func (a *Actor) CloseIssue(repo *Repo, number int, reason string) (*Issue, error) {
	st := "closed"
	return a.patch(repo, number, "close issues", issuePatch{State: &st, StateReason: &reason})
}

// ReopenIssue reopens an issue: issues.reopened.
func (a *Actor) ReopenIssue(repo *Repo, number int) (*Issue, error) {
	st := "open"
	return a.patch(repo, number, "reopen issues", issuePatch{State: &st})
}

func (a *Actor) patch(repo *Repo, number int, what string, p issuePatch) (*Issue, error) {
	a.s.mu.Lock()
	defer a.s.mu.Unlock()
	i, err := a.issue(repo, number)
	if err != nil {
		return nil, err
	}
	if err := a.mayEditLocked(repo, i, what); err != nil {
		return nil, err
	}
	if e := a.s.editIssueLocked(repo, i, a.user, p); e != nil {
		return nil, e
	}
	return i, nil
}

// DeleteIssue deletes an issue (admins only): issues.deleted; the REST API
// answers 410 for it from then on.
func (a *Actor) DeleteIssue(repo *Repo, number int) error {
	a.s.mu.Lock()
	defer a.s.mu.Unlock()
	i, err := a.issue(repo, number)
	if err != nil {
		return err
	}
	if e := a.s.requireLocked(repo, a.user, "admin", "delete issues"); e != nil {
		return e
	}
	return asError(a.s.deleteIssueLocked(repo, i, a.user))
}

func (a *Actor) labeling(repo *Repo, number int, f func(i *Issue) *issueErr) (*Issue, error) {
	a.s.mu.Lock()
	defer a.s.mu.Unlock()
	i, err := a.issue(repo, number)
	if err != nil {
		return nil, err
	}
	if e := a.s.requireLocked(repo, a.user, "triage", "label issues"); e != nil {
		return nil, e
	}
	if e := f(i); e != nil {
		return nil, e
	}
	return i, nil
}

// AddLabels adds labels (created when missing): issues.labeled per label the
// issue did not have.
func (a *Actor) AddLabels(repo *Repo, number int, names ...string) (*Issue, error) {
	return a.labeling(repo, number, func(i *Issue) *issueErr {
		if e := checkLabelNames(names); e != nil {
			return e
		}
		a.s.addLabelsLocked(repo, i, a.user, names)
		return nil
	})
}

// RemoveLabel removes a label (any case): issues.unlabeled. An error (404
// "Label does not exist") when the issue lacks it.
func (a *Actor) RemoveLabel(repo *Repo, number int, name string) (*Issue, error) {
	return a.labeling(repo, number, func(i *Issue) *issueErr {
		return a.s.removeLabelLocked(repo, i, a.user, name)
	})
}

// SetLabels replaces the issue's labels: issues.unlabeled per label removed,
// then issues.labeled per label added.
func (a *Actor) SetLabels(repo *Repo, number int, names ...string) (*Issue, error) {
	return a.labeling(repo, number, func(i *Issue) *issueErr {
		if e := checkLabelNames(names); e != nil {
			return e
		}
		a.s.setLabelsLocked(repo, i, a.user, names)
		return nil
	})
}

// Comment comments on an issue or pull request: issue_comment.created.
func (a *Actor) Comment(repo *Repo, number int, body string) (*Comment, error) {
	a.s.mu.Lock()
	defer a.s.mu.Unlock()
	i, err := a.issue(repo, number)
	if err != nil {
		return nil, err
	}
	if e := a.s.requireLocked(repo, a.user, "read", "comment"); e != nil {
		return nil, e
	}
	c, e := a.s.createCommentLocked(repo, i, a.user, body)
	if e != nil {
		return nil, e
	}
	return c, nil
}

func (a *Actor) comment(repo *Repo, id int64, what string) (*Comment, error) {
	if repo == nil {
		return nil, errNoRepo
	}
	c, e := commentLocked(repo, id)
	if e != nil {
		return nil, e
	}
	if c.User != a.user {
		if e := a.s.requireLocked(repo, a.user, "write", what); e != nil {
			return nil, e
		}
	}
	return c, nil
}

// EditComment replaces a comment's body: issue_comment.edited with
// changes.body.from holding the previous body.
func (a *Actor) EditComment(repo *Repo, commentID int64, body string) (*Comment, error) {
	a.s.mu.Lock()
	defer a.s.mu.Unlock()
	c, err := a.comment(repo, commentID, "edit other people's comments")
	if err != nil {
		return nil, err
	}
	if e := a.s.editCommentLocked(repo, c, a.user, body); e != nil {
		return nil, e
	}
	return c, nil
}

// DeleteComment deletes a comment: issue_comment.deleted.
func (a *Actor) DeleteComment(repo *Repo, commentID int64) error {
	a.s.mu.Lock()
	defer a.s.mu.Unlock()
	c, err := a.comment(repo, commentID, "delete other people's comments")
	if err != nil {
		return err
	}
	a.s.deleteCommentLocked(repo, c, a.user)
	return nil
}

// React adds a reaction to an issue (no webhook; reacting twice with the
// same content returns the first reaction).
func (a *Actor) React(repo *Repo, number int, content string) (*Reaction, error) {
	a.s.mu.Lock()
	defer a.s.mu.Unlock()
	i, err := a.issue(repo, number)
	if err != nil {
		return nil, err
	}
	if e := a.s.requireLocked(repo, a.user, "read", "react"); e != nil {
		return nil, e
	}
	x, _, e := a.s.reactLocked(&i.Reactions, a.user, content)
	if e != nil {
		return nil, e
	}
	return x, nil
}

// ReactToComment adds a reaction to a comment.
func (a *Actor) ReactToComment(repo *Repo, commentID int64, content string) (*Reaction, error) {
	if repo == nil {
		return nil, errNoRepo
	}
	a.s.mu.Lock()
	defer a.s.mu.Unlock()
	c, e := commentLocked(repo, commentID)
	if e == nil {
		e = a.s.requireLocked(repo, a.user, "read", "react")
	}
	if e != nil {
		return nil, e
	}
	x, _, e := a.s.reactLocked(&c.Reactions, a.user, content)
	if e != nil {
		return nil, e
	}
	return x, nil
}

func (a *Actor) subIssue(repo *Repo, parentNumber, childNumber int, f func(parent, child *Issue) *issueErr) (*Issue, error) {
	a.s.mu.Lock()
	defer a.s.mu.Unlock()
	parent, err := a.issue(repo, parentNumber)
	if err != nil {
		return nil, err
	}
	child, err := a.issue(repo, childNumber)
	if err != nil {
		return nil, err
	}
	if e := a.s.requireLocked(repo, a.user, "triage", "manage sub-issues"); e != nil {
		return nil, e
	}
	if e := f(parent, child); e != nil {
		return nil, e
	}
	return parent, nil
}

// AddSubIssue makes issue childNumber a sub-issue of parentNumber (same
// repository): sub_issues.sub_issue_added and parent_issue_added. It
// returns the parent.
func (a *Actor) AddSubIssue(repo *Repo, parentNumber, childNumber int) (*Issue, error) {
	return a.subIssue(repo, parentNumber, childNumber, func(parent, child *Issue) *issueErr {
		return a.s.addSubIssueLocked(repo, parent, child.ID, a.user, false)
	})
}

// RemoveSubIssue detaches a sub-issue: sub_issues.sub_issue_removed and
// parent_issue_removed. It returns the parent.
func (a *Actor) RemoveSubIssue(repo *Repo, parentNumber, childNumber int) (*Issue, error) {
	return a.subIssue(repo, parentNumber, childNumber, func(parent, child *Issue) *issueErr {
		return a.s.removeSubIssueLocked(repo, parent, child.ID, a.user)
	})
}

// CreateLabel creates a repository label: label.created.
func (a *Actor) CreateLabel(repo *Repo, name, color, description string) (*Label, error) {
	if repo == nil {
		return nil, errNoRepo
	}
	a.s.mu.Lock()
	defer a.s.mu.Unlock()
	if e := a.s.requireLocked(repo, a.user, "write", "manage labels"); e != nil {
		return nil, e
	}
	l, e := a.s.createLabelLocked(repo, a.user, name, color, description)
	if e != nil {
		return nil, e
	}
	return l, nil
}

// EditLabel renames, recolors or redescribes a label (nil leaves a field
// alone): label.edited with changes.
func (a *Actor) EditLabel(repo *Repo, name string, newName, color, description *string) (*Label, error) {
	if repo == nil {
		return nil, errNoRepo
	}
	a.s.mu.Lock()
	defer a.s.mu.Unlock()
	if e := a.s.requireLocked(repo, a.user, "write", "manage labels"); e != nil {
		return nil, e
	}
	l := repo.Labels[lowerTrim(name)]
	if l == nil {
		return nil, errNotFound()
	}
	if e := a.s.editLabelLocked(repo, l, a.user, newName, color, description); e != nil {
		return nil, e
	}
	return l, nil
}

// DeleteLabel deletes a label: label.deleted.
func (a *Actor) DeleteLabel(repo *Repo, name string) error {
	if repo == nil {
		return errNoRepo
	}
	a.s.mu.Lock()
	defer a.s.mu.Unlock()
	if e := a.s.requireLocked(repo, a.user, "write", "manage labels"); e != nil {
		return e
	}
	l := repo.Labels[lowerTrim(name)]
	if l == nil {
		return errNotFound()
	}
	a.s.deleteLabelLocked(repo, l, a.user)
	return nil
}
