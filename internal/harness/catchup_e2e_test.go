package harness

import (
	"context"
	"testing"

	"github.com/wardenhq/warden/gating"
)

// TestE2ECatchUpRedeliversDropped: warden is unreachable while a triager
// removes the admission label, so GitHub logs the delivery failed and warden
// never sees it; the catch-up asks GitHub to redeliver it and warden admits
// the item.
func TestE2ECatchUpRedeliversDropped(t *testing.T) {
	t.Parallel()
	x := newE2E(t)
	id, _ := x.loseAdmission(t)
	n := num(t, id)

	res, err := x.Service.CatchUp(context.Background())
	if err != nil {
		t.Fatalf("catch-up: %v (%+v)", err, res)
	}
	if res.Missing != 1 || res.Redelivered != 1 || res.Failed != 0 {
		t.Errorf("catch-up %+v, want 1 missing, 1 redelivered", res)
	}
	x.MustSettle(t)
	// A second run finds nothing left to ask for. (Before moving the
	// clock: the App's JWT is minted on real time, the simulator checks it
	// on the moved clock.)
	if res, err := x.Service.CatchUp(context.Background()); err != nil || res.Missing != 0 || res.Redelivered != 0 {
		t.Errorf("second catch-up %+v (%v), want nothing missing", res, err)
	}
	x.flush(t)
	s := x.mustReady(t)
	if !s.has(id) {
		t.Errorf("%s not admitted after the catch-up: excluded as %q", id, s.exclusion(id))
	}
	if x.labels(n)[lblAdmission] {
		t.Errorf("#%d: the admission label came back after a triager removed it", n)
	}
	x.reportLacks(t, n, "agent-removed-admission", "admission-unrecorded")
}

// loseAdmission makes a gated item and has a triager admit it while warden
// is unreachable: GitHub logs the issues.unlabeled delivery failed and
// warden never sees it. It returns the item and the lost delivery's GUID.
func (x *e2e) loseAdmission(t *testing.T) (id, lost string) {
	t.Helper()
	tom := x.Person("tom", "triage")
	id = x.create(t, PMToken, "Gated, admitted while warden was away", []string{"priority:P1"})
	n := num(t, id)
	x.MustSettle(t)
	if s := x.mustReady(t); s.has(id) || s.exclusion(id) != gating.ExAwaitingAdmission {
		t.Fatalf("%s: excluded as %q, want awaiting-admission before the act", id, s.exclusion(id))
	}
	x.Sim.DropDeliveries(true)
	if _, err := tom.RemoveLabel(x.Repo, n, lblAdmission); err != nil {
		t.Fatal(err)
	}
	x.MustSettle(t)
	x.Sim.DropDeliveries(false)
	if s := x.mustReady(t); s.has(id) {
		t.Fatalf("%s is ready before the catch-up: the removal was not lost", id)
	}
	for _, d := range x.Sim.Deliveries() {
		if d.Event == "issues" && d.Action == "unlabeled" {
			lost = d.GUID
		}
	}
	if lost == "" {
		t.Fatal("no issues.unlabeled delivery logged")
	}
	return id, lost
}
