package mcpapi

import (
	"bytes"
	"encoding/json"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/internal/agentapi"
)

// entryView is the protocol's RepoContextEntryView of a backlog item, with
// warden's own reading of it (attempts, claim, dangling links) alongside.
type entryView struct {
	Key    string              `json:"key"`
	Exists bool                `json:"exists"`
	Kind   string              `json:"kind"`
	RepoID string              `json:"repoId"`
	Topic  string              `json:"topic"`
	ID     string              `json:"id"`
	Fields map[string]string   `json:"fields"`
	Tags   []string            `json:"tags"`
	Links  map[string][]string `json:"links"`
	// A backlog item never expires in warden (it is retired with forget):
	// a per-key read says so (false); a bulk read does not evaluate it
	// (null), as the protocol's scan does not.
	Expires          *bool    `json:"expires"`
	ExpiresAtUtc     *string  `json:"expiresAtUtc"`
	RemainingSeconds *float64 `json:"remainingSeconds"`
	HasExpired       *bool    `json:"hasExpired"`
	// Stale is true with the drifted anchors in StaleLinks when push
	// deliveries moved any on the item's base branch since the link was
	// written (recall's stale); null when the answer carries no verdict
	// (null never means "fresh").
	Stale      *bool    `json:"stale"`
	StaleLinks []string `json:"staleLinks"`

	Number           int            `json:"number,omitempty"`
	CreatedAt        string         `json:"createdAt,omitempty"`
	UpdatedAt        string         `json:"updatedAt,omitempty"`
	Attempts         *int           `json:"attempts,omitempty"`
	LifetimeAttempts *int           `json:"lifetimeAttempts,omitempty"`
	Claim            map[string]any `json:"claim,omitempty"`
	DanglingLinks    []string       `json:"danglingLinks,omitempty"`
}

// absent is the view of a key that holds no record.
func absent(k key) entryView {
	return entryView{Key: k.String(), Kind: "Memory", RepoID: k.RepoID, Topic: k.Topic, ID: k.ID,
		Fields: map[string]string{}, Tags: []string{}, Links: map[string][]string{}}
}

// entryOf is an item as scan shows it (expiry and staleness not evaluated).
func entryOf(repoID string, v agentapi.ItemView) entryView {
	k := itemKey(repoID, v.ID)
	e := absent(k)
	e.Exists = true
	e.Fields["title"] = v.Title
	for name, val := range map[string]string{"body": v.Body, "author": v.Author, "provenance": v.Provenance} {
		if val != "" {
			e.Fields[name] = val
		}
	}
	if v.Tags != nil {
		e.Tags = v.Tags
	}
	e.Links = linksOut(repoID, v.Links)
	e.Number, e.CreatedAt, e.UpdatedAt = v.Number, v.CreatedAt, v.UpdatedAt
	return e
}

// detailOf is an item as recall shows it.
func detailOf(repoID string, d agentapi.ItemDetail) entryView {
	e := entryOf(repoID, d.ItemView)
	no := false
	e.Expires, e.HasExpired = &no, &no
	if len(d.StaleLinks) > 0 {
		yes := true
		e.Stale, e.StaleLinks = &yes, targetsOut(repoID, d.StaleLinks)
	}
	e.Attempts, e.LifetimeAttempts = &d.Attempts, &d.LifetimeAttempts
	e.Claim = statusView(itemKey(repoID, d.ID), toMap(d.Claim))
	e.DanglingLinks = targetsOut(repoID, d.DanglingLinks)
	return e
}

// statusView is the protocol's RepoContextClaimStatusResult: the agent
// API's claim status under the protocol key, with the lock fields. warden's
// ledger is the lock, so lockFencingToken is the fence high-water mark (it
// never runs ahead of it) and the status is never authoritative.
func statusView(k key, st map[string]any) map[string]any {
	st["key"] = k.String()
	st["lockName"] = lockNamespace + k.String()
	st["authoritative"] = false
	if t, ok := st["fencingToken"]; ok && t != nil {
		st["lockFencingToken"] = t
	} else {
		st["lockFencingToken"] = 0
	}
	return st
}

// keyed puts the protocol key and lock name on a claim, renew or release
// answer of the agent API (whose key is the item id).
func keyed(k key, m map[string]any) map[string]any {
	m["key"] = k.String()
	m["lockName"] = lockNamespace + k.String()
	return m
}

// toMap turns a value into its JSON object (numbers kept exact).
func toMap(v any) map[string]any {
	b, err := json.Marshal(v)
	if err != nil {
		return map[string]any{}
	}
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if dec.Decode(&m) != nil || m == nil {
		return map[string]any{}
	}
	return m
}

// itemIDs of the items a list of links names.
func linkTargets(links []gating.Link, rel string) []gating.ItemID {
	var out []gating.ItemID
	for _, l := range links {
		if !itemRel(l.Rel) || (rel != "" && string(l.Rel) != rel) {
			continue
		}
		if _, err := gating.ParseID(l.Target); err == nil {
			out = append(out, gating.ItemID(l.Target))
		}
	}
	return out
}
