package gating

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Mandatory lists the five tag prefixes every item carries ("backlog" is a
// plain tag, the others are prefixes).
var Mandatory = []string{"backlog", "priority", "phase", "homeRegion", "baseBranch"}

// SingleValued lists the prefixes of which an item may carry one tag.
var SingleValued = []string{"priority", "phase", "homeRegion", "baseBranch", "state", "ruling-owner", "ruling-topic"}

// States is the closed state: vocabulary.
var States = []string{"complete", "parked"}

// Phases is the phase: vocabulary.
var Phases = []string{"research", "implementation", "integration"}

// executionStates are values that put execution state on phase: (a defect
// the protocol names: phase never carries status).
var executionStates = []string{"complete", "completed", "done", "review", "in-review", "in-progress", "blocked",
	"parked", "ready", "delivered", "merged", "started", "todo", "wip"}

func isSingleValued(prefix string) bool { return contains(SingleValued, prefix) }

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// SplitTag splits "prefix:value"; a plain tag has no prefix.
func SplitTag(t string) (prefix, value string, ok bool) {
	if i := strings.IndexByte(t, ':'); i >= 0 {
		return t[:i], t[i+1:], true
	}
	return t, "", false
}

// tagKind is what the ready set reads a tag as (readTag).
type tagKind uint8

const (
	tagOther tagKind = iota // any tag the ready set does not read
	tagBacklog
	tagPriority
	tagPhase
	tagState
	tagHomeRegion
	tagBaseBranch
	tagResource
	tagThreshold
	tagRulingOwner
	tagRulingTopic
)

// readTag classifies a tag for the ready set, which reads every tag of every
// item: the plain tag backlog, or a prefix it reads with the value (what
// SplitTag gives). No such prefix holds a ":", so a tag has one as its
// SplitTag prefix exactly when it starts with it and a colon; checking that
// needs no search for the colon, and comparing with a constant compiles to
// a few loads.
func readTag(t string) (tagKind, string) {
	const (
		baseBranch  = "baseBranch:"
		priority    = "priority:"
		phase       = "phase:"
		state       = "state:"
		homeRegion  = "homeRegion:"
		resource    = "resource:"
		rulingOwner = "ruling-owner:"
		rulingTopic = "ruling-topic:"
		threshold   = "threshold:"
	)
	if t == "" {
		return tagOther, ""
	}
	switch t[0] {
	case 'b':
		switch {
		case t == "backlog":
			return tagBacklog, ""
		case len(t) >= len(baseBranch) && t[:len(baseBranch)] == baseBranch:
			return tagBaseBranch, t[len(baseBranch):]
		}
	case 'p':
		switch {
		case len(t) >= len(priority) && t[:len(priority)] == priority:
			return tagPriority, t[len(priority):]
		case len(t) >= len(phase) && t[:len(phase)] == phase:
			return tagPhase, t[len(phase):]
		}
	case 's':
		if len(t) >= len(state) && t[:len(state)] == state {
			return tagState, t[len(state):]
		}
	case 'h':
		if len(t) >= len(homeRegion) && t[:len(homeRegion)] == homeRegion {
			return tagHomeRegion, t[len(homeRegion):]
		}
	case 'r':
		switch {
		case len(t) >= len(resource) && t[:len(resource)] == resource:
			return tagResource, t[len(resource):]
		case len(t) >= len(rulingOwner) && t[:len(rulingOwner)] == rulingOwner:
			return tagRulingOwner, t[len(rulingOwner):]
		case len(t) >= len(rulingTopic) && t[:len(rulingTopic)] == rulingTopic:
			return tagRulingTopic, t[len(rulingTopic):]
		}
	case 't':
		if len(t) >= len(threshold) && t[:len(threshold)] == threshold {
			return tagThreshold, t[len(threshold):]
		}
	}
	return tagOther, ""
}

// ValidTagSyntax checks a tag is printable, without spaces, 1–200 bytes, and
// that a prefixed tag has a non-empty prefix.
func ValidTagSyntax(t string) error {
	if t == "" || len(t) > 200 {
		return fmt.Errorf("tag %q must be 1 to 200 characters", t)
	}
	if !utf8.ValidString(t) {
		return fmt.Errorf("tag %q is not valid UTF-8", t)
	}
	for _, r := range t {
		if unicode.IsSpace(r) || !unicode.IsPrint(r) {
			return fmt.Errorf("tag %q contains a space or a control character", t)
		}
	}
	if p, _, ok := SplitTag(t); ok && p == "" {
		return fmt.Errorf("tag %q has an empty prefix", t)
	}
	return nil
}

// TagProblem is a defect in an item's tags.
type TagProblem struct {
	Code   string // defect code (CONTRACT.md §6)
	Detail string
}

// CheckTags returns every defect in a tag set: duplicate single-valued
// prefixes, values outside the closed vocabularies, and (when mandatory is
// true) missing mandatory tags. It never picks a winner among duplicates.
func CheckTags(tags []string, mandatory bool) []TagProblem {
	var out []TagProblem
	seen := map[string][]string{}
	plain := map[string]bool{}
	for _, t := range tags {
		p, v, ok := SplitTag(t)
		if !ok {
			plain[t] = true
			continue
		}
		seen[p] = append(seen[p], v)
	}
	for _, p := range SingleValued {
		if vs := seen[p]; len(vs) > 1 {
			out = append(out, TagProblem{"duplicate-attribute-tag", fmt.Sprintf("%d %s: tags (%s): one author must win by a human's hand, not by picking", len(vs), p, joinValues(p, vs))})
		}
	}
	for _, v := range seen["priority"] {
		if !contains([]string{"P0", "P1", "P2", "P3"}, v) {
			out = append(out, TagProblem{"invalid-priority", fmt.Sprintf("priority:%s is not P0, P1, P2 or P3", v)})
		}
	}
	for _, v := range seen["phase"] {
		switch {
		case contains(Phases, v):
		case contains(executionStates, strings.ToLower(v)):
			out = append(out, TagProblem{"phase-carries-state", fmt.Sprintf("phase:%s puts execution state on phase: (claims and state: carry it)", v)})
		default:
			out = append(out, TagProblem{"invalid-phase", fmt.Sprintf("phase:%s is not research, implementation or integration", v)})
		}
	}
	for _, v := range seen["state"] {
		if !contains(States, v) {
			out = append(out, TagProblem{"unknown-state", fmt.Sprintf("state:%s is not a recognised state (only state:complete and state:parked exist; absent means live)", v)})
		}
	}
	for _, p := range []string{"homeRegion", "baseBranch", "ruling-owner", "ruling-topic"} {
		for _, v := range seen[p] {
			if v == "" {
				out = append(out, TagProblem{"empty-tag-value", fmt.Sprintf("%s: has an empty value", p)})
			}
		}
	}
	if mandatory {
		var missing []string
		for _, m := range Mandatory {
			if m == "backlog" {
				if !plain["backlog"] {
					missing = append(missing, "backlog")
				}
			} else if len(seen[m]) == 0 {
				missing = append(missing, m+":")
			}
		}
		if len(missing) > 0 {
			out = append(out, TagProblem{"missing-mandatory-tag", "missing " + strings.Join(missing, ", ")})
		}
	}
	return out
}

func joinValues(p string, vs []string) string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = p + ":" + v
	}
	return strings.Join(out, ", ")
}

// ParkRoute checks the parking route of a tag set that carries state:parked:
// exactly one non-empty ruling-owner: and ruling-topic:.
func ParkRoute(tags []string) *TagProblem {
	var owners, topics int
	for _, t := range tags {
		p, v, ok := SplitTag(t)
		if !ok || v == "" {
			continue
		}
		switch p {
		case "ruling-owner":
			owners++
		case "ruling-topic":
			topics++
		}
	}
	if owners != 1 || topics != 1 {
		return &TagProblem{"park-without-route", fmt.Sprintf("state:parked needs exactly one ruling-owner: and one ruling-topic: (has %d and %d)", owners, topics)}
	}
	return nil
}
