package harness

import (
	"fmt"
	"net/http"
	"sync"
	"testing"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/internal/ghsim"
	"github.com/wardenhq/warden/mirror"
)

// End-to-end tests of the history warden reads from GitHub rather than from
// deliveries (CONTRACT.md §5, §6): the comment trail of an existing issue
// that becomes an item, and the label events that repair
// admission-unrecorded.

// restCounter counts the simulator's REST exchanges by method and path.
type restCounter struct {
	mu sync.Mutex
	n  map[string]int
}

// countREST starts counting the REST requests warden makes to the
// simulator (the simulator has one observer; these tests are its only user).
func (x *e2e) countREST() *restCounter {
	c := &restCounter{n: map[string]int{}}
	x.Sim.Observe(func(ex ghsim.Exchange) {
		c.mu.Lock()
		c.n[ex.Method+" "+ex.Path]++
		c.mu.Unlock()
	}, nil)
	return c
}

func (c *restCounter) get(path string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[http.MethodGet+" "+path]
}

func (x *e2e) issuePath(n int, rest string) string {
	return fmt.Sprintf("/repos/%s/issues/%d/%s", x.Repo.FullName, n, rest)
}

// TestE2EHistoryBackfillOnce: an issue with a comment trail (claim and
// outcome markers by agents, prose, a reader's forged marker) gains the
// item label: warden reads its comments once (one page), and the trail
// shows through the API (attempts, findings). A later label delivery does
// not read them again.
func TestE2EHistoryBackfillOnce(t *testing.T) {
	t.Parallel()
	x := newE2E(t)
	maria := x.Person("maria", "maintain")
	rita := x.Person("rita", "read")
	worker := x.Sim.As("worker-7[bot]")
	pmBot := x.Sim.As("pm-agent[bot]")
	iss, err := maria.OpenIssue(x.Repo, "Migrate the session store", "spec")
	if err != nil {
		t.Fatal(err)
	}
	n := iss.Number
	id := idOf(n)
	x.say(t, worker, n, x.marker(id, "worker-7/old-1", 1))
	x.say(t, maria, n, "For reference, agents claim with a line like `"+x.marker(id, "someone/x", 9)+"` at the top.")
	x.say(t, worker, n, fmt.Sprintf("<!-- backlog-worker: outcome item=%s owner=worker-7/old-1 fence=1 result=released -->", id))
	x.say(t, pmBot, n, x.marker(id, "pm/old-2", 2))
	x.say(t, pmBot, n, fmt.Sprintf("<!-- backlog-worker: outcome item=%s owner=pm/old-2 fence=2 result=released -->", id))
	x.say(t, rita, n, x.marker(id, "rita/x", 3))
	x.MustSettle(t)
	if _, ok := x.item(t, id); ok {
		t.Fatalf("%s is an item before it has the item label", id)
	}

	calls := x.countREST()
	if _, err := maria.AddLabels(x.Repo, n, lblItem); err != nil {
		t.Fatal(err)
	}
	x.MustSettle(t)
	commentsPath := x.issuePath(n, "comments")
	if got := calls.get(commentsPath); got != 1 {
		t.Errorf("GET %s made %d times when the issue became an item, want 1 (one page for 6 comments)", commentsPath, got)
	}

	it := x.mustItem(t, id)
	if it.Attempts != 2 {
		t.Errorf("%s attempts %d, want 2 (the agents' two claims in its history)", id, it.Attempts)
	}
	s := x.mustReady(t)
	if !s.has(id) {
		t.Errorf("%s not ready (excluded as %q): a maintainer made it an item", id, s.exclusion(id))
	} else if got := s.attempts(id); got != 2 {
		t.Errorf("GET /ready attempts %d for %s, want 2", got, id)
	}
	if got := len(s.defects(id, gating.CodeForgedMarker)); got != 1 {
		t.Errorf("%s: %d forged-marker findings, want 1 (rita's): %+v", id, got, s.Defects)
	}
	noTrailDefects(t, s, id, gating.CodeMalformedMarker, gating.CodeUnbackedMarker)

	// Later label deliveries about the item do not read the history again.
	if _, err := maria.AddLabels(x.Repo, n, "bug"); err != nil {
		t.Fatal(err)
	}
	x.MustSettle(t)
	if _, err := maria.RemoveLabel(x.Repo, n, lblItem); err != nil {
		t.Fatal(err)
	}
	x.MustSettle(t)
	if _, err := maria.AddLabels(x.Repo, n, lblItem); err != nil {
		t.Fatal(err)
	}
	x.MustSettle(t)
	if got := calls.get(commentsPath); got != 1 {
		t.Errorf("GET %s made %d times in all after more labeled deliveries, want still 1", commentsPath, got)
	}
	if it := x.mustItem(t, id); it.Attempts != 2 {
		t.Errorf("%s attempts %d after more label deliveries, want 2", id, it.Attempts)
	}
}

// TestE2EHistoryAdmissionRepairAfterComment: the admission label is
// removed while warden receives no deliveries (admission-unrecorded: the
// label is off, no act on record). The next delivery about the item — a
// comment, whose payload carries the issue's labels — makes warden read the
// label events: a triager's removal admits the item (it joins the ready
// set, the label stays off); an agent's is undone (the label is put back).
// The events are read once: a further comment reads none.
func TestE2EHistoryAdmissionRepairAfterComment(t *testing.T) {
	t.Parallel()
	x := newE2E(t)
	olga := x.Person("olga", "read")
	x.admissionRepair(t, func(t *testing.T, n int) { x.say(t, olga, n, "Any news on this?") })
}

// TestE2EHistoryAdmissionRepairAfterEdit: the same, when the next delivery
// is issues.edited (the opener fixes a typo in the title).
func TestE2EHistoryAdmissionRepairAfterEdit(t *testing.T) {
	t.Parallel()
	x := newE2E(t)
	maria := x.Person("maria", "maintain")
	x.admissionRepair(t, func(t *testing.T, n int) {
		title := fmt.Sprintf("Item %d (retitled)", n)
		if _, err := maria.EditIssue(x.Repo, n, &title, nil); err != nil {
			t.Fatal(err)
		}
	})
}

// admissionRepair removes the admission label of two gated items while
// deliveries are dropped, by a triager and by an agent, then runs next on
// each item (the next delivery about it) and checks the repair.
func (x *e2e) admissionRepair(t *testing.T, next func(t *testing.T, n int)) {
	t.Helper()
	tom := x.Person("tom", "triage")
	olga := x.Person("olga", "read")
	agent := x.agent("builder[bot]", "write")
	byTom := x.create(t, PMToken, "Admitted while warden was away", []string{"priority:P1"})
	byAgent := x.create(t, PMToken, "Ungated by an agent while warden was away", []string{"priority:P1"})
	x.MustSettle(t)

	x.Sim.DropDeliveries(true)
	if _, err := tom.RemoveLabel(x.Repo, num(t, byTom), lblAdmission); err != nil {
		t.Fatal(err)
	}
	if _, err := agent.RemoveLabel(x.Repo, num(t, byAgent), lblAdmission); err != nil {
		t.Fatal(err)
	}
	x.MustSettle(t)
	x.Sim.DropDeliveries(false)
	if s := x.mustReady(t); s.has(byTom) || s.has(byAgent) {
		t.Fatalf("ready %v before any delivery about the items: the removals were not delivered", s.ids())
	}

	calls := x.countREST()
	next(t, num(t, byTom))
	next(t, num(t, byAgent))
	x.MustSettle(t)
	x.flush(t)

	s := x.mustReady(t)
	t.Run("triager's removal", func(t *testing.T) {
		n := num(t, byTom)
		if calls.get(x.issuePath(n, "events")) == 0 {
			t.Errorf("warden did not read the label events of #%d", n)
		}
		if x.labels(n)[lblAdmission] {
			t.Errorf("#%d: the admission label a triager removed was put back", n)
		}
		if !s.has(byTom) {
			t.Errorf("%s not admitted after the repair: excluded as %q, defects %+v", byTom, s.exclusion(byTom), s.Defects)
		}
		if c := s.codes(byTom)["admission-unrecorded"]; c != 0 {
			t.Errorf("%s still reported admission-unrecorded", byTom)
		}
		x.reportLacks(t, n, mirror.CodeAgentRemovedAdmission, "admission-unrecorded")
	})
	t.Run("agent's removal", func(t *testing.T) {
		n := num(t, byAgent)
		if calls.get(x.issuePath(n, "events")) == 0 {
			t.Errorf("warden did not read the label events of #%d", n)
		}
		if !x.labels(n)[lblAdmission] {
			t.Errorf("#%d: warden did not put back the admission label an agent removed", n)
		}
		if s.has(byAgent) || s.exclusion(byAgent) != gating.ExAwaitingAdmission {
			t.Errorf("%s: excluded as %q, want awaiting-admission", byAgent, s.exclusion(byAgent))
		}
	})
	if t.Failed() {
		return
	}

	// Read once: more comments read no label events.
	events := func() int {
		return calls.get(x.issuePath(num(t, byTom), "events")) + calls.get(x.issuePath(num(t, byAgent), "events"))
	}
	before := events()
	x.say(t, olga, num(t, byTom), "Thanks!")
	x.say(t, olga, num(t, byAgent), "Thanks!")
	x.MustSettle(t)
	x.flush(t)
	if after := events(); after != before {
		t.Errorf("more comments read the label events %d more times, want none", after-before)
	}
	if s := x.mustReady(t); !s.has(byTom) || s.has(byAgent) {
		t.Errorf("after more comments: ready %v, want %s and not %s", s.ids(), byTom, byAgent)
	}
}
