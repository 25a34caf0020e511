package mcpapi

import (
	"context"
	"net/http"
	"net/url"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/internal/agentapi"
)

// Tool arguments carry the protocol's names (samples/AgentBacklog and the
// repocontext tool handlers); warden's own additions say so.

type recallIn struct {
	Key string `json:"key" jsonschema:"the full key to fetch: repo/{repoId}/mem/backlog/issue-N"`
}

type scanIn struct {
	RepoID            string `json:"repoId" jsonschema:"the repository id (a WARDEN_MCP_REPOS entry, or the name of the installed repository)"`
	Scope             string `json:"scope" jsonschema:"the range to walk: MemoryTopic (with topic backlog) or Memory; warden holds no Files, Packages or Symbols records"`
	Topic             string `json:"topic,omitempty" jsonschema:"the memory topic, required with scope MemoryTopic; warden keeps the backlog topic only"`
	PathPrefix        string `json:"pathPrefix,omitempty" jsonschema:"honoured only for a Files scan, which warden does not serve; ignored"`
	ContinuationToken string `json:"continuationToken,omitempty" jsonschema:"the continuationToken of the previous page; omit it to start at the beginning"`
	PageSize          int    `json:"pageSize,omitempty" jsonschema:"entries per page, clamped to [1, 500]; default 100"`
}

type rememberIn struct {
	Key           string              `json:"key,omitempty" jsonschema:"the item's key, repo/{repoId}/mem/backlog/issue-N; or give repoId, topic and id"`
	RepoID        string              `json:"repoId,omitempty" jsonschema:"the repository id"`
	Topic         string              `json:"topic,omitempty" jsonschema:"the topic: backlog (the only one warden keeps)"`
	ID            string              `json:"id,omitempty" jsonschema:"issue-N of the mirrored issue: an item is merged in place, an issue that is not yet an item is adopted; omit it to have warden open a new issue (mirror-first) with specification as its body"`
	Kind          string              `json:"kind,omitempty" jsonschema:"Decision, Note or Memory (accepted; warden keeps no kind)"`
	Title         *string             `json:"title,omitempty" jsonschema:"the item's title"`
	Body          *string             `json:"body,omitempty" jsonschema:"the resume block (lastLocation, resumeNote); on creation warden puts the pointer to the issue before it"`
	Author        *string             `json:"author,omitempty" jsonschema:"who wrote the entry"`
	Provenance    *string             `json:"provenance,omitempty" jsonschema:"where it came from"`
	Specification *string             `json:"specification,omitempty" jsonschema:"warden: the specification of a new item, the body of the issue warden opens (only when id is omitted)"`
	Tags          []string            `json:"tags,omitempty" jsonschema:"tags to add: backlog, priority:, phase:, homeRegion:, baseBranch:, ... (missing mandatory tags take the repository's defaults on creation)"`
	AddLinks      map[string][]string `json:"addLinks,omitempty" jsonschema:"edges to add: relation (blockedBy, partOf, integrates, informs, related, anchoredTo, claims) to target keys"`
	RemoveLinks   map[string][]string `json:"removeLinks,omitempty" jsonschema:"edges to remove: relation to target keys"`
	TTLSeconds    *int64              `json:"ttlSeconds,omitempty" jsonschema:"refused: a backlog item never takes a time-to-live (retire it with repocontext_forget)"`
	FencingToken  *int64              `json:"fencingToken,omitempty" jsonschema:"the fencing token of your claim, when the item is claimed"`
}

type updateIn struct {
	Key          string              `json:"key" jsonschema:"the item's key, repo/{repoId}/mem/backlog/issue-N"`
	Fields       map[string]string   `json:"fields,omitempty" jsonschema:"scalar patches: title, body, author, provenance (no other name is settable)"`
	AddTags      []string            `json:"addTags,omitempty" jsonschema:"tags to add"`
	RemoveTags   []string            `json:"removeTags,omitempty" jsonschema:"tags to remove"`
	AddLinks     map[string][]string `json:"addLinks,omitempty" jsonschema:"edges to add: relation to target keys"`
	RemoveLinks  map[string][]string `json:"removeLinks,omitempty" jsonschema:"edges to remove: relation to target keys"`
	FencingToken *int64              `json:"fencingToken,omitempty" jsonschema:"the fencing token of your claim: required while the item is claimed"`
	Question     *string             `json:"question,omitempty" jsonschema:"with addTags state:parked: the question the park asks its ruling owner (a worker's park needs it); warden posts it in the park comment"`
}

type forgetIn struct {
	Key          string `json:"key" jsonschema:"the item's key"`
	Lapse        bool   `json:"lapse,omitempty" jsonschema:"refused when true: a backlog item never lapses on a time-to-live"`
	LapseSeconds *int64 `json:"lapseSeconds,omitempty" jsonschema:"ignored (lapse is refused)"`
	FencingToken *int64 `json:"fencingToken,omitempty" jsonschema:"the fencing token of your claim, when the item is claimed"`
}

type claimIn struct {
	Key            string   `json:"key" jsonschema:"the item's key"`
	Owner          string   `json:"owner" jsonschema:"who holds the claim; a worker's owner begins with its token's name and /"`
	LeaseSeconds   *float64 `json:"leaseSeconds,omitempty" jsonschema:"the lease asked for; act on the returned leaseSeconds (it is clamped)"`
	MaxWaitSeconds *float64 `json:"maxWaitSeconds,omitempty" jsonschema:"how long to wait for a held claim (0 to 60); 0 answers contended at once"`
	Branch         string   `json:"branch,omitempty" jsonschema:"warden: the working branch, for linking pull requests and evidence of work"`
	Purpose        string   `json:"purpose,omitempty" jsonschema:"warden: maintenance, for a pm or human repair claim (no readiness check, no attempt)"`
	RequestID      string   `json:"requestId,omitempty" jsonschema:"warden: makes a retry safe: a resend with the same requestId and arguments answers the first grant again (same fencingToken) while its lease lasts; 1 to 128 of letters, digits and . _ : / -, fresh for each new claim"`
}

type renewIn struct {
	Key          string   `json:"key" jsonschema:"the item's key"`
	FencingToken *int64   `json:"fencingToken" jsonschema:"the fencing token of your claim"`
	LeaseSeconds *float64 `json:"leaseSeconds,omitempty" jsonschema:"always pass it: omitting it asks for the short default lease (reported as leaseShortened)"`
	RequestID    string   `json:"requestId,omitempty" jsonschema:"warden: a resend with the same requestId and arguments answers the first renew again while its lease lasts"`
}

type releaseIn struct {
	Key          string `json:"key" jsonschema:"the item's key"`
	FencingToken *int64 `json:"fencingToken" jsonschema:"the fencing token of your claim, exactly"`
	RequestID    string `json:"requestId,omitempty" jsonschema:"warden: a resend with the same requestId and arguments answers released: true again instead of stale"`
}

type claimNextIn struct {
	RepoID       string   `json:"repoId" jsonschema:"the repository id"`
	Owner        string   `json:"owner" jsonschema:"who holds the claim; a worker's owner begins with its token's name and /"`
	LeaseSeconds *float64 `json:"leaseSeconds" jsonschema:"required: the lease your work needs, in seconds; it is clamped to the ceiling, so act on the returned leaseSeconds"`
	RequestID    string   `json:"requestId,omitempty" jsonschema:"makes a retry safe: a resend with the same requestId and arguments answers the first grant again (the same item and fencingToken) while its lease lasts; fresh for each new claim"`
}

type statusIn struct {
	Key string `json:"key" jsonschema:"the key to inspect; a memory key holding no record answers exists: false"`
}

type neighborsIn struct {
	Key      string `json:"key" jsonschema:"the seed key"`
	Relation string `json:"relation,omitempty" jsonschema:"the one relation to follow (blockedBy, partOf, integrates, informs, related); omit it to follow every item relation"`
	Depth    int    `json:"depth,omitempty" jsonschema:"hops, clamped to [1, 3]; default 1"`
	MaxNodes int    `json:"maxNodes,omitempty" jsonschema:"neighbours returned at most, clamped to [1, 100]; default 50"`
}

type readyIn struct {
	RepoID string `json:"repoId" jsonschema:"the repository id"`
	Limit  int    `json:"limit,omitempty" jsonschema:"ready items listed at most (1 to 1000; default 100); readyCount says how many there are"`
}

type reportIn struct {
	RepoID string `json:"repoId" jsonschema:"the repository id"`
}

func (s *service) register(srv *mcp.Server) {
	no, yes := false, true
	ro := &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: &no}
	write := &mcp.ToolAnnotations{DestructiveHint: &no, OpenWorldHint: &no}
	mcp.AddTool(srv, &mcp.Tool{Name: "repocontext_recall", Annotations: ro, Description: "Fetches one backlog item by key: fields (title, body, author, provenance), tags, links " +
		"(relation to target keys), and warden's attempts, claim status and dangling links. A key holding no record answers exists: false. Read-only."}, s.recall)
	mcp.AddTool(srv, &mcp.Tool{Name: "repocontext_scan", Annotations: ro, Description: "Pages through the backlog (scope MemoryTopic, topic backlog) with an opaque continuationToken: " +
		"every item with its tags and links. Expiry and staleness are not evaluated (null) on a scan. Read-only."}, s.scan)
	mcp.AddTool(srv, &mcp.Tool{Name: "repocontext_remember", Annotations: write, Description: "Creates or merges a backlog item (only pm and human tokens create). With id issue-N: " +
		"an existing item is merged in place (fenced while claimed); an issue that is not yet an item is adopted. Without id: warden opens the issue first " +
		"(specification as its body, mirror-first), then writes the item issue-N. Answers key, created, linksAdded, linksRemoved."}, s.remember)
	mcp.AddTool(srv, &mcp.Tool{Name: "repocontext_update", Annotations: write, Description: "Patches a backlog item: fields (title, body, author, provenance), addTags, removeTags, " +
		"addLinks, removeLinks, all or nothing; pass fencingToken while the item is claimed. Refusals carry the ledger's reason (ClaimRequired, StaleToken, HumanActRequired, a defect code)."}, s.update)
	mcp.AddTool(srv, &mcp.Tool{Name: "repocontext_forget", Annotations: &mcp.ToolAnnotations{DestructiveHint: &yes, OpenWorldHint: &no},
		Description: "Retires a backlog item (pm and human tokens; fenced while claimed; refused while any item is blockedBy or partOf it). Answers key, mode, existed."}, s.forget)
	mcp.AddTool(srv, &mcp.Tool{Name: "repocontext_claim", Annotations: write, Description: "Claims a backlog item: granted with a fencingToken and the lease actually granted " +
		"(leaseDefaulted: true when no leaseSeconds was passed: the short default), or not granted with reason contended, timeout, missing, not-ready " +
		"(with the exclusion, owner-cap included) or ForeignRegion. Pass a requestId to make a retry answer the same grant."}, s.claim)
	mcp.AddTool(srv, &mcp.Tool{Name: "repocontext_renew_claim", Annotations: write, Description: "Extends a claim's lease under its fencingToken; reports leaseShortened and " +
		"previousLeaseExpiresAtUtc, or granted: false with reason superseded."}, s.renew)
	mcp.AddTool(srv, &mcp.Tool{Name: "repocontext_release_claim", Annotations: write, Description: "Releases a claim on its exact fencingToken: released, or reason stale, missing or unclaimed."}, s.release)
	mcp.AddTool(srv, &mcp.Tool{Name: "repocontext_claim_status", Annotations: ro, Description: "The claim status of a key (advisory): exists, claimed, isHeld, state " +
		"(held, lapsed, abandoned, released), fencingToken, releasedFencingToken, owner, region, leaseExpiresAtUtc, grantedAt (when the current claim was granted). " +
		"A memory key holding no record answers exists: false. Read-only."}, s.claimStatus)
	mcp.AddTool(srv, &mcp.Tool{Name: "repocontext_neighbors", Annotations: ro, Description: "Walks an item's outbound item edges (blockedBy, partOf, integrates, informs, related), " +
		"breadth first up to depth hops and maxNodes neighbours; a dangling edge's target is returned with exists: false. Read-only."}, s.neighbors)
	mcp.AddTool(srv, &mcp.Tool{Name: "backlog_ready", Annotations: ro, Description: "warden: the ready set in claim order, every excluded item with its reason, every defect " +
		"the scan found, and the repository's alarms. Read-only."}, s.ready)
	mcp.AddTool(srv, &mcp.Tool{Name: "backlog_claim_next", Annotations: write, Description: "warden: claims the best ready item in one call: the head of the ready set " +
		"(the top five in claim order, jittered among equals so concurrent claimants spread; then the next five, up to fifteen), tried in turn until one is granted. " +
		"Answers the claim result " +
		"with item and key naming the item claimed; or granted: false with reason not-ready (exclusion owner-cap when the owner holds max_claims_per_owner " +
		"live claims; excluded counts the ready set's exclusions by reason) or contended (every candidate went to other claimants: ask again), and tried."}, s.claimNext)
	mcp.AddTool(srv, &mcp.Tool{Name: "backlog_report", Annotations: ro, Description: "warden: the \"where are we\" report: in flight, ready, blocked, stalled, parked, " +
		"awaiting admission, lapsed, defects, clean re-claims. Read-only."}, s.report)
	s.registerBindings(srv)
}

// ---- the shared start of a call ----

// authz is the caller's Authorization header, which every agent API request
// of the call carries, and what the SDK's bearer middleware knows of it.
func authz(req *mcp.CallToolRequest) (string, *auth.TokenInfo) {
	if req == nil || req.Extra == nil {
		return "", nil
	}
	var h string
	if req.Extra.Header != nil {
		h = req.Extra.Header.Get("Authorization")
	}
	return h, req.Extra.TokenInfo
}

// onRepo resolves a repoId and returns a caller for its repository.
func (s *service) onRepo(ctx context.Context, req *mcp.CallToolRequest, repoID string) (caller, *refusal) {
	if !validRepoID(repoID) {
		return caller{}, invalid("repoId", "repoId %q is not a repository id", repoID)
	}
	h, ti := authz(req)
	full, p := s.resolve(ctx, repoID, ti)
	if p != nil {
		return caller{}, p
	}
	return caller{s: s, authz: h, repo: full}, nil
}

// onKey parses a key and returns a caller for its repository.
func (s *service) onKey(ctx context.Context, req *mcp.CallToolRequest, field, raw string) (key, caller, *refusal) {
	k, p := parseKey(field, raw)
	if p != nil {
		return k, caller{}, p
	}
	c, p := s.onRepo(ctx, req, k.RepoID)
	return k, c, p
}

// onItem is onKey for a tool about one item: id is the item the key names,
// or "" for a memory key warden keeps no record of, once probe has said the
// caller may read the repository at all. refused answers the call when
// either check refused it.
func (s *service) onItem(ctx context.Context, req *mcp.CallToolRequest, raw string) (k key, c caller, id gating.ItemID, refused *mcp.CallToolResult) {
	k, c, p := s.onKey(ctx, req, "key", raw)
	if p != nil {
		return k, c, "", p.result(raw)
	}
	id, ok := k.Item()
	if !ok {
		if p := c.probe(ctx); p != nil {
			return k, c, "", p.result(k.String())
		}
		return k, c, "", nil
	}
	return k, c, id, nil
}

// probe asks the agent API whether the caller may read the repository at
// all (its authentication and repository checks), before an answer about a
// memory key warden keeps no record of, which needs no other request.
func (c caller) probe(ctx context.Context) *refusal {
	_, p := c.call(ctx, http.MethodGet, "/items", url.Values{"limit": {"1"}}, nil, nil)
	return p
}

// fail is a refused tool call.
func fail(p *refusal, k string) (*mcp.CallToolResult, any, error) {
	return p.result(k), nil, nil
}

// missing reports whether a refusal is the agent API's "no such item".
func missing(status int, p *refusal) bool {
	return p != nil && status == http.StatusNotFound && p.Reason == agentapi.ReasonMissing
}

func itemPath(id gating.ItemID, rest string) string {
	return "/items/" + url.PathEscape(string(id)) + rest
}
