package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/internal/agentapi"
	"github.com/wardenhq/warden/mirror/store"
)

// End-to-end test of the claims as the agents need them (CONTRACT.md §11)
// through the running service: POST /ready/claim and its MCP tool
// backlog_claim_next, requestId on claim, renew and release, the per-owner
// cap from `.github/backlog.yml`, leaseDefaulted in the grant and the
// report, grantedAt in the claim status.

// claimNext is POST /ready/claim's answer (a refusal is an answer).
func (e *Env) claimNext(t *testing.T, token string, body map[string]any) agentapi.ClaimNextResult {
	t.Helper()
	var r agentapi.ClaimNextResult
	if code, err := e.API(context.Background(), token, http.MethodPost, "/ready/claim", body, &r); err != nil || code != http.StatusOK {
		t.Fatalf("POST /ready/claim %v: %d %v", body, code, err)
	}
	return r
}

func TestE2EClaimsNext(t *testing.T) {
	t.Parallel()
	x := newE2E(t)
	ctx := context.Background()
	hana := x.Person("hana", "maintain")
	x.pushSettings(t, hana, "main", "max_claims_per_owner: 2\n")
	var ids []string
	for i, prio := range []string{"P2", "P1", "P2", "P3"} {
		ids = append(ids, x.create(t, HumanToken, fmt.Sprintf("Claimable %d", i), []string{"priority:" + prio}))
	}
	x.MustSettle(t)
	if s := x.mustReady(t); s.ReadyCount != 4 {
		t.Fatalf("ready %v, want four items", s.ids())
	}

	// Two runs of the worker at once: each gets its own item, the P1 first
	// among them.
	var wg sync.WaitGroup
	got := make([]agentapi.ClaimNextResult, 2)
	codes := make([]int, 2)
	errs := make([]error, 2)
	for i := range 2 {
		wg.Go(func() {
			codes[i], errs[i] = x.API(ctx, WorkerToken, http.MethodPost, "/ready/claim",
				map[string]any{"owner": fmt.Sprintf("worker-7/run-%d", i), "leaseSeconds": 600, "requestId": fmt.Sprintf("next-%d", i)}, &got[i])
		})
	}
	wg.Wait()
	for i := range 2 {
		if errs[i] != nil || codes[i] != http.StatusOK || !got[i].Granted || got[i].Item == "" || got[i].Key != string(got[i].Item) {
			t.Fatalf("claimant %d: %d %v %+v", i, codes[i], errs[i], got[i])
		}
	}
	if got[0].Item == got[1].Item {
		t.Fatalf("both claimants got %s", got[0].Item)
	}
	p1 := ids[1]
	if got[0].Item != gating.ItemID(p1) && got[1].Item != gating.ItemID(p1) {
		t.Errorf("neither claimant got the P1 item %s: %s, %s", p1, got[0].Item, got[1].Item)
	}

	// The resend of the first (its answer lost): the same grant.
	again := x.claimNext(t, WorkerToken, map[string]any{"owner": "worker-7/run-0", "leaseSeconds": 600, "requestId": "next-0"})
	if !again.Replayed || again.Item != got[0].Item || *again.FencingToken != *got[0].FencingToken || *again.LeaseExpiresAtUtc != *got[0].LeaseExpiresAtUtc {
		t.Fatalf("resend %+v, want %+v", again, got[0])
	}
	var prob map[string]any
	if code, _ := x.API(ctx, WorkerToken, http.MethodPost, "/ready/claim", map[string]any{"owner": "worker-7/run-0", "leaseSeconds": 60,
		"requestId": "next-0"}, &prob); code != http.StatusUnprocessableEntity || prob["reason"] != "idempotency-key-reused" {
		t.Fatalf("the id with another body: %d %v", code, prob)
	}

	// A third run of the same worker: the settings file's cap of two.
	capped := x.claimNext(t, WorkerToken, map[string]any{"owner": "worker-7/run-2", "leaseSeconds": 600})
	if capped.Granted || capped.Reason == nil || *capped.Reason != store.ReasonNotReady || capped.Exclusion == nil || *capped.Exclusion != gating.ExOwnerCap {
		t.Fatalf("a third claim by worker-7: %+v, want not-ready owner-cap", capped)
	}
	rest := x.mustReady(t).ids()
	refused(t, x.claim(t, WorkerToken, rest[0], map[string]any{"owner": "worker-7/run-3", "leaseSeconds": 600}), gating.ExOwnerCap)

	// The pm claims without leaseSeconds: granted the short default, and
	// the grant, the report and the status page say so.
	d := x.claim(t, PMToken, rest[0], map[string]any{"owner": "pm/no-lease"})
	if !d.Granted || d.LeaseDefaulted == nil || !*d.LeaseDefaulted || *d.LeaseSeconds != 30 {
		t.Fatalf("claim without leaseSeconds %+v", d)
	}
	rep := x.mustReport(t)
	lines := 0
	for _, l := range rep.Lines {
		if l.Code == gating.CodeLeaseDefaulted {
			lines++
			if string(l.Item) != rest[0] || !strings.Contains(l.Detail, "pm/no-lease") {
				t.Errorf("lease-defaulted line %+v", l)
			}
		}
	}
	for _, f := range rep.InFlight {
		if f.LeaseDefaulted != (string(f.Item) == rest[0]) {
			t.Errorf("in flight %+v: leaseDefaulted %v", f, f.LeaseDefaulted)
		}
	}
	if lines != 1 || len(rep.InFlight) != 3 {
		t.Fatalf("report lines %+v, in flight %+v", rep.Lines, rep.InFlight)
	}
	if _, page := getText(t, x.AdminURL+"/"); !strings.Contains(page, "(lease-defaulted)") {
		t.Errorf("the status page's in-flight list does not mark the defaulted lease")
	}

	// grantedAt in the claim status, through the API and through MCP.
	var st store.ClaimStatus
	if code, err := x.API(ctx, PMToken, http.MethodGet, "/items/"+rest[0]+"/claim", nil, &st); err != nil || code != http.StatusOK ||
		st.GrantedAt == nil || st.LeaseExpiresAtUtc == nil || *st.GrantedAt >= *st.LeaseExpiresAtUtc {
		t.Fatalf("status %d %v %+v", code, err, st)
	}
	pm := mcpConnect(t, x.Env, "pm", PMToken)
	ms := pm.ok("repocontext_claim_status", map[string]any{"key": mcpKey(num(t, rest[0]))})
	if ms["grantedAt"] != *st.GrantedAt {
		t.Errorf("MCP claim status %v, want grantedAt %s", ms, *st.GrantedAt)
	}

	// backlog_claim_next over MCP: the last item, then why there is none.
	next := pm.ok("backlog_claim_next", map[string]any{"repoId": mcpRepoID, "owner": "pm/mcp", "leaseSeconds": 600, "requestId": "mcp-1"})
	if next["granted"] != true || next["key"] != mcpKey(num(t, rest[1])) || next["item"] != rest[1] {
		t.Fatalf("backlog_claim_next %v, want %s", next, rest[1])
	}
	none := pm.ok("backlog_claim_next", map[string]any{"repoId": mcpRepoID, "owner": "pm/mcp-2", "leaseSeconds": 600})
	if ex, _ := none["excluded"].(map[string]any); none["granted"] != false || none["reason"] != "not-ready" || ex[gating.ExHeld] != float64(4) {
		t.Fatalf("backlog_claim_next with nothing ready %v", none)
	}

	// Release with a requestId, sent twice: released both times.
	var rel store.ReleaseResult
	for i := range 2 {
		if code, err := x.API(ctx, WorkerToken, http.MethodPost, "/items/"+string(got[0].Item)+"/release",
			map[string]any{"fencingToken": *got[0].FencingToken, "requestId": "rel-0"}, &rel); err != nil || code != http.StatusOK || !rel.Released || rel.Replayed != (i == 1) {
			t.Fatalf("release %d: %d %v %+v", i, code, err, rel)
		}
	}
	// A slot is free again under the cap.
	if r := x.claimNext(t, WorkerToken, map[string]any{"owner": "worker-7/run-4", "leaseSeconds": 600}); !r.Granted || r.Item != got[0].Item {
		t.Fatalf("after the release %+v, want %s again", r, got[0].Item)
	}
	b, _ := json.Marshal(x.mustReport(t).Summary)
	if !strings.Contains(string(b), `"inFlight":4`) {
		t.Errorf("summary %s", b)
	}
}
