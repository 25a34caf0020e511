package gating

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"
	"time"
)

// The gate holds after admission (CONTRACT.md §5; PROTOCOL.md: an agent
// that files an item, specifies it and clears the label has proposed the
// work and authorised it in the same breath). The specification is the
// issue's title and body; what a human admitted is recorded as its digest
// with the admission act, and an agent that rewrites it afterwards has
// authorised its own work one step later: the item is gated again.

// CodeSpecChangedByAgent is the finding (and the reason an item is not
// admitted) of an admitted item whose specification an agent rewrote, or
// that changed while warden did not see who changed it.
const CodeSpecChangedByAgent = "spec-changed-by-agent"

// SpecDigest is the digest of an issue's specification: SHA-256, in hex,
// of the title, a blank line and the body, with CRLF (and lone CR) line
// ends read as LF and trailing whitespace trimmed, so that the same text
// read from a webhook payload and from the REST API digests alike.
func SpecDigest(title, body string) string {
	s := title + "\n\n" + body
	s = strings.ReplaceAll(s, "\r\n", "\n")
	s = strings.ReplaceAll(s, "\r", "\n")
	s = strings.TrimRight(s, " \t\n\v\f")
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// Standings of a specification edit's editor, as judged when the edit was
// delivered (Judge: agents are Bot accounts, configured agents, logins
// recorded as agents and shared identities).
const (
	SpecEditorAgent   = "agent"
	SpecEditorHuman   = "human"  // any account that is not an agent (a person below triage too)
	SpecEditorWarden  = "warden" // warden's own App: not an edit of the specification
	SpecEditorUnknown = "unknown"
)

// SpecEditor is the standing of an edit's editor (CONTRACT.md §4):
// warden's own bot; an agent (a Bot account, a configured agent, a login
// recorded as an agent, a shared identity); unknown for an account warden
// cannot judge (ghost, none, or a failed lookup of the recorded agents);
// anyone else is a human. The repository role plays no part: it never
// makes an agent, and a human edit needs no triage to be the human's.
func SpecEditor(id Identity, agents []string) string {
	switch {
	case id.Warden:
		return SpecEditorWarden
	case !id.RecordedKnown || id.Login == "" || strings.EqualFold(id.Login, "ghost"):
		return SpecEditorUnknown
	case id.Recorded || IsAgent(id.Actor, agents):
		return SpecEditorAgent
	}
	return SpecEditorHuman
}

// SpecEdit is one edit of an issue's title or body, as an `issues.edited`
// delivery showed it.
type SpecEdit struct {
	// At is GitHub's time of the edit: the payload's issue updated_at.
	At     time.Time
	Editor string // the sender's login
	// Standing is the editor's standing (SpecEditorAgent, …), and Why,
	// for an agent, why it is one.
	Standing, Why string
	// Digest is the specification's digest after the edit (SpecDigest),
	// Prior the one before it (from the payload's changes.title.from and
	// changes.body.from).
	Digest, Prior string
	Delivery      string // the delivery's id
}

// SpecState is a specification's digest and the GitHub time by which it was
// the text (zero Digest: unknown).
type SpecState struct {
	Digest string
	At     time.Time
}

// SpecInput is what JudgeSpec decides on.
type SpecInput struct {
	// Admitted: the item is admitted now (a recorded act, no admission
	// label, no open spec-changed-by-agent).
	Admitted bool
	// Accepted is the specification a human admitted (or, after a human's
	// edit, the text that edit made); a zero Digest is an admission
	// recorded before digests were (trusted on first use: the text as of
	// AdmittedAt, SpecAsOf).
	Accepted   SpecState
	AdmittedAt time.Time
	// Current is the text as warden last recorded it.
	Current SpecState
	// Edits are the logged edits of the title and body.
	Edits []SpecEdit
}

// SpecAction is what JudgeSpec decides.
type SpecAction int

// Spec actions.
const (
	SpecKeep   SpecAction = iota // nothing to do
	SpecAccept                   // a human's (or warden's) edit made the current text: it becomes the admitted one
	SpecRegate                   // an agent rewrote the admitted specification, or an editor warden did not see: gate it again
)

// SpecVerdict is JudgeSpec's decision, the edit it rests on (nil for an
// edit warden has no delivery of) and the admitted specification to record
// (zero Digest: nothing to record): the current text for SpecAccept, the
// text trusted on first use for an admission recorded without one.
type SpecVerdict struct {
	Action SpecAction
	Edit   *SpecEdit
	Record SpecState
}

// SpecAsOf is the text as of time at, as far as the logged edits
// tell: the text before the earliest edit at or after at (an edit in the
// same second counts as after: the older text is the one judged), else
// current. Its time is at.
func SpecAsOf(current SpecState, edits []SpecEdit, at time.Time) SpecState {
	var first *SpecEdit
	for i := range edits {
		e := &edits[i]
		if e.Prior == "" || e.At.Before(at) {
			continue
		}
		if first == nil || e.At.Before(first.At) {
			first = e
		}
	}
	if first == nil {
		if current.Digest == "" {
			return SpecState{}
		}
		return SpecState{Digest: current.Digest, At: at}
	}
	return SpecState{Digest: first.Prior, At: at}
}

// JudgeSpec decides whether an admitted item's specification still is the
// one a human admitted (the gate holds after admission). Only an admitted
// item whose recorded text differs from the admitted text, and is at least
// as new as it, is judged: the logged edit that produced the current text
// at or after the admission decides. An agent's re-gates; a human's, or
// warden's, is accepted (the human's text is the admitted one now); with
// none logged (a delivery missed, the reconcile's census or a read found
// the text), it re-gates, failing closed: that costs a human a glance at
// most. Of several edits that produced the current text, the latest
// decides, an agent's first among those of the same second. An admission
// recorded without a digest is trusted on first use: the text as of the
// admission (SpecAsOf), recorded (Record) and then judged like any.
func JudgeSpec(in SpecInput) SpecVerdict {
	if !in.Admitted || in.Current.Digest == "" {
		return SpecVerdict{}
	}
	var v SpecVerdict
	if in.Accepted.Digest == "" {
		in.Accepted = SpecAsOf(in.Current, in.Edits, in.AdmittedAt)
		v.Record = in.Accepted
	}
	if in.Current.Digest == in.Accepted.Digest || in.Current.At.Before(in.Accepted.At) {
		return v
	}
	var found *SpecEdit
	for i := range in.Edits {
		e := &in.Edits[i]
		if e.Digest != in.Current.Digest || e.At.Before(in.Accepted.At) {
			continue
		}
		if found == nil || laterEdit(e, found) {
			found = e
		}
	}
	if found == nil {
		v.Action = SpecRegate
		return v
	}
	e := *found
	v.Edit = &e
	switch e.Standing {
	case SpecEditorHuman, SpecEditorWarden:
		v.Action, v.Record = SpecAccept, in.Current
	default:
		v.Action = SpecRegate
	}
	return v
}

// laterEdit reports whether a decides over b: later, or of the same time
// and less trusted (fail closed).
func laterEdit(a, b *SpecEdit) bool {
	if c := a.At.Compare(b.At); c != 0 {
		return c > 0
	}
	return specTrust(a.Standing) < specTrust(b.Standing)
}

// specTrust orders standings from least trusted (an unrecognised one is
// the least).
func specTrust(standing string) int {
	return slices.Index([]string{SpecEditorAgent, SpecEditorUnknown, SpecEditorHuman, SpecEditorWarden}, standing)
}
