package ghsim

import (
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"time"
	"unicode/utf8"
)

// Checks: suites and runs of the simulator's App (App nil) and of another
// CI (ExternalCheck), and commit statuses.

// actionsBot is the account another CI's check-run webhooks are sent as.
var actionsBot = &User{ID: 41898282, Login: "github-actions[bot]", Type: TypeBot}

func sameApp(a, b *CheckApp) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.ID == b.ID
}

// suiteLocked is the app's latest suite on sha, or nil.
func (s *Sim) suiteLocked(r *Repo, app *CheckApp, sha string) *CheckSuite {
	var found *CheckSuite
	for _, cs := range r.CheckSuites {
		if cs.HeadSHA == sha && sameApp(cs.App, app) && (found == nil || cs.ID > found.ID) {
			found = cs
		}
	}
	return found
}

func (s *Sim) newSuiteLocked(r *Repo, app *CheckApp, sha, branch, before string) *CheckSuite {
	now := s.now()
	cs := &CheckSuite{ID: s.newID(), App: app, HeadSHA: sha, HeadBranch: branch, Before: before, After: sha,
		Status: "queued", CreatedAt: now, UpdatedAt: now}
	r.CheckSuites[cs.ID] = cs
	return cs
}

// branchForSHALocked names a branch whose head is sha (the default branch
// first), or "".
func branchForSHALocked(r *Repo, sha string) string {
	if r.Branches[r.DefaultBranch] == sha {
		return r.DefaultBranch
	}
	for _, b := range sortedBranches(r) {
		if r.Branches[b] == sha {
			return b
		}
	}
	return ""
}

// conclusionRank orders conclusions for a suite: the lowest rank wins.
var conclusionRank = map[string]int{"action_required": 0, "cancelled": 1, "timed_out": 2, "failure": 3, "startup_failure": 3,
	"stale": 4, "neutral": 5, "success": 6, "skipped": 7}

// latestRuns keeps the newest run per name.
func latestRuns(runs []*CheckRun) []*CheckRun {
	byName := map[string]*CheckRun{}
	for _, run := range runs {
		if cur := byName[run.Name]; cur == nil || run.ID > cur.ID {
			byName[run.Name] = run
		}
	}
	var out []*CheckRun
	for _, run := range runs {
		if byName[run.Name] == run {
			out = append(out, run)
		}
	}
	return out
}

func suiteRunsLocked(r *Repo, cs *CheckSuite) []*CheckRun {
	var out []*CheckRun
	for _, run := range r.CheckRuns {
		if run.Suite == cs {
			out = append(out, run)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// recomputeSuiteLocked derives a suite's status and conclusion from its
// latest runs, and sends check_suite.completed when it completes.
func (s *Sim) recomputeSuiteLocked(r *Repo, cs *CheckSuite) {
	runs := latestRuns(suiteRunsLocked(r, cs))
	if len(runs) == 0 {
		return
	}
	status, conclusion := "completed", ""
	for _, run := range runs {
		switch run.Status {
		case "completed":
			if conclusion == "" || conclusionRank[run.Conclusion] < conclusionRank[conclusion] {
				conclusion = run.Conclusion
			}
		case "in_progress":
			status = "in_progress"
		default:
			if status != "in_progress" {
				status = "queued"
			}
		}
	}
	if status != "completed" {
		conclusion = ""
	}
	was := cs.Status
	if status == cs.Status && conclusion == cs.Conclusion {
		return
	}
	cs.Status, cs.Conclusion, cs.UpdatedAt = status, conclusion, s.now()
	if status == "completed" && was != "completed" {
		sender := s.bot
		if cs.App != nil {
			sender = actionsBot
		}
		s.emitGitLocked("check_suite", "completed", r, sender, map[string]any{"check_suite": s.checkSuiteHookJSON(r, cs)})
	}
}

// checkRunInput is the body of POST and PATCH /check-runs.
type checkRunInput struct {
	Name        *string `json:"name"`
	HeadSHA     *string `json:"head_sha"`
	DetailsURL  *string `json:"details_url"`
	ExternalID  *string `json:"external_id"`
	Status      *string `json:"status"`
	Conclusion  *string `json:"conclusion"`
	StartedAt   *string `json:"started_at"`
	CompletedAt *string `json:"completed_at"`
	Output      *struct {
		Title       *string           `json:"title"`
		Summary     *string           `json:"summary"`
		Text        *string           `json:"text"`
		Annotations []annotationInput `json:"annotations"`
	} `json:"output"`
}

func invalidRequest(msg string) *GitError {
	return gitErr(http.StatusUnprocessableEntity, "Invalid request.\n\n"+msg)
}

// checkOutputLimit enforces GitHub's 65535 limit on output.summary and
// output.text: in characters (schema validation), then in bytes.
func checkOutputLimit(field string, v *string) *GitError {
	if v == nil {
		return nil
	}
	if n := utf8.RuneCountInString(*v); n > 65535 {
		return invalidRequest(fmt.Sprintf("Only 65535 characters are allowed; %d were supplied.", n))
	}
	if len(*v) > 65535 {
		return &GitError{Status: http.StatusUnprocessableEntity, Message: "Validation Failed", Errors: []map[string]any{{
			"resource": "CheckRun", "code": "custom", "field": field, "message": field + " exceeds a maximum bytesize of 65535"}}}
	}
	return nil
}

func parseCheckTime(field string, v *string) (*time.Time, *GitError) {
	if v == nil {
		return nil, nil
	}
	t, err := time.Parse(time.RFC3339, *v)
	if err != nil {
		return nil, invalidRequest(fmt.Sprintf("%q is not a valid date-time for %q.", *v, field))
	}
	t = t.UTC()
	return &t, nil
}

// applyCheckRunLocked validates in and applies it to run (a new run when
// create). It reports whether the run completed with this change.
func (s *Sim) applyCheckRunLocked(run *CheckRun, in checkRunInput, create bool) (completedNow bool, e *GitError) {
	if create {
		if in.Name == nil || *in.Name == "" {
			return false, invalidRequest(`"name" wasn't supplied.`)
		}
		if in.HeadSHA == nil || *in.HeadSHA == "" {
			return false, invalidRequest(`"head_sha" wasn't supplied.`)
		}
	}
	if in.Status != nil {
		switch *in.Status {
		case "queued", "in_progress", "completed":
		case "waiting", "requested", "pending":
			if create {
				return false, invalidRequest(fmt.Sprintf("For 'properties/status', %q is not a possible value.", *in.Status))
			}
			return false, gitErr(http.StatusUnprocessableEntity, "Only GitHub Actions can set a status of waiting, pending, or requested.")
		default:
			return false, invalidRequest(fmt.Sprintf("For 'properties/status', %q is not a possible value.", *in.Status))
		}
	}
	if in.Conclusion != nil {
		if _, ok := conclusionRank[*in.Conclusion]; !ok || *in.Conclusion == "startup_failure" {
			return false, invalidRequest(fmt.Sprintf("For 'properties/conclusion', %q is not a possible value.", *in.Conclusion))
		}
		if *in.Conclusion == "stale" {
			return false, gitInvalid("CheckRun", "conclusion", "invalid", "stale is set by GitHub only")
		}
	}
	if in.Conclusion == nil && run.Conclusion == "" && (in.Status != nil && *in.Status == "completed" || in.CompletedAt != nil) {
		return false, invalidRequest(`"conclusion" wasn't supplied.`)
	}
	if o := in.Output; o != nil {
		if create && o.Title == nil {
			return false, invalidRequest(`"title" wasn't supplied.`)
		}
		if o.Summary == nil {
			return false, invalidRequest(`"summary" wasn't supplied.`)
		}
		if e := checkOutputLimit("summary", o.Summary); e != nil {
			return false, e
		}
		if e := checkOutputLimit("text", o.Text); e != nil {
			return false, e
		}
	}
	var annotations []CheckAnnotation
	if o := in.Output; o != nil {
		if annotations, e = checkAnnotations(o.Annotations); e != nil {
			return false, e
		}
	}
	started, e := parseCheckTime("started_at", in.StartedAt)
	if e != nil {
		return false, e
	}
	completed, e := parseCheckTime("completed_at", in.CompletedAt)
	if e != nil {
		return false, e
	}
	// Valid: apply.
	wasCompleted, oldConclusion := run.Status == "completed", run.Conclusion
	if in.Name != nil {
		run.Name = *in.Name
	}
	if in.DetailsURL != nil {
		run.DetailsURL = *in.DetailsURL
	}
	if in.ExternalID != nil {
		run.ExternalID = *in.ExternalID
	}
	if o := in.Output; o != nil {
		if o.Title != nil {
			run.Title = *o.Title
		}
		run.Summary = *o.Summary
		if o.Text != nil {
			run.Text = *o.Text
		}
		run.Annotations = append(run.Annotations, annotations...)
	}
	if started != nil {
		run.StartedAt = *started
	} else if create {
		run.StartedAt = s.now()
	}
	if create {
		run.Status = "queued"
	}
	if in.Status != nil {
		run.Status = *in.Status
		if *in.Status != "completed" {
			run.Conclusion, run.CompletedAt = "", nil
		}
	}
	if in.Conclusion != nil || completed != nil {
		run.Status = "completed"
		if in.Conclusion != nil {
			run.Conclusion = *in.Conclusion
		}
	}
	if run.Status == "completed" {
		switch {
		case completed != nil:
			run.CompletedAt = completed
		case run.CompletedAt == nil || in.Conclusion != nil:
			now := s.now()
			run.CompletedAt = &now
		}
	}
	completedNow = run.Status == "completed" && (!wasCompleted || run.Conclusion != oldConclusion || completed != nil)
	return completedNow, nil
}

// createCheckRunLocked creates a check run for app (nil: the simulator's
// App), in the app's suite on the head commit (made if missing), and sends
// check_run.created (and completed, when created completed).
func (s *Sim) createCheckRunLocked(r *Repo, app *CheckApp, sender *User, in checkRunInput) (*CheckRun, *GitError) {
	run := &CheckRun{App: app}
	if in.HeadSHA != nil {
		c := r.Commits[*in.HeadSHA]
		if c == nil || len(*in.HeadSHA) != 40 {
			return nil, gitErr(http.StatusUnprocessableEntity, "No commit found for SHA: "+*in.HeadSHA)
		}
	}
	completedNow, e := s.applyCheckRunLocked(run, in, true)
	if e != nil {
		return nil, e
	}
	run.HeadSHA = *in.HeadSHA
	cs := s.suiteLocked(r, app, run.HeadSHA)
	if cs == nil {
		before := ""
		if c := r.Commits[run.HeadSHA]; len(c.Parents) > 0 {
			before = c.Parents[0]
		}
		cs = s.newSuiteLocked(r, app, run.HeadSHA, branchForSHALocked(r, run.HeadSHA), before)
	}
	run.Suite = cs
	run.ID = s.newID()
	r.CheckRuns[run.ID] = run
	s.emitGitLocked("check_run", "created", r, sender, map[string]any{"check_run": s.checkRunHookJSON(r, run)})
	if completedNow {
		s.emitGitLocked("check_run", "completed", r, sender, map[string]any{"check_run": s.checkRunHookJSON(r, run)})
	}
	s.recomputeSuiteLocked(r, cs)
	return run, nil
}

func (s *Sim) updateCheckRunLocked(r *Repo, run *CheckRun, sender *User, in checkRunInput) *GitError {
	in.HeadSHA = nil
	completedNow, e := s.applyCheckRunLocked(run, in, false)
	if e != nil {
		return e
	}
	if completedNow {
		s.emitGitLocked("check_run", "completed", r, sender, map[string]any{"check_run": s.checkRunHookJSON(r, run)})
	}
	if run.Suite != nil {
		s.recomputeSuiteLocked(r, run.Suite)
	}
	return nil
}

// rerequestSuiteLocked re-queues a suite and, for the App's own suites,
// sends check_suite.rerequested.
func (s *Sim) rerequestSuiteLocked(r *Repo, cs *CheckSuite, sender *User) {
	cs.Status, cs.Conclusion, cs.UpdatedAt = "queued", "", s.now()
	if cs.App == nil {
		s.emitGitLocked("check_suite", "rerequested", r, sender, map[string]any{"check_suite": s.checkSuiteHookJSON(r, cs)})
	}
}

func (s *Sim) rerequestRunLocked(r *Repo, run *CheckRun, sender *User) *GitError {
	if run.Status != "completed" {
		return gitErr(http.StatusUnprocessableEntity, "This check run is not rerequestable")
	}
	if run.App == nil {
		s.emitGitLocked("check_run", "rerequested", r, sender, map[string]any{"check_run": s.checkRunHookJSON(r, run)})
	}
	return nil
}

// combinedStateLocked is the combined commit status of sha: failure if a
// latest status is error or failure, pending if there is none or one is
// pending, else success.
func combinedStateLocked(r *Repo, sha string) string {
	latest := latestStatusesLocked(r, sha)
	if len(latest) == 0 {
		return "pending"
	}
	state := "success"
	for _, st := range latest {
		switch st.State {
		case "error", "failure":
			return "failure"
		case "pending":
			state = "pending"
		}
	}
	return state
}

// latestStatusesLocked is the newest status per context on sha, newest first.
func latestStatusesLocked(r *Repo, sha string) []*CommitStatus {
	seen := map[string]bool{}
	var out []*CommitStatus
	for i := len(r.Statuses) - 1; i >= 0; i-- {
		st := r.Statuses[i]
		if st.SHA == sha && !seen[st.Context] {
			seen[st.Context] = true
			out = append(out, st)
		}
	}
	return out
}

// --- REST ---

func (s *Sim) createCheckRun(w http.ResponseWriter, r *http.Request) {
	var in checkRunInput
	if !readJSON(w, r, &in) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	repo := repoOf(r)
	run, e := s.createCheckRunLocked(repo, nil, s.actorOf(r), in)
	if e != nil {
		writeGitError(w, e)
		return
	}
	writeJSON(w, http.StatusCreated, s.checkRunJSON(repo, run))
}

func (s *Sim) runOf(w http.ResponseWriter, r *http.Request) (*Repo, *CheckRun) {
	repo := repoOf(r)
	id, ok := intParam(r, "check_run_id")
	run := repo.CheckRuns[id]
	if !ok || run == nil {
		writeError(w, http.StatusNotFound, "Not Found")
		return nil, nil
	}
	return repo, run
}

func (s *Sim) suiteOf(w http.ResponseWriter, r *http.Request) (*Repo, *CheckSuite) {
	repo := repoOf(r)
	id, ok := intParam(r, "check_suite_id")
	cs := repo.CheckSuites[id]
	if !ok || cs == nil {
		writeError(w, http.StatusNotFound, "Not Found")
		return nil, nil
	}
	return repo, cs
}

func (s *Sim) getCheckRun(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	repo, run := s.runOf(w, r)
	if run == nil {
		return
	}
	writeJSON(w, http.StatusOK, s.checkRunJSON(repo, run))
}

func (s *Sim) updateCheckRun(w http.ResponseWriter, r *http.Request) {
	var in checkRunInput
	if !readJSON(w, r, &in) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	repo, run := s.runOf(w, r)
	if run == nil {
		return
	}
	if run.App != nil {
		writeError(w, http.StatusForbidden, "Resource not accessible by integration")
		return
	}
	if e := s.updateCheckRunLocked(repo, run, s.actorOf(r), in); e != nil {
		writeGitError(w, e)
		return
	}
	writeJSON(w, http.StatusOK, s.checkRunJSON(repo, run))
}

func (s *Sim) rerequestCheckRun(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	repo, run := s.runOf(w, r)
	if run == nil {
		return
	}
	if run.App != nil {
		writeError(w, http.StatusForbidden, "Resource not accessible by integration")
		return
	}
	if e := s.rerequestRunLocked(repo, run, s.actorOf(r)); e != nil {
		writeGitError(w, e)
		return
	}
	writeJSON(w, http.StatusCreated, map[string]any{})
}

func (s *Sim) getCheckSuite(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	repo, cs := s.suiteOf(w, r)
	if cs == nil {
		return
	}
	writeJSON(w, http.StatusOK, s.checkSuiteJSON(repo, cs))
}

func (s *Sim) rerequestCheckSuite(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	repo, cs := s.suiteOf(w, r)
	if cs == nil {
		return
	}
	if cs.App != nil {
		writeError(w, http.StatusForbidden, "Resource not accessible by integration")
		return
	}
	s.rerequestSuiteLocked(repo, cs, s.actorOf(r))
	writeJSON(w, http.StatusCreated, map[string]any{})
}

func (s *Sim) listSuiteRuns(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	repo, cs := s.suiteOf(w, r)
	if cs == nil {
		return
	}
	s.writeCheckRunsLocked(w, r, repo, suiteRunsLocked(repo, cs))
}

// writeCheckRunsLocked filters (check_name, status, app_id, filter) and
// pages check runs, newest first, as {total_count, check_runs}.
func (s *Sim) writeCheckRunsLocked(w http.ResponseWriter, r *http.Request, repo *Repo, runs []*CheckRun) {
	q := r.URL.Query()
	filter := q.Get("filter")
	if filter == "" {
		filter = "latest"
	}
	if filter != "latest" && filter != "all" {
		writeValidation(w, "CheckRun", "filter", "invalid", "")
		return
	}
	if st := q.Get("status"); st != "" && st != "queued" && st != "in_progress" && st != "completed" {
		writeValidation(w, "CheckRun", "status", "invalid", "")
		return
	}
	if filter == "latest" {
		bySuite := map[*CheckSuite][]*CheckRun{}
		var order []*CheckSuite
		for _, run := range runs {
			if _, ok := bySuite[run.Suite]; !ok {
				order = append(order, run.Suite)
			}
			bySuite[run.Suite] = append(bySuite[run.Suite], run)
		}
		runs = nil
		for _, cs := range order {
			runs = append(runs, latestRuns(bySuite[cs])...)
		}
	}
	var out []*CheckRun
	for _, run := range runs {
		if n := q.Get("check_name"); n != "" && run.Name != n {
			continue
		}
		if st := q.Get("status"); st != "" && run.Status != st {
			continue
		}
		if a := q.Get("app_id"); a != "" {
			id, _ := strconv.ParseInt(a, 10, 64)
			if checkAppID(s, run.App) != id {
				continue
			}
		}
		out = append(out, run)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID > out[j].ID })
	lo, hi := paginate(w, r, len(out))
	list := []any{}
	for _, run := range out[lo:hi] {
		list = append(list, s.checkRunJSON(repo, run))
	}
	writeJSON(w, http.StatusOK, map[string]any{"total_count": len(out), "check_runs": list})
}

func checkAppID(s *Sim, a *CheckApp) int64 {
	if a == nil {
		return s.opt.AppID
	}
	return a.ID
}

func (s *Sim) listRunsForRefLocked(w http.ResponseWriter, r *http.Request, repo *Repo, c *Commit) {
	var runs []*CheckRun
	for _, run := range repo.CheckRuns {
		if run.HeadSHA == c.SHA {
			runs = append(runs, run)
		}
	}
	sort.Slice(runs, func(i, j int) bool { return runs[i].ID < runs[j].ID })
	s.writeCheckRunsLocked(w, r, repo, runs)
}

func (s *Sim) listSuitesForRefLocked(w http.ResponseWriter, r *http.Request, repo *Repo, c *Commit) {
	q := r.URL.Query()
	var out []*CheckSuite
	for _, cs := range repo.CheckSuites {
		if cs.HeadSHA != c.SHA {
			continue
		}
		if a := q.Get("app_id"); a != "" {
			id, _ := strconv.ParseInt(a, 10, 64)
			if checkAppID(s, cs.App) != id {
				continue
			}
		}
		if n := q.Get("check_name"); n != "" {
			found := false
			for _, run := range suiteRunsLocked(repo, cs) {
				found = found || run.Name == n
			}
			if !found {
				continue
			}
		}
		out = append(out, cs)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	lo, hi := paginate(w, r, len(out))
	list := []any{}
	for _, cs := range out[lo:hi] {
		list = append(list, s.checkSuiteJSON(repo, cs))
	}
	writeJSON(w, http.StatusOK, map[string]any{"total_count": len(out), "check_suites": list})
}

func (s *Sim) combinedStatusLocked(w http.ResponseWriter, r *http.Request, repo *Repo, c *Commit) {
	if !needPermission(w, repo, "statuses", "read") {
		return
	}
	latest := latestStatusesLocked(repo, c.SHA)
	lo, hi := paginate(w, r, len(latest))
	list := []any{}
	for _, st := range latest[lo:hi] {
		m := s.statusJSON(repo, st)
		delete(m, "creator")
		list = append(list, m)
	}
	api := repoAPI(repo)
	writeJSON(w, http.StatusOK, map[string]any{"state": combinedStateLocked(repo, c.SHA), "statuses": list, "sha": c.SHA,
		"total_count": len(latest), "repository": s.repoJSON(repo), "commit_url": api + "/commits/" + c.SHA,
		"url": api + "/commits/" + c.SHA + "/status"})
}

func (s *Sim) listStatusesLocked(w http.ResponseWriter, r *http.Request, repo *Repo, c *Commit) {
	if !needPermission(w, repo, "statuses", "read") {
		return
	}
	var all []*CommitStatus
	for i := len(repo.Statuses) - 1; i >= 0; i-- {
		if repo.Statuses[i].SHA == c.SHA {
			all = append(all, repo.Statuses[i])
		}
	}
	lo, hi := paginate(w, r, len(all))
	list := []any{}
	for _, st := range all[lo:hi] {
		list = append(list, s.statusJSON(repo, st))
	}
	writeJSON(w, http.StatusOK, list)
}
