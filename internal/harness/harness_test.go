package harness

import (
	"context"
	"testing"

	"github.com/google/go-github/v66/github"

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

// TestHarnessPeopleAndAgentsOnGitHub is the example end-to-end test: people
// and agents act on GitHub, the simulator delivers signed webhooks, warden
// processes each once, and warden's own writes come back as deliveries from
// its bot, which it records without acting on.
func TestHarnessPeopleAndAgentsOnGitHub(t *testing.T) {
	e := New(t, Options{})
	alice := e.Person("alice", "maintain")
	iss, err := alice.OpenIssue(e.Repo, "Batch WAL writes", "The spec.", "backlog", "needs-specification")
	if err != nil {
		t.Fatal(err)
	}
	worker := e.Sim.As("worker-7[bot]")
	if _, err := worker.Comment(e.Repo, iss.Number, "<!-- backlog-worker: claim item=issue-1 owner=w/1 region=local fence=1 at=2026-09-06T00:12:44Z -->"); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.RemoveLabel(e.Repo, iss.Number, "needs-specification"); err != nil {
		t.Fatal(err)
	}
	// warden writes to GitHub through its installation client.
	gh, err := e.Service.App.Installation(e.Inst.ID)
	if err != nil {
		t.Fatal(err)
	}
	body := "a note from warden"
	if _, _, err := gh.Issues.CreateComment(context.Background(), "acme", "app", iss.Number, &github.IssueComment{Body: &body}); err != nil {
		t.Fatal(err)
	}
	e.MustSettle(t)
	outcomes := deliveredAndProcessed(t, e)
	recs, _ := e.Service.Inbox.List(context.Background(), false, 100)
	var events []string
	for _, r := range recs {
		events = append(events, r.Event+"."+r.Action+"/"+r.Sender+"/"+outcomes[r.ID])
	}
	want := []string{
		"issues.opened/alice/observed", "issues.labeled/alice/observed", "issues.labeled/alice/observed",
		"issue_comment.created/worker-7[bot]/observed", "issues.unlabeled/alice/observed",
		"issue_comment.created/" + e.Sim.BotLogin() + "/self",
	}
	for _, w := range want {
		found := false
		for i, got := range events {
			if got == w {
				events = append(events[:i], events[i+1:]...)
				found = true
				break
			}
		}
		if !found {
			t.Errorf("no delivery %s; have %v", w, events)
		}
	}
}
