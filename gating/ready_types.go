package gating

import "time"

// ClaimState is an item's claim as the ready set sees it (CONTRACT.md §9).
type ClaimState string

// Claim states. "No live claim" means released, abandoned or never claimed.
const (
	StateNever     ClaimState = ""          // never claimed
	StateHeld      ClaimState = "held"      // lease live
	StateLapsed    ClaimState = "lapsed"    // lease expired, not released, holder showed evidence within the quarantine
	StateAbandoned ClaimState = "abandoned" // lapsed with no evidence for the whole quarantine window
	StateReleased  ClaimState = "released"
)

// ClaimView is an item's current grant (the one that owns the fence) and
// its holder's evidence of work.
type ClaimView struct {
	Fence          int64 // 0: never claimed
	Released       int64
	Owner          string
	Region         string
	Branch         string
	Purpose        string // "" or "maintenance"
	GrantedAt      time.Time
	LeaseExpiresAt time.Time
	// LastEvidence is the latest evidence of work by the holder: a push to
	// Branch, a comment by its login, a fence move (a renew). Never before
	// GrantedAt. EvidenceKind names what it was (EvidenceGrant when nothing
	// since the grant) and EvidenceDetail says it in words.
	LastEvidence   time.Time
	EvidenceKind   string
	EvidenceDetail string
}

// Evidence kinds: what showed a claim's holder alive (PROTOCOL.md: "a
// branch pushed, an issue comment, or a fencing token that has moved").
const (
	EvidenceGrant          = "grant"           // the grant itself
	EvidenceRenew          = "renew"           // a renew moved the lease
	EvidencePush           = "push"            // a push to the branch recorded with the claim
	EvidencePushDescendant = "push-descendant" // a branch created at the recorded branch's head
	EvidencePushByHolder   = "push-by-holder"  // a push to another branch by a login acting for the holder
	EvidencePullRequest    = "pull-request"    // activity on a PR from the recorded branch, or by the holder's login
	EvidenceComment        = "comment"         // a comment by a login acting for the holder
)

// ClaimEvidence is a claim's latest evidence of work as the report shows
// it: its kind, when, and what it was.
type ClaimEvidence struct {
	Kind   string    `json:"kind"`
	AtUtc  time.Time `json:"atUtc"`
	Detail string    `json:"detail,omitempty"`
}

// Evidence is the claim's latest evidence of work (the grant when nothing
// since).
func (c ClaimView) Evidence() *ClaimEvidence {
	kind := c.EvidenceKind
	if kind == "" {
		kind = EvidenceGrant
	}
	at := c.LastEvidence
	if at.IsZero() {
		at = c.GrantedAt
	}
	return &ClaimEvidence{Kind: kind, AtUtc: at.UTC(), Detail: c.EvidenceDetail}
}

// Candidate is one item with what the ready set needs beyond its tags and
// links.
type Candidate struct {
	Item              *Item
	Claim             ClaimView
	AdmissionLabel    bool // the mirrored issue carries the admission label
	AdmissionRecorded bool // warden recorded a human admission act
	// SpecChanged: an agent rewrote the specification (the title
	// or body) after a human admitted it, or it changed unseen
	// (spec-changed-by-agent is open): not admitted, whatever the label
	// says, until a human admits it again.
	SpecChanged   bool
	Attempts      int  // attempts in the current epoch
	CollisionHold bool // held by a takeover-collision until /backlog resolve
	// ItemLabelRemoved: the mirrored issue no longer carries the item
	// label (a human took it out of the backlog on GitHub; the item stays
	// in the ledger, and is not offered).
	ItemLabelRemoved bool
	// Findings are further defects about this item found outside the ready
	// set's own rules (the comment trail's, say); ComputeReady reports each
	// in Result.Defects.
	Findings []Defect
}

// Snapshot is one repository's items at one instant. For Claimable it may be
// partial: the candidate, its blockedBy targets, the items partOf it, the
// members of the grouping it integrates, and the items in flight.
type Snapshot struct {
	Items           []Candidate
	Now             time.Time
	Region          string // WARDEN_REGION
	DefaultBranch   string
	Quarantine      time.Duration // WARDEN_QUARANTINE
	PoisonThreshold int           // attempts at which an item is poison (≥); an epic's threshold:N tag overrides for its members
}

// Exclusion codes: why an item is not claimable now (CONTRACT.md §9).
const (
	ExAwaitingAdmission = "awaiting-admission"
	ExItemLabelRemoved  = "item-label-removed" // the issue no longer carries the item label
	ExParked            = "parked"
	ExPoisoned          = "poisoned"
	ExGrouping          = "grouping"
	ExBlocked           = "blocked" // a blocker is live (waiting), or the integration item waits for its grouping
	ExStalled           = "stalled" // a blocker is parked
	ExInvalid           = "invalid" // a blocker is missing or invalid (the defect names it)
	ExUnknownState      = "unknown-state"
	ExCollisionHold     = "collision-hold"
	ExResourceBusy      = "resource-busy"
	ExLapsed            = "lapsed"
	ExComplete          = "complete"
	ExHeld              = "held"
	ExForeignRegion     = "foreign-region"
	ExMalformed         = "malformed" // missing mandatory or duplicate single-valued tags
	// ExMergedNotComplete: a merged pull request delivers the item and no
	// state:complete is recorded (the merged-not-complete divergence is a
	// live finding on it). It is excluded, as an unknown state: is, until the
	// completion is recorded or a human rules the pull request did not
	// deliver it (/backlog undelivered): excluding live work costs a glance,
	// offering finished work costs a session. The code is also the
	// divergence's.
	ExMergedNotComplete = "merged-not-complete"
	// ExIntegrationInFlight: the integration item of a grouping the item is
	// partOf is in flight (held or lapsed), so the grouping is quiesced; or,
	// for the integration item, a member of its grouping is in flight. The
	// integration item's claim is exclusive over its grouping, both ways.
	ExIntegrationInFlight = "integration-in-flight"
)

// CodeUnroutedRegion is the defect (and alarm) of a pending item whose
// homeRegion: is not the region this deployment serves (Snapshot.Region,
// WARDEN_REGION): no replica here can claim it, so it would starve quietly.
const CodeUnroutedRegion = "unrouted-region"

// EdgeVerdict classifies one blockedBy edge (worst first).
type EdgeVerdict int

// Edge verdicts, in precedence order: invalid > stalled > waiting > satisfied.
const (
	EdgeSatisfied EdgeVerdict = iota
	EdgeWaiting
	EdgeStalled
	EdgeInvalid
)

// Exclusion is an item left out of the ready set and why.
type Exclusion struct {
	Item   ItemID `json:"item"`
	Reason string `json:"reason"`
	Detail string `json:"detail,omitempty"`
}

// Defect is a finding the ready set reports, never absorbs. Item is empty
// for repository-wide findings (cycle, ready-empty-pending).
type Defect struct {
	Code   string `json:"code"`
	Item   ItemID `json:"item,omitempty"`
	Detail string `json:"detail"`
}

// ReadyEntry is one claimable item, in order.
type ReadyEntry struct {
	Item     ItemID `json:"item"`
	Priority string `json:"priority"`
	// Overlaps names in-flight items whose anchoredTo radius overlaps this
	// item's (step 7 orders it after disjoint candidates).
	Overlaps []ItemID `json:"overlaps,omitempty"`
}

// Result is the ready set with everything that keeps it from being trusted.
type Result struct {
	Ready    []ReadyEntry `json:"ready"`
	Excluded []Exclusion  `json:"excluded"`
	Defects  []Defect     `json:"defects"`
	// Alarms are repository-wide warnings: a ready set empty while work is
	// pending (naming what each pending item waits on), cycles, and each
	// pending item whose homeRegion: no replica here serves
	// (unrouted-region).
	Alarms []string `json:"alarms"`
}

// Candidate is the snapshot's candidate for item id, if it has one.
func (s *Snapshot) Candidate(id ItemID) (*Candidate, bool) {
	for i := range s.Items {
		if s.Items[i].Item != nil && s.Items[i].Item.ID == id {
			return &s.Items[i], true
		}
	}
	return nil, false
}
