package harness

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestCensusAdoptsLabelledIssues: issues that carry the item label but
// whose deliveries warden never received are adopted by the reconcile's
// census, as if the label had just been added. Admission is decided from
// the label events: a maintainer's issue is admitted, a reader's is gated
// (the admission label added), a maintainer's removal of the admission
// label admits, an agent's removal is reverted and reported; a parked label
// a maintainer added parks the item. A second pass adopts nothing and
// writes nothing.
func TestCensusAdoptsLabelledIssues(t *testing.T) {
	t.Parallel()
	x := newE2E(t)
	x.MustSettle(t)
	maria := x.Person("maria", "maintain")
	x.Sim.SetRole(x.Repo, "reader", "read")
	x.Sim.SetRole(x.Repo, "builder[bot]", "write")
	bot := x.Sim.As("builder[bot]")

	x.Sim.DropDeliveries(true)
	open := func(title string, labels ...string) int {
		t.Helper()
		iss, err := maria.OpenIssue(x.Repo, title, "spec of "+title, labels...)
		if err != nil {
			t.Fatal(err)
		}
		return iss.Number
	}
	byMaria := open("Opened by a maintainer", lblItem)
	gatedByRule := open("Gated, then admitted by a maintainer", lblItem, lblAdmission)
	if _, err := maria.RemoveLabel(x.Repo, gatedByRule, lblAdmission); err != nil {
		t.Fatal(err)
	}
	agentRemoved := open("Gated, then an agent removed the gate", lblItem, lblAdmission)
	if _, err := bot.RemoveLabel(x.Repo, agentRemoved, lblAdmission); err != nil {
		t.Fatal(err)
	}
	parked := open("Parked by a maintainer", lblItem)
	if _, err := maria.AddLabels(x.Repo, parked, lblParked); err != nil {
		t.Fatal(err)
	}
	x.Sim.SetRole(x.Repo, "reader", "write") // GitHub drops labels a reader passes; the role is lowered again below
	byReader, err := x.Sim.As("reader").OpenIssue(x.Repo, "Opened by a reader", "spec", lblItem)
	if err != nil {
		t.Fatal(err)
	}
	x.Sim.SetRole(x.Repo, "reader", "read")
	notAnItem := open("No item label")
	x.MustSettle(t) // every delivery attempted, and failed
	x.Sim.DropDeliveries(false)

	if s := x.mustReady(t); len(s.Ready)+len(s.Excluded) != 0 {
		t.Fatalf("before the pass warden knows items it never saw: %+v", s)
	}
	r := x.passFlush(t)
	if r.Adopted != 5 || r.Unadopted != 0 {
		t.Errorf("the pass adopted %d, %d left; want 5 adopted, none left (actions %v)", r.Adopted, r.Unadopted, r.Actions)
	}
	x.MustSettle(t)
	s := x.mustReady(t)
	if ids := s.ids(); !slices.Equal(ids, []string{idOf(byMaria), idOf(gatedByRule)}) {
		t.Errorf("ready %v, want the maintainer's issue and the one a maintainer admitted (%d, %d); excluded %+v", ids, byMaria, gatedByRule, s.Excluded)
	}
	for n, want := range map[int]string{agentRemoved: "awaiting-admission", byReader.Number: "awaiting-admission", parked: "parked"} {
		if got := s.exclusion(idOf(n)); got != want {
			t.Errorf("#%d excluded as %q, want %q", n, got, want)
		}
	}
	if _, ok := x.item(t, idOf(notAnItem)); ok {
		t.Errorf("#%d, which lacks the item label, became an item", notAnItem)
	}
	for _, n := range []int{agentRemoved, byReader.Number} {
		if !x.labels(n)[lblAdmission] {
			t.Errorf("#%d does not carry %s after the pass: an unadmitted item was not gated", n, lblAdmission)
		}
	}
	if x.apiFindings(t, s, idOf(agentRemoved), "agent-removed-admission") == 0 {
		t.Errorf("the agent's removal of the gate on #%d is not reported: %+v", agentRemoved, s.Defects)
	}
	it, _ := x.item(t, idOf(parked))
	if !it.has("state:parked") || !it.has("ruling-owner:maria") {
		t.Errorf("#%d (stale added by a maintainer) is not parked on maria's ruling: %v", parked, it.Tags)
	}

	writes := x.simWrites()
	again := x.passFlush(t)
	x.MustSettle(t)
	if again.Adopted != 0 || again.PullsRead != 0 {
		t.Errorf("a second pass adopted %d and read %d pull requests, want none", again.Adopted, again.PullsRead)
	}
	if w := x.simWrites() - writes; w != 0 {
		t.Errorf("a second pass over an adopted backlog wrote %d times to GitHub, want 0 (actions %v)", w, again.Actions)
	}

	// An issue that lost the item label while warden was away is no longer
	// offered, is reported, and stays an item; the label back, it is offered.
	x.Sim.DropDeliveries(true)
	if _, err := maria.RemoveLabel(x.Repo, byMaria, lblItem); err != nil {
		t.Fatal(err)
	}
	x.MustSettle(t)
	x.Sim.DropDeliveries(false)
	x.passFlush(t)
	s = x.mustReady(t)
	if got := s.exclusion(idOf(byMaria)); got != "item-label-removed" {
		t.Errorf("#%d without the item label is excluded as %q, want item-label-removed", byMaria, got)
	}
	if x.apiFindings(t, s, idOf(byMaria), "item-label-removed") == 0 {
		t.Errorf("the item label's removal from #%d is not reported: %+v", byMaria, s.Defects)
	}
	if _, err := maria.AddLabels(x.Repo, byMaria, lblItem); err != nil {
		t.Fatal(err)
	}
	x.MustSettle(t)
	if ids := x.mustReady(t).ids(); !slices.Contains(ids, idOf(byMaria)) {
		t.Errorf("#%d is not offered once the item label is back: ready %v", byMaria, ids)
	}
}

// TestCensusReadsMissedPullRequests: a pull request that merged
// while warden was not listening is found by the census and recorded, so
// the item it delivers reports merged-not-complete.
func TestCensusReadsMissedPullRequests(t *testing.T) {
	t.Parallel()
	x := newE2E(t)
	x.MustSettle(t)
	id := x.create(t, HumanToken, "Delivered while warden was away", nil)
	x.MustSettle(t)
	dev := x.dev()
	x.branch(t, "feat/away", "main")
	x.Sim.DropDeliveries(true)
	p, err := dev.OpenPR(x.Repo, "feat/away", "main", "The work", "Closes #"+strings.TrimPrefix(id, "issue-"), false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dev.MergePR(x.Repo, p.Issue.Number, "merge"); err != nil {
		t.Fatal(err)
	}
	x.MustSettle(t)
	x.Sim.DropDeliveries(false)
	r := x.passFlush(t)
	if r.PullsRead != 1 {
		t.Errorf("the census read %d pull requests, want the merged one (1)", r.PullsRead)
	}
	if k := findings(r, "merged-not-complete", id); k != 1 {
		t.Errorf("merged-not-complete for %s reported %d times, want once: %+v", id, k, r.Findings)
	}
	if again := x.passFlush(t); again.PullsRead != 0 {
		t.Errorf("a second pass read %d pull requests again, want 0", again.PullsRead)
	}
}

// TestCensusReadsMissedComments: an item whose issue changed after all that
// warden recorded of it (its deliveries missed, or a database restored from
// an older backup) has its comments read again by the census: the claims a
// lost ledger granted count from their markers (the attempts reach the
// poison threshold and the item is parked), and the fence rises above every
// token a worker held, so the next one (the park's maintenance claim) is 4.
func TestCensusReadsMissedComments(t *testing.T) {
	t.Parallel()
	x := newE2E(t)
	x.MustSettle(t)
	maria := x.Person("maria", "maintain")
	x.Sim.SetRole(x.Repo, "builder[bot]", "write")
	agent := x.Sim.As("builder[bot]")
	is, err := maria.OpenIssue(x.Repo, "Worked on while warden was restored", "spec", lblItem)
	if err != nil {
		t.Fatal(err)
	}
	n := is.Number
	x.MustSettle(t)
	f := x.claimFor(t, WorkerToken, idOf(n), "worker-7/a", 600)
	x.say(t, agent, n, x.marker(idOf(n), "worker-7/a", f))
	x.MustSettle(t)
	x.release(t, WorkerToken, idOf(n), f)
	x.MustSettle(t)

	// Tokens 2 and 3, held under a ledger this one does not have, a few
	// seconds on (GitHub's updated_at has one-second resolution).
	x.clk.Advance(3 * time.Second)
	x.Sim.DropDeliveries(true)
	for _, c := range []struct {
		owner string
		fence int64
	}{{"worker-7/b", 2}, {"worker-7/c", 3}} {
		x.say(t, agent, n, x.marker(idOf(n), c.owner, c.fence))
		x.say(t, agent, n, fmt.Sprintf("<!-- backlog-worker: outcome item=%s owner=%s fence=%d result=released -->", idOf(n), c.owner, c.fence))
	}
	x.MustSettle(t)
	x.Sim.DropDeliveries(false)
	r := x.passFlush(t)
	x.MustSweep(t)
	x.MustSettle(t)
	if r.TrailsRead != 1 {
		t.Errorf("the census read %d items' comments again, want 1 (actions %v)", r.TrailsRead, r.Actions)
	}
	it, _ := x.item(t, idOf(n))
	if it.Attempts != 3 || !it.has("state:parked") {
		t.Errorf("%s after the census: %d attempts, tags %v; want 3 (one granted here, two by the lost ledger) and a poison park", idOf(n), it.Attempts, it.Tags)
	}
	if it.Claim.FencingToken == nil || *it.Claim.FencingToken != 4 {
		t.Errorf("%s: the park's maintenance claim holds fence %v, want 4: above the tokens the trail shows held", idOf(n), it.Claim.FencingToken)
	}
	if k := x.apiFindings(t, x.mustReady(t), idOf(n), "unbacked-marker"); k != 0 {
		t.Errorf("the lost ledger's markers are reported unbacked %d times: %+v", k, x.mustReady(t).Defects)
	}
	if again := x.passFlush(t); again.TrailsRead != 0 {
		t.Errorf("a second pass read %d items' comments again, want 0", again.TrailsRead)
	}
}
