package harness

import "testing"

// TestE2ELateDeliveryDoesNotUndoWardensAct: an agent's removal of the
// admission label is reverted; a maintainer then admits with /backlog admit
// (warden removes the label itself). The agent's old delivery, handled
// again afterwards (a redelivery past de-duplication, or one that was
// delayed), must not put the label back: the last event for the
// label is warden's own act, which a late delivery about an earlier act
// cannot undo. The same holds for an unpark warden carried out.
func TestE2ELateDeliveryDoesNotUndoWardensAct(t *testing.T) {
	x := newE2E(t)
	bot := x.agent("pm-agent[bot]", "write")
	maria := x.Person("maria", "maintain")
	n := x.openWithLabelsAs(t, "pm-agent[bot]", "write", "late deliveries", lblItem)
	x.MustSettle(t)
	if !x.labels(n)[lblAdmission] {
		t.Fatalf("#%d was not gated", n)
	}
	if _, err := bot.RemoveLabel(x.Repo, n, lblAdmission); err != nil {
		t.Fatal(err)
	}
	x.MustSettle(t)
	if !x.labels(n)[lblAdmission] {
		t.Fatalf("the agent's removal was not reverted")
	}
	c := x.say(t, maria, n, "/backlog admit")
	x.MustSettle(t)
	x.mustReact(t, n, c, thumbsUp)
	if x.labels(n)[lblAdmission] {
		t.Fatalf("/backlog admit left the admission label on")
	}

	x.rehandle(t, n)
	if x.labels(n)[lblAdmission] {
		t.Fatalf("a late delivery about the agent's removal put the admission label back after warden's own admit")
	}
	if s := x.mustReady(t); !s.has(idOf(n)) {
		t.Fatalf("%s is no longer ready (excluded as %q)", idOf(n), s.exclusion(idOf(n)))
	}
}
