package mcpapi

import (
	"context"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/internal/agentapi"
)

// backlogTopic is the one memory topic warden keeps.
const backlogTopic = "backlog"

// lockNamespace prefixes the protocol's lock names (repocontext/claim/<key>).
const lockNamespace = "repocontext/claim/"

// key is a parsed protocol key: repo/{repoId}/mem/{topic}/{id}.
type key struct {
	RepoID string
	Topic  string
	ID     string
}

// String is the key in its canonical form.
func (k key) String() string { return "repo/" + k.RepoID + "/mem/" + k.Topic + "/" + k.ID }

// Item is the backlog item the key names, and whether it names one: a key
// under another memory topic, or with an id that is not issue-N, names a
// memory record warden does not keep (it holds no record there).
func (k key) Item() (gating.ItemID, bool) {
	if k.Topic != backlogTopic {
		return "", false
	}
	if _, err := gating.ParseID(k.ID); err != nil {
		return "", false
	}
	return gating.ItemID(k.ID), true
}

func itemKey(repoID string, id gating.ItemID) key {
	return key{RepoID: repoID, Topic: backlogTopic, ID: string(id)}
}

// parseKey reads a protocol key. A malformed key, or one naming another
// record family than memory (file, symbol, package…), is refused, as the
// protocol's store refuses it: claims and backlog items exist only on
// memory records.
func parseKey(field, s string) (key, *refusal) {
	if s == "" {
		return key{}, invalid(field, "%s is required: a protocol key, repo/{repoId}/mem/backlog/issue-N", field)
	}
	rest, ok := strings.CutPrefix(s, "repo/")
	repoID, rest, ok2 := strings.Cut(rest, "/")
	if !ok || !ok2 || !validRepoID(repoID) {
		return key{}, invalid(field, "%q is not a repository-context key: want repo/{repoId}/mem/backlog/issue-N", s)
	}
	family, rest, _ := strings.Cut(rest, "/")
	if family != "mem" {
		return key{}, invalid(field, "%q names a %q record, not a memory record: warden keeps backlog items only, at repo/{repoId}/mem/backlog/issue-N (claims exist only on memory records)", s, family)
	}
	topic, id, ok := strings.Cut(rest, "/")
	if !ok || topic == "" || id == "" || strings.Contains(id, "/") || strings.TrimSpace(id) != id || strings.TrimSpace(topic) != topic {
		return key{}, invalid(field, "%q is not a memory key: want repo/{repoId}/mem/{topic}/{id}", s)
	}
	return key{RepoID: repoID, Topic: topic, ID: id}, nil
}

// validRepoID: what a repoId may be in a key (WARDEN_MCP_REPOS allows
// letters, digits and . _ -; a repository name is the same).
func validRepoID(s string) bool {
	if s == "" || len(s) > 100 {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// resolve maps a repoId to owner/repo: a WARDEN_MCP_REPOS entry; else the
// one served repository whose name (or numeric id, as the agent API
// accepts in links) it equals. A token limited to repositories learns
// nothing from a repoId it cannot resolve to one of them: RepoNotAllowed.
func (s *service) resolve(ctx context.Context, repoID string, ti *auth.TokenInfo) (string, *refusal) {
	if full, ok := s.repoKeys[repoID]; ok {
		return full, nil
	}
	limited := tokenLimits(ti)
	notAllowed := func() *refusal {
		return refuse(http.StatusForbidden, agentapi.ReasonRepoNotAllowed, "this token is limited to other repositories than repoId %q", repoID)
	}
	if s.repos == nil {
		if len(limited) > 0 {
			return "", notAllowed()
		}
		return "", refuse(http.StatusNotFound, agentapi.ReasonRepoNotServed, "repoId %q has no WARDEN_MCP_REPOS entry", repoID)
	}
	repos, err := s.repos(ctx)
	if err != nil {
		s.log.Error("list the served repositories", "err", err)
		return "", refuse(http.StatusInternalServerError, agentapi.ReasonInternal, "warden could not list the repositories it serves; see its log")
	}
	var match []string
	for _, r := range repos {
		_, name, _ := strings.Cut(r.FullName, "/")
		if strings.EqualFold(name, repoID) || strconv.FormatInt(r.ID, 10) == repoID {
			match = append(match, r.FullName)
		}
	}
	if len(match) == 1 {
		return match[0], nil
	}
	if len(limited) > 0 {
		return "", notAllowed()
	}
	if len(match) == 0 {
		return "", refuse(http.StatusNotFound, agentapi.ReasonRepoNotServed,
			"repoId %q names no repository warden serves: it is neither a WARDEN_MCP_REPOS entry nor the name of an installed repository", repoID)
	}
	sort.Strings(match)
	return "", refuse(http.StatusConflict, agentapi.ReasonRepoNotServed,
		"repoId %q is the name of %d installed repositories (%s): map it to one in WARDEN_MCP_REPOS (repoId=owner/repo)", repoID, len(match), strings.Join(match, ", "))
}

func tokenLimits(ti *auth.TokenInfo) []string {
	if ti == nil || ti.Extra == nil {
		return nil
	}
	rs, _ := ti.Extra[tokenRepos].([]string)
	return rs
}

// linkIn is a link as the agent API takes it.
type linkIn struct {
	Rel    string `json:"rel"`
	Target string `json:"target"`
}

// linksIn turns the protocol's addLinks/removeLinks map (relation -> target
// keys) into the agent API's links. A memory key of this repository's
// backlog becomes its item id, and a file key of this repository
// (repo/{repoId}/file/{path}) an anchoredTo path; anything else goes to the
// agent API as given, which validates it (and refuses a key of another
// repository or family).
func (s *service) linksIn(ctx context.Context, ti *auth.TokenInfo, repoID, full string, m map[string][]string) []linkIn {
	rels := make([]string, 0, len(m))
	for rel := range m {
		rels = append(rels, rel)
	}
	sort.Strings(rels)
	var out []linkIn
	for _, rel := range rels {
		for _, t := range m[rel] {
			out = append(out, linkIn{Rel: rel, Target: s.targetIn(ctx, ti, repoID, full, gating.Rel(rel), t)})
		}
	}
	return out
}

func (s *service) targetIn(ctx context.Context, ti *auth.TokenInfo, repoID, full string, rel gating.Rel, t string) string {
	rest, ok := strings.CutPrefix(t, "repo/")
	if !ok {
		return t
	}
	rid, rest, ok := strings.Cut(rest, "/")
	if !ok {
		return t
	}
	same := func() bool {
		if rid == repoID {
			return true
		}
		other, p := s.resolve(ctx, rid, ti)
		return p == nil && strings.EqualFold(other, full)
	}
	if path, ok := strings.CutPrefix(rest, "file/"); ok && rel == gating.AnchoredTo {
		if path != "" && same() {
			return path
		}
		return t
	}
	if id, ok := strings.CutPrefix(rest, "mem/"+backlogTopic+"/"); ok && rel != gating.AnchoredTo && rel != gating.Claims {
		if _, err := gating.ParseID(id); err == nil && same() {
			return id
		}
	}
	return t
}

// targetOut is a link target as the protocol shows it: an item as its
// memory key, an anchor as its file key; a claims target as stored.
func targetOut(repoID string, rel gating.Rel, t string) string {
	switch rel {
	case gating.AnchoredTo:
		return "repo/" + repoID + "/file/" + t
	case gating.Claims:
		return t
	}
	if _, err := gating.ParseID(t); err == nil {
		return itemKey(repoID, gating.ItemID(t)).String()
	}
	return t
}

// linksOut groups links by relation, targets as the protocol shows them.
func linksOut(repoID string, links []gating.Link) map[string][]string {
	out := map[string][]string{}
	for _, l := range links {
		out[string(l.Rel)] = append(out[string(l.Rel)], targetOut(repoID, l.Rel, l.Target))
	}
	return out
}

func targetsOut(repoID string, links []gating.Link) []string {
	out := make([]string, 0, len(links))
	for _, l := range links {
		out = append(out, targetOut(repoID, l.Rel, l.Target))
	}
	return out
}

// itemRel reports whether a relation points at items (anchoredTo points at
// files, claims at run records).
func itemRel(r gating.Rel) bool { return r != gating.AnchoredTo && r != gating.Claims }

// countLinks counts the targets of a links map.
func countLinks(m map[string][]string) int {
	n := 0
	for _, ts := range m {
		n += len(ts)
	}
	return n
}
