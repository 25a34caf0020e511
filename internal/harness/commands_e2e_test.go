package harness

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/internal/ghsim"
)

// End-to-end tests of CONTRACT.md §7: /backlog commands in issue comments,
// answered with a reaction (+1 done, confused refused) and, for a refused
// person with triage+, a line in the report comment.

const (
	thumbsUp = "+1"
	confused = "confused"
)

// TestE2ECommands: every command, by who may and who may not run it.
func TestE2ECommands(t *testing.T) {
	t.Parallel()
	x := newE2E(t)
	maria := x.Person("maria", "maintain")
	tom := x.Person("tom", "triage")
	rita := x.Person("rita", "read")
	olga := x.Sim.As("olga") // no role: can read the public repository
	bot := x.agent("builder[bot]", "write")

	admitted := func(title string) int { return num(t, x.create(t, HumanToken, title, []string{"priority:P1"})) }
	gated := func(title string) int { return num(t, x.create(t, PMToken, title, []string{"priority:P1"})) }

	type row struct {
		name  string
		setup func(title string) int
		// act posts the command and returns the comment to judge.
		act   func(t *testing.T, n int) *ghsim.Comment
		react string
		check func(t *testing.T, n int, s readySet)
	}
	rows := []row{
		{"status by a reader", admitted, func(t *testing.T, n int) *ghsim.Comment {
			return x.say(t, rita, n, "/backlog status")
		}, thumbsUp, nil},
		{"status by an outsider", admitted, func(t *testing.T, n int) *ghsim.Comment {
			return x.say(t, olga, n, "/backlog status")
		}, thumbsUp, nil},
		{"admit by a triager", gated, func(t *testing.T, n int) *ghsim.Comment {
			return x.say(t, tom, n, "/backlog admit")
		}, thumbsUp, func(t *testing.T, n int, s readySet) {
			if x.labels(n)[lblAdmission] {
				t.Errorf("#%d still carries the admission label after /backlog admit", n)
			}
			if !s.has(idOf(n)) {
				t.Errorf("%s not admitted: excluded as %q", idOf(n), s.exclusion(idOf(n)))
			}
		}},
		{"admit by a reader", gated, func(t *testing.T, n int) *ghsim.Comment {
			return x.say(t, rita, n, "/backlog admit")
		}, confused, func(t *testing.T, n int, s readySet) {
			stillGated(t, x, n, s)
			// The reaction only: no refusal line for someone without triage.
			if body := x.report(t, n); strings.Contains(body, "admit") || strings.Contains(body, "rita") {
				t.Errorf("#%d report comment carries a refusal for a reader:\n%s", n, body)
			}
		}},
		{"admit by a bot", gated, func(t *testing.T, n int) *ghsim.Comment {
			return x.say(t, bot, n, "/backlog admit")
		}, "", func(t *testing.T, n int, s readySet) {
			stillGated(t, x, n, s)
			if body := x.report(t, n); strings.Contains(body, "admit") {
				t.Errorf("#%d report comment answers a bot's command:\n%s", n, body)
			}
		}},
		{"park with a question", admitted, func(t *testing.T, n int) *ghsim.Comment {
			return x.say(t, maria, n, "/backlog park ruling-owner=pm ruling-topic=design\nShould the claim table be sharded by region\nor by item prefix?")
		}, thumbsUp, func(t *testing.T, n int, s readySet) {
			id := idOf(n)
			parkedWith(t, x.mustItem(t, id), "pm", "design")
			if !x.labels(n)[lblParked] {
				t.Errorf("#%d lacks the parked label", n)
			}
			if s.has(id) || s.exclusion(id) != gating.ExParked {
				t.Errorf("%s: excluded as %q, want parked", id, s.exclusion(id))
			}
			pcs := x.parkComments(n)
			if len(pcs) != 1 {
				t.Fatalf("#%d has %d park comments, want 1", n, len(pcs))
			}
			if fl := firstLine(pcs[0].Raw); !strings.HasPrefix(fl, fmt.Sprintf("<!-- backlog-warden: park item=%s attempts=0 ", id)) ||
				!strings.Contains(fl, "ruling-owner=pm ruling-topic=design") {
				t.Errorf("park comment first line %q", fl)
			}
			if !strings.Contains(pcs[0].Body, "Should the claim table be sharded by region") || !strings.Contains(pcs[0].Body, "or by item prefix?") {
				t.Errorf("park comment does not carry the question:\n%s", pcs[0].Body)
			}
			x.reportLacks(t, n, "park-without-question")
		}},
		{"park without ruling-topic", admitted, func(t *testing.T, n int) *ghsim.Comment {
			return x.say(t, maria, n, "/backlog park ruling-owner=pm\nWhat now?")
		}, confused, func(t *testing.T, n int, s readySet) {
			id := idOf(n)
			notParked(t, x.mustItem(t, id))
			if x.labels(n)[lblParked] || len(x.parkComments(n)) != 0 {
				t.Errorf("#%d parked by a refused command", n)
			}
			if !s.has(id) {
				t.Errorf("%s left the ready set (excluded as %q)", id, s.exclusion(id))
			}
			// A refusal to a person with triage+ gets a line saying why.
			x.mustReportWith(t, n, nil, "ruling-topic")
		}},
		{"unpark by a triager", func(title string) int {
			n := admitted(title)
			x.MustSettle(t)
			if _, err := maria.AddLabels(x.Repo, n, lblParked); err != nil {
				t.Fatal(err)
			}
			x.MustSettle(t)
			return n
		}, func(t *testing.T, n int) *ghsim.Comment {
			if !x.mustItem(t, idOf(n)).has("state:parked") {
				t.Errorf("#%d was not parked by a maintainer's label (setup)", n)
			}
			return x.say(t, tom, n, "/backlog unpark")
		}, thumbsUp, func(t *testing.T, n int, s readySet) {
			id := idOf(n)
			notParked(t, x.mustItem(t, id))
			if x.labels(n)[lblParked] {
				t.Errorf("#%d still carries the parked label after /backlog unpark", n)
			}
			if !s.has(id) {
				t.Errorf("%s not ready after the unpark: excluded as %q", id, s.exclusion(id))
			}
		}},
		{"recheck by a maintainer", admitted, func(t *testing.T, n int) *ghsim.Comment {
			return x.say(t, maria, n, "/backlog recheck")
		}, thumbsUp, nil},
		{"recheck by a reader", admitted, func(t *testing.T, n int) *ghsim.Comment {
			return x.say(t, rita, n, "/backlog recheck")
		}, confused, nil},
		{"command in a code block", gated, func(t *testing.T, n int) *ghsim.Comment {
			return x.say(t, tom, n, "Run this:\n\n```\n/backlog admit\n```\n")
		}, "", stillGatedCheck(x)},
		{"command in a quote", gated, func(t *testing.T, n int) *ghsim.Comment {
			return x.say(t, tom, n, "Someone wrote:\n\n> /backlog admit\n")
		}, "", stillGatedCheck(x)},
		{"indented command", gated, func(t *testing.T, n int) *ghsim.Comment {
			return x.say(t, tom, n, "Run this:\n\n    /backlog admit\n")
		}, "", stillGatedCheck(x)},
		{"second command line does not count", gated, func(t *testing.T, n int) *ghsim.Comment {
			return x.say(t, tom, n, "/backlog status\n/backlog admit")
		}, thumbsUp, stillGatedCheck(x)},
		{"edited comment is no command", gated, func(t *testing.T, n int) *ghsim.Comment {
			c := x.say(t, tom, n, "Looks specified to me.")
			x.MustSettle(t)
			if _, err := tom.EditComment(x.Repo, c.ID, "/backlog admit"); err != nil {
				t.Fatal(err)
			}
			return c
		}, "", stillGatedCheck(x)},
	}
	nums := make([]int, len(rows))
	for i, r := range rows {
		nums[i] = r.setup(r.name)
	}
	x.MustSettle(t)
	cs := make([]*ghsim.Comment, len(rows))
	for i, r := range rows {
		cs[i] = r.act(t, nums[i])
	}
	x.MustSettle(t)
	x.flush(t)
	s := x.mustReady(t)
	for i, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			x.mustReact(t, nums[i], cs[i], r.react)
			if r.check != nil {
				r.check(t, nums[i], s)
			}
		})
	}
}

func stillGated(t *testing.T, x *e2e, n int, s readySet) {
	t.Helper()
	if !x.labels(n)[lblAdmission] {
		t.Errorf("#%d lost the admission label", n)
	}
	if id := idOf(n); s.has(id) || s.exclusion(id) != gating.ExAwaitingAdmission {
		t.Errorf("%s: excluded as %q, want awaiting-admission", id, s.exclusion(id))
	}
}

func stillGatedCheck(x *e2e) func(t *testing.T, n int, s readySet) {
	return func(t *testing.T, n int, s readySet) { stillGated(t, x, n, s) }
}

// TestE2ECommandRateLimit: a second command by the same user on the same
// item within a minute is refused; after the minute it works. Another
// user, or another item, is not limited.
func TestE2ECommandRateLimit(t *testing.T) {
	t.Parallel()
	x := newE2E(t)
	tom := x.Person("tom", "triage")
	maria := x.Person("maria", "maintain")
	a := num(t, x.create(t, HumanToken, "Rate limited", []string{"priority:P1"}))
	b := num(t, x.create(t, HumanToken, "Another item", []string{"priority:P1"}))
	x.MustSettle(t)

	first := x.say(t, tom, a, "/backlog status")
	x.MustSettle(t)
	x.mustReact(t, a, first, thumbsUp)
	second := x.say(t, tom, a, "/backlog status")
	other := x.say(t, maria, a, "/backlog status")
	elsewhere := x.say(t, tom, b, "/backlog status")
	x.MustSettle(t)
	x.mustReact(t, a, second, confused)
	x.mustReact(t, a, other, thumbsUp)
	x.mustReact(t, b, elsewhere, thumbsUp)

	x.clk.Advance(61 * time.Second)
	third := x.say(t, tom, a, "/backlog status")
	x.MustSettle(t)
	x.mustReact(t, a, third, thumbsUp)
}

// TestE2ECommandResolve: a takeover-collision hold (the prior owner's
// marker after the takeover) keeps the item out of the ready set until a
// human runs /backlog resolve; a reader's /backlog resolve is refused.
func TestE2ECommandResolve(t *testing.T) {
	t.Parallel()
	x := newE2E(t)
	worker := x.Sim.As("worker-7[bot]")
	pmBot := x.Sim.As("pm-agent[bot]")
	maria := x.Person("maria", "maintain")
	rita := x.Person("rita", "read")
	id := x.create(t, HumanToken, "Move the queue to the new broker", []string{"priority:P1"})
	n := num(t, id)
	x.MustSettle(t)

	f1 := x.claimFor(t, WorkerToken, id, "worker-7/a", 60)
	x.say(t, worker, n, x.marker(id, "worker-7/a", f1))
	x.MustSettle(t)
	x.clk.Advance(pastQuarantine)
	f2 := x.claimFor(t, PMToken, id, "pm/b", 600)
	x.say(t, pmBot, n, x.takeoverMarker(id, "pm/b", f2, "worker-7/a", f1))
	x.MustSettle(t)
	// The prior owner was alive after all: its outcome marker, seconds
	// after the takeover, is a collision.
	x.clk.Advance(5 * time.Second)
	x.say(t, worker, n, fmt.Sprintf("<!-- backlog-worker: outcome item=%s owner=worker-7/a fence=%d result=released -->", id, f1))
	x.MustSettle(t)
	x.release(t, PMToken, id, f2)
	x.MustSettle(t)
	x.flush(t)

	s := x.mustReady(t)
	if s.has(id) || s.exclusion(id) != gating.ExCollisionHold {
		t.Fatalf("%s: ready %v, excluded as %q, want collision-hold; defects %+v; comments %+v", id, s.ids(), s.exclusion(id), s.Defects, x.comments(n))
	}
	x.mustReportWith(t, n, []string{gating.CodeTakeoverCollision})
	refused(t, x.claim(t, WorkerToken, id, map[string]any{"owner": "worker-7/c"}), gating.ExCollisionHold)

	byReader := x.say(t, rita, n, "/backlog resolve")
	x.MustSettle(t)
	x.mustReact(t, n, byReader, confused)
	if s := x.mustReady(t); s.exclusion(id) != gating.ExCollisionHold {
		t.Errorf("a reader's /backlog resolve cleared the hold: excluded as %q", s.exclusion(id))
	}

	c := x.say(t, maria, n, "/backlog resolve")
	x.MustSettle(t)
	x.mustReact(t, n, c, thumbsUp)
	x.flush(t)
	s = x.mustReady(t)
	if !s.has(id) {
		t.Errorf("%s not ready after /backlog resolve: excluded as %q", id, s.exclusion(id))
	}
	x.reportLacks(t, n, gating.CodeTakeoverCollision)
	granted(t, x.claim(t, WorkerToken, id, map[string]any{"owner": "worker-7/c", "leaseSeconds": 60}))
}
