package harness

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/internal/ghsim"
	"github.com/wardenhq/warden/mirror"
)

// End-to-end tests of issue 24, the gate after admission: an agent that
// rewrites an admitted item's specification (its issue's title or body)
// gets the item gated again (the admission label back, out of the ready
// set, spec-changed-by-agent in the report comment); a human's edit, warden's
// own, an agent's draft of an item still gated and an agent's label change
// do not. Deliveries out of order and missed ones come out the same.

const codeSpec = gating.CodeSpecChangedByAgent

// editSpec edits issue n's title (when title != "") or body as a.
func (x *e2e) editSpec(t *testing.T, a *ghsim.Actor, n int, title, body string) {
	t.Helper()
	x.clk.Advance(2 * time.Second) // GitHub's times have one-second resolution: keep acts apart
	var tp, bp *string
	if title != "" {
		tp = &title
	}
	if body != "" {
		bp = &body
	}
	if _, err := a.EditIssue(x.Repo, n, tp, bp); err != nil {
		t.Fatalf("%s edits #%d: %v", a.User().Login, n, err)
	}
}

// admittedBy makes a gated item that the human h admits by removing the
// admission label, and returns its number.
func (x *e2e) admittedBy(t *testing.T, h *ghsim.Actor, title string) int {
	t.Helper()
	n := num(t, x.create(t, PMToken, title, []string{"priority:P1"}))
	x.MustSettle(t)
	x.clk.Advance(2 * time.Second)
	if _, err := h.RemoveLabel(x.Repo, n, lblAdmission); err != nil {
		t.Fatal(err)
	}
	x.MustSettle(t)
	return n
}

// mustRegated checks what a person and an agent see of a re-gated item: the
// admission label back, not ready (awaiting admission), and the report
// comment listing spec-changed-by-agent with a link to the issue, the edit
// history and what re-admits it; also names each of also.
func (x *e2e) mustRegated(t *testing.T, n int, also ...string) {
	t.Helper()
	id := idOf(n)
	if !x.labels(n)[lblAdmission] {
		t.Errorf("#%d: the admission label was not put back after the specification changed", n)
	}
	s := x.mustReady(t)
	if s.has(id) || s.exclusion(id) != gating.ExAwaitingAdmission {
		t.Errorf("%s: ready %v, excluded as %q; want awaiting-admission", id, s.ids(), s.exclusion(id))
	}
	if c := x.apiFindings(t, s, id, codeSpec); c != 1 {
		t.Errorf("%s: the API lists %s %d times, want once: %+v", id, codeSpec, c, s.Defects)
	}
	url := fmt.Sprintf("https://github.com/%s/issues/%d", x.Repo.FullName, n) // the simulator's html_url
	body := x.mustReportWith(t, n, []string{codeSpec}, append([]string{"edit history", "edited", "/backlog admit", "removes the admission label"}, also...)...)
	if line := findingLine(body, codeSpec); !strings.Contains(line, url) {
		t.Errorf("#%d: the finding does not link the issue %s: %q", n, url, line)
	}
}

// mustAdmittedClean checks an item is ready with no spec-changed-by-agent.
func (x *e2e) mustAdmittedClean(t *testing.T, n int) {
	t.Helper()
	id := idOf(n)
	if x.labels(n)[lblAdmission] {
		t.Errorf("#%d carries the admission label, want admitted", n)
	}
	if s := x.mustReady(t); !s.has(id) {
		t.Errorf("%s not ready: excluded as %q (defects %+v)", id, s.exclusion(id), s.codes(id))
	}
	x.reportLacks(t, n, codeSpec)
}

// TestE2ESpecChangedByAgent: each row acts on an admitted item (or one
// still gated) and checks the gate.
func TestE2ESpecChangedByAgent(t *testing.T) {
	t.Parallel()
	x := newE2E(t)
	const agentLogin = "builder[bot]"
	agent := x.agent(agentLogin, "write")
	tom := x.Person("tom", "triage")
	maria := x.Person("maria", "maintain")
	carl := x.Person("carl", "write") // a person's account that posts worker markers: an agent (§4)
	bot := x.Sim.As(x.Sim.BotLogin())

	t.Run("agent widens the body of an item under a live claim", func(t *testing.T) {
		n := x.admittedBy(t, tom, "Cache the census pages")
		id := idOf(n)
		fence := x.claimFor(t, WorkerToken, id, "worker-7/a", 600)
		x.MustSettle(t)
		x.editSpec(t, agent, n, "", "Cache the census pages. Also rewrite the store and drop the inbox.")
		x.MustSettle(t)
		x.flush(t)
		// The claim is left to run: still held, and its holder releases it.
		if st := x.status(t, id); st.State != "held" || st.FencingToken == nil || *st.FencingToken != fence {
			t.Errorf("%s claim %+v after the re-gate, want still held under fence %d", id, st, fence)
		}
		if !x.labels(n)[lblAdmission] {
			t.Errorf("#%d: the admission label was not put back", n)
		}
		x.mustReportWith(t, n, []string{codeSpec}, agentLogin)
		x.release(t, WorkerToken, id, fence)
		x.MustSettle(t)
		x.mustRegated(t, n, agentLogin)
		// A second claim is refused: the item awaits admission.
		notReady(t, x.claim(t, WorkerToken, id, map[string]any{"owner": "worker-7/b", "leaseSeconds": 60}), gating.ExAwaitingAdmission)

		// The agent removes the label again: put back and reported, as
		// always; still not admitted.
		x.clk.Advance(2 * time.Second)
		if _, err := agent.RemoveLabel(x.Repo, n, lblAdmission); err != nil {
			t.Fatal(err)
		}
		x.MustSettle(t)
		x.flush(t)
		x.mustRegated(t, n)
		x.mustReportWith(t, n, []string{mirror.CodeAgentRemovedAdmission}, agentLogin)

		// A human with triage removes the label: the new text is admitted.
		x.clk.Advance(2 * time.Second)
		if _, err := tom.RemoveLabel(x.Repo, n, lblAdmission); err != nil {
			t.Fatal(err)
		}
		x.MustSettle(t)
		x.flush(t)
		x.mustAdmittedClean(t, n)
	})

	t.Run("agent retitles; /backlog admit re-admits", func(t *testing.T) {
		n := x.admittedBy(t, tom, "Shard the claim table")
		x.editSpec(t, agent, n, "Shard the claim table and every other table", "")
		x.MustSettle(t)
		x.flush(t)
		x.mustRegated(t, n, agentLogin)
		x.clk.Advance(2 * time.Second)
		c := x.say(t, maria, n, "/backlog admit")
		x.MustSettle(t)
		x.flush(t)
		x.mustReact(t, n, c, "+1")
		x.mustAdmittedClean(t, n)
	})

	t.Run("a write-access person who posted a worker marker rewrites it", func(t *testing.T) {
		n := x.admittedBy(t, tom, "Index the grants by branch")
		id := idOf(n)
		x.say(t, carl, n, x.marker(id, "carl/run", 1))
		x.MustSettle(t)
		x.editSpec(t, carl, n, "", "Index the grants by branch, and by owner, and drop the old index.")
		x.MustSettle(t)
		x.flush(t)
		x.mustRegated(t, n, "carl", "recorded as an agent")
	})

	t.Run("human rewrites it: the human's text is admitted", func(t *testing.T) {
		n := x.admittedBy(t, tom, "Bound the report comment")
		x.editSpec(t, maria, n, "", "Bound the report comment at 60,000 characters.")
		x.MustSettle(t)
		x.flush(t)
		x.mustAdmittedClean(t, n)
		// The human's text is the admitted one now: an agent's later edit is
		// judged against it.
		x.editSpec(t, agent, n, "", "Bound the report comment, and delete the dashboard.")
		x.MustSettle(t)
		x.flush(t)
		x.mustRegated(t, n, agentLogin)
	})

	t.Run("warden's own edit is not an edit of the specification", func(t *testing.T) {
		n := num(t, x.create(t, HumanToken, "Made by a maintainer's CLI", []string{"priority:P1"}))
		x.MustSettle(t)
		x.editSpec(t, bot, n, "", "Made by a maintainer's CLI (warden's own edit).")
		x.MustSettle(t)
		x.say(t, maria, n, "Looks right.") // a delivery that settles the item
		x.MustSettle(t)
		x.flush(t)
		x.mustAdmittedClean(t, n)
	})

	t.Run("agent drafts the spec of an item still gated, then a human admits", func(t *testing.T) {
		n := num(t, x.create(t, PMToken, "Drafted by the pm agent", []string{"priority:P1"}))
		x.MustSettle(t)
		x.editSpec(t, agent, n, "", "What must be true: the drafted specification, in full.")
		x.MustSettle(t)
		x.flush(t)
		x.reportLacks(t, n, codeSpec)
		x.clk.Advance(2 * time.Second)
		if _, err := tom.RemoveLabel(x.Repo, n, lblAdmission); err != nil {
			t.Fatal(err)
		}
		x.MustSettle(t)
		x.flush(t)
		x.mustAdmittedClean(t, n)
	})

	t.Run("agent's edit undone before warden acts on it", func(t *testing.T) {
		// Confirmed against the issue as it is when warden acts: the read
		// shows the admitted text back, so nothing is re-gated.
		n := x.admittedBy(t, tom, "Keep the admitted text")
		before := x.issue(n)
		x.Sim.HoldDeliveries()
		x.editSpec(t, agent, n, "", "A wider scope, soon undone.")
		x.editSpec(t, agent, n, "", before.Body)
		x.Sim.ReleaseDeliveries(nil)
		x.MustSettle(t)
		x.flush(t)
		x.mustAdmittedClean(t, n)
	})

	t.Run("agent changes only labels", func(t *testing.T) {
		n := x.admittedBy(t, tom, "Label me")
		x.clk.Advance(2 * time.Second)
		if _, err := agent.AddLabels(x.Repo, n, "enhancement"); err != nil {
			t.Fatal(err)
		}
		x.MustSettle(t)
		x.flush(t)
		x.mustAdmittedClean(t, n)
	})
}

// TestE2ESpecEditOutOfOrder: GitHub does not keep delivery order. A human
// admits (removing the label, or with /backlog admit), then an agent
// rewrites the text; delivered in either order, the item is re-gated. An agent drafts, then a human admits the draft;
// delivered in either order, it is admitted.
func TestE2ESpecEditOutOfOrder(t *testing.T) {
	t.Parallel()
	x := newE2E(t)
	const agentLogin = "builder[bot]"
	agent := x.agent(agentLogin, "write")
	tom := x.Person("tom", "triage")
	maria := x.Person("maria", "maintain")
	reverse := func(n int) []int {
		out := make([]int, n)
		for i := range out {
			out[i] = n - 1 - i
		}
		return out
	}
	for _, order := range []struct {
		name    string
		permute func(int) []int
	}{{"in order", nil}, {"reversed", reverse}} {
		t.Run("admitted, then rewritten by an agent, "+order.name, func(t *testing.T) {
			n := num(t, x.create(t, PMToken, "Admitted then rewritten "+order.name, []string{"priority:P1"}))
			x.MustSettle(t)
			x.Sim.HoldDeliveries()
			x.clk.Advance(2 * time.Second)
			if _, err := tom.RemoveLabel(x.Repo, n, lblAdmission); err != nil {
				t.Fatal(err)
			}
			x.editSpec(t, agent, n, "", "Rewritten by an agent after the admission.")
			x.Sim.ReleaseDeliveries(order.permute)
			x.MustSettle(t)
			x.flush(t)
			x.mustRegated(t, n, agentLogin)
		})
		t.Run("admitted by /backlog admit, then rewritten by an agent, "+order.name, func(t *testing.T) {
			// No label event to repair from: the command's payload shows the
			// text the human admitted.
			n := num(t, x.create(t, PMToken, "Admitted by command then rewritten "+order.name, []string{"priority:P1"}))
			x.MustSettle(t)
			x.Sim.HoldDeliveries()
			x.clk.Advance(2 * time.Second)
			c := x.say(t, maria, n, "/backlog admit")
			x.editSpec(t, agent, n, "", "Rewritten by an agent after the command.")
			x.Sim.ReleaseDeliveries(order.permute)
			x.MustSettle(t)
			x.flush(t)
			x.mustReact(t, n, c, "+1")
			x.mustRegated(t, n, agentLogin)
		})
		t.Run("drafted by an agent, then admitted, "+order.name, func(t *testing.T) {
			n := num(t, x.create(t, PMToken, "Drafted then admitted "+order.name, []string{"priority:P1"}))
			x.MustSettle(t)
			x.Sim.HoldDeliveries()
			x.editSpec(t, agent, n, "", "Drafted by an agent before the admission.")
			x.clk.Advance(2 * time.Second)
			if _, err := tom.RemoveLabel(x.Repo, n, lblAdmission); err != nil {
				t.Fatal(err)
			}
			x.Sim.ReleaseDeliveries(order.permute)
			x.MustSettle(t)
			x.flush(t)
			x.mustAdmittedClean(t, n)
		})
	}
}

// TestE2ESpecEditMissed: an agent rewrites an admitted item while warden
// is unreachable (the delivery is dropped). The reconcile's census reads the
// issue changed and its text not the admitted one: the item is re-gated,
// the report saying warden did not see who changed it. A second pass
// changes nothing more.
func TestE2ESpecEditMissed(t *testing.T) {
	t.Parallel()
	x := newE2E(t)
	agent := x.agent("builder[bot]", "write")
	tom := x.Person("tom", "triage")
	n := x.admittedBy(t, tom, "Rewritten while warden was away")
	quiet := x.admittedBy(t, tom, "Left alone")
	x.passFlush(t) // the census has seen both as they are

	x.Sim.DropDeliveries(true)
	x.editSpec(t, agent, n, "", "Rewritten while warden was away, with a wider scope.")
	x.MustSettle(t)
	x.Sim.DropDeliveries(false)
	if s := x.mustReady(t); !s.has(idOf(n)) {
		t.Fatalf("%s not ready before the pass (excluded as %q): the edit was not missed", idOf(n), s.exclusion(idOf(n)))
	}

	x.passFlush(t)
	x.mustRegated(t, n, "warden did not see the edit", "unknown")
	x.mustAdmittedClean(t, quiet)

	writes := x.simWrites()
	x.passFlush(t)
	if w := x.simWrites() - writes; w != 0 {
		t.Errorf("a second pass wrote %d times, want none", w)
	}
	x.mustRegated(t, n)
}

// TestE2ESpecEditCalls counts the GitHub requests of edits: a human's edit
// of an admitted item, an agent's draft of a gated one and a comment cost
// none; an agent's rewrite of an admitted item costs one read of the issue
// and one label write, and the report comment's (at most one more).
func TestE2ESpecEditCalls(t *testing.T) {
	t.Parallel()
	x := newE2E(t)
	agent := x.agent("builder[bot]", "write")
	tom := x.Person("tom", "triage")
	maria := x.Person("maria", "maintain")
	n := x.admittedBy(t, tom, "Count my calls")
	gated := num(t, x.create(t, PMToken, "Still gated", []string{"priority:P1"}))
	x.MustSettle(t)
	x.flush(t)

	cost := func(act func()) (reads, writes int) {
		t.Helper()
		before := x.Sim.Calls(x.Inst.ID)
		act()
		x.MustSettle(t)
		after := x.Sim.Calls(x.Inst.ID)
		return after.Reads - before.Reads, after.Writes - before.Writes
	}
	// No role lookup either: the role never makes an agent.
	if r, w := cost(func() { x.editSpec(t, maria, n, "", "Count my calls, precisely.") }); r != 0 || w != 0 {
		t.Errorf("a human's edit of an admitted item cost %d reads, %d writes; want none", r, w)
	}
	if r, w := cost(func() { x.editSpec(t, agent, gated, "", "Drafted while gated.") }); r != 0 || w != 0 {
		t.Errorf("an agent's draft of a gated item cost %d reads, %d writes; want none", r, w)
	}
	if r, w := cost(func() { x.say(t, maria, n, "Another comment.") }); r != 0 || w != 0 {
		t.Errorf("a comment on an admitted item cost %d reads, %d writes; want none", r, w)
	}
	calls := x.countREST()
	r, w := cost(func() { x.editSpec(t, agent, n, "", "Count my calls, and rewrite everything.") })
	if got := calls.get("/repos/" + x.Repo.FullName + "/issues/" + strconv.Itoa(n)); got != 1 {
		t.Errorf("the agent's rewrite read the issue %d times, want once", got)
	}
	if r != 1 || w < 1 || w > 2 {
		t.Errorf("the agent's rewrite cost %d reads, %d writes; want 1 read, the label write and at most the report comment", r, w)
	}
	x.flush(t)
	x.mustRegated(t, n)
}
