package harness

import (
	"context"
	"net/http"
	"strings"
	"testing"
)

// TestE2EAPIRefusalsNameTheRealReason drives the running service, over the
// agent API and MCP, into the three refusals a black-box probe found
// misleading or missing (CONTRACT.md §4, §9): completing a never-claimed
// item says it was never claimed (no "fence 0", no "live claim"); a worker
// owner with an empty run name is refused, naming the owner; and a worker
// adds no blockedBy edge, even under its own live claim.
func TestE2EAPIRefusalsNameTheRealReason(t *testing.T) {
	t.Parallel()
	x := newE2E(t)
	ctx := context.Background()
	id := x.create(t, HumanToken, "Shard the session table", []string{"priority:P1"})
	blocker := x.create(t, HumanToken, "Split the session schema", []string{"priority:P2"})
	x.MustSettle(t)

	// 1. Completion of an item nobody ever claimed.
	code, out := x.patchItem(t, PMToken, id, map[string]any{"addTags": []string{"state:complete", "pr:9"}})
	detail, _ := out["detail"].(string)
	if code != http.StatusConflict || out["reason"] != "ClaimRequired" || !strings.Contains(detail, id+" has never been claimed") ||
		strings.Contains(detail, "fence 0") || strings.Contains(detail, "live claim") {
		t.Errorf("completing a never-claimed item: %d %v, want 409 ClaimRequired saying it has never been claimed", code, out)
	}

	// 2. A worker owner with an empty run name: refused, nothing granted.
	var prob map[string]any
	code, err := x.API(ctx, WorkerToken, http.MethodPost, "/items/"+id+"/claim", map[string]any{"owner": "worker-7/"}, &prob)
	if err != nil || code != http.StatusUnprocessableEntity || prob["reason"] != "invalid-request" || prob["field"] != "owner" ||
		!strings.Contains(prob["detail"].(string), `owner "worker-7/"`) {
		t.Errorf("a claim under worker-7/: %d %v %v, want 422 invalid-request naming the owner", code, prob, err)
	}
	w := mcpConnect(t, x.Env, "worker", WorkerToken)
	w.refused("repocontext_claim", map[string]any{"key": mcpKey(num(t, id)), "owner": "worker-7/ "}, "invalid-request")
	var st struct {
		Claimed bool `json:"claimed"`
	}
	if _, err := x.API(ctx, PMToken, http.MethodGet, "/items/"+id+"/claim", nil, &st); err != nil || st.Claimed {
		t.Errorf("claim status after the refused claims: claimed %v (%v), want unclaimed", st.Claimed, err)
	}

	// 3. A worker adds no edge under its own live claim; the pm does.
	fence := x.claimFor(t, WorkerToken, id, "worker-7/a", 600)
	edge := []map[string]string{{"rel": "blockedBy", "target": blocker}}
	code, out = x.patchItem(t, WorkerToken, id, map[string]any{"addLinks": edge, "fencingToken": fence})
	if detail, _ := out["detail"].(string); code != http.StatusForbidden || out["reason"] != "HumanActRequired" ||
		!strings.Contains(detail, "blockedBy edge from "+id+" to "+blocker) || !strings.Contains(detail, "pm or human") {
		t.Errorf("a worker's blockedBy edge: %d %v, want 403 HumanActRequired naming the edge and the roles", code, out)
	}
	w.refused("repocontext_update", map[string]any{"key": mcpKey(num(t, id)), "fencingToken": fence,
		"addLinks": map[string][]string{"blockedBy": {mcpKey(num(t, blocker))}}}, "HumanActRequired")
	if it := mustAPIItem(t, x.Env, id); len(it.Links) != 0 {
		t.Errorf("a refused edge was written: %v", it.Links)
	}
	if code, out := x.patchItem(t, PMToken, id, map[string]any{"addLinks": edge, "fencingToken": fence}); code != http.StatusOK {
		t.Errorf("the pm's blockedBy edge under the claim: %d %v", code, out)
	}
}
