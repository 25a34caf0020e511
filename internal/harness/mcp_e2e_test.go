package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/wardenhq/warden/internal/agentapi"
	"github.com/wardenhq/warden/internal/config"
)

// End-to-end tests of the MCP endpoint (CONTRACT.md §3, §9; issue 10): the
// protocol's agents drive warden with the official SDK's client over real
// HTTP, and what they do lands in the same ledger the agent API serves.

// mcpRepoID is the harness repository (acme/app) as a protocol repoId: no
// WARDEN_MCP_REPOS entry, so it is the installed repository's name.
const mcpRepoID = "app"

func mcpKey(n int) string { return fmt.Sprintf("repo/%s/mem/backlog/issue-%d", mcpRepoID, n) }

// bearerTransport adds the agent's token to every request of its client.
type bearerTransport struct {
	token string
	next  http.RoundTripper
}

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// mcpAgent is one agent's MCP session with warden.
type mcpAgent struct {
	t    *testing.T
	name string
	s    *mcp.ClientSession
}

// mcpConnect opens an MCP session with warden as token's holder.
func mcpConnect(t *testing.T, e *Env, name, token string) *mcpAgent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: name, Version: "test"}, nil)
	s, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: e.PublicURL + "/mcp",
		HTTPClient: &http.Client{Transport: bearerTransport{token: token, next: http.DefaultTransport}}}, nil)
	if err != nil {
		t.Fatalf("%s: connect to %s/mcp: %v", name, e.PublicURL, err)
	}
	t.Cleanup(func() { s.Close() })
	return &mcpAgent{t: t, name: name, s: s}
}

// try calls a tool and returns its structured answer and whether it is a
// tool error (a refusal).
func (a *mcpAgent) try(tool string, args map[string]any) (map[string]any, bool) {
	a.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := a.s.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		a.t.Fatalf("%s: %s(%v): protocol error: %v", a.name, tool, args, err)
	}
	var out map[string]any
	if res.StructuredContent != nil {
		b, err := json.Marshal(res.StructuredContent)
		if err != nil {
			a.t.Fatalf("%s: %s: %v", a.name, tool, err)
		}
		if err := json.Unmarshal(b, &out); err != nil {
			a.t.Fatalf("%s: %s answered %s: %v", a.name, tool, b, err)
		}
	}
	if res.IsError {
		var text []string
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				text = append(text, tc.Text)
			}
		}
		if out == nil {
			out = map[string]any{}
		}
		out["_text"] = strings.Join(text, "\n")
	}
	return out, res.IsError
}

// ok calls a tool that must succeed.
func (a *mcpAgent) ok(tool string, args map[string]any) map[string]any {
	a.t.Helper()
	out, isErr := a.try(tool, args)
	if isErr {
		a.t.Fatalf("%s: %s(%v) refused: %v", a.name, tool, args, out)
	}
	return out
}

// refused calls a tool that must be refused with reason.
func (a *mcpAgent) refused(tool string, args map[string]any, reason string) map[string]any {
	a.t.Helper()
	out, isErr := a.try(tool, args)
	if !isErr {
		a.t.Fatalf("%s: %s(%v) succeeded, want a refusal with reason %s: %v", a.name, tool, args, reason, out)
	}
	if out["reason"] != reason {
		a.t.Fatalf("%s: %s(%v) refused with reason %v, want %s: %v", a.name, tool, args, out["reason"], reason, out)
	}
	if !strings.Contains(fmt.Sprint(out["_text"]), reason) {
		a.t.Errorf("%s: %s refusal text %q does not name the reason %s", a.name, tool, out["_text"], reason)
	}
	return out
}

// token reads a fencing token from an answer.
func token(t *testing.T, m map[string]any) int64 {
	t.Helper()
	f, ok := m["fencingToken"].(float64)
	if !ok || f < 1 {
		t.Fatalf("no fencingToken in %v", m)
	}
	return int64(f)
}

func strs(v any) []string {
	l, _ := v.([]any)
	out := make([]string, 0, len(l))
	for _, x := range l {
		out = append(out, fmt.Sprint(x))
	}
	return out
}

func field(m map[string]any, path ...string) any {
	var v any = m
	for _, p := range path {
		mm, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = mm[p]
	}
	return v
}

// apiItem reads an item through the agent API (the other surface of the
// same ledger); ok is false when it is no item.
func apiItem(t *testing.T, e *Env, id string) (agentapi.ItemDetail, bool) {
	t.Helper()
	var d agentapi.ItemDetail
	code, err := e.API(context.Background(), PMToken, http.MethodGet, "/items/"+id, nil, &d)
	if code == http.StatusNotFound {
		return d, false
	}
	if err != nil || code != http.StatusOK {
		t.Fatalf("GET /items/%s: %d %v", id, code, err)
	}
	return d, true
}

func mustAPIItem(t *testing.T, e *Env, id string) agentapi.ItemDetail {
	t.Helper()
	d, ok := apiItem(t, e, id)
	if !ok {
		t.Fatalf("%s is not an item (404)", id)
	}
	return d
}

// mcpCreate makes an item through repocontext_remember (no id: warden
// opens the issue) and returns its number.
func mcpCreate(t *testing.T, a *mcpAgent, title string, tags []string) int {
	t.Helper()
	out := a.ok("repocontext_remember", map[string]any{"repoId": mcpRepoID, "topic": "backlog", "kind": "Note",
		"title": title, "specification": "What must be true: " + title, "tags": tags})
	n, ok := field(out, "issue", "number").(float64)
	if !ok || out["key"] != mcpKey(int(n)) || out["created"] != true {
		t.Fatalf("remember answered %v, want a created item with its issue", out)
	}
	return int(n)
}

// TestMCPWorkerRun: a worker's whole run through the MCP tools, on an item a
// maintainer's token made (admitted at creation): scan, the ready set,
// claim, a fenced update of the resume block (an unfenced one refused),
// renew, release. Every step is the ledger's, as the agent API shows it.
func TestMCPWorkerRun(t *testing.T) {
	t.Parallel()
	e := New(t, Options{})
	human := mcpConnect(t, e, "maintainer", HumanToken)
	n := mcpCreate(t, human, "Batch WAL writes", []string{"priority:P1"})
	key := mcpKey(n)
	e.MustSettle(t)

	w := mcpConnect(t, e, "worker", WorkerToken)
	tools, err := w.s.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
	}
	for _, want := range []string{"repocontext_remember", "repocontext_update", "repocontext_recall", "repocontext_scan",
		"repocontext_forget", "repocontext_claim", "repocontext_renew_claim", "repocontext_release_claim",
		"repocontext_claim_status", "repocontext_neighbors", "backlog_ready", "backlog_report", "backlog_claim_next",
		"repocontext_list_repos", "lattice_list_regions", "repocontext_related"} {
		if !slices.Contains(names, want) {
			t.Errorf("tools/list lacks %s: %v", want, names)
		}
	}

	// 1. Scan the backlog topic.
	page := w.ok("repocontext_scan", map[string]any{"repoId": mcpRepoID, "scope": "MemoryTopic", "topic": "backlog"})
	entries, _ := page["entries"].([]any)
	if len(entries) != 1 {
		t.Fatalf("scan: %d entries, want 1: %v", len(entries), page)
	}
	entry := entries[0].(map[string]any)
	if entry["key"] != key || entry["exists"] != true || !slices.Contains(strs(entry["tags"]), "priority:P1") ||
		!slices.Contains(strs(entry["tags"]), "backlog") || entry["stale"] != nil {
		t.Errorf("scan entry %v, want %s with its tags and stale not evaluated (null)", entry, key)
	}

	// 2. The ready set names it, by key too.
	ready := w.ok("backlog_ready", map[string]any{"repoId": mcpRepoID})
	rs, _ := ready["ready"].([]any)
	if len(rs) != 1 || field(rs[0].(map[string]any), "key") != key {
		t.Fatalf("backlog_ready: %v, want %s ready", ready, key)
	}

	// 3. Claim it under the worker's own owner.
	claim := w.ok("repocontext_claim", map[string]any{"key": key, "owner": "worker-7/run-1", "leaseSeconds": 120})
	if claim["granted"] != true || claim["key"] != key || claim["lockName"] != "repocontext/claim/"+key ||
		claim["owner"] != "worker-7/run-1" || claim["region"] != "local" || claim["leaseExpiresAtUtc"] == nil {
		t.Fatalf("claim: %v", claim)
	}
	fence := token(t, claim)
	st := w.ok("repocontext_claim_status", map[string]any{"key": key})
	if st["exists"] != true || st["claimed"] != true || st["isHeld"] != true || st["owner"] != "worker-7/run-1" ||
		token(t, st) != fence || st["authoritative"] != false {
		t.Errorf("claim_status under the claim: %v", st)
	}

	// 4. The resume block: refused without the token, written with it.
	body := "lastLocation: branch feat/wal\nresumeNote: seam wired, tests pending"
	w.refused("repocontext_update", map[string]any{"key": key, "fields": map[string]any{"body": body}}, "ClaimRequired")
	up := w.ok("repocontext_update", map[string]any{"key": key, "fields": map[string]any{"body": body}, "fencingToken": fence})
	if up["key"] != key || up["fieldsUpdated"] != float64(1) {
		t.Errorf("update answered %v", up)
	}
	rec := w.ok("repocontext_recall", map[string]any{"key": key})
	if field(rec, "fields", "body") != body || field(rec, "claim", "claimed") != true || rec["expires"] != false {
		t.Errorf("recall after the fenced update: %v", rec)
	}
	if viaAPI := mustAPIItem(t, e, idOf(n)); viaAPI.Body != body {
		t.Errorf("the agent API reads body %q, want the MCP write %q", viaAPI.Body, body)
	}

	// 5. Renew with an explicit length, then release on the exact token.
	renewed := w.ok("repocontext_renew_claim", map[string]any{"key": key, "fencingToken": fence, "leaseSeconds": 600})
	if renewed["granted"] != true || token(t, renewed) != fence || renewed["leaseShortened"] != false || renewed["previousLeaseExpiresAtUtc"] == nil {
		t.Errorf("renew: %v", renewed)
	}
	rel := w.ok("repocontext_release_claim", map[string]any{"key": key, "fencingToken": fence})
	if rel["released"] != true || rel["key"] != key {
		t.Errorf("release: %v", rel)
	}
	again := w.ok("repocontext_release_claim", map[string]any{"key": key, "fencingToken": fence})
	if again["released"] != false || again["reason"] != "stale" {
		t.Errorf("a second release: %v, want released false, reason stale", again)
	}
	st = w.ok("repocontext_claim_status", map[string]any{"key": key})
	if st["claimed"] != false || st["state"] != "released" || token(t, st) != fence {
		t.Errorf("claim_status after the release: %v", st)
	}
	if it := mustAPIItem(t, e, idOf(n)); it.Claim.Claimed || it.Attempts != 1 {
		t.Errorf("the ledger after the run: claimed %v, attempts %d; want released, 1 attempt", it.Claim.Claimed, it.Attempts)
	}
}

// TestMCPProjectManagerCreates: a project manager authors items through
// repocontext_remember. Without an id warden opens the GitHub issue first
// (the specification its body, the item and admission labels), then writes
// the item under the issue's number; a retry opens no second issue. With
// the id of an issue the PM filed itself (the protocol's own order), the
// issue is adopted. Edges go by key, and neighbours walk them.
func TestMCPProjectManagerCreates(t *testing.T) {
	t.Parallel()
	e := New(t, Options{})
	pm := mcpConnect(t, e, "pm", PMToken)
	args := map[string]any{"repoId": mcpRepoID, "topic": "backlog", "kind": "Note", "author": "backlog-pm",
		"title": "Add the WAL shard batching seam", "specification": "The seam exists and is tested.",
		"tags": []string{"backlog", "priority:P1", "phase:implementation", "homeRegion:local", "baseBranch:main"}}
	out := pm.ok("repocontext_remember", args)
	if out["key"] != mcpKey(1) || out["created"] != true || out["outcome"] != "created" || field(out, "issue", "number") != float64(1) {
		t.Fatalf("remember (create): %v", out)
	}
	e.MustSettle(t)
	var issues int
	e.Sim.Locked(func() {
		issues = len(e.Repo.Issues)
		iss := e.Repo.Issues[1]
		if iss == nil {
			t.Fatalf("no GitHub issue #1 after the create")
		}
		if !strings.Contains(iss.Body, "The seam exists and is tested.") || iss.Title != "Add the WAL shard batching seam" {
			t.Errorf("issue #1: title %q body %q, want the item's title and specification", iss.Title, iss.Body)
		}
		var labels []string
		for _, l := range iss.Labels {
			labels = append(labels, l.Name)
		}
		if !slices.Contains(labels, lblItem) || !slices.Contains(labels, lblAdmission) {
			t.Errorf("issue #1 labels %v, want %s and %s (a pm's item awaits admission)", labels, lblItem, lblAdmission)
		}
	})
	it := mustAPIItem(t, e, "issue-1")
	if it.Author != "backlog-pm" || !strings.Contains(it.Body, "#1") {
		t.Errorf("item issue-1: author %q body %q, want the PM's author and a pointer to #1", it.Author, it.Body)
	}

	// A retry of the same remember adopts nothing new and opens no issue.
	again := pm.ok("repocontext_remember", args)
	if again["key"] != mcpKey(1) || again["created"] != false {
		t.Errorf("a retried remember: %v, want issue-1 again, created false", again)
	}
	e.MustSettle(t)
	e.Sim.Locked(func() {
		if len(e.Repo.Issues) != issues {
			t.Errorf("a retried remember opened another issue: %d issues, want %d", len(e.Repo.Issues), issues)
		}
	})

	// The protocol's order: the PM files the issue, then remembers it by id.
	iss, err := e.Person("pm-human", "write").OpenIssue(e.Repo, "Batch the shipper poll", "Spec: poll in batches.")
	if err != nil {
		t.Fatal(err)
	}
	e.MustSettle(t)
	dep := pm.ok("repocontext_remember", map[string]any{"repoId": mcpRepoID, "topic": "backlog", "id": fmt.Sprintf("issue-%d", iss.Number),
		"kind": "Note", "author": "backlog-pm", "body": "Spec: https://github.com/acme/app/issues/2",
		"tags":     []string{"backlog", "priority:P1", "phase:implementation", "homeRegion:local", "baseBranch:main"},
		"addLinks": map[string][]string{"blockedBy": {mcpKey(1)}, "anchoredTo": {"repo/" + mcpRepoID + "/file/wal/shipper.go"}}})
	if dep["key"] != mcpKey(iss.Number) || dep["created"] != true || dep["outcome"] != "adopted" || dep["linksAdded"] != float64(2) {
		t.Fatalf("remember (adopt): %v", dep)
	}
	if got := strs(field(dep, "links", "blockedBy")); !slices.Equal(got, []string{mcpKey(1)}) {
		t.Errorf("adopted item's blockedBy %v, want [%s]", got, mcpKey(1))
	}
	if got := strs(field(dep, "links", "anchoredTo")); !slices.Equal(got, []string{"repo/" + mcpRepoID + "/file/wal/shipper.go"}) {
		t.Errorf("adopted item's anchoredTo %v, want the file key", got)
	}
	adopted := mustAPIItem(t, e, idOf(iss.Number))
	if !strings.Contains(adopted.Body, fmt.Sprintf("#%d", iss.Number)) || !slices.Equal(strs(dep["ignored"]), []string{"body"}) {
		t.Errorf("adopted item's body %q (ignored %v), want warden's pointer to the issue and the given body reported ignored", adopted.Body, dep["ignored"])
	}
	var links []string
	for _, l := range adopted.Links {
		links = append(links, string(l.Rel)+" "+l.Target)
	}
	if !slices.Contains(links, "blockedBy issue-1") || !slices.Contains(links, "anchoredTo wal/shipper.go") {
		t.Errorf("the ledger holds links %v, want blockedBy issue-1 and anchoredTo wal/shipper.go", links)
	}

	// neighbors over blockedBy: the blocker, live.
	nb := pm.ok("repocontext_neighbors", map[string]any{"key": mcpKey(iss.Number), "relation": "blockedBy", "depth": 1})
	ns, _ := nb["neighbors"].([]any)
	if nb["exists"] != true || len(ns) != 1 || field(ns[0].(map[string]any), "key") != mcpKey(1) || field(ns[0].(map[string]any), "exists") != true {
		t.Errorf("neighbors over blockedBy: %v, want exactly %s", nb, mcpKey(1))
	}

	// A merge in place: another tag, no new item.
	merged := pm.ok("repocontext_remember", map[string]any{"key": mcpKey(1), "tags": []string{"resource:test-box"}})
	if merged["created"] != false || merged["outcome"] != "merged" || !slices.Contains(mustAPIItem(t, e, "issue-1").Tags, "resource:test-box") {
		t.Errorf("remember into an existing item: %v", merged)
	}

	// The report sees both, awaiting admission.
	rep := pm.ok("backlog_report", map[string]any{"repoId": mcpRepoID})
	if aw, _ := rep["awaitingAdmission"].([]any); len(aw) != 2 {
		t.Errorf("backlog_report awaitingAdmission %v, want both items", rep["awaitingAdmission"])
	}
}

// TestMCPVerificationChecklist: the protocol's "Verify" list, through the
// SDK's client: claim_status on a memory key that holds no record answers
// exists: false (no error); a key of another record family is refused; a
// claim on a real key answers granted with a fencingToken; an unfenced
// update of that claimed key is refused and writes nothing.
func TestMCPVerificationChecklist(t *testing.T) {
	t.Parallel()
	e := New(t, Options{})
	human := mcpConnect(t, e, "maintainer", HumanToken)
	n := mcpCreate(t, human, "Rotate the signing keys", nil)
	e.MustSettle(t)
	w := mcpConnect(t, e, "worker", WorkerToken)

	for _, k := range []string{mcpKey(999), "repo/" + mcpRepoID + "/mem/notes/some-note"} {
		st := w.ok("repocontext_claim_status", map[string]any{"key": k})
		if st["exists"] != false || st["claimed"] != false || st["key"] != k {
			t.Errorf("claim_status %s: %v, want exists: false", k, st)
		}
	}
	for _, k := range []string{"repo/" + mcpRepoID + "/file/src/main.go", "repo/" + mcpRepoID + "/symbol/main.Run", "not-a-key", "repo/" + mcpRepoID + "/mem/backlog"} {
		out := w.refused("repocontext_claim_status", map[string]any{"key": k}, "invalid-request")
		if out["field"] != "key" {
			t.Errorf("claim_status %s refused without naming the key: %v", k, out)
		}
	}

	claim := w.ok("repocontext_claim", map[string]any{"key": mcpKey(n), "owner": "worker-7/verify", "leaseSeconds": 60})
	if claim["granted"] != true {
		t.Fatalf("claim: %v", claim)
	}
	token(t, claim)
	out := w.refused("repocontext_update", map[string]any{"key": mcpKey(n), "fields": map[string]any{"title": "Renamed without a fence"}}, "ClaimRequired")
	if out["currentFencingToken"] == nil {
		t.Errorf("the fence refusal does not carry the current fence: %v", out)
	}
	if it := mustAPIItem(t, e, idOf(n)); it.Title != "Rotate the signing keys" {
		t.Errorf("an unfenced update of a claimed key wrote the title %q", it.Title)
	}
}

// TestMCPRoleRefusals: roles and refusals apply to the tools exactly as to
// the routes (CONTRACT.md §4, §9).
func TestMCPRoleRefusals(t *testing.T) {
	t.Parallel()
	e := New(t, Options{})
	human := mcpConnect(t, e, "maintainer", HumanToken)
	pm := mcpConnect(t, e, "pm", PMToken)
	w := mcpConnect(t, e, "worker", WorkerToken)

	// A worker's remember of a new item is refused, whether warden would
	// open the issue or adopt one.
	w.refused("repocontext_remember", map[string]any{"repoId": mcpRepoID, "topic": "backlog", "title": "Sneak in",
		"specification": "a worker's own item"}, "role-not-allowed")
	iss, err := e.Person("filer", "write").OpenIssue(e.Repo, "Filed by a person", "spec")
	if err != nil {
		t.Fatal(err)
	}
	e.MustSettle(t)
	w.refused("repocontext_remember", map[string]any{"key": mcpKey(iss.Number), "title": "Adopt it"}, "role-not-allowed")
	if _, ok := apiItem(t, e, idOf(iss.Number)); ok {
		t.Errorf("#%d became an item through a worker's remember", iss.Number)
	}

	// A claim on an item that is not claimable: not-ready, with the
	// exclusion (a pm's item awaits a human's admission).
	gated := mcpCreate(t, pm, "Awaiting admission", nil)
	e.MustSettle(t)
	c := w.ok("repocontext_claim", map[string]any{"key": mcpKey(gated), "owner": "worker-7/a"})
	if c["granted"] != false || c["reason"] != "not-ready" || c["exclusion"] != "awaiting-admission" || c["fencingToken"] != nil {
		t.Errorf("claim on an item awaiting admission: %v, want granted false, not-ready, awaiting-admission", c)
	}

	// A worker claims only under its own owner prefix.
	open := mcpCreate(t, human, "Admitted work", []string{"priority:P1"})
	e.MustSettle(t)
	w.refused("repocontext_claim", map[string]any{"key": mcpKey(open), "owner": "someone-else/1"}, "owner-not-allowed")

	// A human act through a worker token: changing phase: after creation
	// (a pm's act) and removing a blockedBy edge, under the worker's own
	// valid claim.
	fence := token(t, w.ok("repocontext_claim", map[string]any{"key": mcpKey(open), "owner": "worker-7/b", "leaseSeconds": 60}))
	w.refused("repocontext_update", map[string]any{"key": mcpKey(open), "fencingToken": fence,
		"removeTags": []string{"phase:implementation"}, "addTags": []string{"phase:research"}}, "HumanActRequired")
	if it := mustAPIItem(t, e, idOf(open)); !slices.Contains(it.Tags, "phase:implementation") {
		t.Errorf("the refused phase change was written: %v", it.Tags)
	}
	w.ok("repocontext_release_claim", map[string]any{"key": mcpKey(open), "fencingToken": fence})

	// Forgetting is a pm's or a human's act.
	w.refused("repocontext_forget", map[string]any{"key": mcpKey(gated)}, "role-not-allowed")
	f := pm.ok("repocontext_forget", map[string]any{"key": mcpKey(gated)})
	if f["existed"] != true || f["mode"] != "delete" {
		t.Errorf("forget: %v", f)
	}
	if f := pm.ok("repocontext_forget", map[string]any{"key": mcpKey(gated)}); f["existed"] != false {
		t.Errorf("forgetting it again: %v, want existed false", f)
	}
	if st := w.ok("repocontext_claim_status", map[string]any{"key": mcpKey(gated)}); st["exists"] != false {
		t.Errorf("claim_status of a forgotten item: %v", st)
	}
}

// TestMCPKeysAndRepos: keys of another record family, other memory
// topics, TTLs and repoIds warden cannot resolve are refused for writes;
// WARDEN_MCP_REPOS maps a repoId to the repository.
func TestMCPKeysAndRepos(t *testing.T) {
	t.Parallel()
	e := New(t, Options{Settings: func(s *config.Settings) { s.MCPRepos = map[string]string{"lattice": "acme/app"} }})
	human := mcpConnect(t, e, "maintainer", HumanToken)
	n := mcpCreate(t, human, "Shard the session table", []string{"priority:P2"})
	e.MustSettle(t)

	fileKey := "repo/" + mcpRepoID + "/file/src/main.go"
	human.refused("repocontext_recall", map[string]any{"key": fileKey}, "invalid-request")
	human.refused("repocontext_claim", map[string]any{"key": fileKey, "owner": "alice/1"}, "invalid-request")
	human.refused("repocontext_update", map[string]any{"key": fileKey, "addTags": []string{"x"}}, "invalid-request")
	human.refused("repocontext_update", map[string]any{"key": "repo/" + mcpRepoID + "/mem/decisions/d-1", "addTags": []string{"x"}}, "invalid-request")
	human.refused("repocontext_remember", map[string]any{"repoId": mcpRepoID, "topic": "decisions", "id": "d-1", "title": "A decision"}, "invalid-request")
	human.refused("repocontext_remember", map[string]any{"key": mcpKey(n), "ttlSeconds": 60, "tags": []string{"x"}}, "invalid-request")
	human.refused("repocontext_scan", map[string]any{"repoId": mcpRepoID, "scope": "Files"}, "invalid-request")
	out := human.refused("repocontext_update", map[string]any{"key": mcpKey(n), "fields": map[string]any{"priority": "P0"}}, "invalid-request")
	if !strings.Contains(fmt.Sprint(out["detail"]), "not a settable scalar") {
		t.Errorf("an unsettable field refused as %v, want the protocol's 'not a settable scalar'", out)
	}
	human.refused("repocontext_claim_status", map[string]any{"key": "repo/elsewhere/mem/backlog/issue-1"}, "RepoNotServed")

	// A memory key under another topic holds no record: exists: false.
	if r := human.ok("repocontext_recall", map[string]any{"key": "repo/" + mcpRepoID + "/mem/decisions/d-1"}); r["exists"] != false {
		t.Errorf("recall of another topic's key: %v, want exists: false", r)
	}
	// The mapped repoId names the same item.
	r := human.ok("repocontext_recall", map[string]any{"key": fmt.Sprintf("repo/lattice/mem/backlog/issue-%d", n)})
	if r["exists"] != true || r["key"] != fmt.Sprintf("repo/lattice/mem/backlog/issue-%d", n) || field(r, "fields", "title") != "Shard the session table" {
		t.Errorf("recall through WARDEN_MCP_REPOS: %v", r)
	}
	if r := human.ok("repocontext_recall", map[string]any{"key": mcpKey(n)}); r["exists"] != true {
		t.Errorf("recall by the installed repository's name: %v", r)
	}
}

// TestMCPUnauthenticated: a request without a token warden knows is
// refused 401 before any MCP processing, on POST and GET; the SDK's client
// cannot connect without one; a session is bound to the token that opened
// it; GET serves the session's event stream.
func TestMCPUnauthenticated(t *testing.T) {
	t.Parallel()
	e := New(t, Options{})
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`
	send := func(method, authz, session, body string) *http.Response {
		t.Helper()
		req, err := http.NewRequest(method, e.PublicURL+"/mcp", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Content-Type", "application/json")
		if authz != "" {
			req.Header.Set("Authorization", authz)
		}
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
			req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	for _, c := range []struct{ method, authz string }{
		{http.MethodPost, ""}, {http.MethodPost, "Bearer not-a-known-token-000000"}, {http.MethodPost, "Basic " + WorkerToken},
		{http.MethodGet, ""}, {http.MethodDelete, ""},
	} {
		resp := send(c.method, c.authz, "", initialize)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var p map[string]any
		_ = json.Unmarshal(b, &p)
		if resp.StatusCode != http.StatusUnauthorized || p["reason"] != "Unauthenticated" ||
			!strings.HasPrefix(resp.Header.Get("Content-Type"), "application/problem+json") || resp.Header.Get("WWW-Authenticate") == "" {
			t.Errorf("%s /mcp with %q: %d %s %q, want 401 problem+json reason Unauthenticated", c.method, c.authz, resp.StatusCode, resp.Header.Get("Content-Type"), b)
		}
		if resp.Header.Get("Mcp-Session-Id") != "" {
			t.Errorf("%s /mcp with %q opened a session", c.method, c.authz)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if s, err := mcp.NewClient(&mcp.Implementation{Name: "anon", Version: "1"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: e.PublicURL + "/mcp", MaxRetries: -1}, nil); err == nil {
		s.Close()
		t.Errorf("the SDK's client connected without a token")
	}

	// A session opened by the worker: its event stream on GET, and no use
	// to another token.
	resp := send(http.MethodPost, "Bearer "+WorkerToken, "", initialize)
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || sid == "" {
		t.Fatalf("initialize with the worker's token: %d, session %q", resp.StatusCode, sid)
	}
	gctx, gcancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(gctx, http.MethodGet, e.PublicURL+"/mcp", nil)
	req.Header.Set("Authorization", "Bearer "+WorkerToken)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	stream, err := http.DefaultClient.Do(req)
	if err != nil {
		gcancel()
		t.Fatal(err)
	}
	if stream.StatusCode != http.StatusOK || !strings.HasPrefix(stream.Header.Get("Content-Type"), "text/event-stream") {
		t.Errorf("GET /mcp on the session: %d %s, want 200 text/event-stream", stream.StatusCode, stream.Header.Get("Content-Type"))
	}
	gcancel()
	stream.Body.Close()

	list := `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`
	other := send(http.MethodPost, "Bearer "+PMToken, sid, list)
	io.Copy(io.Discard, other.Body)
	other.Body.Close()
	if other.StatusCode != http.StatusForbidden {
		t.Errorf("the worker's session used with the pm's token: %d, want 403", other.StatusCode)
	}
}
