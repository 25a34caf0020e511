package harness

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/internal/ghsim"
)

// End-to-end tests of CONTRACT.md §6's trail rules: what the agent API says
// about attempts and defects, and what the report comment on the issue
// lists, after agents and people post, edit and delete markers.

// TestE2ETrailKilledWorkersCount: a worker that claims, posts its marker
// and dies (never releases; the lease expires) made an attempt. Three such
// workers, each taking over from the last, poison the item: the timer pass
// parks it.
func TestE2ETrailKilledWorkersCount(t *testing.T) {
	t.Parallel()
	x := newE2E(t)
	worker := x.Sim.As("worker-7[bot]")
	pmBot := x.Sim.As("pm-agent[bot]")
	id := x.create(t, HumanToken, "Compact the WAL", []string{"priority:P1"})
	n := num(t, id)
	x.MustSettle(t)

	f1 := x.claimFor(t, WorkerToken, id, "worker-7/a", 60)
	x.say(t, worker, n, x.marker(id, "worker-7/a", f1))
	x.MustSettle(t)
	x.clk.Advance(61 * time.Second)
	if it := x.mustItem(t, id); it.Attempts != 1 || it.Claim.State != "lapsed" {
		t.Errorf("after the lease expired: attempts %d, claim %+v; want 1, lapsed", it.Attempts, it.Claim)
	}
	x.clk.Advance(pastQuarantine)
	if it := x.mustItem(t, id); it.Attempts != 1 || it.Claim.State != "abandoned" {
		t.Errorf("after the quarantine: attempts %d, claim state %q; want 1, abandoned", it.Attempts, it.Claim.State)
	}
	x.MustSweep(t)
	if it := x.mustItem(t, id); it.has("state:parked") {
		t.Fatalf("parked after one attempt: %v", it.Tags)
	}

	f2 := x.claimFor(t, PMToken, id, "pm/b", 60)
	x.say(t, pmBot, n, x.takeoverMarker(id, "pm/b", f2, "worker-7/a", f1))
	x.MustSettle(t)
	if it := x.mustItem(t, id); it.Attempts != 2 {
		t.Errorf("after the first takeover: attempts %d, want 2", it.Attempts)
	}
	x.clk.Advance(pastQuarantine)

	f3 := x.claimFor(t, WorkerToken, id, "worker-7/c", 60)
	x.say(t, worker, n, x.takeoverMarker(id, "worker-7/c", f3, "pm/b", f2))
	x.MustSettle(t)
	x.clk.Advance(pastQuarantine)
	x.MustSweep(t)

	it := x.mustItem(t, id)
	if it.Attempts < 3 {
		t.Errorf("after three killed workers: attempts %d, want 3", it.Attempts)
	}
	parkedWith(t, it, "pm", "poison-threshold")
	if !x.labels(n)[lblParked] {
		t.Errorf("#%d lacks the parked label", n)
	}
	pcs := x.parkComments(n)
	if len(pcs) != 1 || !strings.HasPrefix(firstLine(pcs[0].Raw), fmt.Sprintf("<!-- backlog-warden: park item=%s attempts=3 ", id)) {
		t.Errorf("#%d park comments %+v, want one with attempts=3", n, pcs)
	}
	s := x.mustReady(t)
	for _, c := range []string{gating.CodeUnannouncedTakeover, gating.CodeClaimedUnmarked, gating.CodeUnbackedMarker, gating.CodeTakeoverMismatch} {
		if s.codes(id)[c] > 0 {
			t.Errorf("%s: unexpected %s: %+v", id, c, s.Defects)
		}
	}
}

// TestE2ETrailLapsedSameOwnerReclaim: a holder whose lease lapsed re-claims
// its own item: one attempt, not two, and no finding. The re-claim posts no
// marker (custody did not change); a second claim marker by the same owner
// is duplicate-claim-marker, and still one attempt.
func TestE2ETrailLapsedSameOwnerReclaim(t *testing.T) {
	t.Parallel()
	x := newE2E(t)
	worker := x.Sim.As("worker-7[bot]")
	id := x.create(t, HumanToken, "Index the audit log", []string{"priority:P1"})
	n := num(t, id)
	x.MustSettle(t)

	f1 := x.claimFor(t, WorkerToken, id, "worker-7/a", 60)
	x.say(t, worker, n, x.marker(id, "worker-7/a", f1))
	x.MustSettle(t)
	x.clk.Advance(61 * time.Second)
	if st := x.status(t, id); st.State != "lapsed" {
		t.Fatalf("claim state %q, want lapsed", st.State)
	}
	f2 := x.claimFor(t, WorkerToken, id, "worker-7/a", 600)
	if f2 <= f1 {
		t.Fatalf("re-claim fence %d, want above %d", f2, f1)
	}
	x.MustSettle(t)
	x.release(t, WorkerToken, id, f2)
	x.MustSettle(t)
	x.flush(t)

	if it := x.mustItem(t, id); it.Attempts != 1 {
		t.Errorf("attempts %d, want 1: a same-owner re-claim after a lapse is no attempt", it.Attempts)
	}
	s := x.mustReady(t)
	if got := s.attempts(id); got != 1 {
		t.Errorf("GET /ready attempts %d, want 1 (excluded as %q)", got, s.exclusion(id))
	}
	bad := []string{gating.CodeUnannouncedTakeover, gating.CodeDuplicateClaimMarker, gating.CodeClaimedUnmarked, gating.CodeUnbackedMarker}
	for _, c := range bad {
		if s.codes(id)[c] > 0 {
			t.Errorf("%s: unexpected %s: %+v", id, c, s.Defects)
		}
	}
	x.reportLacks(t, n, bad...)

	x.say(t, worker, n, x.marker(id, "worker-7/a", f2))
	x.MustSettle(t)
	x.flush(t)
	s = x.mustReady(t)
	if got := s.attempts(id); got != 1 {
		t.Errorf("after a second marker: GET /ready attempts %d, want 1", got)
	}
	if s.codes(id)[gating.CodeDuplicateClaimMarker] == 0 {
		t.Errorf("%s: a second claim marker by the same owner is not %s: %+v", id, gating.CodeDuplicateClaimMarker, s.Defects)
	}
	x.mustReportWith(t, n, []string{gating.CodeDuplicateClaimMarker})
}

// TestE2ETrailMarkerFindings: a forged, an edited, a deleted and a
// malformed marker are each reported on the issue and through the API, and
// none changes the count.
func TestE2ETrailMarkerFindings(t *testing.T) {
	t.Parallel()
	x := newE2E(t)
	worker := x.Sim.As("worker-7[bot]")
	mallory := x.Person("mallory", "read")
	forged := x.create(t, HumanToken, "Forged", []string{"priority:P1"})
	edited := x.create(t, HumanToken, "Edited", []string{"priority:P1"})
	deleted := x.create(t, HumanToken, "Deleted", []string{"priority:P1"})
	malformed := x.create(t, HumanToken, "Malformed", []string{"priority:P1"})
	x.MustSettle(t)

	x.cycle(t, WorkerToken, "worker-7/a", worker, forged)
	x.say(t, mallory, num(t, forged), x.marker(forged, "mallory/x", 2))

	c := x.cycle(t, WorkerToken, "worker-7/a", worker, edited)
	if _, err := worker.EditComment(x.Repo, c.ID, x.marker(edited, "worker-7/zzz", 9)); err != nil {
		t.Fatal(err)
	}

	d := x.cycle(t, WorkerToken, "worker-7/a", worker, deleted)
	if err := worker.DeleteComment(x.Repo, d.ID); err != nil {
		t.Fatal(err)
	}

	x.cycle(t, WorkerToken, "worker-7/a", worker, malformed)
	x.say(t, worker, num(t, malformed), fmt.Sprintf("<!-- backlog-worker: claim item=%s owner=worker-7/b region=local -->", malformed))
	x.MustSettle(t)
	x.flush(t)

	s := x.mustReady(t)
	for _, r := range []struct{ id, code string }{
		{forged, gating.CodeForgedMarker},
		{edited, gating.CodeMarkerEdited},
		{deleted, gating.CodeMarkerDeleted},
		{malformed, gating.CodeMalformedMarker},
	} {
		t.Run(r.code, func(t *testing.T) {
			if it := x.mustItem(t, r.id); it.Attempts != 1 {
				t.Errorf("%s: attempts %d, want 1", r.id, it.Attempts)
			}
			if got := s.attempts(r.id); got != 1 {
				t.Errorf("%s: GET /ready attempts %d, want 1 (excluded as %q)", r.id, got, s.exclusion(r.id))
			}
			if s.codes(r.id)[r.code] != 1 {
				t.Errorf("%s: GET /ready defects %v, want one %s", r.id, s.codes(r.id), r.code)
			}
			x.mustReportWith(t, num(t, r.id), []string{r.code})
		})
	}
	// A forged marker makes nobody an agent.
	if s.codes(forged)[gating.CodeUndeclaredAgent] > 0 {
		t.Errorf("forged marker reported undeclared-agent: %+v", s.Defects)
	}
}

// TestE2ETrailUnannouncedTakeover: a new owner claims over an unreleased
// (abandoned) claim and posts a plain claim marker: reported, and counted.
func TestE2ETrailUnannouncedTakeover(t *testing.T) {
	t.Parallel()
	x := newE2E(t)
	worker := x.Sim.As("worker-7[bot]")
	pmBot := x.Sim.As("pm-agent[bot]")
	id := x.create(t, HumanToken, "Split the router", []string{"priority:P1"})
	n := num(t, id)
	x.MustSettle(t)

	f1 := x.claimFor(t, WorkerToken, id, "worker-7/a", 60)
	x.say(t, worker, n, x.marker(id, "worker-7/a", f1))
	x.MustSettle(t)
	x.clk.Advance(pastQuarantine)
	f2 := x.claimFor(t, PMToken, id, "pm/b", 600)
	x.say(t, pmBot, n, x.marker(id, "pm/b", f2))
	x.MustSettle(t)
	x.flush(t)

	if it := x.mustItem(t, id); it.Attempts != 2 {
		t.Errorf("attempts %d, want 2 (an unannounced takeover still counts)", it.Attempts)
	}
	if s := x.mustReady(t); s.codes(id)[gating.CodeUnannouncedTakeover] != 1 {
		t.Errorf("GET /ready defects %v, want one unannounced-takeover", s.codes(id))
	}
	x.mustReportWith(t, n, []string{gating.CodeUnannouncedTakeover})
}

// TestE2ETrailOutOfOrder: the same acts on two items, one with its
// deliveries in order and one with them held and released in reverse
// (GitHub keeps no order): the same attempts, the same findings.
func TestE2ETrailOutOfOrder(t *testing.T) {
	t.Parallel()
	x := newE2E(t)
	worker := x.Sim.As("worker-7[bot]")
	pmBot := x.Sim.As("pm-agent[bot]")
	mallory := x.Person("mallory", "read")
	inOrder := x.create(t, HumanToken, "In order", []string{"priority:P1"})
	reversed := x.create(t, HumanToken, "Reversed", []string{"priority:P1"})
	x.MustSettle(t)

	// The acts, without waiting for deliveries: two custody changes, the
	// first marker edited, a forged marker and a malformed one.
	acts := func(id string) {
		n := num(t, id)
		post := func(a *ghsim.Actor, body string) *ghsim.Comment {
			c, err := a.Comment(x.Repo, n, body)
			if err != nil {
				t.Fatal(err)
			}
			return c
		}
		f1 := x.claimFor(t, WorkerToken, id, "worker-7/a", 600)
		c := post(worker, x.marker(id, "worker-7/a", f1))
		x.release(t, WorkerToken, id, f1)
		if _, err := worker.EditComment(x.Repo, c.ID, x.marker(id, "worker-7/other", f1+5)); err != nil {
			t.Fatal(err)
		}
		f2 := x.claimFor(t, PMToken, id, "pm/b", 600)
		post(pmBot, x.marker(id, "pm/b", f2))
		post(mallory, x.marker(id, "mallory/x", f2+1))
		post(worker, fmt.Sprintf("<!-- backlog-worker: outcome item=%s owner=pm/b fence=oops result=complete -->", id))
		x.release(t, PMToken, id, f2)
	}
	acts(inOrder)
	x.MustSettle(t)

	x.Sim.HoldDeliveries()
	acts(reversed)
	x.Sim.ReleaseDeliveries(func(k int) []int {
		idx := make([]int, k)
		for i := range idx {
			idx[i] = k - 1 - i
		}
		return idx
	})
	x.MustSettle(t)
	x.flush(t)

	s := x.mustReady(t)
	a, b := x.mustItem(t, inOrder), x.mustItem(t, reversed)
	if a.Attempts != 2 || b.Attempts != 2 {
		t.Errorf("attempts: in order %d, reversed %d; want 2 and 2", a.Attempts, b.Attempts)
	}
	ca, cb := s.codes(inOrder), s.codes(reversed)
	if !maps.Equal(ca, cb) {
		t.Errorf("defects differ: in order %v, reversed %v", ca, cb)
	}
	for _, c := range []string{gating.CodeMarkerEdited, gating.CodeForgedMarker, gating.CodeMalformedMarker} {
		if ca[c] != 1 {
			t.Errorf("in order: defects %v, want one %s", ca, c)
		}
	}
	ra, rb := reportCodes(x.report(t, num(t, inOrder))), reportCodes(x.report(t, num(t, reversed)))
	if !slices.Equal(ra, rb) || len(ra) == 0 {
		t.Errorf("report comments list %v in order and %v reversed; want the same, non-empty", ra, rb)
	}
}

// reportCodes is the defect codes a report comment mentions (the
// contract's trail and label codes), sorted.
func reportCodes(body string) []string {
	var out []string
	for _, c := range []string{gating.CodeClaimedUnmarked, gating.CodeUnbackedMarker, gating.CodeMalformedMarker,
		gating.CodeDuplicateClaimMarker, gating.CodeUnannouncedTakeover, gating.CodeTakeoverMismatch,
		gating.CodeTakeoverCollision, gating.CodeMarkerEdited, gating.CodeMarkerDeleted, gating.CodeOutcomeWithoutTag,
		gating.CodeForgedMarker, gating.CodeUndeclaredAgent, "shared-identity"} {
		if strings.Contains(body, c) {
			out = append(out, c)
		}
	}
	sort.Strings(out)
	return out
}

// TestE2ETrailCollisionSameSecond: the prior owner's marker posted right
// after the takeover marker, within the same second (GitHub's timestamps
// have whole seconds), is still after the takeover: comments are ordered by
// (created_at, id), so it is a takeover-collision and holds the item.
func TestE2ETrailCollisionSameSecond(t *testing.T) {
	t.Parallel()
	x := newE2E(t)
	worker := x.Sim.As("worker-7[bot]")
	pmBot := x.Sim.As("pm-agent[bot]")
	id := x.create(t, HumanToken, "Retire the legacy importer", []string{"priority:P1"})
	n := num(t, id)
	x.MustSettle(t)

	f1 := x.claimFor(t, WorkerToken, id, "worker-7/a", 60)
	x.say(t, worker, n, x.marker(id, "worker-7/a", f1))
	x.MustSettle(t)
	x.clk.Advance(pastQuarantine)
	// Start a fresh second, then grant, announce and collide within it.
	x.clk.Advance(time.Second - time.Duration(x.clk.Now().Nanosecond()) + 20*time.Millisecond)
	f2 := x.claimFor(t, PMToken, id, "pm/b", 600)
	x.say(t, pmBot, n, x.takeoverMarker(id, "pm/b", f2, "worker-7/a", f1))
	x.say(t, worker, n, fmt.Sprintf("<!-- backlog-worker: outcome item=%s owner=worker-7/a fence=%d result=released -->", id, f1))
	x.MustSettle(t)
	x.flush(t)

	s := x.mustReady(t)
	if s.codes(id)[gating.CodeTakeoverCollision] == 0 || s.exclusion(id) != gating.ExHeld && s.exclusion(id) != gating.ExCollisionHold {
		t.Errorf("%s: defects %v, excluded as %q; want takeover-collision (held)", id, s.codes(id), s.exclusion(id))
	}
	x.mustReportWith(t, n, []string{gating.CodeTakeoverCollision})
}
