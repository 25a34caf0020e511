package mcpapi

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/wardenhq/warden/internal/config"
	"github.com/wardenhq/warden/mirror/store"
)

// bodyAPI stands in for the agent API, recording each request's body.
type bodyAPI struct {
	mu     sync.Mutex
	bodies map[string]map[string]any // "METHOD path" → the body
}

func (f *bodyAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	var body map[string]any
	json.Unmarshal(raw, &body)
	f.mu.Lock()
	f.bodies[r.Method+" "+r.URL.Path] = body
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch r.URL.Path {
	case "/repos/acme/app/ready/claim":
		io.WriteString(w, `{"key":"issue-3","item":"issue-3","granted":true,"fencingToken":7,"owner":"worker-7/a","region":"local",`+
			`"leaseExpiresAtUtc":"2026-09-06T00:13:44Z","leaseSeconds":600,"previousLeaseExpiresAtUtc":null,"leaseShortened":null,"reason":null,`+
			`"leaseDefaulted":false,"tried":[{"item":"issue-2","reason":"contended"}],"readyCount":3,"excluded":{"held":1}}`)
	case "/repos/acme/app/items/issue-1/claim":
		if r.Method == http.MethodGet {
			io.WriteString(w, `{"key":"issue-1","exists":true,"claimed":true,"isHeld":true,"state":"held","fencingToken":4,"releasedFencingToken":null,`+
				`"owner":"worker-7/a","region":"local","leaseExpiresAtUtc":"2026-09-06T00:13:44Z","grantedAt":"2026-09-06T00:03:44Z"}`)
			return
		}
		fallthrough
	default:
		io.WriteString(w, `{"key":"issue-1","granted":true,"fencingToken":4,"released":true}`)
	}
}

func (f *bodyAPI) body(k string) map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.bodies[k]
}

// TestMCPClaimsAsTheAgentsNeedThem: backlog_claim_next is POST
// /ready/claim (its answer under the protocol's keys); requestId passes
// through claim, renew and release; the claim status carries grantedAt.
func TestMCPClaimsAsTheAgentsNeedThem(t *testing.T) {
	api := &bodyAPI{bodies: map[string]map[string]any{}}
	const tok = "worker-token-0123456789"
	srv := httptest.NewServer(New(Options{API: api, Tokens: []config.APIToken{{Name: "worker-7", Token: tok, Role: "worker"}},
		Repos: repos(store.Repo{ID: 1, FullName: "acme/app"})}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: srv.URL, HTTPClient: &http.Client{Transport: bearerRT{tok, http.DefaultTransport}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	tools, err := s.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var next *mcp.Tool
	for _, tl := range tools.Tools {
		if tl.Name == "backlog_claim_next" {
			next = tl
		}
	}
	if next == nil || next.Description == "" || next.Annotations == nil || next.Annotations.ReadOnlyHint {
		t.Fatalf("backlog_claim_next: %+v", next)
	}
	schema, _ := json.Marshal(next.InputSchema)
	var sch struct {
		Properties map[string]any `json:"properties"`
		Required   []string       `json:"required"`
	}
	json.Unmarshal(schema, &sch)
	for _, p := range []string{"repoId", "owner", "leaseSeconds", "requestId"} {
		if sch.Properties[p] == nil {
			t.Errorf("input schema lacks %s: %s", p, schema)
		}
	}
	for _, p := range []string{"repoId", "owner", "leaseSeconds"} {
		if !slices.Contains(sch.Required, p) {
			t.Errorf("input schema does not require %s: %s", p, schema)
		}
	}

	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "backlog_claim_next", Arguments: map[string]any{
		"repoId": "app", "owner": "worker-7/a", "leaseSeconds": 600, "requestId": "n-1"}})
	if err != nil || res.IsError {
		t.Fatalf("claim_next: %v %+v", err, res)
	}
	m := res.StructuredContent.(map[string]any)
	tried := m["tried"].([]any)
	if m["key"] != "repo/app/mem/backlog/issue-3" || m["item"] != "issue-3" || m["lockName"] != "repocontext/claim/repo/app/mem/backlog/issue-3" ||
		m["fencingToken"] != float64(7) || len(tried) != 1 || tried[0].(map[string]any)["key"] != "repo/app/mem/backlog/issue-2" {
		t.Errorf("claim_next answer %v", m)
	}
	if b := api.body("POST /repos/acme/app/ready/claim"); b["owner"] != "worker-7/a" || b["leaseSeconds"] != float64(600) || b["requestId"] != "n-1" {
		t.Errorf("POST /ready/claim body %v", b)
	}

	for _, c := range []struct {
		tool, path string
		args       map[string]any
	}{
		{"repocontext_claim", "POST /repos/acme/app/items/issue-1/claim", map[string]any{"owner": "worker-7/a", "leaseSeconds": 60}},
		{"repocontext_renew_claim", "POST /repos/acme/app/items/issue-1/renew", map[string]any{"fencingToken": 4, "leaseSeconds": 60}},
		{"repocontext_release_claim", "POST /repos/acme/app/items/issue-1/release", map[string]any{"fencingToken": 4}},
	} {
		c.args["key"], c.args["requestId"] = "repo/app/mem/backlog/issue-1", "r-"+c.tool
		if res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: c.tool, Arguments: c.args}); err != nil || res.IsError {
			t.Fatalf("%s: %v %+v", c.tool, err, res)
		}
		if b := api.body(c.path); b["requestId"] != "r-"+c.tool {
			t.Errorf("%s sent %v, want requestId", c.tool, b)
		}
	}
	res, err = s.CallTool(ctx, &mcp.CallToolParams{Name: "repocontext_claim_status", Arguments: map[string]any{"key": "repo/app/mem/backlog/issue-1"}})
	if err != nil || res.IsError || res.StructuredContent.(map[string]any)["grantedAt"] != "2026-09-06T00:03:44Z" {
		t.Fatalf("claim status: %v %+v", err, res)
	}
}
