package mirror

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-github/v66/github"

	"github.com/wardenhq/warden/mirror/store"
)

// testBot is warden's own login in the unit tests.
const testBot = "warden[bot]"

// fakeCalls is GitHub as the handlers' unit tests see it: one repository
// in memory (issue labels and their label events, comments, reactions,
// pull requests, check runs, compares and roles), behind repoCalls. Each
// call is logged by name with its arguments ("addLabels 5 [stale]"), so a
// test asserts which calls were made, in what order. Writes are warden's:
// a label it adds or removes appears in the label events as testBot's
// act, a comment it posts is testBot's.
type fakeCalls struct {
	now func() time.Time

	mu     sync.Mutex
	labels map[int][]string
	events map[int][]*github.IssueEvent
	// comments are each issue's comments, oldest first.
	comments  map[int][]*github.IssueComment
	reactions map[int64][]string
	pulls     map[int]*github.PullRequest
	// runs are the check runs by head commit.
	runs map[string][]*github.CheckRun
	// compares answer "base...head"; one missing is errNotFound.
	compares map[string]*github.CommitsComparison
	// roles answer the role lookup; a login missing from it fails it.
	roles map[string]string
	// issues answer the read of an issue (its labels are the fake's); one
	// missing is errNotFound.
	issues map[int]*github.Issue
	// fail fails a call (by method name) before it has any effect; lost
	// makes it take effect, then answer with the error (the answer lost
	// on the way back).
	fail, lost map[string]error
	nextID     int64
	log        []string
}

var _ repoCalls = (*fakeCalls)(nil)

func newFakeCalls(now func() time.Time) *fakeCalls {
	return &fakeCalls{now: now, labels: map[int][]string{}, events: map[int][]*github.IssueEvent{},
		comments: map[int][]*github.IssueComment{}, reactions: map[int64][]string{}, pulls: map[int]*github.PullRequest{},
		runs: map[string][]*github.CheckRun{}, compares: map[string]*github.CommitsComparison{}, roles: map[string]string{}, issues: map[int]*github.Issue{},
		fail: map[string]error{}, lost: map[string]error{}, nextID: 1000}
}

// newMirror is a Mirror over the env's store whose GitHub is f; any call
// that does not go through f fails (failingClients).
func (e *env) newMirror(f *fakeCalls) *Mirror {
	return &Mirror{Ledger: e.l, Acts: e.acts, GitHub: failingClients{}, Perms: NewPermissions(), Agents: []string{"pm-agent"},
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: e.clock.Now, Bot: func() string { return testBot },
		calls: func(r store.Repo) (repoCalls, error) {
			if r.ID != e.repo {
				return nil, fmt.Errorf("no fake for repository %d", r.ID)
			}
			return f, nil
		}}
}

// call logs a call and answers whether it may go on: err is its failure
// (before any effect), lost the error to answer with after its effect.
func (f *fakeCalls) call(method string, args ...any) (err, lost error) {
	s := method
	for _, a := range args {
		s += " " + fmt.Sprint(a)
	}
	f.log = append(f.log, s)
	return f.fail[method], f.lost[method]
}

// calls returns the calls made so far whose log line begins with prefix
// (all of them for "").
func (f *fakeCalls) calls(prefix string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, l := range f.log {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return out
}

func (f *fakeCalls) id() int64 {
	f.nextID++
	return f.nextID
}

// labelEvent adds a labeled or unlabeled event to issue n by login (an
// account of type typ) at at, and puts the issue's labels in step.
func (f *fakeCalls) labelEvent(n int, action, label, login, typ string, at time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.labelEventLocked(n, action, label, login, typ, at)
}

func (f *fakeCalls) labelEventLocked(n int, action, label, login, typ string, at time.Time) {
	f.events[n] = append(f.events[n], &github.IssueEvent{ID: github.Int64(f.id()), Event: github.String(action),
		Actor: &github.User{Login: github.String(login), Type: github.String(typ)}, Label: &github.Label{Name: github.String(label)},
		CreatedAt: &github.Timestamp{Time: at}})
	has := slices.Contains(f.labels[n], label)
	switch {
	case action == "labeled" && !has:
		f.labels[n] = append(f.labels[n], label)
	case action == "unlabeled" && has:
		f.labels[n] = slices.DeleteFunc(f.labels[n], func(l string) bool { return l == label })
	}
}

// hasLabel reports whether issue n carries label.
func (f *fakeCalls) hasLabel(n int, label string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Contains(f.labels[n], label)
}

// commentsOn returns issue n's comments.
func (f *fakeCalls) commentsOn(n int) []*github.IssueComment {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.comments[n])
}

// reactionsOn returns the reactions on comment id, in the order made.
func (f *fakeCalls) reactionsOn(id int64) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.reactions[id])
}

// runsOn returns the check runs on sha.
func (f *fakeCalls) runsOn(sha string) []*github.CheckRun {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.runs[sha])
}

// pageOf is one page of per items of all (page 0 and 1 are the first), with
// the number of the last page (0 when all fit one, as GitHub's missing
// Link header reads) and of the next (0: none).
func pageOf[T any](all []T, page, per int) (items []T, last, next int) {
	if page < 1 {
		page = 1
	}
	pages := (len(all) + per - 1) / per
	if pages > 1 {
		last = pages
	}
	if page < pages {
		next = page + 1
	}
	lo := min((page-1)*per, len(all))
	return all[lo:min(lo+per, len(all))], last, next
}

func (f *fakeCalls) issueEvents(_ context.Context, n, p int) ([]*github.IssueEvent, int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err, _ := f.call("issueEvents", n, p); err != nil {
		return nil, 0, err
	}
	evs, last, _ := pageOf(f.events[n], p, 100)
	return evs, last, nil
}

func (f *fakeCalls) addLabels(_ context.Context, n int, labels []string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	err, lost := f.call("addLabels", n, labels)
	if err != nil {
		return err
	}
	for _, l := range labels {
		if !slices.Contains(f.labels[n], l) {
			f.labelEventLocked(n, "labeled", l, testBot, "Bot", f.now())
		}
	}
	return lost
}

func (f *fakeCalls) removeLabel(_ context.Context, n int, label string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	err, lost := f.call("removeLabel", n, label)
	if err != nil {
		return err
	}
	if slices.Contains(f.labels[n], label) {
		f.labelEventLocked(n, "unlabeled", label, testBot, "Bot", f.now())
	}
	return lost
}

func (f *fakeCalls) createComment(_ context.Context, n int, body string) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	err, lost := f.call("createComment", n)
	if err != nil {
		return 0, err
	}
	now := &github.Timestamp{Time: f.now()}
	c := &github.IssueComment{ID: github.Int64(f.id()), Body: github.String(body), User: &github.User{Login: github.String(testBot), Type: github.String("Bot")},
		CreatedAt: now, UpdatedAt: now}
	f.comments[n] = append(f.comments[n], c)
	if lost != nil {
		return 0, lost
	}
	return c.GetID(), nil
}

func (f *fakeCalls) issueComments(_ context.Context, n int, since time.Time, p int) ([]*github.IssueComment, int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err, _ := f.call("issueComments", n, p); err != nil {
		return nil, 0, err
	}
	var all []*github.IssueComment
	for _, c := range f.comments[n] {
		if !c.GetUpdatedAt().Before(since) {
			all = append(all, c)
		}
	}
	cs, _, next := pageOf(all, p, 100)
	return cs, next, nil
}

func (f *fakeCalls) react(_ context.Context, commentID int64, content string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	err, lost := f.call("react", commentID, content)
	if err != nil {
		return err
	}
	if !slices.Contains(f.reactions[commentID], content) {
		f.reactions[commentID] = append(f.reactions[commentID], content)
	}
	return lost
}

func (f *fakeCalls) issue(_ context.Context, n int) (*github.Issue, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err, _ := f.call("issue", n); err != nil {
		return nil, err
	}
	is, ok := f.issues[n]
	if !ok {
		return nil, errNotFound
	}
	cp := *is
	cp.Labels = nil
	for _, l := range f.labels[n] {
		cp.Labels = append(cp.Labels, &github.Label{Name: github.String(l)})
	}
	return &cp, nil
}

func (f *fakeCalls) pull(_ context.Context, n int) (*github.PullRequest, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err, _ := f.call("pull", n); err != nil {
		return nil, err
	}
	pr, ok := f.pulls[n]
	if !ok {
		return nil, errNotFound
	}
	return pr, nil
}

func (f *fakeCalls) checkRunsFor(_ context.Context, sha, name string) ([]*github.CheckRun, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err, _ := f.call("checkRunsFor", shortSHA(sha), name); err != nil {
		return nil, err
	}
	var out []*github.CheckRun
	for _, r := range f.runs[sha] {
		if r.GetName() == name {
			out = append(out, r)
		}
	}
	return out, nil
}

func (f *fakeCalls) createCheckRun(_ context.Context, opts github.CreateCheckRunOptions) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	err, lost := f.call("createCheckRun", shortSHA(opts.HeadSHA), opts.GetConclusion())
	if err != nil {
		return 0, err
	}
	slug, _ := strings.CutSuffix(testBot, "[bot]")
	r := &github.CheckRun{ID: github.Int64(f.id()), Name: github.String(opts.Name), HeadSHA: github.String(opts.HeadSHA),
		Status: opts.Status, Conclusion: opts.Conclusion, Output: opts.Output, App: &github.App{Slug: github.String(slug)}}
	f.runs[opts.HeadSHA] = append(f.runs[opts.HeadSHA], r)
	if lost != nil {
		return 0, lost
	}
	return r.GetID(), nil
}

func (f *fakeCalls) updateCheckRun(_ context.Context, id int64, opts github.UpdateCheckRunOptions) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	err, lost := f.call("updateCheckRun", id, opts.GetConclusion())
	if err != nil {
		return err
	}
	for _, rs := range f.runs {
		for _, r := range rs {
			if r.GetID() == id {
				r.Status, r.Conclusion, r.Output = opts.Status, opts.Conclusion, opts.Output
				return lost
			}
		}
	}
	return errNotFound
}

func (f *fakeCalls) compare(_ context.Context, base, head string) (*github.CommitsComparison, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err, _ := f.call("compare", base+"..."+head); err != nil {
		return nil, err
	}
	c, ok := f.compares[base+"..."+head]
	if !ok {
		return nil, errNotFound
	}
	return c, nil
}

func (f *fakeCalls) role(_ context.Context, login string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err, _ := f.call("role", login); err != nil {
		return "", err
	}
	r, ok := f.roles[login]
	if !ok {
		return "", errors.New("fake: the permission lookup failed")
	}
	return r, nil
}

// noCalls fails t when any call was made whose log line begins with one
// of prefixes.
func (f *fakeCalls) noCalls(t *testing.T, prefixes ...string) {
	t.Helper()
	for _, p := range prefixes {
		if got := f.calls(p); len(got) > 0 {
			t.Errorf("calls %v, want none", got)
		}
	}
}
