package harness

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/wardenhq/warden/gating"
)

// TestE2EProtocolWritesWorkerPark: a worker's park under its claim needs
// its ruling route and the question; without the question it is refused
// (park-without-question, nothing written), with it the item is parked and
// warden posts one park comment naming the question, as for its own parks.
func TestE2EProtocolWritesWorkerPark(t *testing.T) {
	t.Parallel()
	x := newE2E(t)
	id := x.create(t, HumanToken, "Pick the job queue", []string{"priority:P1"})
	n := num(t, id)
	x.MustSettle(t)
	fence := x.claimFor(t, WorkerToken, id, "worker-7/run-1", 600)
	park := []string{"state:parked", "ruling-owner:pm", "ruling-topic:queue-choice"}

	code, out := x.patchItem(t, WorkerToken, id, map[string]any{"addTags": park, "fencingToken": fence})
	if code != http.StatusConflict || out["reason"] != gating.CodeParkWithoutQuestion || out["field"] != "question" {
		t.Errorf("a worker's park without a question answered %d %v, want 409 park-without-question naming the question", code, out)
	}
	code, out = x.patchItem(t, WorkerToken, id, map[string]any{"addTags": []string{"state:parked"}, "question": "Which queue?", "fencingToken": fence})
	if code != http.StatusConflict || out["reason"] != "park-without-route" {
		t.Errorf("a worker's park without a route answered %d %v, want 409 park-without-route", code, out)
	}
	x.MustSettle(t)
	notParked(t, x.mustItem(t, id))

	q := "Redis or Postgres for the job queue? The specification names both and they need different deployments."
	code, out = x.patchItem(t, WorkerToken, id, map[string]any{"addTags": park, "question": q, "fencingToken": fence})
	if code != http.StatusOK {
		t.Fatalf("a worker's park with its question answered %d %v", code, out)
	}
	x.MustSettle(t)
	x.MustSweep(t)
	x.flush(t)
	parkedWith(t, x.mustItem(t, id), "pm", "queue-choice")
	if !x.labels(n)[lblParked] {
		t.Errorf("#%d lacks the parked label after a worker parked it: %v", n, x.labels(n))
	}
	pcs := x.parkComments(n)
	if len(pcs) != 1 {
		t.Fatalf("#%d has %d park comments, want 1", n, len(pcs))
	}
	if !strings.Contains(pcs[0].Raw, "Redis or Postgres for the job queue?") || !strings.Contains(pcs[0].Raw, "ruling-topic=queue-choice") {
		t.Errorf("the park comment does not name the question and route:\n%s", pcs[0].Raw)
	}
	if s := x.mustReady(t); s.has(id) || s.exclusion(id) != gating.ExParked {
		t.Errorf("%s: excluded as %q, want parked", id, s.exclusion(id))
	}
}

// TestE2EProtocolWritesClaimsRefused: a claims edge is a per-run record's,
// never an item's: POST /items and PATCH refuse it (claims-on-item), and
// nothing is opened or written.
func TestE2EProtocolWritesClaimsRefused(t *testing.T) {
	t.Parallel()
	x := newE2E(t)
	claims := []any{map[string]string{"rel": "claims", "target": "repo/app/mem/runs/r-1"}}
	var out map[string]any
	code, err := x.API(context.Background(), PMToken, http.MethodPost, "/items",
		map[string]any{"title": "With a claims edge", "specification": "s", "links": claims}, &out)
	if err != nil || code != http.StatusUnprocessableEntity || out["reason"] != gating.CodeClaimsOnItem {
		t.Errorf("POST /items with a claims link answered %d %v %v, want 422 claims-on-item", code, out, err)
	}
	id := x.create(t, HumanToken, "Plain item", []string{"priority:P2"})
	code, out = x.patchItem(t, PMToken, id, map[string]any{"addLinks": claims})
	if code != http.StatusUnprocessableEntity || out["reason"] != gating.CodeClaimsOnItem {
		t.Errorf("PATCH adding a claims link answered %d %v, want 422 claims-on-item", code, out)
	}
	x.MustSettle(t)
	var it struct {
		Links []gating.Link `json:"links"`
	}
	if code, err := x.API(context.Background(), PMToken, http.MethodGet, "/items/"+id, nil, &it); err != nil || code != http.StatusOK {
		t.Fatalf("GET /items/%s: %d %v", id, code, err)
	}
	if len(it.Links) != 0 {
		t.Errorf("%s links %v after the refused claims edge, want none", id, it.Links)
	}
}

// TestE2EProtocolWritesAnchorAtCreate: an anchor an item is made with is
// read at once, as one a PATCH adds: at a file the default branch lacks it
// reads dangling and stale from the first recall; at a file that is there
// it reads fresh; on a base branch not pushed yet it waits for that branch.
func TestE2EProtocolWritesAnchorAtCreate(t *testing.T) {
	t.Parallel()
	x := newE2E(t)
	x.MustSettle(t)
	x.push(t, "main", map[string]string{"src/wal.go": "package src"}, "seed")

	absent := x.create(t, HumanToken, "Anchored at nothing", []string{"priority:P1"}, anchorLink("src/absent.go"))
	x.wantAnchors(t, "created onto nothing", absent, []string{"src/absent.go"}, []string{"src/absent.go"})
	present := x.create(t, HumanToken, "Anchored at the WAL", []string{"priority:P1"}, anchorLink("src/wal.go"))
	x.wantAnchors(t, "created onto a file", present, nil, nil)
	side := x.create(t, HumanToken, "On a branch not pushed yet", []string{"priority:P2", "baseBranch:side"}, anchorLink("src/absent.go"))
	x.wantAnchors(t, "created on a missing base branch", side, nil, nil)

	// The next push does not clear it: nothing came to the path.
	x.push(t, "main", map[string]string{"src/log.go": "package src"}, "log")
	x.wantAnchors(t, "after an unrelated push", absent, []string{"src/absent.go"}, []string{"src/absent.go"})
}
