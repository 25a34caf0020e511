package harness

import (
	"context"
	"testing"

	"github.com/wardenhq/warden/webhooks"
)

// deliveredAndProcessed checks that every delivery the simulator sent was
// acknowledged and processed exactly once by warden, and returns the
// outcomes by delivery id.
func deliveredAndProcessed(t *testing.T, e *Env) map[string]string {
	t.Helper()
	recs, err := e.Service.Inbox.List(context.Background(), false, 10000)
	if err != nil {
		t.Fatal(err)
	}
	outcome := map[string]string{}
	for _, r := range recs {
		if r.State != webhooks.StateDone {
			t.Errorf("delivery %s (%s) is %s: %s", r.ID, r.Event, r.State, r.LastError)
		}
		outcome[r.ID] = r.Outcome
	}
	for _, d := range e.Sim.Deliveries() {
		if d.Status != "OK" {
			t.Errorf("simulator delivery %s (%s) was not acknowledged: %s", d.GUID, d.Event, d.Status)
		}
		if _, ok := outcome[d.GUID]; !ok {
			t.Errorf("delivery %s (%s) acknowledged but not in warden's inbox", d.GUID, d.Event)
		}
	}
	return outcome
}

func TestHarnessDeliversInstallationEvents(t *testing.T) {
	e := New(t, Options{})
	outcomes := deliveredAndProcessed(t, e)
	if len(outcomes) != 2 {
		t.Fatalf("want the installation and installation_repositories deliveries, got %v", outcomes)
	}
	for id, o := range outcomes {
		if o != "observed" {
			t.Errorf("delivery %s outcome %q", id, o)
		}
	}
}

func TestHarnessRedeliveryIsNotProcessedTwice(t *testing.T) {
	e := New(t, Options{})
	ctx := context.Background()
	first := e.Sim.Deliveries()[0]
	if _, _, err := e.Service.App.AppClient().Apps.RedeliverHookDelivery(ctx, first.ID); err != nil && !isAccepted(err) {
		t.Fatal(err)
	}
	e.MustSettle(t)
	all := e.Sim.Deliveries()
	last := all[len(all)-1]
	if last.GUID != first.GUID || !last.Redelivery || last.StatusCode != 200 {
		t.Fatalf("redelivery answered %d (%s), want 200 for a duplicate", last.StatusCode, last.Status)
	}
	if outcomes := deliveredAndProcessed(t, e); len(outcomes) != 2 {
		t.Fatalf("inbox has %d deliveries after a redelivery, want 2", len(outcomes))
	}
}

// isAccepted reports go-github's *AcceptedError for a 202 answer.
func isAccepted(err error) bool {
	return err != nil && err.Error() == "job scheduled on GitHub side; try again later"
}
