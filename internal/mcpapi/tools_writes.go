package mcpapi

import (
	"context"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/internal/agentapi"
	"github.com/wardenhq/warden/mirror/store"
)

// ---- writes ----

// writable refuses a write to a memory key warden keeps no record of.
func writable(k key) (gating.ItemID, *refusal) {
	if k.Topic != backlogTopic {
		return "", invalid("key", "%s is under memory topic %q: warden keeps the backlog topic only, so it stores no other memory records", k, k.Topic)
	}
	id, ok := k.Item()
	if !ok {
		return "", invalid("key", "%s: a backlog item's id is issue-N, the number of its mirrored GitHub issue", k)
	}
	return id, nil
}

type rememberOut struct {
	Key          string              `json:"key"`
	RepoID       string              `json:"repoId"`
	Topic        string              `json:"topic"`
	ID           string              `json:"id"`
	Created      bool                `json:"created"`
	Expires      bool                `json:"expires"`
	ExpiresAtUtc *string             `json:"expiresAtUtc"`
	LinksAdded   int                 `json:"linksAdded"`
	LinksRemoved int                 `json:"linksRemoved"`
	Outcome      string              `json:"outcome"`
	Issue        *agentapi.IssueRef  `json:"issue,omitempty"`
	Item         *agentapi.ItemView  `json:"item,omitempty"`
	Links        map[string][]string `json:"links,omitempty"`
	// Ignored names the arguments warden did not write: body, on adopting
	// an issue (the body is the pointer to the issue, then the holder's
	// resume block under its claim), and removeLinks on a new item.
	Ignored []string `json:"ignored,omitempty"`
}

// outcomeMerged: remember wrote into an existing item (beside the agent
// API's created, adopted and replayed).
const outcomeMerged = "merged"

func (s *service) remember(ctx context.Context, req *mcp.CallToolRequest, in rememberIn) (*mcp.CallToolResult, any, error) {
	repoID, topic, id := in.RepoID, in.Topic, in.ID
	if in.Key != "" {
		k, p := parseKey("key", in.Key)
		if p != nil {
			return fail(p, in.Key)
		}
		for _, x := range []struct{ field, given, want string }{{"repoId", repoID, k.RepoID}, {"topic", topic, k.Topic}, {"id", id, k.ID}} {
			if x.given != "" && x.given != x.want {
				return fail(invalid(x.field, "%s %q disagrees with key %s", x.field, x.given, in.Key), in.Key)
			}
		}
		repoID, topic, id = k.RepoID, k.Topic, k.ID
	}
	switch {
	case repoID == "":
		return fail(invalid("repoId", "repoId is required (or key)"), "")
	case topic == "":
		return fail(invalid("topic", "topic is required (or key): backlog"), "")
	case topic != backlogTopic:
		return fail(invalid("topic", "topic %q: warden keeps the backlog topic only, so it stores no other memory records", topic), "")
	case in.TTLSeconds != nil:
		return fail(invalid("ttlSeconds", "a backlog item never takes a time-to-live: expiry is silent and would starve its dependents; retire it with repocontext_forget"), "")
	}
	switch strings.ToLower(in.Kind) {
	case "", "decision", "note", "memory":
	default:
		return fail(invalid("kind", "the kind value %q is not recognised. Use one of: Decision, Note, Memory", in.Kind), "")
	}
	c, p := s.onRepo(ctx, req, repoID)
	if p != nil {
		return fail(p, "")
	}
	_, ti := authz(req)
	out := rememberOut{RepoID: repoID, Topic: backlogTopic, LinksAdded: countLinks(in.AddLinks)}
	add := s.linksIn(ctx, ti, repoID, c.repo, in.AddLinks)
	if id == "" {
		if len(in.RemoveLinks) > 0 {
			out.Ignored = append(out.Ignored, "removeLinks")
		}
		return c.create(ctx, in, add, out)
	}
	itemID, p := writable(key{RepoID: repoID, Topic: topic, ID: id})
	if p != nil {
		return fail(p, "")
	}
	k := itemKey(repoID, itemID)
	out.Key, out.ID = k.String(), string(itemID)
	if in.Specification != nil {
		return fail(invalid("specification", "%s names an issue already filed: its body is the specification, and it is the human's (edit it on GitHub)", itemID), k.String())
	}
	status, p := c.call(ctx, http.MethodGet, itemPath(itemID, ""), nil, nil, nil)
	if p != nil && !missing(status, p) {
		return fail(p, k.String())
	}
	if p != nil {
		// An issue that is not yet an item: adopt it.
		res, p := c.adopt(ctx, itemID, in, add)
		if p == nil {
			out.Created, out.Outcome, out.Issue = true, res.Outcome, &res.Issue
			item := res.ItemView
			if in.Body != nil {
				// The ledger writes body only under the holder's claim, or
				// when an item is made; adoption takes no body, and warden
				// points the new item's body at its issue.
				out.Ignored = append(out.Ignored, "body")
			}
			if len(in.RemoveLinks) > 0 {
				out.Ignored = append(out.Ignored, "removeLinks")
			}
			out.Item, out.Links = &item, linksOut(repoID, item.Links)
			return nil, out, nil
		}
		if p.Reason != agentapi.ReasonExists {
			return fail(p, k.String())
		}
		// Adopted meanwhile: merge into it.
	}
	patch := map[string]any{}
	for name, v := range map[string]*string{"title": in.Title, "body": in.Body, "author": in.Author, "provenance": in.Provenance} {
		if v != nil {
			patch[name] = *v
		}
	}
	if len(in.Tags) > 0 {
		patch["addTags"] = in.Tags
	}
	if len(add) > 0 {
		patch["addLinks"] = add
	}
	if remove := s.linksIn(ctx, ti, repoID, c.repo, in.RemoveLinks); len(remove) > 0 {
		patch["removeLinks"] = remove
	}
	if len(patch) == 0 {
		// Nothing to merge: the entry is there as asked.
		out.Outcome = agentapi.OutcomeReplayed
		return nil, out, nil
	}
	if in.FencingToken != nil {
		patch["fencingToken"] = *in.FencingToken
	}
	var after agentapi.ItemView
	if _, p := c.call(ctx, http.MethodPatch, itemPath(itemID, ""), nil, patch, &after); p != nil {
		return fail(p, k.String())
	}
	out.Outcome, out.LinksRemoved = outcomeMerged, countLinks(in.RemoveLinks)
	out.Item, out.Links = &after, linksOut(repoID, after.Links)
	return nil, out, nil
}

// create opens the issue and writes the item (POST /items: mirror-first).
func (c caller) create(ctx context.Context, in rememberIn, links []linkIn, out rememberOut) (*mcp.CallToolResult, any, error) {
	if in.Title == nil {
		return fail(invalid("title", "title is required to create an item"), "")
	}
	if in.Specification == nil {
		return fail(invalid("specification", "a new item needs its specification (the body of the issue warden opens), or an id naming the issue you filed"), "")
	}
	body := map[string]any{"tags": in.Tags, "links": links}
	for name, v := range map[string]*string{"title": in.Title, "specification": in.Specification, "author": in.Author,
		"provenance": in.Provenance, "body": in.Body} {
		if v != nil {
			body[name] = *v
		}
	}
	var res agentapi.CreateResult
	if _, p := c.call(ctx, http.MethodPost, "/items", nil, body, &res); p != nil {
		return fail(p, "")
	}
	k := itemKey(out.RepoID, res.ID)
	out.Key, out.ID = k.String(), string(res.ID)
	out.Created = res.Outcome != agentapi.OutcomeReplayed
	out.Outcome, out.Issue = res.Outcome, &res.Issue
	item := res.ItemView
	out.Item, out.Links = &item, linksOut(out.RepoID, item.Links)
	return nil, out, nil
}

// adopt makes the existing issue an item (POST /items/adopt).
func (c caller) adopt(ctx context.Context, id gating.ItemID, in rememberIn, links []linkIn) (agentapi.CreateResult, *refusal) {
	body := map[string]any{"number": id.Number(), "tags": in.Tags, "links": links}
	for name, v := range map[string]*string{"title": in.Title, "author": in.Author, "provenance": in.Provenance} {
		if v != nil {
			body[name] = *v
		}
	}
	var res agentapi.CreateResult
	_, p := c.call(ctx, http.MethodPost, "/items/adopt", nil, body, &res)
	return res, p
}

// settable are the scalars repocontext_update sets on a memory record.
var settable = map[string]bool{"title": true, "body": true, "author": true, "provenance": true}

type updateOut struct {
	Key           string              `json:"key"`
	Kind          string              `json:"kind"`
	FieldsUpdated int                 `json:"fieldsUpdated"`
	TagsAdded     int                 `json:"tagsAdded"`
	TagsRemoved   int                 `json:"tagsRemoved"`
	LinksAdded    int                 `json:"linksAdded"`
	LinksRemoved  int                 `json:"linksRemoved"`
	Item          agentapi.ItemView   `json:"item"`
	Links         map[string][]string `json:"links"`
}

func (s *service) update(ctx context.Context, req *mcp.CallToolRequest, in updateIn) (*mcp.CallToolResult, any, error) {
	k, c, p := s.onKey(ctx, req, "key", in.Key)
	if p != nil {
		return fail(p, in.Key)
	}
	id, p := writable(k)
	if p != nil {
		return fail(p, k.String())
	}
	patch := map[string]any{}
	for name, v := range in.Fields {
		if !settable[name] {
			return fail(invalid("fields."+name, "The field '%s' is not a settable scalar on a Memory record (title, body, author and provenance are; attributes are tags)", name), k.String())
		}
		patch[name] = v
	}
	_, ti := authz(req)
	if len(in.AddTags) > 0 {
		patch["addTags"] = in.AddTags
	}
	if len(in.RemoveTags) > 0 {
		patch["removeTags"] = in.RemoveTags
	}
	if add := s.linksIn(ctx, ti, k.RepoID, c.repo, in.AddLinks); len(add) > 0 {
		patch["addLinks"] = add
	}
	if remove := s.linksIn(ctx, ti, k.RepoID, c.repo, in.RemoveLinks); len(remove) > 0 {
		patch["removeLinks"] = remove
	}
	if in.FencingToken != nil {
		patch["fencingToken"] = *in.FencingToken
	}
	if in.Question != nil {
		patch["question"] = *in.Question
	}
	var after agentapi.ItemView
	if _, p := c.call(ctx, http.MethodPatch, itemPath(id, ""), nil, patch, &after); p != nil {
		return fail(p, k.String())
	}
	return nil, updateOut{Key: k.String(), Kind: "Memory", FieldsUpdated: len(in.Fields), TagsAdded: len(in.AddTags),
		TagsRemoved: len(in.RemoveTags), LinksAdded: countLinks(in.AddLinks), LinksRemoved: countLinks(in.RemoveLinks),
		Item: after, Links: linksOut(k.RepoID, after.Links)}, nil
}

type forgetOut struct {
	Key          string  `json:"key"`
	Mode         string  `json:"mode"`
	Existed      bool    `json:"existed"`
	ExpiresAtUtc *string `json:"expiresAtUtc"`
	Undecodable  bool    `json:"undecodable"`
}

func (s *service) forget(ctx context.Context, req *mcp.CallToolRequest, in forgetIn) (*mcp.CallToolResult, any, error) {
	k, c, p := s.onKey(ctx, req, "key", in.Key)
	if p != nil {
		return fail(p, in.Key)
	}
	if in.Lapse {
		return fail(invalid("lapse", "a backlog item never lapses on a time-to-live (a lapsed blocker silently starves its dependents); forget it with a hard delete"), k.String())
	}
	id, ok := k.Item()
	if !ok {
		if p := c.probe(ctx); p != nil {
			return fail(p, k.String())
		}
		return nil, forgetOut{Key: k.String(), Mode: "delete"}, nil
	}
	var body any
	if in.FencingToken != nil {
		body = map[string]any{"fencingToken": *in.FencingToken}
	}
	status, p := c.call(ctx, http.MethodDelete, itemPath(id, ""), nil, body, nil)
	if missing(status, p) {
		return nil, forgetOut{Key: k.String(), Mode: "delete"}, nil
	}
	if p != nil {
		return fail(p, k.String())
	}
	return nil, forgetOut{Key: k.String(), Mode: "delete", Existed: true}, nil
}

// ---- claims ----

// noRecord is a claim or renew answer for a memory key warden keeps no
// record of, as the protocol's store answers a key without a record.
func noRecord(k key) map[string]any {
	reason := store.ReasonMissing
	return keyed(k, toMap(store.ClaimResult{Reason: &reason}))
}

func (s *service) claim(ctx context.Context, req *mcp.CallToolRequest, in claimIn) (*mcp.CallToolResult, any, error) {
	k, c, id, refused := s.onItem(ctx, req, in.Key)
	if refused != nil {
		return refused, nil, nil
	}
	if id == "" {
		return nil, noRecord(k), nil
	}
	body := map[string]any{"owner": in.Owner}
	if in.LeaseSeconds != nil {
		body["leaseSeconds"] = *in.LeaseSeconds
	}
	if in.MaxWaitSeconds != nil {
		body["maxWaitSeconds"] = *in.MaxWaitSeconds
	}
	if in.Branch != "" {
		body["branch"] = in.Branch
	}
	if in.Purpose != "" {
		body["purpose"] = in.Purpose
	}
	if in.RequestID != "" {
		body["requestId"] = in.RequestID
	}
	var res map[string]any
	if _, p := c.call(ctx, http.MethodPost, itemPath(id, "/claim"), nil, body, &res); p != nil {
		return fail(p, k.String())
	}
	return nil, keyed(k, res), nil
}

func (s *service) renew(ctx context.Context, req *mcp.CallToolRequest, in renewIn) (*mcp.CallToolResult, any, error) {
	k, c, id, refused := s.onItem(ctx, req, in.Key)
	if refused != nil {
		return refused, nil, nil
	}
	if id == "" {
		return nil, noRecord(k), nil
	}
	body := map[string]any{"fencingToken": in.FencingToken}
	if in.LeaseSeconds != nil {
		body["leaseSeconds"] = *in.LeaseSeconds
	}
	if in.RequestID != "" {
		body["requestId"] = in.RequestID
	}
	var res map[string]any
	if _, p := c.call(ctx, http.MethodPost, itemPath(id, "/renew"), nil, body, &res); p != nil {
		return fail(p, k.String())
	}
	return nil, keyed(k, res), nil
}

func (s *service) release(ctx context.Context, req *mcp.CallToolRequest, in releaseIn) (*mcp.CallToolResult, any, error) {
	k, c, id, refused := s.onItem(ctx, req, in.Key)
	if refused != nil {
		return refused, nil, nil
	}
	if id == "" {
		reason := store.ReasonMissing
		res := store.ReleaseResult{Reason: &reason}
		if in.FencingToken != nil {
			res.FencingToken = *in.FencingToken
		}
		return nil, keyed(k, toMap(res)), nil
	}
	body := map[string]any{"fencingToken": in.FencingToken}
	if in.RequestID != "" {
		body["requestId"] = in.RequestID
	}
	var res map[string]any
	if _, p := c.call(ctx, http.MethodPost, itemPath(id, "/release"), nil, body, &res); p != nil {
		return fail(p, k.String())
	}
	return nil, keyed(k, res), nil
}

// claimNext is POST /ready/claim: the answer with key and lockName the
// protocol's, for the item claimed (none when nothing was), and each tried
// candidate also by its key.
func (s *service) claimNext(ctx context.Context, req *mcp.CallToolRequest, in claimNextIn) (*mcp.CallToolResult, any, error) {
	c, p := s.onRepo(ctx, req, in.RepoID)
	if p != nil {
		return fail(p, "")
	}
	body := map[string]any{"owner": in.Owner}
	if in.LeaseSeconds != nil {
		body["leaseSeconds"] = *in.LeaseSeconds
	}
	if in.RequestID != "" {
		body["requestId"] = in.RequestID
	}
	var res map[string]any
	if _, p := c.call(ctx, http.MethodPost, "/ready/claim", nil, body, &res); p != nil {
		return fail(p, "")
	}
	if id, _ := res["item"].(string); id != "" {
		keyed(itemKey(in.RepoID, gating.ItemID(id)), res)
	}
	tried, _ := res["tried"].([]any)
	for _, t := range tried {
		if m, ok := t.(map[string]any); ok {
			if id, ok := m["item"].(string); ok {
				m["key"] = itemKey(in.RepoID, gating.ItemID(id)).String()
			}
		}
	}
	res["repoId"] = in.RepoID
	return nil, res, nil
}
