package ghsim

import (
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// pushLocked moves branch from before to after ("" before: the branch is
// created; "" after: it is deleted) and sends what GitHub sends for a push:
// `push`; `check_suite.requested` for the App's new suite on the new head;
// `pull_request.synchronize` for open pull requests from the branch (or
// `pull_request.closed` when the branch is deleted); and, on the default
// branch, `issues.closed` for each issue a new commit's message closes.
func (s *Sim) pushLocked(r *Repo, pusher *User, branch, before, after string, forced bool) {
	// What is on the other branches, for "distinct" and base_ref.
	others := map[string]bool{}
	baseRef := any(nil)
	names := sortedBranches(r)
	for _, b := range names {
		if b == branch {
			continue
		}
		for sha := range ancestorsLocked(r, r.Branches[b]) {
			others[sha] = true
		}
		if after != "" && r.Branches[b] == after && baseRef == nil {
			baseRef = "refs/heads/" + b
		}
	}
	var pushed []*Commit
	switch {
	case after == "":
	case before == "":
		pushed = onlyInLocked(r, after, r.Branches[r.DefaultBranch])
		if branch == r.DefaultBranch {
			pushed = onlyInLocked(r, after, "")
		}
	default:
		pushed = onlyInLocked(r, after, before)
	}
	if len(pushed) > 2048 {
		pushed = pushed[len(pushed)-2048:]
	}
	commits := []any{}
	for _, c := range pushed {
		commits = append(commits, s.pushCommitJSON(r, c, !others[c.SHA]))
	}
	if after == "" {
		delete(r.Branches, branch)
	} else {
		r.Branches[branch] = after
	}
	web := repoWeb(r)
	var compare string
	switch {
	case before == "":
		compare = web + "/compare/" + url.PathEscape(branch)
	case after == "":
		compare = web + "/compare/" + before[:12] + "...000000000000"
	default:
		compare = web + "/compare/" + before[:12] + "..." + after[:12]
	}
	var head any
	if c := r.Commits[after]; c != nil {
		head = s.pushCommitJSON(r, c, !others[c.SHA])
	}
	name, email := gitIdent(pusher)
	beforeSHA, afterSHA := before, after
	if beforeSHA == "" {
		beforeSHA = zeroSHA
	}
	if afterSHA == "" {
		afterSHA = zeroSHA
	}
	s.emitGitLocked("push", "", r, pusher, map[string]any{
		"ref": "refs/heads/" + branch, "before": beforeSHA, "after": afterSHA,
		"created": before == "", "deleted": after == "", "forced": forced, "base_ref": baseRef,
		"compare": compare, "commits": commits, "head_commit": head,
		"pusher":     map[string]any{"name": name, "email": email},
		"repository": s.pushRepoJSON(r),
	})
	// The pull requests from the branch follow its head before the suite is
	// made (its pull_requests lists them), and are told after.
	type pullMove struct {
		p      *Pull
		before string
	}
	var synced, closing []pullMove
	for _, p := range sortedPulls(r) {
		if p.Issue.State == "closed" {
			continue
		}
		switch {
		case after == "" && (p.Head == branch || p.Base == branch):
			closing = append(closing, pullMove{p, p.HeadSHA})
		case after != "" && p.Head == branch && p.HeadSHA != after:
			synced = append(synced, pullMove{p, p.HeadSHA})
			p.HeadSHA = after
			if bs, ok := r.Branches[p.Base]; ok {
				p.BaseSHA = bs
			}
			p.Issue.UpdatedAt = s.now()
		}
	}
	if after != "" && s.suiteLocked(r, nil, after) == nil {
		cs := s.newSuiteLocked(r, nil, after, branch, beforeSHA)
		s.emitGitLocked("check_suite", "requested", r, pusher, map[string]any{"check_suite": s.checkSuiteHookJSON(r, cs)})
	}
	for _, x := range synced {
		if forced {
			s.addPullEventLocked(x.p, "head_ref_force_pushed", pusher, "")
		}
		s.emitGitLocked("pull_request", "synchronize", r, pusher, map[string]any{
			"number": x.p.Issue.Number, "before": x.before, "after": after, "pull_request": s.pullJSON(r, x.p, true, true)})
	}
	for _, x := range closing {
		if x.p.Head == branch {
			s.addPullEventLocked(x.p, "head_ref_deleted", pusher, "")
		}
		s.closePullLocked(r, x.p, pusher)
	}
	if branch == r.DefaultBranch && after != "" {
		for _, c := range pushed {
			for _, n := range closingRefs(r, c.Message, false) {
				s.closeIssueByCommitLocked(r, n, pusher, c.SHA)
			}
		}
	}
}

// emitGitLocked sends a webhook about r to the App, which hears only of
// the repositories it is installed on.
func (s *Sim) emitGitLocked(event, action string, r *Repo, sender *User, body map[string]any) {
	if r.Install == nil {
		return
	}
	s.emitLocked(event, action, nil, r, sender, body)
}

func sortedBranches(r *Repo) []string {
	out := make([]string, 0, len(r.Branches))
	for b := range r.Branches {
		out = append(out, b)
	}
	sort.Strings(out)
	return out
}

func sortedPulls(r *Repo) []*Pull {
	out := make([]*Pull, 0, len(r.Pulls))
	for _, p := range r.Pulls {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Issue.Number < out[j].Issue.Number })
	return out
}

// closingRE matches GitHub's closing keywords followed by a reference to an
// issue: #N, OWNER/REPO#N, or the issue's URL.
var closingRE = regexp.MustCompile(`(?i)(?:^|[^\w])(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?)\s*:?\s+(?:https://github\.com/([\w.-]+/[\w.-]+)/issues/|([\w.-]+/[\w.-]+)?#)(\d+)\b`)

var (
	fencedRE  = regexp.MustCompile("(?s)(```|~~~).*?(```|~~~|$)")
	inlineRE  = regexp.MustCompile("`[^`\n]*`")
	htmlComRE = regexp.MustCompile(`(?s)<!--.*?-->`)
)

// closingRefs lists the issue numbers of this repository that text closes
// with a keyword, in order of appearance, without repeats. Markdown (a pull
// request body) is read as GitHub renders it: references in code or HTML
// comments are not references.
func closingRefs(r *Repo, text string, markdown bool) []int {
	if markdown {
		text = htmlComRE.ReplaceAllString(text, " ")
		text = fencedRE.ReplaceAllString(text, " ")
		text = inlineRE.ReplaceAllString(text, " ")
	}
	var out []int
	seen := map[int]bool{}
	for _, m := range closingRE.FindAllStringSubmatch(text, -1) {
		repo := m[1]
		if repo == "" {
			repo = m[2]
		}
		if repo != "" && !strings.EqualFold(repo, r.FullName) {
			continue
		}
		n, err := strconv.Atoi(m[3])
		if err != nil || seen[n] {
			continue
		}
		seen[n] = true
		out = append(out, n)
	}
	return out
}

// closeIssueByCommitLocked closes issue n as GitHub does when a closing
// commit reaches the default branch: the issue's `closed` event carries the
// commit, and `issues.closed` is sent. Pull requests, closed and unknown
// issues are left alone.
func (s *Sim) closeIssueByCommitLocked(r *Repo, n int, actor *User, commit string) {
	iss := r.Issues[n]
	if iss == nil || iss.IsPull || iss.Deleted || iss.State == "closed" {
		return
	}
	now := s.now()
	iss.State = "closed"
	iss.StateReason = "completed"
	iss.ClosedAt = &now
	iss.ClosedBy = actor
	iss.UpdatedAt = now
	iss.Events = append(iss.Events, &IssueEvent{ID: s.newID(), Event: "closed", Actor: actor, CommitID: commit,
		CreatedAt: now, ViaApp: actor == s.bot, StateReason: "completed"})
	s.emitGitLocked("issues", "closed", r, actor, map[string]any{"issue": s.issueJSON(r, iss)})
}

// addPullEventLocked records an issue event on a pull request's timeline.
func (s *Sim) addPullEventLocked(p *Pull, event string, actor *User, commit string) *IssueEvent {
	e := &IssueEvent{ID: s.newID(), Event: event, Actor: actor, CommitID: commit, CreatedAt: s.now(), ViaApp: actor == s.bot}
	p.Issue.Events = append(p.Issue.Events, e)
	return e
}
