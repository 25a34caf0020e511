package gating

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// stateKind is an item's state: tags read against the closed vocabulary.
type stateKind uint8

const (
	stLive     stateKind = iota // no state: tag
	stComplete                  // exactly state:complete
	stParked                    // exactly state:parked
	stInvalid                   // several state: tags, or an unrecognised value
)

// entry is one item of a snapshot with its tags and links read once. It is
// kept small (the ready set and the report each read one per item): what
// only words a finding about a few items (the region's name, the ruling
// route, the resource names) is read again from the tags when it is needed.
type entry struct {
	c           *Candidate
	id          ItemID
	num         int // id.Number()
	claim       ClaimState
	threshold   int   // the smallest valid threshold:N (N ≥ 1); 0 when none
	nStates     int32 // how many state: tags
	st          stateKind
	prio        int8 // 0..3; -1 when absent, repeated or out of range
	oneRegion   bool // exactly one homeRegion: tag
	hasRegion   bool // a non-empty homeRegion: value (region() is the first)
	inRegion    bool // region() is the snapshot's region
	onDefault   bool // a baseBranch: value is the default branch
	hasResource bool // a non-empty resource: value (resources() lists them)
	clean       bool // read proved CheckTags(tags, true) finds nothing

	// Which relations the item's links use (any target, itself included),
	// so that a rule about one relation skips an item without it instead of
	// walking its links again.
	hasBlockedBy, hasPartOf, hasIntegrates, hasAnchor bool
}

// read parses the entry's tags and classifies its claim.
//
// It also decides clean: true only when CheckTags(tags, true) would report
// nothing (the five mandatory tags present, no single-valued prefix twice,
// priority, phase and state inside their vocabularies, no empty region,
// branch or route value). ComputeReady then skips the CheckTags call, which
// is most of its allocation on a healthy repository; every other item goes
// through CheckTags, which alone words the findings.
// TestTagsCleanMatchesCheckTags holds the two to the same answer: a rule
// added to CheckTags must be added here.
func (e *entry) read(s *Snapshot) {
	e.prio = -1
	prios, phases, regions, bases, owners, topics := 0, 0, 0, 0, 0, 0
	prioStr, state1, region := "", "", ""
	backlog, phaseOK, empty := false, false, false
	for _, t := range e.c.Item.Tags {
		k, v := readTag(t)
		switch k {
		case tagBacklog:
			backlog = true
		case tagPriority:
			prios++
			prioStr = v
		case tagPhase:
			phases++
			phaseOK = slices.Contains(Phases, v)
		case tagState:
			if e.nStates == 0 {
				state1 = v
			}
			e.nStates++
		case tagHomeRegion:
			regions++
			empty = empty || v == ""
			if region == "" {
				region = v
			}
		case tagBaseBranch:
			bases++
			empty = empty || v == ""
			e.onDefault = e.onDefault || v == s.DefaultBranch && v != ""
		case tagResource:
			e.hasResource = e.hasResource || v != ""
		case tagThreshold:
			if n, err := strconv.Atoi(v); err == nil && n >= 1 {
				if e.threshold == 0 || n < e.threshold {
					e.threshold = n
				}
			}
		case tagRulingOwner:
			owners++
			empty = empty || v == ""
		case tagRulingTopic:
			topics++
			empty = empty || v == ""
		}
	}
	if prios == 1 && len(prioStr) == 2 && prioStr[0] == 'P' && prioStr[1] >= '0' && prioStr[1] <= '3' {
		e.prio = int8(prioStr[1] - '0')
	}
	e.st = stateOf(e.nStates, state1)
	e.oneRegion = regions == 1
	e.hasRegion, e.inRegion = region != "", region == s.Region
	e.clean = backlog && e.prio >= 0 && phases == 1 && phaseOK && regions == 1 && bases == 1 && !empty &&
		owners <= 1 && topics <= 1 && e.st != stInvalid
	e.readClaim(s)
}

// readState reads only the item's state: tags and its claim, all the report
// needs of an item (read reads everything).
func (e *entry) readState(s *Snapshot) {
	const state = "state:"
	state1 := ""
	for _, t := range e.c.Item.Tags {
		if len(t) >= len(state) && t[:len(state)] == state {
			if e.nStates == 0 {
				state1 = t[len(state):]
			}
			e.nStates++
		}
	}
	e.st = stateOf(e.nStates, state1)
	e.readClaim(s)
}

// stateOf is the state of an item with n state: tags, the first of value v.
func stateOf(n int32, v string) stateKind {
	switch {
	case n == 0:
		return stLive
	case n > 1:
		return stInvalid
	case v == "complete":
		return stComplete
	case v == "parked":
		return stParked
	}
	return stInvalid
}

func (e *entry) readClaim(s *Snapshot) {
	if e.c.Claim.Fence > 0 { // else never claimed (ClaimStateOf's first case), without copying the claim
		e.claim = ClaimStateOf(e.c.Claim, s.Now, s.Quarantine)
	}
}

// tagValue is the first non-empty value of the item's tags with the prefix
// ("" when none): its homeRegion:, ruling-owner: or ruling-topic:.
func (e *entry) tagValue(prefix string) string {
	for _, t := range e.c.Item.Tags {
		if p, v, ok := SplitTag(t); ok && p == prefix && v != "" {
			return v
		}
	}
	return ""
}

// region is the item's home region: its first non-empty homeRegion: value.
func (e *entry) region() string { return e.tagValue("homeRegion") }

// resources lists the item's distinct resource: names, in tag order.
func (e *entry) resources() []string {
	if !e.hasResource {
		return nil
	}
	var rs []string
	for _, t := range e.c.Item.Tags {
		if p, v, ok := SplitTag(t); ok && p == "resource" && v != "" && !slices.Contains(rs, v) {
			rs = append(rs, v)
		}
	}
	return rs
}

// state1 is the value of the item's first state: tag (read keeps only its
// verdict, st: the value is needed only to word an unknown state).
func (e *entry) state1() string {
	for _, t := range e.c.Item.Tags {
		if p, v, ok := SplitTag(t); ok && p == "state" {
			return v
		}
	}
	return ""
}

// priority is the item's priority: tag value (the last, if several). A
// claimable item has no tag problem, so its one priority: tag is P0..P3,
// read into prio.
func (e *entry) priority() string {
	if e.prio >= 0 {
		return priorities[e.prio]
	}
	v := ""
	for _, t := range e.c.Item.Tags {
		if k, val := readTag(t); k == tagPriority {
			v = val
		}
	}
	return v
}

var priorities = [...]string{"P0", "P1", "P2", "P3"}

// pending: not complete and not parked (an unknown state is pending: its real
// condition is unknown and needs a human).
func (e *entry) pending() bool { return e.st == stLive || e.st == stInvalid }

// route describes a parked item's ruling route.
func (e *entry) route() string {
	if ParkRoute(e.c.Item.Tags) != nil {
		return "no ruling route (park-without-route)"
	}
	return "ruling-owner:" + e.tagValue("ruling-owner") + " ruling-topic:" + e.tagValue("ruling-topic")
}

// stateWhy describes an invalid state for diagnostics.
func (e *entry) stateWhy() string {
	if e.nStates > 1 {
		var vs []string
		for _, t := range e.c.Item.Tags {
			if strings.HasPrefix(t, "state:") {
				vs = append(vs, t)
			}
		}
		return fmt.Sprintf("%d state: tags (%s): the item's state is unknown", e.nStates, strings.Join(vs, ", "))
	}
	return "state:" + e.state1() + " is not a recognised state (only state:complete and state:parked exist; absent means live)"
}

// describe is a one-word account of an item's condition as a blocker or a
// grouping member sees it.
func (e *entry) describe() string {
	switch e.st {
	case stComplete:
		return "complete"
	case stParked:
		return "parked; " + e.route()
	case stInvalid:
		if e.nStates > 1 {
			return fmt.Sprintf("%d state: tags", e.nStates)
		}
		return "state:" + e.state1() + " is not a recognised state"
	}
	return "live"
}
