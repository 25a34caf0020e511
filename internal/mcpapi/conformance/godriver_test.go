package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/wardenhq/warden/internal/harness"
)

// bearer adds the agent's token to every request, as an agent host's
// headers setting does.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// goDriver is client.mjs's sequence in Go, over the Go SDK's client.
type goDriver struct {
	t     *testing.T
	s     *mcp.ClientSession
	e     *harness.Env
	step  string
	token string
}

func (d *goDriver) check(cond bool, what string, got any) {
	d.t.Helper()
	if !cond {
		d.t.Fatalf("at %s: %s; got %v", d.step, what, got)
	}
}

// call runs a tool and returns its structured answer (numbers as float64)
// and the text of its content.
func (d *goDriver) call(name string, args map[string]any) (map[string]any, bool, string) {
	d.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := d.s.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		d.t.Fatalf("at %s: %s: protocol error: %v", d.step, name, err)
	}
	out := map[string]any{}
	if res.StructuredContent != nil {
		b, _ := json.Marshal(res.StructuredContent)
		json.Unmarshal(b, &out)
	}
	var text []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			text = append(text, tc.Text)
		}
	}
	return out, res.IsError, strings.Join(text, "\n")
}

func (d *goDriver) ok(name string, args map[string]any) map[string]any {
	d.t.Helper()
	out, isErr, _ := d.call(name, args)
	d.check(!isErr, name+" refused", out)
	return out
}

func (d *goDriver) refused(name string, args map[string]any) map[string]any {
	d.t.Helper()
	out, isErr, text := d.call(name, args)
	d.check(isErr, name+" succeeded, want a refusal", out)
	reason, _ := out["reason"].(string)
	d.check(reason != "" && strings.HasPrefix(text, reason+": "), name+"'s refusal carries its reason, first in its text", text)
	return out
}

// rest asks the agent API the same question, for the reason it gives.
func (d *goDriver) rest(method, path string, body any) (int, map[string]any) {
	d.t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(method, d.e.PublicURL+"/api/v1/repos/"+d.e.Repo.FullName+path, bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+d.token)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		d.t.Fatalf("at %s: %s %s: %v", d.step, method, path, err)
	}
	defer res.Body.Close()
	var out map[string]any
	json.NewDecoder(res.Body).Decode(&out)
	return res.StatusCode, out
}

func list(v any) []any { l, _ := v.([]any); return l }

func obj(v any) map[string]any { m, _ := v.(map[string]any); return m }

// TestConformanceGoClient: the Go SDK's client drives the same sequence as
// client.mjs.
func TestConformanceGoClient(t *testing.T) {
	e := backlog(t)
	d := &goDriver{t: t, e: e, token: harness.WorkerToken, step: "initialize"}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "warden-conformance-go", Version: "1.0.0"}, nil)
	s, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: e.PublicURL + "/mcp",
		HTTPClient: &http.Client{Transport: bearer{token: d.token, next: http.DefaultTransport}}}, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer s.Close()
	d.s = s
	init := s.InitializeResult()
	d.check(init.ServerInfo != nil && init.ServerInfo.Name == "warden", "the server names itself warden", init.ServerInfo)
	d.check(init.Capabilities != nil && init.Capabilities.Tools != nil, "the server offers tools", init.Capabilities)
	d.check(strings.Contains(init.Instructions, "repocontext_list_repos"), "the instructions say how to bind {repoId}", init.Instructions)

	d.step = "tools/list"
	tools, err := s.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	schemas := map[string]map[string]any{}
	for _, tl := range tools.Tools {
		b, _ := json.Marshal(tl.InputSchema)
		var sch map[string]any
		json.Unmarshal(b, &sch)
		schemas[tl.Name] = sch
		d.check(len(tl.Description) >= 40, tl.Name+" has a description", tl.Description)
		d.check(sch["type"] == "object", tl.Name+" publishes an object input schema", sch)
	}
	for _, name := range []string{"repocontext_list_repos", "lattice_list_regions", "repocontext_related", "backlog_claim_next", "backlog_ready",
		"repocontext_claim", "repocontext_renew_claim", "repocontext_release_claim", "repocontext_update"} {
		d.check(schemas[name] != nil, "tools/list lists "+name, len(schemas))
	}

	d.step = "repocontext_list_repos"
	var repoID string
	for _, r := range list(d.ok("repocontext_list_repos", nil)["repos"]) {
		if strings.EqualFold(fmt.Sprint(obj(r)["repository"]), e.Repo.FullName) {
			repoID = fmt.Sprint(obj(r)["repoId"])
		}
	}
	d.check(repoID != "", e.Repo.FullName+" is listed with its repoId", repoID)
	prefix := "repo/" + repoID + "/mem/backlog/"
	file := func(p string) string { return "repo/" + repoID + "/file/" + p }

	d.step = "lattice_list_regions"
	regions := d.ok("lattice_list_regions", nil)
	d.check(regions["current"] == region && fmt.Sprint(regions["regions"]) == "[map[current:true id:"+region+"]]", "the one region is current", regions)

	d.step = "backlog_ready"
	ready := d.ok("backlog_ready", map[string]any{"repoId": repoID})
	var keys []string
	for _, r := range list(ready["ready"]) {
		keys = append(keys, fmt.Sprint(obj(r)["key"]))
		d.check(obj(r)["key"] == prefix+fmt.Sprint(obj(r)["item"]), "a ready item carries its key", r)
	}
	d.check(ready["readyCount"] == float64(3) && len(keys) == 3, "three items are ready", ready)
	a, b, c := keys[0], keys[1], keys[2]

	d.step = "repocontext_related"
	rel := d.ok("repocontext_related", map[string]any{"key": a})
	d.check(fmt.Sprint(rel["anchors"]) == "["+file("src/wal")+"]", a+"'s radius is src/wal", rel)
	d.check(len(list(rel["related"])) == 1 && obj(list(rel["related"])[0])["key"] == b, "only "+b+" overlaps it", rel)
	d.check(fmt.Sprint(obj(list(rel["related"])[0])["shared"]) == "[map[anchor:"+file("src/wal")+" overlaps:"+file("src/wal/batch.go")+"]]", "the anchors shared are named", rel)
	docs := d.ok("repocontext_related", map[string]any{"repoId": repoID, "anchors": []string{"docs"}})
	d.check(len(list(docs["related"])) == 1 && obj(list(docs["related"])[0])["key"] == c, "only "+c+" is under docs", docs)

	d.step = "repocontext_claim with requestId"
	claimArgs := map[string]any{"key": a, "owner": claimOwner, "leaseSeconds": 120, "requestId": "conformance-go-1"}
	claim := d.ok("repocontext_claim", claimArgs)
	fence, _ := claim["fencingToken"].(float64)
	d.check(claim["granted"] == true && fence > 0 && claim["lockName"] == "repocontext/claim/"+a && claim["region"] == region, "the claim is granted", claim)
	again := d.ok("repocontext_claim", claimArgs)
	d.check(again["fencingToken"] == fence && again["replayed"] == true && again["leaseExpiresAtUtc"] == claim["leaseExpiresAtUtc"], "a resend answers the same grant", again)
	inflight := d.ok("repocontext_related", map[string]any{"key": b})
	d.check(fmt.Sprint(inflight["inFlight"]) == "["+a+"]", a+" is in flight beside "+b, inflight)

	d.step = "repocontext_renew_claim"
	renew := d.ok("repocontext_renew_claim", map[string]any{"key": a, "fencingToken": fence, "leaseSeconds": 300})
	d.check(renew["granted"] == true && renew["fencingToken"] == fence && renew["leaseSeconds"] == float64(300), "the renew keeps the fence", renew)

	d.step = "repocontext_update"
	up := d.ok("repocontext_update", map[string]any{"key": a, "fields": map[string]any{"body": "resumeNote: go driver"}, "fencingToken": fence})
	d.check(up["fieldsUpdated"] == float64(1) && strings.Contains(fmt.Sprint(obj(up["item"])["body"]), "resumeNote: go driver"), "the fenced update is written", up)

	d.step = "repocontext_release_claim"
	d.check(d.ok("repocontext_release_claim", map[string]any{"key": a, "fencingToken": fence})["released"] == true, "the claim is released", nil)

	d.step = "repocontext_update with a stale fence"
	claim2 := d.ok("repocontext_claim", map[string]any{"key": a, "owner": claimOwner, "leaseSeconds": 120, "requestId": "conformance-go-2"})
	d.check(claim2["fencingToken"].(float64) > fence, "a new claim moves the fence on", claim2)
	stale := d.refused("repocontext_update", map[string]any{"key": a, "fields": map[string]any{"body": "stale"}, "fencingToken": fence})
	status, restStale := d.rest(http.MethodPatch, "/items/"+strings.TrimPrefix(a, prefix), map[string]any{"body": "stale", "fencingToken": fence})
	d.check(status == http.StatusConflict && stale["reason"] == restStale["reason"] && stale["reason"] == "StaleToken", "the tool error carries the REST reason",
		fmt.Sprintf("mcp %v, rest %d %v", stale["reason"], status, restStale["reason"]))
	d.check(d.ok("repocontext_release_claim", map[string]any{"key": a, "fencingToken": claim2["fencingToken"]})["released"] == true, "the second claim is released", nil)

	d.step = "backlog_claim_next with requestId"
	nextArgs := map[string]any{"repoId": repoID, "owner": claimOwner, "leaseSeconds": 120, "requestId": "conformance-go-3"}
	next := d.ok("backlog_claim_next", nextArgs)
	d.check(next["granted"] == true && next["key"] == a, "the best ready item is claimed", next)
	nextAgain := d.ok("backlog_claim_next", nextArgs)
	d.check(nextAgain["key"] == a && nextAgain["fencingToken"] == next["fencingToken"] && nextAgain["replayed"] == true, "a resend answers the same grant", nextAgain)

	d.step = "backlog_ready with a claim held"
	ready2 := d.ok("backlog_ready", map[string]any{"repoId": repoID})
	held := slices.ContainsFunc(list(ready2["excluded"]), func(x any) bool { return obj(x)["key"] == a && obj(x)["reason"] == "held" })
	d.check(ready2["readyCount"] == float64(2) && held, a+" is excluded held", ready2)
	d.check(d.ok("repocontext_release_claim", map[string]any{"key": a, "fencingToken": next["fencingToken"]})["released"] == true, "the last claim is released", nil)
}
