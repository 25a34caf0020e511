package store

import (
	"errors"
	"fmt"
	"time"

	"github.com/wardenhq/warden/gating"
)

// Repo is a repository warden serves.
type Repo struct {
	ID            int64  `json:"id"`
	FullName      string `json:"fullName"`
	Installation  int64  `json:"installation"`
	DefaultBranch string `json:"defaultBranch"`
}

// Item is a backlog item as stored.
type Item struct {
	RepoID     int64         `json:"-"`
	ID         gating.ItemID `json:"id"`
	Title      string        `json:"title"`
	Body       string        `json:"body"`
	Author     string        `json:"author"`
	Provenance string        `json:"provenance"`
	CreatedAt  time.Time     `json:"createdAt"`
	UpdatedAt  time.Time     `json:"updatedAt"`
	Tags       []string      `json:"tags"`
	Links      []gating.Link `json:"links"`
	// Fence is the durable claim state; Grant the grant that owns the fence
	// (nil when never claimed).
	Fence gating.Fence `json:"-"`
	Grant *Grant       `json:"-"`
}

// Snapshot is the item as the rules in gating see it.
func (it *Item) Snapshot() *gating.Item {
	return &gating.Item{ID: it.ID, Title: it.Title, Body: it.Body, Author: it.Author, Provenance: it.Provenance,
		CreatedAt: it.CreatedAt, Tags: append([]string(nil), it.Tags...), Links: append([]gating.Link(nil), it.Links...)}
}

// Grant is one claim ever granted on an item: the grant log's row.
type Grant struct {
	Fence          int64      `json:"fencingToken"`
	Owner          string     `json:"owner"`
	Region         string     `json:"region"`
	Branch         string     `json:"branch,omitempty"`
	Purpose        string     `json:"purpose,omitempty"` // "" or "maintenance"
	GrantedAt      time.Time  `json:"grantedAt"`
	LeaseExpiresAt time.Time  `json:"leaseExpiresAtUtc"`
	ReleasedAt     *time.Time `json:"releasedAt,omitempty"`
}

// Actor is who asks for a write: a token's role and name (the token name
// prefixes a worker's owners), or warden itself.
type Actor struct {
	Role gating.Role
	Name string
}

// NewItem is an item to create for an issue that already exists.
type NewItem struct {
	Number     int
	Title      string
	Body       string
	Author     string
	Provenance string
	Tags       []string
	Links      []gating.Link
}

// Patch is a partial update; nil and empty fields change nothing. It is
// applied all or nothing.
type Patch struct {
	Title        *string       `json:"title,omitempty"`
	Body         *string       `json:"body,omitempty"`
	Author       *string       `json:"author,omitempty"`
	Provenance   *string       `json:"provenance,omitempty"`
	AddTags      []string      `json:"addTags,omitempty"`
	RemoveTags   []string      `json:"removeTags,omitempty"`
	AddLinks     []gating.Link `json:"addLinks,omitempty"`
	RemoveLinks  []gating.Link `json:"removeLinks,omitempty"`
	FencingToken *int64        `json:"fencingToken,omitempty"`
}

// ClaimRequest asks for a claim.
type ClaimRequest struct {
	Owner          string   `json:"owner"`
	LeaseSeconds   *float64 `json:"leaseSeconds,omitempty"`
	MaxWaitSeconds *float64 `json:"maxWaitSeconds,omitempty"`
	Branch         string   `json:"branch,omitempty"`
	Purpose        string   `json:"purpose,omitempty"`
	// RequestID, when set, makes the claim idempotent: a resend with the
	// same id and body is answered with the first answer while its lease
	// lasts (claimrequests.go).
	RequestID string `json:"requestId,omitempty"`
}

// RenewRequest asks for a renew (Ledger.RenewWith).
type RenewRequest struct {
	FencingToken int64
	LeaseSeconds *float64 // nil: the default lease, however long the one it replaces
	RequestID    string   // optional (ClaimRequest.RequestID)
}

// ReleaseRequest asks for a release (Ledger.ReleaseWith).
type ReleaseRequest struct {
	FencingToken int64
	RequestID    string // optional (ClaimRequest.RequestID)
}

// ClaimResult is the answer to a claim or a renew, with the protocol store's
// field names. A refusal is Granted false with a Reason, not an error.
type ClaimResult struct {
	Key                       string   `json:"key"`
	Granted                   bool     `json:"granted"`
	FencingToken              *int64   `json:"fencingToken"`
	Owner                     *string  `json:"owner"`
	Region                    *string  `json:"region"`
	LeaseExpiresAtUtc         *string  `json:"leaseExpiresAtUtc"`
	LeaseSeconds              *float64 `json:"leaseSeconds"`
	PreviousLeaseExpiresAtUtc *string  `json:"previousLeaseExpiresAtUtc"`
	LeaseShortened            *bool    `json:"leaseShortened"`
	Reason                    *string  `json:"reason"`
	// Exclusion names why an item that is not claimable now is not (with
	// Reason "not-ready").
	Exclusion *string `json:"exclusion,omitempty"`
	// LeaseDefaulted says, on a grant, whether the lease is the default
	// one because the request named no leaseSeconds (CONTRACT.md §11).
	LeaseDefaulted *bool `json:"leaseDefaulted,omitempty"`
	// Replayed marks the answer to a resend of a requestId: the first
	// answer, not a second grant.
	Replayed bool `json:"replayed,omitempty"`
}

// Claim refusal reasons.
const (
	ReasonContended     = "contended"
	ReasonTimeout       = "timeout"
	ReasonMissing       = "missing"
	ReasonSuperseded    = "superseded"
	ReasonNotReady      = "not-ready"
	ReasonForeignRegion = "ForeignRegion"
)

// ClaimStatus is the read-only claim status (advisory apart from the durable
// fence fields).
type ClaimStatus struct {
	Key                  string  `json:"key"`
	Exists               bool    `json:"exists"`
	Claimed              bool    `json:"claimed"`
	IsHeld               bool    `json:"isHeld"`
	State                string  `json:"state"` // held, lapsed, abandoned, released, or "" when never claimed
	FencingToken         *int64  `json:"fencingToken"`
	ReleasedFencingToken *int64  `json:"releasedFencingToken"`
	Owner                *string `json:"owner"`
	Region               *string `json:"region"`
	LeaseExpiresAtUtc    *string `json:"leaseExpiresAtUtc"`
	// GrantedAt is when the current claim (the grant that owns the fence,
	// held or not) was granted.
	GrantedAt *string `json:"grantedAt"`
	// LastEvidence is the current, unreleased claim's latest evidence of
	// work (what a lapsed claim's quarantine runs from): its kind, when, and
	// what it was.
	LastEvidence *gating.ClaimEvidence `json:"lastEvidence,omitempty"`
}

// ReleaseResult is the answer to a release.
type ReleaseResult struct {
	Key          string  `json:"key"`
	Released     bool    `json:"released"`
	FencingToken int64   `json:"fencingToken"`
	Reason       *string `json:"reason"`
	// Replayed marks the answer to a resend of a requestId.
	Replayed bool `json:"replayed,omitempty"`
}

// Release refusal reasons.
const (
	ReasonStale     = "stale"
	ReasonUnclaimed = "unclaimed"
)

// ErrNotFound is returned for an item (or repository) that does not exist.
var ErrNotFound = errors.New("not found")

// FenceError is a write refused by the write-admission table.
type FenceError struct {
	Verdict   gating.Verdict
	Item      gating.ItemID
	Presented *int64
	Current   int64
}

func (e *FenceError) Error() string {
	p := "no token"
	if e.Presented != nil {
		p = fmt.Sprintf("token %d", *e.Presented)
	}
	return fmt.Sprintf("%s: write to %s with %s refused (fence %d)", e.Verdict, e.Item, p, e.Current)
}

// Timestamp formats t as the protocol's round-trip ISO-8601 UTC.
func Timestamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.0000000Z") }

// HasTag reports whether the item carries tag exactly.
func (it *Item) HasTag(tag string) bool {
	for _, t := range it.Tags {
		if t == tag {
			return true
		}
	}
	return false
}
