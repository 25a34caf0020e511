package mcpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/wardenhq/warden/internal/config"
	"github.com/wardenhq/warden/mirror/store"
)

// bindingsAPI stands in for the agent API's /regions and /related.
type bindingsAPI struct {
	mu      sync.Mutex
	queries []string // "path?query"
}

func (f *bindingsAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.queries = append(f.queries, r.URL.Path+"?"+r.URL.RawQuery)
	f.mu.Unlock()
	switch r.URL.Path {
	case "/regions":
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"regions":[{"id":"local","current":true}],"current":"local"}`)
	case "/repos/acme/app/related":
		if r.URL.Query().Get("item") == "issue-9" {
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, `{"type":"about:blank","title":"Not Found","status":404,"detail":"issue-9 is not an item of acme/app","reason":"missing"}`)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"item":"issue-1","anchors":["src/wal"],"related":[{"item":"issue-2","title":"B","state":"","claimState":"held","inFlight":true,`+
			`"shared":[{"anchor":"src/wal","overlaps":"src/wal/batch.go"}]}],"inFlight":["issue-2"]}`)
	case "/repos/acme/app/items":
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"items":[],"nextCursor":null}`)
	default:
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, `{"type":"about:blank","title":"Not Found","status":404,"detail":"no such route","reason":"not-found"}`)
	}
}

func (f *bindingsAPI) last() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.queries) == 0 {
		return ""
	}
	return f.queries[len(f.queries)-1]
}

// session opens an MCP session with h as tok's holder.
func session(t *testing.T, h http.Handler, tok string) *mcp.ClientSession {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: srv.URL, HTTPClient: &http.Client{Transport: bearerRT{tok, http.DefaultTransport}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// callTool calls a tool and returns its structured content as a map.
func callTool(t *testing.T, s *mcp.ClientSession, name string, args map[string]any) (map[string]any, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	b, _ := json.Marshal(res.StructuredContent)
	var m map[string]any
	json.Unmarshal(b, &m)
	if res.IsError && m != nil {
		if len(res.Content) == 0 || !strings.HasPrefix(res.Content[0].(*mcp.TextContent).Text, fmt.Sprint(m["reason"])+": ") {
			t.Errorf("%s: the refusal's text %v does not begin with its reason %v", name, res.Content, m["reason"])
		}
	}
	return m, res.IsError
}

// TestMCPListRepos: repocontext_list_repos answers each served repository
// the token may use once, by its WARDEN_MCP_REPOS id, else its name when
// that names it alone, else its GitHub id (every one of them resolves back
// to it); configured entries warden does not serve are listed apart.
func TestMCPListRepos(t *testing.T) {
	const all, limited = "pm-token-0123456789", "limited-token-0123456789"
	o := Options{API: &bindingsAPI{},
		Tokens:   []config.APIToken{{Name: "pm", Token: all, Role: "pm"}, {Name: "l", Token: limited, Role: "pm", Repos: []string{"ACME/lib", "acme/ghost"}}},
		RepoKeys: map[string]string{"lattice": "NSTA1/Orleans.Lattice", "ghost": "acme/ghost", "app2": "acme/app", "app3": "acme/app"},
		Repos: repos(store.Repo{ID: 7, FullName: "acme/app", DefaultBranch: "main"}, store.Repo{ID: 8, FullName: "acme/lib"},
			store.Repo{ID: 9, FullName: "other/lib"}, store.Repo{ID: 10, FullName: "NSTA1/Orleans.Lattice"}, store.Repo{ID: 11, FullName: "acme/solo"})}
	cases := []struct {
		tok            string
		repos, unknown string
	}{
		{all, "8=acme/lib 9=other/lib app2=acme/app[app3] lattice=NSTA1/Orleans.Lattice solo=acme/solo", "ghost=acme/ghost"},
		{limited, "8=acme/lib", "ghost=acme/ghost"},
	}
	s := &service{repoKeys: o.RepoKeys, repos: o.Repos, log: discard()}
	for _, c := range cases {
		out, isErr := callTool(t, session(t, New(o), c.tok), "repocontext_list_repos", nil)
		if isErr {
			t.Fatalf("list_repos refused: %v", out)
		}
		render := func(list any) string {
			var parts []string
			for _, e := range list.([]any) {
				m := e.(map[string]any)
				p := fmt.Sprintf("%v=%v", m["repoId"], m["repository"])
				if a, ok := m["aliases"].([]any); ok {
					p += fmt.Sprint(a)
				}
				parts = append(parts, p)
				if full, pr := s.resolve(context.Background(), m["repoId"].(string), nil); c.tok == all && m["githubId"] != nil && (pr != nil || full != m["repository"]) {
					t.Errorf("repoId %v resolves to %q (%v), not %v", m["repoId"], full, pr, m["repository"])
				}
			}
			return strings.Join(parts, " ")
		}
		if got := render(out["repos"]); got != c.repos {
			t.Errorf("repos %q, want %q", got, c.repos)
		}
		if got := render(out["notServed"]); got != c.unknown {
			t.Errorf("notServed %q, want %q", got, c.unknown)
		}
	}
}

// TestMCPRegionsAndRelated: lattice_list_regions is GET /regions;
// repocontext_related is GET /related with the item or the anchors, its
// answer under the protocol's keys; malformed arguments, and arguments the
// input schema refuses, are tool errors carrying invalid-request and the
// argument at fault.
func TestMCPRegionsAndRelated(t *testing.T) {
	api := &bindingsAPI{}
	const tok = "worker-token-0123456789"
	s := session(t, New(Options{API: api, Tokens: []config.APIToken{{Name: "worker-7", Token: tok, Role: "worker"}},
		Repos: repos(store.Repo{ID: 1, FullName: "acme/app"})}), tok)

	reg, isErr := callTool(t, s, "lattice_list_regions", nil)
	if isErr || reg["current"] != "local" || fmt.Sprint(reg["regions"]) != "[map[current:true id:local]]" {
		t.Errorf("regions %v", reg)
	}

	rel, isErr := callTool(t, s, "repocontext_related", map[string]any{"key": "repo/app/mem/backlog/issue-1"})
	if isErr || api.last() != "/repos/acme/app/related?item=issue-1" {
		t.Fatalf("related: %v; asked %s", rel, api.last())
	}
	r0 := rel["related"].([]any)[0].(map[string]any)
	if rel["key"] != "repo/app/mem/backlog/issue-1" || fmt.Sprint(rel["anchors"]) != "[repo/app/file/src/wal]" ||
		r0["key"] != "repo/app/mem/backlog/issue-2" || r0["inFlight"] != true ||
		fmt.Sprint(r0["shared"]) != "[map[anchor:repo/app/file/src/wal overlaps:repo/app/file/src/wal/batch.go]]" ||
		fmt.Sprint(rel["inFlight"]) != "[repo/app/mem/backlog/issue-2]" {
		t.Errorf("related answer %v", rel)
	}
	if _, isErr := callTool(t, s, "repocontext_related", map[string]any{"key": "repo/app/file/src/wal/batch.go"}); isErr ||
		api.last() != "/repos/acme/app/related?anchor=src%2Fwal%2Fbatch.go" {
		t.Errorf("a file key asked %s", api.last())
	}
	if _, isErr := callTool(t, s, "repocontext_related", map[string]any{"repoId": "app", "anchors": []string{"repo/app/file/docs", "src"}}); isErr ||
		api.last() != "/repos/acme/app/related?anchor=docs&anchor=src" {
		t.Errorf("anchors asked %s", api.last())
	}

	refusals := []struct {
		tool          string
		args          map[string]any
		reason, field string
	}{
		{"repocontext_related", map[string]any{"key": "repo/app/mem/backlog/issue-9"}, "missing", ""},
		{"repocontext_related", map[string]any{}, "invalid-request", "key"},
		{"repocontext_related", map[string]any{"anchors": []string{"src"}}, "invalid-request", "repoId"},
		{"repocontext_related", map[string]any{"key": "repo/app/mem/backlog/issue-1", "anchors": []string{"src"}}, "invalid-request", "anchors"},
		{"repocontext_related", map[string]any{"repoId": "app", "anchors": []string{"repo/other/file/x.go"}}, "invalid-request", "anchors"},
		{"repocontext_related", map[string]any{"key": "repo/nope/mem/backlog/issue-1"}, "RepoNotServed", ""},
		// The input schema refuses these before any tool runs.
		{"repocontext_claim", map[string]any{"key": "repo/app/mem/backlog/issue-1", "owner": "worker-7/a", "leaseSeconds": "soon"}, "invalid-request", "leaseSeconds"},
		{"repocontext_related", map[string]any{"anchors": "src"}, "invalid-request", "anchors"},
	}
	for _, c := range refusals {
		out, isErr := callTool(t, s, c.tool, c.args)
		if !isErr || out["reason"] != c.reason || (c.field != "" && out["field"] != c.field) {
			t.Errorf("%s(%v) = %v (error %v), want a refusal %s naming %q", c.tool, c.args, out, isErr, c.reason, c.field)
		}
	}
}

// TestMCPToolsPublishSchemas: every tool has a description and an object
// input schema, the three binding tools included.
func TestMCPToolsPublishSchemas(t *testing.T) {
	const tok = "worker-token-0123456789"
	s := session(t, New(Options{API: &bindingsAPI{}, Tokens: []config.APIToken{{Name: "w", Token: tok, Role: "worker"}}}), tok)
	res, err := s.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, tl := range res.Tools {
		names[tl.Name] = true
		schema, _ := json.Marshal(tl.InputSchema)
		if len(tl.Description) < 40 || !strings.Contains(string(schema), `"type":"object"`) {
			t.Errorf("%s: description %q, schema %s", tl.Name, tl.Description, schema)
		}
	}
	for _, want := range []string{"repocontext_list_repos", "lattice_list_regions", "repocontext_related", "backlog_claim_next", "repocontext_claim"} {
		if !names[want] {
			t.Errorf("tools/list lacks %s", want)
		}
	}
	if len(res.Tools) != 16 {
		t.Errorf("%d tools, want 16", len(res.Tools))
	}
}
