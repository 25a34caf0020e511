package ghsim

import (
	"encoding/base64"
	"fmt"
	"net/url"
	"path"
	"sort"
	"strings"
	"time"
)

// Renderers for the git side: commits, diffs, pull requests, checks,
// statuses and contents. They run under s.mu.

func repoAPI(r *Repo) string { return apiBase + "/repos/" + r.FullName }
func repoWeb(r *Repo) string { return webBase + "/" + r.FullName }

// escapePath escapes each segment of a repository path for a URL.
func escapePath(p string) string {
	parts := strings.Split(p, "/")
	for i, s := range parts {
		parts[i] = url.PathEscape(s)
	}
	return strings.Join(parts, "/")
}

// webFlow is the account GitHub shows as the committer of commits it makes
// itself (merges made on github.com).
var webFlow = &User{ID: 19864447, Login: "web-flow", Type: TypeUser}

func (s *Sim) gitActorJSON(u *User, when time.Time) map[string]any {
	name, email := gitIdent(u)
	return map[string]any{"name": name, "email": email, "date": ts(when)}
}

func (s *Sim) gitVerificationJSON() map[string]any {
	return map[string]any{"verified": false, "reason": "unsigned", "signature": nil, "payload": nil, "verified_at": nil}
}

// commitJSON is the REST "commit" object; withFiles adds stats and files
// (GET /commits/{ref}).
func (s *Sim) commitJSON(r *Repo, c *Commit, withFiles bool) map[string]any {
	api := repoAPI(r)
	parents := []any{}
	for _, p := range c.Parents {
		parents = append(parents, map[string]any{"sha": p, "url": api + "/commits/" + p, "html_url": repoWeb(r) + "/commit/" + p})
	}
	committer := c.Committer
	var committerJSON any = s.userJSON(committer)
	if committer == nil {
		committerJSON = s.userJSON(webFlow)
	}
	var authorJSON any
	if c.Author != nil {
		authorJSON = s.userJSON(c.Author)
	}
	m := map[string]any{
		"sha": c.SHA, "node_id": nodeID("C", c.Seq), "url": api + "/commits/" + c.SHA,
		"html_url": repoWeb(r) + "/commit/" + c.SHA, "comments_url": api + "/commits/" + c.SHA + "/comments",
		"commit": map[string]any{
			"author": s.gitActorJSON(c.Author, c.Time), "committer": s.gitActorJSON(committer, c.Time),
			"message": c.Message, "comment_count": 0, "url": api + "/git/commits/" + c.SHA,
			"tree":         map[string]any{"sha": c.TreeSHA, "url": api + "/git/trees/" + c.TreeSHA},
			"verification": s.gitVerificationJSON(),
		},
		"author": authorJSON, "committer": committerJSON, "parents": parents,
	}
	if withFiles {
		changes := diffTrees(parentFilesLocked(r, c), c.Files, true)
		files, add, del := s.diffEntriesJSON(r, c.SHA, changes)
		m["files"] = files
		m["stats"] = map[string]any{"total": add + del, "additions": add, "deletions": del}
	}
	return m
}

// diffEntriesJSON renders file changes as GitHub's diff entries, at most 300
// (GitHub's cap for a comparison), with the total line counts.
func (s *Sim) diffEntriesJSON(r *Repo, sha string, changes []fileChange) (out []any, additions, deletions int) {
	out = []any{}
	for i, fc := range changes {
		add, del, patch := lineDiff(fc.Old, fc.New)
		additions += add
		deletions += del
		if i >= 300 {
			continue
		}
		blob := gitBlobSHA(fc.New)
		if fc.Status == "removed" {
			blob = gitBlobSHA(fc.Old)
		}
		p := escapePath(fc.Path)
		e := map[string]any{
			"sha": blob, "filename": fc.Path, "status": fc.Status, "additions": add, "deletions": del, "changes": add + del,
			"blob_url": repoWeb(r) + "/blob/" + sha + "/" + p, "raw_url": repoWeb(r) + "/raw/" + sha + "/" + p,
			"contents_url": repoAPI(r) + "/contents/" + p + "?ref=" + sha,
		}
		if patch != "" {
			e["patch"] = patch
		}
		if fc.Previous != "" {
			e["previous_filename"] = fc.Previous
		}
		out = append(out, e)
	}
	return out, additions, deletions
}

// pushCommitJSON is a commit as a push payload lists it.
func (s *Sim) pushCommitJSON(r *Repo, c *Commit, distinct bool) map[string]any {
	added, removed, modified := []string{}, []string{}, []string{}
	for _, fc := range diffTrees(parentFilesLocked(r, c), c.Files, false) {
		switch fc.Status {
		case "added":
			added = append(added, fc.Path)
		case "removed":
			removed = append(removed, fc.Path)
		default:
			modified = append(modified, fc.Path)
		}
	}
	ident := func(u *User) map[string]any {
		name, email := gitIdent(u)
		m := map[string]any{"name": name, "email": email}
		if u != nil {
			m["username"] = u.Login
		} else {
			m["username"] = "web-flow"
		}
		return m
	}
	return map[string]any{
		"id": c.SHA, "tree_id": c.TreeSHA, "distinct": distinct, "message": c.Message, "timestamp": ts(c.Time),
		"url": repoWeb(r) + "/commit/" + c.SHA, "author": ident(c.Author), "committer": ident(c.Committer),
		"added": added, "removed": removed, "modified": modified,
	}
}

// simpleCommitJSON is the head_commit of a check suite.
func (s *Sim) simpleCommitJSON(c *Commit) map[string]any {
	ident := func(u *User) map[string]any {
		name, email := gitIdent(u)
		return map[string]any{"name": name, "email": email}
	}
	return map[string]any{"id": c.SHA, "tree_id": c.TreeSHA, "message": c.Message, "timestamp": ts(c.Time),
		"author": ident(c.Author), "committer": ident(c.Committer)}
}

// pushRepoJSON is the repository object of a push payload, which (unlike
// every other payload) carries created_at and pushed_at as Unix seconds.
func (s *Sim) pushRepoJSON(r *Repo) map[string]any {
	m := s.repoJSON(r)
	m["created_at"] = r.CreatedAt.Unix()
	m["pushed_at"] = s.now().Unix()
	m["stargazers"] = 0
	m["master_branch"] = r.DefaultBranch
	m["has_discussions"] = false
	m["custom_properties"] = map[string]any{}
	if r.Owner.Type == TypeOrg {
		m["organization"] = r.Owner.Login
	}
	m["url"] = repoWeb(r)
	return m
}

func (s *Sim) branchJSON(r *Repo, name string) map[string]any {
	c := r.Commits[r.Branches[name]]
	api := repoAPI(r)
	return map[string]any{
		"name": name, "commit": s.commitJSON(r, c, false),
		"_links":    map[string]any{"self": api + "/branches/" + url.PathEscape(name), "html": repoWeb(r) + "/tree/" + escapePath(name)},
		"protected": false, "protection": map[string]any{"enabled": false, "required_status_checks": map[string]any{
			"enforcement_level": "off", "contexts": []string{}, "checks": []any{}}},
		"protection_url": api + "/branches/" + url.PathEscape(name) + "/protection",
	}
}

func (s *Sim) refJSON(r *Repo, branch string) map[string]any {
	sha := r.Branches[branch]
	api := repoAPI(r)
	return map[string]any{"ref": "refs/heads/" + branch, "node_id": base64.RawURLEncoding.EncodeToString([]byte("REF:" + r.FullName + ":" + branch)),
		"url":    api + "/git/refs/heads/" + escapePath(branch),
		"object": map[string]any{"type": "commit", "sha": sha, "url": api + "/git/commits/" + sha}}
}

// pullLabelJSON renders a label of a pull request.
func (s *Sim) pullLabelJSON(r *Repo, l *Label) map[string]any {
	var desc any
	if l.Description != "" {
		desc = l.Description
	}
	return map[string]any{"id": l.ID, "node_id": nodeID("LA", l.ID), "url": repoAPI(r) + "/labels/" + url.PathEscape(l.Name),
		"name": l.Name, "color": l.Color, "default": l.Default, "description": desc}
}

// pullBaseLocked is the base commit the pull request's diff is taken from:
// the base branch head recorded when the pull request was opened or its
// head last moved (GitHub's base.sha).
func pullRange(p *Pull) (base, head string) { return p.BaseSHA, p.HeadSHA }

// pullStatsLocked counts the pull request's commits and changes.
func (s *Sim) pullStatsLocked(r *Repo, p *Pull) (commits int, changes []fileChange) {
	base, head := pullRange(p)
	commits = len(onlyInLocked(r, head, base))
	mb := mergeBaseLocked(r, base, head)
	from := map[string]string{}
	if mb != nil {
		from = mb.Files
	}
	if hc := r.Commits[head]; hc != nil {
		changes = diffTrees(from, hc.Files, true)
	}
	return commits, changes
}

// mergeableLocked reports whether the pull request merges cleanly into its
// base branch's current head (nil: unknown).
func (s *Sim) mergeableLocked(r *Repo, p *Pull) *bool {
	if p.MergeableSet {
		return p.Mergeable
	}
	if p.Merged {
		return nil
	}
	baseHead, ok := r.Branches[p.Base]
	if !ok || r.Commits[p.HeadSHA] == nil {
		f := false
		return &f
	}
	mb := mergeBaseLocked(r, baseHead, p.HeadSHA)
	from := map[string]string{}
	if mb != nil {
		from = mb.Files
	}
	_, conflicts := mergeTrees(from, r.Commits[baseHead].Files, r.Commits[p.HeadSHA].Files)
	ok = len(conflicts) == 0
	return &ok
}

// mergeableStateLocked is GitHub's mergeable_state: clean, dirty, unknown,
// draft, or unstable (mergeable, but a check on the head is not passing).
func (s *Sim) mergeableStateLocked(r *Repo, p *Pull, m *bool) string {
	switch {
	case p.Merged || m == nil:
		return "unknown"
	case !*m:
		return "dirty"
	case p.Draft:
		return "draft"
	}
	for _, run := range r.CheckRuns {
		if run.HeadSHA == p.HeadSHA && run.Status == "completed" && failingConclusion(run.Conclusion) {
			return "unstable"
		}
	}
	if st := combinedStateLocked(r, p.HeadSHA); st == "failure" {
		return "unstable"
	}
	return "clean"
}

func failingConclusion(c string) bool {
	switch c {
	case "failure", "cancelled", "timed_out", "action_required", "startup_failure", "stale":
		return true
	}
	return false
}

// pullJSON renders a pull request: full for GET /pulls/{n} and webhooks,
// otherwise the list form (pull-request-simple). hookFresh renders
// mergeable as GitHub does right after the head or state changed: still
// being computed (null, "unknown").
func (s *Sim) pullJSON(r *Repo, p *Pull, full, hookFresh bool) map[string]any {
	iss := p.Issue
	api, web := repoAPI(r), repoWeb(r)
	n := fmt.Sprint(iss.Number)
	labels := []any{}
	for _, l := range iss.Labels {
		labels = append(labels, s.pullLabelJSON(r, l))
	}
	state := iss.State
	if state == "" {
		state = "open"
	}
	var body any
	if iss.Body != "" {
		body = iss.Body
	}
	var mergeCommit any
	if p.MergeCommitSHA != "" {
		mergeCommit = p.MergeCommitSHA
	}
	end := func(branch, sha string) map[string]any {
		return map[string]any{"label": r.Owner.Login + ":" + branch, "ref": branch, "sha": sha,
			"user": s.userJSON(r.Owner), "repo": s.repoJSON(r)}
	}
	statuses := api + "/statuses/" + p.HeadSHA
	m := map[string]any{
		"url": api + "/pulls/" + n, "id": p.ID, "node_id": nodeID("PR", p.ID), "html_url": web + "/pull/" + n,
		"diff_url": web + "/pull/" + n + ".diff", "patch_url": web + "/pull/" + n + ".patch", "issue_url": api + "/issues/" + n,
		"commits_url": api + "/pulls/" + n + "/commits", "review_comments_url": api + "/pulls/" + n + "/comments",
		"review_comment_url": api + "/pulls/comments{/number}", "comments_url": api + "/issues/" + n + "/comments",
		"statuses_url": statuses, "number": iss.Number, "state": state, "locked": iss.Locked, "title": iss.Title,
		"user": s.userJSON(iss.User), "body": body, "labels": labels, "milestone": nil, "active_lock_reason": nil,
		"created_at": ts(iss.CreatedAt), "updated_at": ts(iss.UpdatedAt), "closed_at": tsPtr(iss.ClosedAt),
		"merged_at": tsPtr(p.MergedAt), "merge_commit_sha": mergeCommit,
		"requested_reviewers": []any{}, "requested_teams": []any{},
		"head": end(p.Head, p.HeadSHA), "base": end(p.Base, p.BaseSHA),
		"_links": map[string]any{
			"self": map[string]any{"href": api + "/pulls/" + n}, "html": map[string]any{"href": web + "/pull/" + n},
			"issue": map[string]any{"href": api + "/issues/" + n}, "comments": map[string]any{"href": api + "/issues/" + n + "/comments"},
			"review_comments": map[string]any{"href": api + "/pulls/" + n + "/comments"},
			"review_comment":  map[string]any{"href": api + "/pulls/comments{/number}"},
			"commits":         map[string]any{"href": api + "/pulls/" + n + "/commits"},
			"statuses":        map[string]any{"href": statuses},
		},
		"author_association": s.associationLocked(r, iss.User), "auto_merge": nil, "draft": p.Draft,
	}
	s.assigneesJSON(iss, m)
	if !full {
		return m
	}
	mergeable := s.mergeableLocked(r, p)
	mstate := s.mergeableStateLocked(r, p, mergeable)
	var mergeableJSON, rebaseable any
	if mergeable != nil {
		mergeableJSON = *mergeable
		rebaseable = *mergeable
	}
	if hookFresh {
		mergeableJSON, rebaseable, mstate = nil, nil, "unknown"
	}
	var mergedBy any
	if p.MergedBy != nil {
		mergedBy = s.userJSON(p.MergedBy)
	}
	commits, changes := s.pullStatsLocked(r, p)
	var add, del int
	for _, fc := range changes {
		a, d, _ := lineDiff(fc.Old, fc.New)
		add += a
		del += d
	}
	m["merged"] = p.Merged
	m["mergeable"] = mergeableJSON
	m["rebaseable"] = rebaseable
	m["mergeable_state"] = mstate
	m["merged_by"] = mergedBy
	m["comments"] = len(iss.CommentIDs)
	m["review_comments"] = 0
	m["maintainer_can_modify"] = p.MaintainerCanModify
	m["commits"] = commits
	m["additions"] = add
	m["deletions"] = del
	m["changed_files"] = len(changes)
	return m
}

// pullMinimalJSON is a pull request as check runs and suites list it.
func (s *Sim) pullMinimalJSON(r *Repo, p *Pull) map[string]any {
	repo := map[string]any{"id": r.ID, "url": repoAPI(r), "name": r.Name}
	return map[string]any{"id": p.ID, "number": p.Issue.Number, "url": repoAPI(r) + "/pulls/" + fmt.Sprint(p.Issue.Number),
		"head": map[string]any{"ref": p.Head, "sha": p.HeadSHA, "repo": repo},
		"base": map[string]any{"ref": p.Base, "sha": p.BaseSHA, "repo": repo}}
}

// openPullsForHeadLocked lists the open pull requests whose head is sha, by
// number.
func openPullsForHeadLocked(r *Repo, sha string) []*Pull {
	var out []*Pull
	for _, p := range r.Pulls {
		if p.Issue.State != "closed" && p.HeadSHA == sha {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Issue.Number < out[j].Issue.Number })
	return out
}

// actionsApp is the CI that ExternalCheck posts as.
var actionsApp = &CheckApp{ID: 15368, Slug: "github-actions", Name: "GitHub Actions"}

func (s *Sim) checkAppJSON(a *CheckApp) map[string]any {
	if a == nil {
		return s.appJSON()
	}
	created := time.Date(2018, 7, 30, 9, 30, 17, 0, time.UTC)
	owner := &User{ID: 9919, Login: "github", Type: TypeOrg}
	return map[string]any{
		"id": a.ID, "slug": a.Slug, "node_id": nodeID("A", a.ID), "client_id": fmt.Sprintf("Iv1.%016x", a.ID),
		"owner": s.userJSON(owner), "name": a.Name, "description": "Automate your workflow from idea to production",
		"external_url": "https://help.github.com/en/actions", "html_url": webBase + "/apps/" + a.Slug,
		"created_at": ts(created), "updated_at": ts(created),
		"permissions": map[string]string{"checks": "write", "statuses": "write", "metadata": "read", "contents": "write"},
		"events":      []string{"check_run", "check_suite", "push", "pull_request"},
	}
}

func (s *Sim) checkSuiteJSON(r *Repo, cs *CheckSuite) map[string]any {
	api := repoAPI(r)
	var branch, before, after, conclusion any
	if cs.HeadBranch != "" {
		branch = cs.HeadBranch
	}
	if cs.Before != "" {
		before = cs.Before
	}
	if cs.After != "" {
		after = cs.After
	}
	if cs.Conclusion != "" {
		conclusion = cs.Conclusion
	}
	prs := []any{}
	for _, p := range openPullsForHeadLocked(r, cs.HeadSHA) {
		prs = append(prs, s.pullMinimalJSON(r, p))
	}
	runs := 0
	for _, run := range r.CheckRuns {
		if run.Suite == cs {
			runs++
		}
	}
	m := map[string]any{
		"id": cs.ID, "node_id": nodeID("CS", cs.ID), "head_branch": branch, "head_sha": cs.HeadSHA,
		"status": cs.Status, "conclusion": conclusion, "url": api + "/check-suites/" + fmt.Sprint(cs.ID),
		"before": before, "after": after, "pull_requests": prs, "app": s.checkAppJSON(cs.App),
		"repository": s.repoJSON(r), "created_at": ts(cs.CreatedAt), "updated_at": ts(cs.UpdatedAt),
		"latest_check_runs_count": runs, "check_runs_url": api + "/check-suites/" + fmt.Sprint(cs.ID) + "/check-runs",
		"rerequestable": true, "runs_rerequestable": true,
	}
	if c := r.Commits[cs.HeadSHA]; c != nil {
		m["head_commit"] = s.simpleCommitJSON(c)
	}
	return m
}

func (s *Sim) checkRunJSON(r *Repo, run *CheckRun) map[string]any {
	api := repoAPI(r)
	id := fmt.Sprint(run.ID)
	str := func(v string) any {
		if v == "" {
			return nil
		}
		return v
	}
	prs := []any{}
	for _, p := range openPullsForHeadLocked(r, run.HeadSHA) {
		prs = append(prs, s.pullMinimalJSON(r, p))
	}
	var started any = ts(run.StartedAt)
	if run.StartedAt.IsZero() {
		started = nil
	}
	var suite any
	if run.Suite != nil {
		suite = map[string]any{"id": run.Suite.ID}
	}
	app := s.checkAppJSON(run.App)
	// Without a details_url GitHub links the App's homepage.
	var details any = run.DetailsURL
	if run.DetailsURL == "" {
		details = app["external_url"]
	}
	return map[string]any{
		"id": run.ID, "node_id": nodeID("CR", run.ID), "head_sha": run.HeadSHA, "external_id": run.ExternalID,
		"url": api + "/check-runs/" + id, "html_url": repoWeb(r) + "/runs/" + id, "details_url": details,
		"status": run.Status, "conclusion": str(run.Conclusion), "started_at": started, "completed_at": tsPtr(run.CompletedAt),
		"output": map[string]any{"title": str(run.Title), "summary": str(run.Summary), "text": str(run.Text),
			"annotations_count": len(run.Annotations), "annotations_url": api + "/check-runs/" + id + "/annotations"},
		"name": run.Name, "check_suite": suite, "app": app, "pull_requests": prs,
	}
}

// checkSuiteHookJSON is a check suite in a check_suite webhook (whose
// repository is at the top level only).
func (s *Sim) checkSuiteHookJSON(r *Repo, cs *CheckSuite) map[string]any {
	m := s.checkSuiteJSON(r, cs)
	delete(m, "repository")
	return m
}

// checkRunHookJSON is a check run in a webhook, whose check_suite is the
// whole suite.
func (s *Sim) checkRunHookJSON(r *Repo, run *CheckRun) map[string]any {
	m := s.checkRunJSON(r, run)
	if run.Suite != nil {
		cs := s.checkSuiteJSON(r, run.Suite)
		delete(cs, "repository")
		delete(cs, "head_commit")
		delete(cs, "latest_check_runs_count")
		delete(cs, "check_runs_url")
		m["check_suite"] = cs
	}
	return m
}

func (s *Sim) statusJSON(r *Repo, st *CommitStatus) map[string]any {
	str := func(v string) any {
		if v == "" {
			return nil
		}
		return v
	}
	return map[string]any{"id": st.ID, "node_id": nodeID("SC", st.ID), "url": repoAPI(r) + "/statuses/" + st.SHA,
		"avatar_url": "https://avatars.githubusercontent.com/u/" + fmt.Sprint(st.Creator.ID), "state": st.State,
		"description": str(st.Description), "target_url": str(st.TargetURL), "context": st.Context,
		"created_at": ts(st.CreatedAt), "updated_at": ts(st.UpdatedAt), "creator": s.userJSON(st.Creator)}
}

// contentJSON is a file or directory entry of GET /contents.
func (s *Sim) contentJSON(r *Repo, ref, p, typ, sha string, size int) map[string]any {
	api := repoAPI(r)
	ep := escapePath(p)
	self := api + "/contents/" + ep + "?ref=" + url.QueryEscape(ref)
	var git, html, download any
	if typ == "dir" {
		git = api + "/git/trees/" + sha
		html = repoWeb(r) + "/tree/" + escapePath(ref) + "/" + ep
	} else {
		git = api + "/git/blobs/" + sha
		html = repoWeb(r) + "/blob/" + escapePath(ref) + "/" + ep
		download = "https://raw.githubusercontent.com/" + r.FullName + "/" + escapePath(ref) + "/" + ep
	}
	return map[string]any{"type": typ, "size": size, "name": path.Base(p), "path": p, "sha": sha, "url": self,
		"git_url": git, "html_url": html, "download_url": download,
		"_links": map[string]any{"self": self, "git": git, "html": html}}
}
