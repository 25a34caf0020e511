package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/internal/clock"
	"github.com/wardenhq/warden/internal/config"
	"github.com/wardenhq/warden/internal/ghsim"
	"github.com/wardenhq/warden/mirror"
	"github.com/wardenhq/warden/mirror/store"
)

// Shared helpers of the end-to-end tests written from CONTRACT.md §5–§7
// (gate_e2e_test.go, park_e2e_test.go, trailrules_e2e_test.go,
// commands_e2e_test.go). They read what a person sees on GitHub (labels,
// warden's comments, its reactions) from the simulator's state, and what an
// agent sees through the agent API.

// The repository's default labels (CONTRACT.md §2).
const (
	lblItem      = "backlog"
	lblAdmission = "needs-specification"
	lblParked    = "stale"
)

// e2e is an environment with a settable clock for warden and the simulator.
type e2e struct {
	*Env
	clk *clock.Offset
}

// e2eQuarantine is the tests' WARDEN_QUARANTINE, and pastQuarantine moves
// the clock past a 60-second lease and that quarantine (no evidence of work
// since): the claim is abandoned. The quarantine is shorter than the
// default hour because the installation token warden holds lives an hour
// on the simulator's (moved) clock while ghinstallation refreshes it on the
// real one: a test must move the clock by less than an hour in all.
const (
	e2eQuarantine  = 5 * time.Minute
	pastQuarantine = e2eQuarantine + 2*time.Minute
)

func newE2E(t *testing.T) *e2e {
	t.Helper()
	clk := &clock.Offset{}
	env := New(t, Options{Now: clk.Now, Settings: func(s *config.Settings) { s.Quarantine = e2eQuarantine }})
	return &e2e{Env: env, clk: clk}
}

// num is the issue number of an item id.
func num(t *testing.T, id string) int {
	t.Helper()
	n, err := gating.ParseID(id)
	if err != nil {
		t.Fatalf("item id %q: %v", id, err)
	}
	return n
}

func idOf(n int) string { return string(gating.IDFor(n)) }

// flush crosses the one-minute window of coalesced report-comment edits and
// runs warden's timer pass, so every edit that came due is on GitHub.
func (x *e2e) flush(t *testing.T) {
	t.Helper()
	x.clk.Advance(61 * time.Second)
	x.MustSweep(t)
}

// agent is a Bot account with role on the repository (an agent, §4; labels
// need triage on GitHub, so agents that label get write).
func (x *e2e) agent(login, role string) *ghsim.Actor {
	a := x.Sim.As(login)
	if role != "" {
		x.Sim.SetRole(x.Repo, login, role)
	}
	return a
}

// labels is the issue's labels on GitHub (lower-case names).
func (x *e2e) labels(n int) map[string]bool {
	out := map[string]bool{}
	x.Sim.Locked(func() {
		if i := x.Repo.Issues[n]; i != nil {
			for _, l := range i.Labels {
				out[strings.ToLower(l.Name)] = true
			}
		}
	})
	return out
}

// comment is a copy of a simulator comment (read under the lock).
type comment struct {
	ID        int64
	Login     string
	Body      string // for warden's comments: as read (see plain)
	Raw       string // the body as stored
	Edited    bool
	Reactions []reaction
}

type reaction struct{ Login, Content string }

// comments is the issue's comments, oldest first.
func (x *e2e) comments(n int) []comment {
	var out []comment
	x.Sim.Locked(func() {
		i := x.Repo.Issues[n]
		if i == nil {
			return
		}
		for _, id := range i.CommentIDs {
			c := x.Repo.Comments[id]
			if c == nil {
				continue
			}
			cc := comment{ID: c.ID, Login: c.User.Login, Body: c.Body, Raw: c.Body, Edited: c.UpdatedAt.After(c.CreatedAt)}
			for _, r := range c.Reactions {
				cc.Reactions = append(cc.Reactions, reaction{r.User.Login, r.Content})
			}
			out = append(out, cc)
		}
	})
	return out
}

// zwsp is what warden's report comment inserts to defuse mentions and
// references, and mdEscape a Markdown backslash escape; the tests compare
// text without either.
var (
	zwsp     = strings.NewReplacer("\u200b", "", "\u200c", "", "\u200d", "", "\u2060", "", "\ufeff", "")
	mdEscape = regexp.MustCompile(`\\([!-/:-@\[-\x60{-~])`)
)

// plain is a comment body as a person reads it rendered: without
// zero-width characters and backslash escapes.
func plain(s string) string { return mdEscape.ReplaceAllString(zwsp.Replace(s), "$1") }

// wardenComments is warden's comments on the issue whose first line starts
// with prefix (bodies without zero-width characters).
func (x *e2e) wardenComments(n int, prefix string) []comment {
	var out []comment
	for _, c := range x.comments(n) {
		if c.Login == x.Sim.BotLogin() && strings.HasPrefix(c.Body, prefix) {
			c.Body = plain(c.Body)
			out = append(out, c)
		}
	}
	return out
}

func reportFirstLine(n int) string {
	return fmt.Sprintf("<!-- backlog-warden: report item=issue-%d -->", n)
}

// reportComments is warden's report comments on the issue (at most one, §6).
func (x *e2e) reportComments(n int) []comment {
	var out []comment
	for _, c := range x.wardenComments(n, "<!-- backlog-warden: report ") {
		if firstLine(c.Raw) == reportFirstLine(n) {
			out = append(out, c)
		}
	}
	return out
}

// report is the body of the issue's one report comment ("" when there is
// none); more than one is an error.
func (x *e2e) report(t *testing.T, n int) string {
	t.Helper()
	rs := x.reportComments(n)
	switch len(rs) {
	case 0:
		return ""
	case 1:
		return rs[0].Body
	}
	t.Errorf("#%d has %d report comments, want one (edited in place): %+v", n, len(rs), rs)
	return rs[len(rs)-1].Body
}

// mustReportWith checks that the issue's report comment lists each code and
// mentions each of also (for example the actor it names).
func (x *e2e) mustReportWith(t *testing.T, n int, codes []string, also ...string) string {
	t.Helper()
	body := x.report(t, n)
	if body == "" {
		t.Errorf("#%d has no report comment; want one listing %v", n, codes)
		return ""
	}
	for _, c := range codes {
		if !strings.Contains(body, c) {
			t.Errorf("#%d report comment does not list %s:\n%s", n, c, body)
		}
	}
	for _, s := range also {
		if !strings.Contains(body, s) {
			t.Errorf("#%d report comment does not mention %q:\n%s", n, s, body)
		}
	}
	return body
}

// reportLacks checks that the issue's report comment (if any) does not list
// any of codes.
func (x *e2e) reportLacks(t *testing.T, n int, codes ...string) {
	t.Helper()
	body := x.report(t, n)
	for _, c := range codes {
		if strings.Contains(body, c) {
			t.Errorf("#%d report comment lists %s, want not:\n%s", n, c, body)
		}
	}
}

// parkComments is warden's park comments on the issue.
func (x *e2e) parkComments(n int) []comment {
	return x.wardenComments(n, fmt.Sprintf("<!-- backlog-warden: park item=issue-%d ", n))
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return strings.TrimSuffix(line, "\r")
}

// wardenReactions is warden's reactions on a comment.
func (x *e2e) wardenReactions(t *testing.T, n int, commentID int64) []string {
	t.Helper()
	for _, c := range x.comments(n) {
		if c.ID != commentID {
			continue
		}
		var out []string
		for _, r := range c.Reactions {
			if r.Login == x.Sim.BotLogin() {
				out = append(out, r.Content)
			}
		}
		return out
	}
	t.Fatalf("comment %d is not on #%d", commentID, n)
	return nil
}

// mustReact checks that warden answered the comment with exactly the
// reaction want ("" = no reaction at all).
func (x *e2e) mustReact(t *testing.T, n int, c *ghsim.Comment, want string) {
	t.Helper()
	got := x.wardenReactions(t, n, c.ID)
	switch {
	case want == "" && len(got) != 0:
		t.Errorf("#%d comment %q: warden reacted %v, want no reaction", n, c.Body, got)
	case want != "" && !slices.Equal(got, []string{want}):
		t.Errorf("#%d comment %q: warden reacted %v, want [%s]", n, c.Body, got, want)
	}
}

// say posts a comment as actor.
func (x *e2e) say(t *testing.T, a *ghsim.Actor, n int, body string) *ghsim.Comment {
	t.Helper()
	c, err := a.Comment(x.Repo, n, body)
	if err != nil {
		t.Fatalf("%s comments on #%d: %v", a.User().Login, n, err)
	}
	return c
}

// itemFull is GET /items/{id} as a client reads it.
type itemFull struct {
	ID       string            `json:"id"`
	Tags     []string          `json:"tags"`
	Attempts int               `json:"attempts"`
	Claim    store.ClaimStatus `json:"claim"`
}

func (i itemFull) has(tag string) bool { return slices.Contains(i.Tags, tag) }

// withPrefix is the item's tags that start with prefix.
func (i itemFull) withPrefix(prefix string) []string {
	var out []string
	for _, tag := range i.Tags {
		if strings.HasPrefix(tag, prefix) {
			out = append(out, tag)
		}
	}
	return out
}

// item recalls an item through the agent API; ok is false when it is no item.
func (x *e2e) item(t *testing.T, id string) (itemFull, bool) {
	t.Helper()
	var it itemFull
	code, err := x.API(context.Background(), WorkerToken, http.MethodGet, "/items/"+id, nil, &it)
	if code == http.StatusNotFound {
		return it, false
	}
	if err != nil || code != http.StatusOK {
		t.Fatalf("GET /items/%s: %d %v", id, code, err)
	}
	return it, true
}

func (x *e2e) mustItem(t *testing.T, id string) itemFull {
	t.Helper()
	it, ok := x.item(t, id)
	if !ok {
		t.Fatalf("%s is not an item (404)", id)
	}
	return it
}

// parkedWith checks the parking tags: state:parked with exactly one route.
func parkedWith(t *testing.T, it itemFull, owner, topic string) {
	t.Helper()
	if !it.has("state:parked") || !slices.Equal(it.withPrefix("ruling-owner:"), []string{"ruling-owner:" + owner}) ||
		!slices.Equal(it.withPrefix("ruling-topic:"), []string{"ruling-topic:" + topic}) {
		t.Errorf("%s tags %v, want state:parked ruling-owner:%s ruling-topic:%s", it.ID, it.Tags, owner, topic)
	}
}

// notParked checks that no parking tag is left.
func notParked(t *testing.T, it itemFull) {
	t.Helper()
	if p := append(append(it.withPrefix("state:"), it.withPrefix("ruling-owner:")...), it.withPrefix("ruling-topic:")...); len(p) != 0 {
		t.Errorf("%s still carries %v (tags %v)", it.ID, p, it.Tags)
	}
}

func (s readySet) has(id string) bool { return slices.Contains(s.ids(), id) }

// codes counts the defects of GET /ready for an item by code.
func (s readySet) codes(id string) map[string]int {
	out := map[string]int{}
	for _, d := range s.Defects {
		if string(d.Item) == id {
			out[d.Code]++
		}
	}
	return out
}

// marker is a claim marker with at= from warden's clock (so markers
// and grants agree when a test moves the clock).
func (x *e2e) marker(id, owner string, fence int64) string {
	return fmt.Sprintf("<!-- backlog-worker: claim item=%s owner=%s region=local fence=%d at=%s -->",
		id, owner, fence, x.clk.Now().UTC().Format("2006-01-02T15:04:05Z"))
}

// takeoverMarker is a claim marker in the takeover form (§6).
func (x *e2e) takeoverMarker(id, owner string, fence int64, prior string, priorFence int64) string {
	return fmt.Sprintf("<!-- backlog-worker: claim item=%s owner=%s region=local fence=%d at=%s prior-owner=%s prior-fence=%d -->",
		id, owner, fence, x.clk.Now().UTC().Format("2006-01-02T15:04:05Z"), prior, priorFence)
}

// claimFor claims id for owner with a lease and returns the fence.
func (x *e2e) claimFor(t *testing.T, token, id, owner string, lease int) int64 {
	t.Helper()
	return granted(t, x.claim(t, token, id, map[string]any{"owner": owner, "leaseSeconds": lease}))
}

// openWithLabelsAs opens an issue as login with the given role and labels,
// as GitHub keeps them when an issue form applies them (GitHub drops labels
// a person without push access passes to the REST API, and so does the
// simulator): the account gets write only while it opens the issue, and the
// deliveries are held until its role is back to role, so warden sees the
// opener with role.
func (x *e2e) openWithLabelsAs(t *testing.T, login, role, title string, labels ...string) int {
	t.Helper()
	x.MustSettle(t)
	a := x.Sim.As(login)
	x.Sim.HoldDeliveries()
	x.Sim.SetRole(x.Repo, login, "write")
	iss, err := a.OpenIssue(x.Repo, title, "spec of "+title, labels...)
	x.Sim.SetRole(x.Repo, login, role)
	x.Sim.ReleaseDeliveries(nil)
	if err != nil {
		t.Fatal(err)
	}
	return iss.Number
}

// removeLabelAs removes a label as login, who has triage for the act only
// and role when warden handles it (a read-only person cannot remove labels
// on GitHub; this is one whose role was lowered before the delivery was
// handled, or an integration acting for them).
func (x *e2e) removeLabelAs(t *testing.T, login, role string, n int, label string) {
	t.Helper()
	x.MustSettle(t)
	a := x.Sim.As(login)
	x.Sim.HoldDeliveries()
	x.Sim.SetRole(x.Repo, login, "triage")
	_, err := a.RemoveLabel(x.Repo, n, label)
	x.Sim.SetRole(x.Repo, login, role)
	x.Sim.ReleaseDeliveries(nil)
	if err != nil {
		t.Fatal(err)
	}
}

// rehandle runs warden's handlers a second time on every issues and
// issue_comment delivery about issue n (as a redelivery that passed the
// inbox's de-duplication would), then settles.
func (x *e2e) rehandle(t *testing.T, n int) {
	t.Helper()
	ctx := context.Background()
	for _, d := range x.Sim.Deliveries() {
		if d.Event != "issues" && d.Event != "issue_comment" {
			continue
		}
		var p struct {
			Issue struct {
				Number int `json:"number"`
			} `json:"issue"`
			Sender struct {
				Login string `json:"login"`
			} `json:"sender"`
		}
		if err := json.Unmarshal(d.Payload, &p); err != nil || p.Issue.Number != n {
			continue
		}
		ev := mirror.Event{Name: d.Event, Action: d.Action, DeliveryID: d.GUID, Installation: d.InstallationID,
			Payload: d.Payload, FromSelf: p.Sender.Login == x.Sim.BotLogin()}
		var err error
		if d.Event == "issues" {
			_, err = x.Service.Mirror.HandleIssues(ctx, ev)
		} else {
			_, err = x.Service.Mirror.HandleIssueComment(ctx, ev)
		}
		if err != nil {
			t.Fatalf("handling %s.%s %s again: %v", d.Event, d.Action, d.GUID, err)
		}
	}
	x.MustSettle(t)
}

// countLike matches a repeat count of two in a finding's text.
var countLike = regexp.MustCompile(`(?i)\b2\b|twice`)

// findingLine is the line of body that lists code (and the lines of its
// detail up to the next finding), "" when absent.
func findingLine(body, code string) string {
	lines := strings.Split(body, "\n")
	for i, l := range lines {
		if strings.Contains(l, code) {
			out := l
			for _, m := range lines[i+1:] {
				if strings.HasPrefix(m, "- ") || strings.TrimSpace(m) == "" {
					break
				}
				out += "\n" + m
			}
			return out
		}
	}
	return ""
}

// cycle is one attempt: claim id for owner, post the claim marker as agent
// (at= on warden's clock), release. It returns the marker comment.
func (x *e2e) cycle(t *testing.T, token, owner string, agent *ghsim.Actor, id string) *ghsim.Comment {
	t.Helper()
	fence := x.claimFor(t, token, id, owner, 600)
	c := x.say(t, agent, num(t, id), x.marker(id, owner, fence))
	x.MustSettle(t)
	x.release(t, token, id, fence)
	x.MustSettle(t)
	return c
}

// refused checks that a claim was refused as not ready with one of the
// exclusions (any when none is given).
func refused(t *testing.T, r store.ClaimResult, exclusions ...string) {
	t.Helper()
	if r.Granted || r.Reason == nil || *r.Reason != store.ReasonNotReady || r.Exclusion == nil ||
		(len(exclusions) > 0 && !slices.Contains(exclusions, *r.Exclusion)) {
		b, _ := json.Marshal(r)
		t.Errorf("claim answered %s, want granted false, reason not-ready, exclusion in %v", b, exclusions)
	}
}

// apiFindings counts an item's findings of code in the agent API: GET
// /ready's defects and GET /report's defects (the contract lists both; a
// finding must be in at least one, and once in each that lists it).
func (x *e2e) apiFindings(t *testing.T, s readySet, id, code string) int {
	t.Helper()
	inReady := s.codes(id)[code]
	inReport := 0
	for _, d := range x.mustReport(t).Defects {
		if string(d.Item) == id && d.Code == code {
			inReport++
		}
	}
	return max(inReady, inReport)
}
