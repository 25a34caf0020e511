package mcpapi

import (
	"context"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/internal/agentapi"
	"github.com/wardenhq/warden/mirror/store"
)

// The tools an agent resolves its bindings with before anything else (the
// protocol's {repoId} and {homeRegion}), and the blast-radius read of step 7
// of the ready set: repocontext_list_repos, lattice_list_regions and
// repocontext_related.

type listReposIn struct{}

type listRegionsIn struct{}

type relatedIn struct {
	Key     string   `json:"key,omitempty" jsonschema:"an item's key (repo/{repoId}/mem/backlog/issue-N: its anchoredTo anchors are the radius) or a file key (repo/{repoId}/file/{path}); or give repoId and anchors"`
	RepoID  string   `json:"repoId,omitempty" jsonschema:"the repository id, with anchors"`
	Anchors []string `json:"anchors,omitempty" jsonschema:"repository-relative paths (a directory covers everything below it, . the whole repository) or file keys of the same repository, with repoId"`
}

// repoEntry is one repository the token may use, by the id its keys take.
type repoEntry struct {
	RepoID string `json:"repoId"`
	// Repository is the GitHub owner/repo the ledger mirrors.
	Repository    string `json:"repository"`
	GitHubID      int64  `json:"githubId,omitempty"`
	DefaultBranch string `json:"defaultBranch,omitempty"`
	// Aliases are further ids that name it (other WARDEN_MCP_REPOS
	// entries).
	Aliases []string `json:"aliases,omitempty"`
}

type listReposOut struct {
	Repos []repoEntry `json:"repos"`
	// NotServed are WARDEN_MCP_REPOS entries naming a repository warden
	// does not serve (the App is not installed there): their keys are
	// refused RepoNotServed.
	NotServed []repoEntry `json:"notServed"`
}

// listRepos answers the repository ids this token may use: every served
// repository its limits allow, by its WARDEN_MCP_REPOS id (else its name,
// when that names it alone; else its numeric GitHub id).
func (s *service) listRepos(ctx context.Context, req *mcp.CallToolRequest, _ listReposIn) (*mcp.CallToolResult, any, error) {
	_, ti := authz(req)
	limits := tokenLimits(ti)
	allowed := func(full string) bool {
		if len(limits) == 0 {
			return true
		}
		for _, r := range limits {
			if strings.EqualFold(r, full) {
				return true
			}
		}
		return false
	}
	ids := map[string][]string{} // lower-case owner/repo → its WARDEN_MCP_REPOS ids, sorted
	for id, full := range s.repoKeys {
		ids[strings.ToLower(full)] = append(ids[strings.ToLower(full)], id)
	}
	for _, l := range ids {
		sort.Strings(l)
	}
	var served []store.Repo
	if s.repos == nil {
		// No ledger to ask (tests): the configured entries are what resolves.
		for _, full := range s.repoKeys {
			served = append(served, store.Repo{FullName: full})
		}
	} else {
		var err error
		if served, err = s.repos(ctx); err != nil {
			s.log.Error("list the served repositories", "err", err)
			return fail(refuse(http.StatusInternalServerError, agentapi.ReasonInternal, "warden could not list the repositories it serves; see its log"), "")
		}
	}
	out := listReposOut{Repos: []repoEntry{}, NotServed: []repoEntry{}}
	seen := map[string]bool{}
	for _, r := range served {
		lower := strings.ToLower(r.FullName)
		if seen[lower] || !allowed(r.FullName) {
			continue
		}
		seen[lower] = true
		e := repoEntry{Repository: r.FullName, GitHubID: r.ID, DefaultBranch: r.DefaultBranch}
		if l := ids[lower]; len(l) > 0 {
			e.RepoID, e.Aliases = l[0], l[1:]
		} else {
			_, name, _ := strings.Cut(r.FullName, "/")
			if full, p := s.resolve(ctx, name, ti); p == nil && strings.EqualFold(full, r.FullName) {
				e.RepoID = name
			} else {
				e.RepoID = strconv.FormatInt(r.ID, 10)
			}
		}
		out.Repos = append(out.Repos, e)
	}
	for lower, l := range ids {
		full := s.repoKeys[l[0]]
		if seen[lower] || !allowed(full) {
			continue
		}
		out.NotServed = append(out.NotServed, repoEntry{RepoID: l[0], Repository: full, Aliases: l[1:]})
	}
	sort.Slice(out.Repos, func(i, j int) bool { return out.Repos[i].RepoID < out.Repos[j].RepoID })
	sort.Slice(out.NotServed, func(i, j int) bool { return out.NotServed[i].RepoID < out.NotServed[j].RepoID })
	return nil, out, nil
}

// listRegions is GET /regions: the routable region ids, the current one
// marked.
func (s *service) listRegions(ctx context.Context, req *mcp.CallToolRequest, _ listRegionsIn) (*mcp.CallToolResult, any, error) {
	h, _ := authz(req)
	var out map[string]any
	if _, p := (caller{s: s, authz: h}).call(ctx, http.MethodGet, "/regions", nil, nil, &out); p != nil {
		return fail(p, "")
	}
	return nil, out, nil
}

type sharedOut struct {
	Anchor   string `json:"anchor"`
	Overlaps string `json:"overlaps"`
}

type relatedEntry struct {
	Key        string      `json:"key"`
	Item       string      `json:"item"`
	Title      string      `json:"title"`
	State      string      `json:"state"`
	ClaimState string      `json:"claimState"`
	InFlight   bool        `json:"inFlight"`
	Shared     []sharedOut `json:"shared"`
}

type relatedOut struct {
	Key      string         `json:"key,omitempty"`
	RepoID   string         `json:"repoId"`
	Anchors  []string       `json:"anchors"`
	Related  []relatedEntry `json:"related"`
	InFlight []string       `json:"inFlight"`
}

// related is GET /related: for an item (its anchoredTo anchors) or for
// anchors, the items whose radius overlaps, with the anchors shared, under
// the protocol's keys.
func (s *service) related(ctx context.Context, req *mcp.CallToolRequest, in relatedIn) (*mcp.CallToolResult, any, error) {
	_, ti := authz(req)
	if in.Key != "" && len(in.Anchors) > 0 {
		return fail(invalid("anchors", "give key or anchors, not both: an item's radius is its own anchoredTo anchors"), in.Key)
	}
	repoID, q, seedKey := in.RepoID, url.Values{}, ""
	var anchors []string
	switch {
	case in.Key != "":
		if rid, path, ok := fileKey(in.Key); ok {
			if in.RepoID != "" && in.RepoID != rid {
				return fail(invalid("repoId", "repoId %q disagrees with key %s", in.RepoID, in.Key), in.Key)
			}
			repoID, anchors = rid, []string{path}
			break
		}
		k, p := parseKey("key", in.Key)
		if p != nil {
			return fail(p, in.Key)
		}
		if in.RepoID != "" && in.RepoID != k.RepoID {
			return fail(invalid("repoId", "repoId %q disagrees with key %s", in.RepoID, in.Key), in.Key)
		}
		repoID, seedKey = k.RepoID, k.String()
		id, ok := k.Item()
		if !ok {
			// A memory key warden keeps no record of: nothing is anchored.
			c, p := s.onRepo(ctx, req, repoID)
			if p == nil {
				p = c.probe(ctx)
			}
			if p != nil {
				return fail(p, seedKey)
			}
			return nil, relatedOut{Key: seedKey, RepoID: repoID, Anchors: []string{}, Related: []relatedEntry{}, InFlight: []string{}}, nil
		}
		q.Set("item", string(id))
	case len(in.Anchors) > 0:
		if repoID == "" {
			return fail(invalid("repoId", "repoId is required with anchors (or give a file key as key)"), "")
		}
		anchors = in.Anchors
	default:
		return fail(invalid("key", "key is required: an item's key or a file key (or give repoId and anchors)"), "")
	}
	c, p := s.onRepo(ctx, req, repoID)
	if p != nil {
		return fail(p, seedKey)
	}
	for _, a := range anchors {
		path := s.targetIn(ctx, ti, repoID, c.repo, gating.AnchoredTo, a)
		if _, _, isFile := fileKey(path); isFile {
			return fail(invalid("anchors", "%s is a file key of another repository than %s", a, repoID), seedKey)
		}
		q.Add("anchor", path)
	}
	var res agentapi.Related
	if _, p := c.call(ctx, http.MethodGet, "/related", q, nil, &res); p != nil {
		return fail(p, seedKey)
	}
	out := relatedOut{Key: seedKey, RepoID: repoID, Anchors: make([]string, 0, len(res.Anchors)),
		Related: make([]relatedEntry, 0, len(res.Related)), InFlight: make([]string, 0, len(res.InFlight))}
	if seedKey == "" && in.Key != "" {
		out.Key = in.Key
	}
	for _, a := range res.Anchors {
		out.Anchors = append(out.Anchors, targetOut(repoID, gating.AnchoredTo, a))
	}
	for _, r := range res.Related {
		e := relatedEntry{Key: itemKey(repoID, r.Item).String(), Item: string(r.Item), Title: r.Title, State: r.State,
			ClaimState: string(r.ClaimState), InFlight: r.InFlight, Shared: make([]sharedOut, 0, len(r.Shared))}
		for _, sh := range r.Shared {
			e.Shared = append(e.Shared, sharedOut{Anchor: targetOut(repoID, gating.AnchoredTo, sh.Anchor), Overlaps: targetOut(repoID, gating.AnchoredTo, sh.Overlaps)})
		}
		out.Related = append(out.Related, e)
	}
	for _, id := range res.InFlight {
		out.InFlight = append(out.InFlight, itemKey(repoID, id).String())
	}
	return nil, out, nil
}

// fileKey reads a file key, repo/{repoId}/file/{path}.
func fileKey(s string) (repoID, path string, ok bool) {
	rest, ok := strings.CutPrefix(s, "repo/")
	if !ok {
		return "", "", false
	}
	repoID, rest, ok = strings.Cut(rest, "/")
	if !ok || !validRepoID(repoID) {
		return "", "", false
	}
	path, ok = strings.CutPrefix(rest, "file/")
	if !ok || path == "" {
		return "", "", false
	}
	return repoID, path, true
}

func (s *service) registerBindings(srv *mcp.Server) {
	no := false
	ro := &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: &no}
	mcp.AddTool(srv, &mcp.Tool{Name: "repocontext_list_repos", Annotations: ro, Description: "Call this first, to bind {repoId}: " +
		"the repository ids this token may use, each with the GitHub owner/repo its backlog mirrors (repos), and WARDEN_MCP_REPOS entries " +
		"naming a repository warden does not serve (notServed: their keys are refused). Keys are repo/{repoId}/mem/backlog/issue-N. " +
		"If the repository you were sent to is not listed, stop and report. Read-only."}, s.listRepos)
	mcp.AddTool(srv, &mcp.Tool{Name: "lattice_list_regions", Annotations: ro, Description: "Call this to bind {homeRegion}: the routable region ids of " +
		"this deployment (regions, each with current; current names the region claims here record). An item's homeRegion: tag must be one of them: " +
		"a claim on an item tagged with any other region is not granted (reason ForeignRegion; the ready set excludes it foreign-region). Never derive it from a geography. Read-only."}, s.listRegions)
	mcp.AddTool(srv, &mcp.Tool{Name: "repocontext_related", Annotations: ro, Description: "The blast radius of an item or of anchors: " +
		"every other item whose anchoredTo radius overlaps it (a directory anchor covers everything below it, . the whole repository), with the " +
		"anchor pairs shared, its state and claim state; inFlight lists the overlapping items held or lapsed, which the ready set orders a candidate " +
		"after (step 7). Use it before claiming, to prefer a candidate disjoint from the work in flight. Give key (an item's or a file key) " +
		"or repoId and anchors. Read-only."}, s.related)
}
