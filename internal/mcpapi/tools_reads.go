package mcpapi

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/internal/agentapi"
	"github.com/wardenhq/warden/mirror/store"
)

// ---- reads ----

func (s *service) recall(ctx context.Context, req *mcp.CallToolRequest, in recallIn) (*mcp.CallToolResult, any, error) {
	k, c, p := s.onKey(ctx, req, "key", in.Key)
	if p != nil {
		return fail(p, in.Key)
	}
	d, found, p := c.detail(ctx, k)
	if p != nil {
		return fail(p, k.String())
	}
	if !found {
		return nil, absent(k), nil
	}
	return nil, detailOf(k.RepoID, d), nil
}

// detail reads the item a key names (GET /items/{id}); found is false for a
// key that holds no item.
func (c caller) detail(ctx context.Context, k key) (agentapi.ItemDetail, bool, *refusal) {
	var d agentapi.ItemDetail
	id, ok := k.Item()
	if !ok {
		return d, false, c.probe(ctx)
	}
	status, p := c.call(ctx, http.MethodGet, itemPath(id, ""), nil, nil, &d)
	if missing(status, p) {
		return d, false, nil
	}
	return d, p == nil, p
}

type scanOut struct {
	Entries           []entryView `json:"entries"`
	ContinuationToken *string     `json:"continuationToken"`
	HasMore           bool        `json:"hasMore"`
}

func (s *service) scan(ctx context.Context, req *mcp.CallToolRequest, in scanIn) (*mcp.CallToolResult, any, error) {
	c, p := s.onRepo(ctx, req, in.RepoID)
	if p != nil {
		return fail(p, "")
	}
	size := in.PageSize
	switch {
	case size <= 0:
		size = 100
	case size > 500:
		size = 500
	}
	switch strings.ToLower(in.Scope) {
	case "memory":
	case "memorytopic":
		if in.Topic == "" {
			return fail(invalid("topic", "topic is required when scope is MemoryTopic (warden keeps the backlog topic)"), "")
		}
		if in.Topic != backlogTopic {
			// warden holds no record under another topic: an empty range.
			if p := c.probe(ctx); p != nil {
				return fail(p, "")
			}
			return nil, scanOut{Entries: []entryView{}}, nil
		}
	case "files", "packages", "symbols":
		return fail(invalid("scope", "scope %q walks structural records; warden keeps backlog items only (scope MemoryTopic, topic backlog)", in.Scope), "")
	default:
		return fail(invalid("scope", "the scope value %q is not recognised. Use one of: Files, Packages, Symbols, Memory, MemoryTopic", in.Scope), "")
	}
	q := url.Values{"limit": {strconv.Itoa(size)}}
	if in.ContinuationToken != "" {
		q.Set("cursor", in.ContinuationToken)
	}
	var page agentapi.ItemPage
	if _, p := c.call(ctx, http.MethodGet, "/items", q, nil, &page); p != nil {
		if p.doc["field"] == "cursor" {
			p.doc["field"] = "continuationToken"
		}
		return fail(p, "")
	}
	out := scanOut{Entries: make([]entryView, 0, len(page.Items)), ContinuationToken: page.NextCursor, HasMore: page.NextCursor != nil}
	for _, it := range page.Items {
		out.Entries = append(out.Entries, entryOf(in.RepoID, it))
	}
	return nil, out, nil
}

type neighborsOut struct {
	Key       string      `json:"key"`
	Exists    bool        `json:"exists"`
	Neighbors []entryView `json:"neighbors"`
	Truncated bool        `json:"truncated"`
}

func (s *service) neighbors(ctx context.Context, req *mcp.CallToolRequest, in neighborsIn) (*mcp.CallToolResult, any, error) {
	k, c, p := s.onKey(ctx, req, "key", in.Key)
	if p != nil {
		return fail(p, in.Key)
	}
	if in.Relation != "" {
		r := gating.Rel(in.Relation)
		if !gating.ValidRel(r) {
			return fail(invalid("relation", "%q is not a relation (blockedBy, partOf, integrates, informs, related)", in.Relation), k.String())
		}
		if !itemRel(r) {
			return fail(invalid("relation", "%s edges point at files or run records, which warden keeps no record of; recall the item to read them", r), k.String())
		}
	}
	depth := min(max(in.Depth, 1), 3)
	maxNodes := in.MaxNodes
	if maxNodes == 0 {
		maxNodes = 50
	}
	maxNodes = min(max(maxNodes, 1), 100)
	out := neighborsOut{Key: k.String(), Neighbors: []entryView{}}
	seed, found, p := c.detail(ctx, k)
	if p != nil {
		return fail(p, k.String())
	}
	if !found {
		return nil, out, nil
	}
	out.Exists = true
	// Breadth first over outbound edges (there is no reverse index); each
	// node is read once.
	seen := map[gating.ItemID]bool{seed.ID: true}
	frontier := []gating.ItemID{seed.ID}
	links := map[gating.ItemID][]gating.Link{seed.ID: seed.Links}
walk:
	for hop := 1; hop <= depth && len(frontier) > 0; hop++ {
		var next []gating.ItemID
		for _, from := range frontier {
			for _, to := range linkTargets(links[from], in.Relation) {
				if seen[to] {
					continue
				}
				if len(out.Neighbors) >= maxNodes {
					out.Truncated = true
					break walk
				}
				seen[to] = true
				nd, found, p := c.detail(ctx, itemKey(k.RepoID, to))
				switch {
				case p != nil:
					return fail(p, k.String())
				case !found:
					out.Neighbors = append(out.Neighbors, absent(itemKey(k.RepoID, to)))
				default:
					out.Neighbors = append(out.Neighbors, detailOf(k.RepoID, nd))
					links[to] = nd.Links
					next = append(next, to)
				}
			}
		}
		frontier = next
	}
	return nil, out, nil
}

func (s *service) claimStatus(ctx context.Context, req *mcp.CallToolRequest, in statusIn) (*mcp.CallToolResult, any, error) {
	k, c, id, refused := s.onItem(ctx, req, in.Key)
	if refused != nil {
		return refused, nil, nil
	}
	if id == "" {
		return nil, statusView(k, toMap(store.ClaimStatus{})), nil
	}
	var st map[string]any
	if _, p := c.call(ctx, http.MethodGet, itemPath(id, "/claim"), nil, nil, &st); p != nil {
		return fail(p, k.String())
	}
	return nil, statusView(k, st), nil
}

func (s *service) ready(ctx context.Context, req *mcp.CallToolRequest, in readyIn) (*mcp.CallToolResult, any, error) {
	c, p := s.onRepo(ctx, req, in.RepoID)
	if p != nil {
		return fail(p, "")
	}
	q := url.Values{}
	if in.Limit != 0 {
		q.Set("limit", strconv.Itoa(in.Limit))
	}
	var out map[string]any
	if _, p := c.call(ctx, http.MethodGet, "/ready", q, nil, &out); p != nil {
		return fail(p, "")
	}
	// Each ready and excluded item also by its key, for the claim.
	for _, list := range []string{"ready", "excluded"} {
		entries, _ := out[list].([]any)
		for _, e := range entries {
			if m, ok := e.(map[string]any); ok {
				if id, ok := m["item"].(string); ok {
					m["key"] = itemKey(in.RepoID, gating.ItemID(id)).String()
				}
			}
		}
	}
	out["repoId"] = in.RepoID
	return nil, out, nil
}

func (s *service) report(ctx context.Context, req *mcp.CallToolRequest, in reportIn) (*mcp.CallToolResult, any, error) {
	c, p := s.onRepo(ctx, req, in.RepoID)
	if p != nil {
		return fail(p, "")
	}
	var out map[string]any
	if _, p := c.call(ctx, http.MethodGet, "/report", nil, nil, &out); p != nil {
		return fail(p, "")
	}
	out["repoId"] = in.RepoID
	return nil, out, nil
}
