package harness

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-github/v66/github"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/mirror"
)

// End-to-end tests of CONTRACT.md §4 (who is who): a write-access person
// who posts a worker marker becomes an agent, warden never answers its own
// bot, and a forged marker makes nobody an agent.

// TestE2EIdentityUndeclaredAgent: a User with write access, not configured
// as an agent, posts a claim marker backed by a grant: it is recorded as an
// agent and reported undeclared-agent once. Afterwards its removal of the
// admission label is no admission (re-added, agent-removed-admission), the
// login is reported shared-identity, and its settings push is no human's.
func TestE2EIdentityUndeclaredAgent(t *testing.T) {
	t.Parallel()
	x := newE2E(t)
	dave := x.Person("dave", "write")
	worked := x.create(t, HumanToken, "Rebuild the search index", []string{"priority:P1"})
	gated := x.create(t, PMToken, "Proposed by the pm agent", []string{"priority:P1"})
	x.MustSettle(t)

	f1 := x.claimFor(t, WorkerToken, worked, "worker-7/dave-1", 600)
	x.say(t, dave, num(t, worked), x.marker(worked, "worker-7/dave-1", f1))
	x.MustSettle(t)

	undeclared := func(s readySet) []gating.Defect {
		var out []gating.Defect
		for _, d := range s.withCode(gating.CodeUndeclaredAgent) {
			if strings.Contains(d.Detail, "dave") {
				out = append(out, d)
			}
		}
		return out
	}
	s := x.mustReady(t)
	if ds := undeclared(s); len(ds) != 1 {
		t.Errorf("GET /ready lists undeclared-agent for dave %d times, want once: %+v", len(ds), s.Defects)
	}
	// The marker counts: dave is an agent now, and the grant is marked.
	if it := x.mustItem(t, worked); it.Attempts != 1 {
		t.Errorf("%s attempts %d, want 1 (dave's marker is backed by the grant)", worked, it.Attempts)
	}
	noTrailDefects(t, s, worked, gating.CodeForgedMarker, gating.CodeUnbackedMarker, gating.CodeClaimedUnmarked)

	// A second marker by dave (next attempt): still reported once.
	x.release(t, WorkerToken, worked, f1)
	f2 := x.claimFor(t, WorkerToken, worked, "worker-7/dave-2", 600)
	x.say(t, dave, num(t, worked), x.marker(worked, "worker-7/dave-2", f2))
	x.MustSettle(t)
	if ds := undeclared(x.mustReady(t)); len(ds) != 1 {
		t.Errorf("after a second marker: undeclared-agent for dave listed %d times, want once: %+v", len(ds), ds)
	}

	// dave removes the admission label of another item: no admission.
	n := num(t, gated)
	if _, err := dave.RemoveLabel(x.Repo, n, lblAdmission); err != nil {
		t.Fatal(err)
	}
	x.MustSettle(t)
	x.flush(t)
	if !x.labels(n)[lblAdmission] {
		t.Errorf("#%d: warden did not re-add the admission label a recorded agent removed", n)
	}
	s = x.mustReady(t)
	if s.has(gated) || s.exclusion(gated) != gating.ExAwaitingAdmission {
		t.Errorf("%s: ready %v, excluded as %q, want awaiting-admission", gated, s.ids(), s.exclusion(gated))
	}
	if c := x.apiFindings(t, s, gated, mirror.CodeAgentRemovedAdmission); c != 1 {
		t.Errorf("%s: the API lists agent-removed-admission %d times, want once: %+v", gated, c, s.Defects)
	}
	x.mustReportWith(t, n, []string{mirror.CodeAgentRemovedAdmission}, "dave")
	shared := 0
	for _, d := range s.withCode(mirror.CodeSharedIdentity) {
		if strings.Contains(d.Detail, "dave") {
			shared++
		}
	}
	if shared == 0 {
		t.Errorf("GET /ready does not report shared-identity for dave: %+v", s.Defects)
	}

	// A push by a recorded agent is no human's: the settings stay.
	x.pushSettings(t, dave, "main", "poison_threshold: 1\n")
	if ds := x.mustReady(t).withCode(mirror.SettingsChangedByAgent); len(ds) == 0 {
		t.Errorf("a settings push by the recorded agent dave is not reported %s", mirror.SettingsChangedByAgent)
	}
	x.release(t, WorkerToken, worked, f2)
	x.MustSweep(t)
	if it := x.mustItem(t, worked); it.has("state:parked") {
		t.Errorf("%s parked at %d attempts: dave's poison_threshold 1 took effect", worked, it.Attempts)
	}
}

// TestE2EIdentityWardenNotAnswered: comments by warden's own bot are never
// commands: `/backlog admit` and `/backlog park` posted through warden's
// installation client get no reaction and change nothing.
func TestE2EIdentityWardenNotAnswered(t *testing.T) {
	t.Parallel()
	x := newE2E(t)
	ctx := context.Background()
	gated := num(t, x.create(t, PMToken, "Gated item", []string{"priority:P1"}))
	admitted := num(t, x.create(t, HumanToken, "Admitted item", []string{"priority:P1"}))
	x.MustSettle(t)

	gh, err := x.Service.App.Installation(x.Inst.ID)
	if err != nil {
		t.Fatal(err)
	}
	post := func(n int, body string) int64 {
		c, _, err := gh.Issues.CreateComment(ctx, "acme", "app", n, &github.IssueComment{Body: github.String(body)})
		if err != nil {
			t.Fatal(err)
		}
		return c.GetID()
	}
	admit := post(gated, "/backlog admit")
	park := post(admitted, "/backlog park ruling-owner=pm ruling-topic=design\nShould this wait?")
	x.MustSettle(t)
	x.flush(t)

	if r := x.wardenReactions(t, gated, admit); len(r) != 0 {
		t.Errorf("warden reacted %v to its own /backlog admit", r)
	}
	if r := x.wardenReactions(t, admitted, park); len(r) != 0 {
		t.Errorf("warden reacted %v to its own /backlog park", r)
	}
	s := x.mustReady(t)
	stillGated(t, x, gated, s)
	notParked(t, x.mustItem(t, idOf(admitted)))
	if x.labels(admitted)[lblParked] || !s.has(idOf(admitted)) {
		t.Errorf("#%d parked by warden's own comment: labels %v, excluded as %q", admitted, x.labels(admitted), s.exclusion(idOf(admitted)))
	}
	x.reportLacks(t, gated, "admit")
}

// TestE2EIdentityForgedMarker: a marker posted by a person without write
// access is forged-marker and makes nobody an agent: that person, with
// triage, still admits by removing the admission label. Two cases: a
// triager throughout (triage is no write access), and a reader given triage
// later (after the ten minutes the role is cached for; warden's clock is
// moved).
func TestE2EIdentityForgedMarker(t *testing.T) {
	t.Parallel()
	x := newE2E(t)
	worker := x.Sim.As("worker-7[bot]")
	worked := x.create(t, HumanToken, "Forged on", []string{"priority:P1"})
	gatedTom := x.create(t, PMToken, "Admitted by the triager", []string{"priority:P1"})
	gatedRita := x.create(t, PMToken, "Admitted by the former reader", []string{"priority:P1"})
	x.MustSettle(t)
	tom := x.Person("tom", "triage")
	rita := x.Person("rita", "read")

	f := x.claimFor(t, WorkerToken, worked, "worker-7/a", 3600)
	x.say(t, worker, num(t, worked), x.marker(worked, "worker-7/a", f))
	x.say(t, tom, num(t, worked), x.marker(worked, "tom/x", f+1))
	x.say(t, rita, num(t, worked), x.marker(worked, "rita/x", f+2))
	x.MustSettle(t)

	s := x.mustReady(t)
	if got := len(s.defects(worked, gating.CodeForgedMarker)); got != 2 {
		t.Errorf("%s: %d forged-marker findings, want 2 (tom's and rita's): %+v", worked, got, s.Defects)
	}
	if ds := s.withCode(gating.CodeUndeclaredAgent); len(ds) != 0 {
		t.Errorf("a forged marker made an agent: %+v", ds)
	}
	if it := x.mustItem(t, worked); it.Attempts != 1 {
		t.Errorf("%s attempts %d, want 1: forged markers count nothing", worked, it.Attempts)
	}

	check := func(t *testing.T, who, id string) {
		t.Helper()
		n := num(t, id)
		if x.labels(n)[lblAdmission] {
			t.Errorf("#%d: the admission label %s removed came back", n, who)
		}
		s := x.mustReady(t)
		if !s.has(id) {
			t.Errorf("%s not admitted by %s: excluded as %q", id, who, s.exclusion(id))
		}
		x.reportLacks(t, n, mirror.CodeAgentRemovedAdmission)
		for _, d := range s.withCode(mirror.CodeSharedIdentity) {
			if strings.Contains(d.Detail, who) {
				t.Errorf("%s reported shared-identity after a forged marker: %+v", who, d)
			}
		}
	}
	t.Run("triager", func(t *testing.T) {
		if _, err := tom.RemoveLabel(x.Repo, num(t, gatedTom), lblAdmission); err != nil {
			t.Fatal(err)
		}
		x.MustSettle(t)
		x.flush(t)
		check(t, "tom", gatedTom)
	})
	t.Run("reader given triage later", func(t *testing.T) {
		x.Sim.SetRole(x.Repo, "rita", "triage")
		x.clk.Advance(11 * time.Minute)
		if _, err := rita.RemoveLabel(x.Repo, num(t, gatedRita), lblAdmission); err != nil {
			t.Fatal(err)
		}
		x.MustSettle(t)
		x.flush(t)
		check(t, "rita", gatedRita)
	})
}
