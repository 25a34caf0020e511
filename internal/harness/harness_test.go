package harness

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-github/v66/github"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/mirror"

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
	deliveredAndProcessed(t, e)
	// The installation taught warden the repository, and warden created the
	// labels it needs (its own label.created deliveries come back as self).
	r, err := e.Service.Ledger.Repo(context.Background(), "acme/app")
	if err != nil || r.Installation != e.Inst.ID || r.DefaultBranch != "main" {
		t.Fatalf("repository recorded as %+v (%v)", r, err)
	}
	e.Sim.Locked(func() {
		for _, l := range []string{"backlog", "needs-specification", "stale"} {
			if e.Repo.Labels[l] == nil {
				t.Errorf("label %q was not created", l)
			}
		}
	})
}

func TestHarnessRedeliveryIsNotProcessedTwice(t *testing.T) {
	e := New(t, Options{})
	ctx := context.Background()
	first := e.Sim.Deliveries()[0]
	if err := e.Redeliver(ctx, first.ID); err != nil {
		t.Fatal(err)
	}
	e.MustSettle(t)
	all := e.Sim.Deliveries()
	last := all[len(all)-1]
	if last.GUID != first.GUID || !last.Redelivery || last.StatusCode != 200 {
		t.Fatalf("redelivery answered %d (%s), want 200 for a duplicate", last.StatusCode, last.Status)
	}
	before := len(e.Sim.Deliveries()) - 1 // all but the redelivery
	if outcomes := deliveredAndProcessed(t, e); len(outcomes) != before {
		t.Fatalf("inbox has %d deliveries after a redelivery, want %d", len(outcomes), before)
	}
}

var commentID = regexp.MustCompile(`comment [0-9]+ `)

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
		// Comment ids are the simulator's to assign: compare without them.
		events = append(events, r.Event+"."+r.Action+"/"+r.Sender+"/"+commentID.ReplaceAllString(outcomes[r.ID], "comment # "))
	}
	want := []string{
		"issues.opened/alice/item issue-1 made by alice, admitted at creation", "issues.labeled/alice/item exists",
		"issues.labeled/alice/issue-1: needs-specification added (not admitted until a human removes it)",
		"issue_comment.created/worker-7[bot]/comment # on issue-1 created",
		"issues.unlabeled/alice/issue-1 admitted by alice (removed needs-specification)",
		"issue_comment.created/" + e.Sim.BotLogin() + "/self: comment # on issue-1 created",
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

// TestItemsFromGitHub: an issue that gains the item label becomes an item
// with the repository's default tags; a maintainer's item is admitted at
// creation, an agent's or an outsider's is gated with the admission label.
func TestItemsFromGitHub(t *testing.T) {
	e := New(t, Options{})
	ctx := context.Background()
	alice := e.Person("alice", "maintain")
	bob := e.Person("bob", "read")
	agent := e.Sim.As("worker-7[bot]")
	e.Sim.SetRole(e.Repo, "worker-7[bot]", "write")

	byAlice, _ := alice.OpenIssue(e.Repo, "by alice", "spec", "backlog")
	byAgent, _ := agent.OpenIssue(e.Repo, "by an agent", "spec", "backlog")
	plain, _ := bob.OpenIssue(e.Repo, "by bob", "spec")
	if _, err := bob.AddLabels(e.Repo, plain.Number, "backlog"); err == nil {
		t.Fatal("a reader added a label") // GitHub needs triage to label
	}
	if _, err := alice.AddLabels(e.Repo, plain.Number, "backlog"); err != nil {
		t.Fatal(err)
	}
	e.MustSettle(t)
	repo, _ := e.Service.Ledger.Repo(ctx, "acme/app")
	labels := func(n int) map[string]bool {
		out := map[string]bool{}
		e.Sim.Locked(func() {
			for _, l := range e.Repo.Issues[n].Labels {
				out[l.Name] = true
			}
		})
		return out
	}
	for _, c := range []struct {
		number   int
		admitted bool
	}{{byAlice.Number, true}, {byAgent.Number, false}, {plain.Number, true}} {
		it, err := e.Service.Ledger.Get(ctx, repo.ID, gating.IDFor(c.number))
		if err != nil {
			t.Fatalf("#%d is not an item: %v", c.number, err)
		}
		want := []string{"backlog", "priority:P2", "phase:implementation", "homeRegion:local", "baseBranch:main"}
		for _, tag := range want {
			if !it.Snapshot().HasTag(tag) {
				t.Errorf("#%d lacks %s: %v", c.number, tag, it.Tags)
			}
		}
		adm, err := e.Service.Acts.Admission(ctx, repo.ID, c.number)
		if err != nil {
			t.Fatal(err)
		}
		gated := labels(c.number)["needs-specification"]
		if c.admitted && (adm == nil || gated) {
			t.Errorf("#%d should be admitted at creation: act %v, gated %v", c.number, adm, gated)
		}
		if !c.admitted && (adm != nil || !gated) {
			t.Errorf("#%d should be gated: act %v, admission label %v", c.number, adm, gated)
		}
	}
	// Handling the same deliveries again changes nothing (idempotent): run
	// the handler on every issues delivery a second time.
	writes := e.Sim.Calls(e.Inst.ID).Writes
	for _, d := range e.Sim.Deliveries() {
		if d.Event != "issues" {
			continue
		}
		from := strings.Contains(string(d.Payload), `"login":"`+e.Sim.BotLogin()+`"`)
		if _, err := e.Service.Mirror.HandleIssues(ctx, mirror.Event{Name: d.Event, Action: d.Action, DeliveryID: d.GUID,
			Installation: d.InstallationID, Payload: d.Payload, FromSelf: from}); err != nil {
			t.Fatal(err)
		}
	}
	e.MustSettle(t)
	if after := e.Sim.Calls(e.Inst.ID).Writes; after != writes {
		t.Errorf("handling the deliveries again made %d more GitHub writes", after-writes)
	}
	if n := len(labels(byAgent.Number)); n != 2 {
		t.Errorf("agent's item has %d labels after redelivery, want 2", n)
	}
}
