package harness

import (
	"context"
	"net/http"
	"testing"

	"github.com/wardenhq/warden/mirror/store"
)

// TestAgentAPIEndToEnd drives the agent API of the running service: a
// maintainer's token creates an item (mirror-first: the GitHub issue, then
// the item; a human's item is admitted at creation), a worker claims it,
// writes its resume block under the claim, renews and releases; warden's own
// issue deliveries change nothing.
func TestAgentAPIEndToEnd(t *testing.T) {
	e := New(t, Options{})
	ctx := context.Background()
	var created struct {
		ID      string   `json:"id"`
		Tags    []string `json:"tags"`
		Outcome string   `json:"outcome"`
	}
	code, err := e.API(ctx, HumanToken, http.MethodPost, "/items", map[string]any{
		"title": "Batch WAL writes", "specification": "What must be true: ...", "tags": []string{"priority:P1"},
	}, &created)
	if err != nil || code != http.StatusCreated {
		t.Fatalf("create: %d %v", code, err)
	}
	if created.ID != "issue-1" || created.Outcome != "created" {
		t.Fatalf("item %q (%s), want issue-1 (the issue's number), created", created.ID, created.Outcome)
	}
	e.MustSettle(t)
	e.Sim.Locked(func() {
		iss := e.Repo.Issues[1]
		if iss == nil || iss.Body == "" || len(iss.Labels) != 1 {
			t.Fatalf("GitHub issue: %+v", iss)
		}
	})
	// A worker claims under its own owner prefix and nobody else's.
	var claim store.ClaimResult
	if code, err := e.API(ctx, WorkerToken, http.MethodPost, "/items/issue-1/claim", map[string]any{"owner": "someone-else/1"}, nil); err != nil || code != http.StatusForbidden {
		t.Fatalf("claim under another owner: %d %v", code, err)
	}
	if code, err := e.API(ctx, WorkerToken, http.MethodPost, "/items/issue-1/claim", map[string]any{"owner": "worker-7/a", "leaseSeconds": 120}, &claim); err != nil || code != 200 || !claim.Granted {
		t.Fatalf("claim: %d %v %+v", code, err, claim)
	}
	token := *claim.FencingToken
	var other store.ClaimResult
	if _, err := e.API(ctx, PMToken, http.MethodPost, "/items/issue-1/claim", map[string]any{"owner": "pm/x"}, &other); err != nil || other.Granted || *other.Reason != "contended" {
		t.Fatalf("second claim: %+v %v", other, err)
	}
	body := "lastLocation: branch feat/wal\nresumeNote: seam wired"
	if code, err := e.API(ctx, WorkerToken, http.MethodPatch, "/items/issue-1", map[string]any{"body": body}, nil); err != nil || code != http.StatusConflict {
		t.Fatalf("unfenced write to a claimed item: %d %v, want 409 ClaimRequired", code, err)
	}
	if code, err := e.API(ctx, WorkerToken, http.MethodPatch, "/items/issue-1", map[string]any{"body": body, "fencingToken": token}, nil); err != nil || code != 200 {
		t.Fatalf("fenced write: %d %v", code, err)
	}
	var renewed store.ClaimResult
	if _, err := e.API(ctx, WorkerToken, http.MethodPost, "/items/issue-1/renew", map[string]any{"fencingToken": token}, &renewed); err != nil || !renewed.Granted || renewed.LeaseShortened == nil || !*renewed.LeaseShortened {
		t.Fatalf("renew without a length must report the shortened lease: %+v %v", renewed, err)
	}
	var released store.ReleaseResult
	if _, err := e.API(ctx, WorkerToken, http.MethodPost, "/items/issue-1/release", map[string]any{"fencingToken": token}, &released); err != nil || !released.Released {
		t.Fatalf("release: %+v %v", released, err)
	}
	if _, err := e.API(ctx, WorkerToken, http.MethodPost, "/items/issue-1/release", map[string]any{"fencingToken": token}, &released); err != nil || released.Released || *released.Reason != "stale" {
		t.Fatalf("second release: %+v %v", released, err)
	}
	// warden's own deliveries about the issue it opened were recorded only.
	recs, _ := e.Service.Inbox.List(ctx, false, 100)
	for _, r := range recs {
		if r.Event == "issues" && r.Sender == e.Sim.BotLogin() && r.Outcome[:4] != "self" {
			t.Errorf("warden acted on its own delivery %s: %s", r.ID, r.Outcome)
		}
	}
}
