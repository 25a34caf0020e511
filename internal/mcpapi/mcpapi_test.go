package mcpapi

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/internal/config"
	"github.com/wardenhq/warden/mirror/store"
)

func TestMCPParseKey(t *testing.T) {
	good := []struct {
		in   string
		want key
		item string
	}{
		{"repo/app/mem/backlog/issue-12", key{"app", "backlog", "issue-12"}, "issue-12"},
		{"repo/my-repo.x/mem/backlog/issue-1", key{"my-repo.x", "backlog", "issue-1"}, "issue-1"},
		{"repo/app/mem/notes/n-1", key{"app", "notes", "n-1"}, ""},
		{"repo/app/mem/backlog/issue-012", key{"app", "backlog", "issue-012"}, ""},
		{"repo/app/mem/backlog/issue-2101-completion-report", key{"app", "backlog", "issue-2101-completion-report"}, ""},
	}
	for _, c := range good {
		k, p := parseKey("key", c.in)
		if p != nil || k != c.want || k.String() != c.in {
			t.Errorf("parseKey(%q) = %+v, %v; want %+v", c.in, k, p, c.want)
			continue
		}
		id, ok := k.Item()
		if string(id) != c.item || ok != (c.item != "") {
			t.Errorf("%q names item %q (%v), want %q", c.in, id, ok, c.item)
		}
	}
	for _, in := range []string{"", "issue-1", "repo/app", "repo//mem/backlog/issue-1", "repo/app/file/src/main.go",
		"repo/app/symbol/main.Run", "repo/app/mem/backlog", "repo/app/mem//issue-1", "repo/app/mem/backlog/a/b",
		"repo/a b/mem/backlog/issue-1", "x/app/mem/backlog/issue-1"} {
		if k, p := parseKey("key", in); p == nil || p.Reason != "invalid-request" || p.doc["field"] != "key" {
			t.Errorf("parseKey(%q) = %+v, %v; want an invalid-request refusal naming key", in, k, p)
		}
	}
}

func repos(rs ...store.Repo) func(context.Context) ([]store.Repo, error) {
	return func(context.Context) ([]store.Repo, error) { return rs, nil }
}

func TestMCPResolveRepoID(t *testing.T) {
	s := &service{repoKeys: map[string]string{"lattice": "NSTA1/Orleans.Lattice"},
		repos: repos(store.Repo{ID: 7, FullName: "acme/app"}, store.Repo{ID: 8, FullName: "acme/lib"}, store.Repo{ID: 9, FullName: "other/lib"}),
		log:   discard()}
	ctx := context.Background()
	for in, want := range map[string]string{"lattice": "NSTA1/Orleans.Lattice", "app": "acme/app", "APP": "acme/app", "7": "acme/app", "9": "other/lib"} {
		if got, p := s.resolve(ctx, in, nil); p != nil || got != want {
			t.Errorf("resolve(%q) = %q, %v; want %q", in, got, p, want)
		}
	}
	if _, p := s.resolve(ctx, "lib", nil); p == nil || p.Reason != "RepoNotServed" || !strings.Contains(p.Detail, "acme/lib, other/lib") {
		t.Errorf("an ambiguous repoId: %+v, want RepoNotServed naming both", p)
	}
	if _, p := s.resolve(ctx, "nothing", nil); p == nil || p.Reason != "RepoNotServed" || p.Status != http.StatusNotFound {
		t.Errorf("an unknown repoId: %+v, want 404 RepoNotServed", p)
	}
	limited := &auth.TokenInfo{UserID: "w", Extra: map[string]any{tokenRepos: []string{"acme/app"}}}
	if _, p := s.resolve(ctx, "nothing", limited); p == nil || p.Reason != "RepoNotAllowed" {
		t.Errorf("an unknown repoId for a limited token: %+v, want RepoNotAllowed (it learns nothing)", p)
	}
}

func TestMCPLinkTargets(t *testing.T) {
	s := &service{repos: repos(store.Repo{ID: 7, FullName: "acme/app"}, store.Repo{ID: 8, FullName: "acme/lib"}), log: discard()}
	got := s.linksIn(context.Background(), nil, "app", "acme/app", map[string][]string{
		"blockedBy":  {"repo/app/mem/backlog/issue-3", "issue-4", "repo/lib/mem/backlog/issue-5", "repo/7/mem/backlog/issue-6", "repo/app/file/x.go"},
		"anchoredTo": {"repo/app/file/src/main.go", "src/other.go", "repo/lib/file/y.go"},
		"claims":     {"repo/app/mem/runs/r-1"},
	})
	want := []linkIn{
		{"anchoredTo", "src/main.go"}, {"anchoredTo", "src/other.go"}, {"anchoredTo", "repo/lib/file/y.go"},
		{"blockedBy", "issue-3"}, {"blockedBy", "issue-4"}, {"blockedBy", "repo/lib/mem/backlog/issue-5"}, {"blockedBy", "issue-6"}, {"blockedBy", "repo/app/file/x.go"},
		{"claims", "repo/app/mem/runs/r-1"},
	}
	if len(got) != len(want) {
		t.Fatalf("linksIn = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("link %d = %v, want %v", i, got[i], want[i])
		}
	}
	out := linksOut("app", []gating.Link{{Rel: gating.BlockedBy, Target: "issue-3"}, {Rel: gating.AnchoredTo, Target: "src/main.go"}, {Rel: gating.Claims, Target: "run-1"}})
	if out["blockedBy"][0] != "repo/app/mem/backlog/issue-3" || out["anchoredTo"][0] != "repo/app/file/src/main.go" || out["claims"][0] != "run-1" {
		t.Errorf("linksOut = %v", out)
	}
}

func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// fakeAPI stands in for the agent API: it records each request and answers
// from a table.
type fakeAPI struct {
	mu     sync.Mutex
	seen   []string // "METHOD path Authorization"
	bodies []string // the request bodies, in the same order
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.seen = append(f.seen, r.Method+" "+r.URL.Path+" "+r.Header.Get("Authorization"))
	f.bodies = append(f.bodies, string(body))
	f.mu.Unlock()
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/repos/acme/app/items/issue-1/claim":
		var req map[string]any
		json.Unmarshal(body, &req)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"key":"issue-1","granted":true,"fencingToken":41,"owner":"`+req["owner"].(string)+`","region":"local","leaseExpiresAtUtc":"2026-09-06T00:13:44Z","leaseSeconds":60,"previousLeaseExpiresAtUtc":null,"leaseShortened":null,"reason":null}`)
	case r.Method == http.MethodPatch && r.URL.Path == "/repos/acme/app/items/issue-1":
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusConflict)
		io.WriteString(w, `{"type":"about:blank","title":"Conflict","status":409,"detail":"the fencing token is older","reason":"StaleToken","item":"issue-1","presentedFencingToken":40,"currentFencingToken":41}`)
	default:
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, `{"type":"about:blank","title":"Not Found","status":404,"detail":"no such route","reason":"not-found"}`)
	}
}

type bearerRT struct {
	tok  string
	next http.RoundTripper
}

func (b bearerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.tok)
	return b.next.RoundTrip(r)
}

// TestMCPToolsCallTheAgentAPI: a tool is one request to the agent API,
// carrying the caller's own token; its answer comes back under the
// protocol's key, and its refusal as a tool error with the problem
// document whole (reason and fence details). A request without a known
// token never reaches the MCP transport.
func TestMCPToolsCallTheAgentAPI(t *testing.T) {
	api := &fakeAPI{}
	const tok = "worker-token-0123456789"
	h := New(Options{API: api, Tokens: []config.APIToken{{Name: "worker-7", Token: tok, Role: "worker"}},
		Repos: repos(store.Repo{ID: 1, FullName: "acme/app"})})
	srv := httptest.NewServer(h)
	defer srv.Close()

	resp, err := http.Post(srv.URL, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(b), `"reason":"Unauthenticated"`) {
		t.Errorf("unauthenticated: %d %s", resp.StatusCode, b)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: srv.URL, HTTPClient: &http.Client{Transport: bearerRT{tok, http.DefaultTransport}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "repocontext_claim", Arguments: map[string]any{
		"key": "repo/app/mem/backlog/issue-1", "owner": "worker-7/a", "leaseSeconds": 60}})
	if err != nil || res.IsError {
		t.Fatalf("claim: %v %+v", err, res)
	}
	m := res.StructuredContent.(map[string]any)
	if m["key"] != "repo/app/mem/backlog/issue-1" || m["lockName"] != "repocontext/claim/repo/app/mem/backlog/issue-1" ||
		m["fencingToken"] != float64(41) || m["granted"] != true || m["owner"] != "worker-7/a" {
		t.Errorf("claim answer %v", m)
	}
	res, err = s.CallTool(ctx, &mcp.CallToolParams{Name: "repocontext_update", Arguments: map[string]any{
		"key": "repo/app/mem/backlog/issue-1", "fencingToken": 40, "fields": map[string]any{"body": "x"},
		"addTags": []string{"state:parked"}, "question": "which way?"}})
	if err != nil || !res.IsError {
		t.Fatalf("a refused update: %v %+v", err, res)
	}
	m = res.StructuredContent.(map[string]any)
	if m["reason"] != "StaleToken" || m["currentFencingToken"] != float64(41) || m["presentedFencingToken"] != float64(40) || m["status"] != float64(409) {
		t.Errorf("refusal %v, want the problem document whole", m)
	}
	if txt := res.Content[0].(*mcp.TextContent).Text; !strings.HasPrefix(txt, "StaleToken: ") {
		t.Errorf("refusal text %q, want it to start with the reason", txt)
	}
	api.mu.Lock()
	defer api.mu.Unlock()
	want := []string{"POST /repos/acme/app/items/issue-1/claim Bearer " + tok, "PATCH /repos/acme/app/items/issue-1 Bearer " + tok}
	if len(api.seen) != len(want) {
		t.Fatalf("agent API saw %v, want %v", api.seen, want)
	}
	for i := range want {
		if api.seen[i] != want[i] {
			t.Errorf("agent API request %d: %q, want %q", i, api.seen[i], want[i])
		}
	}
	// A park's question reaches the API (a worker's park needs one).
	if !strings.Contains(api.bodies[1], `"question":"which way?"`) || !strings.Contains(api.bodies[1], `"addTags":["state:parked"]`) {
		t.Errorf("PATCH body %s, want the park's tag and question", api.bodies[1])
	}
}
