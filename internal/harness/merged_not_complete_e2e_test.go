package harness

import (
	"fmt"
	"strings"
	"testing"

	"github.com/wardenhq/warden/gating"
)

// End-to-end tests of CONTRACT.md §11's merged-not-complete exclusion and
// unrouted-region alarm: a finished-looking item (a merged pull request
// delivers it, no state:complete is recorded) is not offered and its
// claims are refused not-ready until the completion is recorded or a human
// rules, with /backlog undelivered #<pr>, that the pull request did not
// deliver it; an item whose homeRegion: this deployment does not serve is
// reported and raises an alarm.

// TestE2EMergedNotComplete: a worker's pull request merges and nobody
// records the completion. GET /ready leaves the item out
// (merged-not-complete, still reported), a claim is refused not-ready with
// that exclusion, the report comment says how to clear it, and a reader's
// ruling is refused; after a maintainer's /backlog undelivered #<pr> the
// item is offered and claimable again.
func TestE2EMergedNotComplete(t *testing.T) {
	t.Parallel()
	x := newE2E(t)
	maria := x.Person("maria", "maintain")
	rita := x.Person("rita", "read")
	id := x.create(t, HumanToken, "Cache the tenant lookups", []string{"priority:P1"})
	n := num(t, id)
	x.MustSettle(t)

	f := x.claimBranch(t, WorkerToken, id, "worker-7/cache", "feat/tenant-cache", 600)
	p := x.branchPR(t, "feat/tenant-cache", "", "main", fmt.Sprintf("Refs #%d", n))
	p = x.merge(t, p.N)
	if !p.Merged {
		t.Fatalf("setup: #%d not merged", p.N)
	}
	x.release(t, WorkerToken, id, f) // the holder goes away without recording the completion
	x.MustSettle(t)

	s := x.mustReady(t)
	if s.has(id) {
		t.Fatalf("%s is offered though merged #%d delivers it and no state:complete is recorded", id, p.N)
	}
	if got := s.exclusion(id); got != gating.ExMergedNotComplete {
		t.Errorf("%s excluded as %q, want %s", id, got, gating.ExMergedNotComplete)
	}
	if x.apiFindings(t, s, id, gating.ExMergedNotComplete) != 1 {
		t.Errorf("%s: merged-not-complete not reported once: %+v", id, s.Defects)
	}
	notReady(t, x.claim(t, WorkerToken, id, map[string]any{"owner": "worker-7/fresh", "leaseSeconds": 600}), gating.ExMergedNotComplete)
	x.flush(t)
	x.mustReportWith(t, n, []string{gating.ExMergedNotComplete}, fmt.Sprintf("#%d", p.N), "/backlog undelivered #<pr>")

	// A reader may not rule.
	c := x.say(t, rita, n, fmt.Sprintf("/backlog undelivered #%d", p.N))
	x.MustSettle(t)
	x.mustReact(t, n, c, confused)
	if s := x.mustReady(t); s.has(id) || s.exclusion(id) != gating.ExMergedNotComplete {
		t.Errorf("after a reader's ruling %s is excluded as %q, want still %s", id, s.exclusion(id), gating.ExMergedNotComplete)
	}

	// A maintainer rules the pull request did not deliver the item.
	c = x.say(t, maria, n, fmt.Sprintf("That PR only added the benchmark.\n/backlog undelivered #%d", p.N))
	x.MustSettle(t)
	x.mustReact(t, n, c, thumbsUp)
	s = x.mustReady(t)
	if !s.has(id) {
		t.Fatalf("%s not offered after /backlog undelivered #%d: excluded as %q", id, p.N, s.exclusion(id))
	}
	if k := s.codes(id)[gating.ExMergedNotComplete]; k != 0 {
		t.Errorf("%s: merged-not-complete still reported %d times after the ruling", id, k)
	}
	x.flush(t)
	x.reportLacks(t, n, gating.ExMergedNotComplete)
	granted(t, x.claim(t, WorkerToken, id, map[string]any{"owner": "worker-7/fresh", "leaseSeconds": 600}))
}

// TestE2EMergedNotCompleteRecorded: the other way out is the record: a pm's
// maintenance claim records the completion the merge proves, and the item
// is complete, not offered, and no longer finished-looking.
func TestE2EMergedNotCompleteRecorded(t *testing.T) {
	t.Parallel()
	x := newE2E(t)
	id := x.create(t, HumanToken, "Retire the v1 webhooks", []string{"priority:P1"})
	n := num(t, id)
	x.MustSettle(t)
	f, p := x.deliver(t, id, "worker-7/v1", "feat/retire-v1", "", "main", fmt.Sprintf("Closes #%d", n))
	x.release(t, WorkerToken, id, f)
	x.MustSettle(t)
	notReady(t, x.claim(t, WorkerToken, id, map[string]any{"owner": "worker-7/v1b", "leaseSeconds": 600}), gating.ExMergedNotComplete)

	fm := x.maintenanceClaim(t, PMToken, id, "pm/record-merge")
	x.mustComplete(t, PMToken, id, fm, fmt.Sprintf("pr:%d", p.N))
	x.release(t, PMToken, id, fm)
	x.MustSettle(t)
	s := x.mustReady(t)
	if s.has(id) || s.exclusion(id) != gating.ExComplete {
		t.Errorf("%s excluded as %q after the completion, want %s", id, s.exclusion(id), gating.ExComplete)
	}
	if k := s.codes(id)[gating.ExMergedNotComplete]; k != 0 {
		t.Errorf("%s: merged-not-complete still reported after the completion", id)
	}
}

// TestE2EUnroutedRegion: an item whose homeRegion: is not WARDEN_REGION is
// excluded foreign-region as before, and now also reported unrouted-region
// (naming the region it names and the one served) and counted among GET
// /ready's alarms.
func TestE2EUnroutedRegion(t *testing.T) {
	t.Parallel()
	x := newE2E(t)
	id := x.create(t, HumanToken, "Tune the EU cache", []string{"priority:P1", "homeRegion:eu-west"})
	here := x.create(t, HumanToken, "Tune the local cache", []string{"priority:P1"})
	x.MustSettle(t)
	s := x.mustReady(t)
	if s.has(id) || s.exclusion(id) != gating.ExForeignRegion {
		t.Errorf("%s excluded as %q, want %s", id, s.exclusion(id), gating.ExForeignRegion)
	}
	var detail string
	for _, d := range s.Defects {
		if string(d.Item) == id && d.Code == gating.CodeUnroutedRegion {
			detail = d.Detail
		}
	}
	if !strings.Contains(detail, `names region "eu-west"`) || !strings.Contains(detail, `serves region "local"`) {
		t.Errorf("%s: unrouted-region detail %q, want both regions named (defects %+v)", id, detail, s.Defects)
	}
	alarms := 0
	for _, a := range s.Alarms {
		if strings.HasPrefix(a, gating.CodeUnroutedRegion+": "+id+": ") {
			alarms++
		}
		if strings.Contains(a, here+":") {
			t.Errorf("alarm about the item of this region: %q", a)
		}
	}
	if alarms != 1 {
		t.Errorf("%d unrouted-region alarms for %s, want 1: %q", alarms, id, s.Alarms)
	}
	if !s.has(here) {
		t.Errorf("%s of this region not offered: excluded as %q", here, s.exclusion(here))
	}
}
