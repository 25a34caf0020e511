package harness

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/wardenhq/warden/gating"
)

// End-to-end tests of CONTRACT.md §5's parking ladder on GitHub: warden's
// own park of a poison item, the parked label's removal and addition by
// humans, agents and other bots.

// TestE2EParkPoisonItem: three custody changes park the item on the timer
// pass (tags, label, one park comment naming each attempt's owner);
// handling everything again changes nothing; an agent's removal of the
// parked label is reverted and reported; a triage+ human's removal unparks
// and starts a new epoch, so one more attempt does not park it again.
func TestE2EParkPoisonItem(t *testing.T) {
	t.Parallel()
	x := newE2E(t)
	worker := x.Sim.As("worker-7[bot]")
	pmBot := x.Sim.As("pm-agent[bot]")
	cleaner := x.agent("cleaner[bot]", "write")
	maria := x.Person("maria", "maintain")
	id := x.create(t, HumanToken, "Rotate the signing keys", []string{"priority:P1"})
	n := num(t, id)
	x.MustSettle(t)

	owners := []string{"worker-7/a", "pm/b", "worker-7/c"}
	x.cycle(t, WorkerToken, owners[0], worker, id)
	x.cycle(t, PMToken, owners[1], pmBot, id)
	x.cycle(t, WorkerToken, owners[2], worker, id)
	x.MustSweep(t)

	it := x.mustItem(t, id)
	parkedWith(t, it, "pm", "poison-threshold")
	if !x.labels(n)[lblParked] {
		t.Errorf("#%d lacks the parked label after the park: %v", n, x.labels(n))
	}
	pcs := x.parkComments(n)
	if len(pcs) != 1 {
		t.Fatalf("#%d has %d park comments, want 1: %+v", n, len(pcs), x.comments(n))
	}
	want := fmt.Sprintf("<!-- backlog-warden: park item=%s attempts=3 ruling-owner=pm ruling-topic=poison-threshold -->", id)
	if got := firstLine(pcs[0].Raw); got != want {
		t.Errorf("park comment first line\n got %q\nwant %q", got, want)
	}
	for _, o := range owners {
		if !strings.Contains(pcs[0].Body, o) {
			t.Errorf("park comment does not name attempt owner %s:\n%s", o, pcs[0].Body)
		}
	}
	s := x.mustReady(t)
	if s.has(id) || (s.exclusion(id) != gating.ExParked && s.exclusion(id) != gating.ExPoisoned) {
		t.Errorf("%s: ready %v, excluded as %q, want parked", id, s.ids(), s.exclusion(id))
	}
	refused(t, x.claim(t, WorkerToken, id, map[string]any{"owner": "worker-7/x"}), gating.ExParked, gating.ExPoisoned)

	// Idempotent: another timer pass, and every delivery about the item
	// handled a second time, change nothing on GitHub or in the ledger.
	x.MustSweep(t)
	writes := x.Sim.Calls(x.Inst.ID).Writes
	x.rehandle(t, n)
	x.MustSweep(t)
	if after := x.Sim.Calls(x.Inst.ID).Writes; after != writes {
		t.Errorf("handling the item's deliveries again made %d GitHub writes", after-writes)
	}
	if pcs := x.parkComments(n); len(pcs) != 1 {
		t.Errorf("#%d has %d park comments after handling again, want 1", n, len(pcs))
	}
	if again := x.mustItem(t, id); !slices.Equal(again.Tags, it.Tags) {
		t.Errorf("tags changed on handling again: %v -> %v", it.Tags, again.Tags)
	}

	// An agent removes the parked label: re-added and reported.
	if _, err := cleaner.RemoveLabel(x.Repo, n, lblParked); err != nil {
		t.Fatal(err)
	}
	x.MustSettle(t)
	x.flush(t)
	if !x.labels(n)[lblParked] {
		t.Errorf("#%d: warden did not re-add the parked label an agent removed", n)
	}
	parkedWith(t, x.mustItem(t, id), "pm", "poison-threshold")
	x.mustReportWith(t, n, []string{"agent-removed-park"}, "cleaner[bot]")

	// A maintainer removes it: unparked, claimable, a new epoch.
	if _, err := maria.RemoveLabel(x.Repo, n, lblParked); err != nil {
		t.Fatal(err)
	}
	x.MustSettle(t)
	if x.labels(n)[lblParked] {
		t.Errorf("#%d: the parked label came back after a maintainer removed it", n)
	}
	notParked(t, x.mustItem(t, id))
	if s := x.mustReady(t); !s.has(id) {
		t.Errorf("%s not ready after the unpark: excluded as %q", id, s.exclusion(id))
	}
	x.cycle(t, WorkerToken, "worker-7/d", worker, id)
	x.MustSweep(t)
	x.flush(t)
	notParked(t, x.mustItem(t, id))
	if x.labels(n)[lblParked] {
		t.Errorf("#%d parked again after one attempt in the new epoch", n)
	}
	if pcs := x.parkComments(n); len(pcs) != 1 {
		t.Errorf("#%d has %d park comments after the new epoch's attempt, want 1", n, len(pcs))
	}
	if s := x.mustReady(t); !s.has(id) {
		t.Errorf("%s not ready after one attempt in the new epoch: excluded as %q", id, s.exclusion(id))
	}
}

// TestE2EParkLabelAdded: the parked label added by another bot (a stale
// bot) is no park; added by a triage+ human it parks with the human's route.
func TestE2EParkLabelAdded(t *testing.T) {
	t.Parallel()
	x := newE2E(t)
	staleBot := x.agent("stale[bot]", "write")
	tom := x.Person("tom", "triage")
	maria := x.Person("maria", "maintain")
	byBot := x.create(t, HumanToken, "Touched by the stale bot", []string{"priority:P1"})
	byTom := x.create(t, HumanToken, "Parked by hand", []string{"priority:P1"})
	x.MustSettle(t)

	if _, err := staleBot.AddLabels(x.Repo, num(t, byBot), lblParked); err != nil {
		t.Fatal(err)
	}
	if _, err := tom.AddLabels(x.Repo, num(t, byTom), lblParked); err != nil {
		t.Fatal(err)
	}
	x.MustSettle(t)
	x.flush(t)
	s := x.mustReady(t)

	t.Run("another bot adds the parked label", func(t *testing.T) {
		n := num(t, byBot)
		it := x.mustItem(t, byBot)
		notParked(t, it)
		x.mustReportWith(t, n, []string{"park-label-without-tag"})
		if len(x.parkComments(n)) != 0 {
			t.Errorf("#%d got a park comment", n)
		}
		if !s.has(byBot) {
			t.Errorf("%s left the ready set (excluded as %q): a stale bot's label is no park", byBot, s.exclusion(byBot))
		}
	})
	t.Run("triage human adds the parked label", func(t *testing.T) {
		n := num(t, byTom)
		parkedWith(t, x.mustItem(t, byTom), "tom", "manual-park")
		if !x.labels(n)[lblParked] {
			t.Errorf("#%d lost the parked label", n)
		}
		x.mustReportWith(t, n, []string{"park-without-question"})
		if s.has(byTom) || s.exclusion(byTom) != gating.ExParked {
			t.Errorf("%s: excluded as %q, want parked", byTom, s.exclusion(byTom))
		}
		refused(t, x.claim(t, WorkerToken, byTom, map[string]any{"owner": "worker-7/x"}), gating.ExParked)
	})
	if t.Failed() {
		return
	}

	// A maintainer parks the stale bot's item properly: the finding about
	// the bot's label is resolved and leaves the list.
	n := num(t, byBot)
	c := x.say(t, maria, n, "/backlog park ruling-owner=pm ruling-topic=flaky-tests\nIs this still reproducible?")
	x.MustSettle(t)
	x.flush(t)
	x.mustReact(t, n, c, thumbsUp)
	parkedWith(t, x.mustItem(t, byBot), "pm", "flaky-tests")
	x.reportLacks(t, n, "park-label-without-tag")
}
