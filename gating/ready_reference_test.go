// Code frozen for the equivalence check: DO NOT EDIT, and never call from
// production code.
//
// The ref* names in gating/ready_reference*_test.go are a verbatim copy of
// ComputeReady, Claimable and BuildReport (gating/ready.go, gating/report.go)
// as they were at commit 71377f8, before the 50,000-item work of issue 18,
// with every package-level name prefixed "ref" (by a go/ast rename, so no
// string literal changed) and ItemID.Number routed to a frozen copy (refIDNumber).
// TestReadyMatchesFrozenReference holds the live code to exactly their
// output. Change these files only to follow a deliberate change of that
// output, and say so in the commit.

package gating

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// refIDNumber is ItemID.Number as it was: ParseID's number, or 0.
func refIDNumber(id ItemID) int {
	n, _ := refParseID(string(id))
	return n
}

// refParseID is ParseID as it was.
func refParseID(s string) (int, error) {
	rest, ok := strings.CutPrefix(s, "issue-")
	if !ok || rest == "" || rest[0] == '0' || len(rest) > 10 {
		return 0, fmt.Errorf("%q is not an item id (issue-<number>)", s)
	}
	for _, c := range rest {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("%q is not an item id (issue-<number>)", s)
		}
	}
	n, err := strconv.Atoi(rest)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%q is not an item id (issue-<number>)", s)
	}
	return n, nil
}

// stateKind is an item's state: tags read against the closed vocabulary.
type refStateKind uint8

const (
	refStLive     refStateKind = iota // no state: tag
	refStComplete                     // exactly state:complete
	refStParked                       // exactly state:parked
	refStInvalid                      // several state: tags, or an unrecognised value
)

// entry is one item of a snapshot with its tags read once.
type refEntry struct {
	c         *Candidate
	id        ItemID
	num       int
	st        refStateKind
	prio      int8 // 0..3; -1 when absent, repeated or out of range
	prioStr   string
	nStates   int      // how many state: tags
	state1    string   // the first state: value
	region    string   // the first homeRegion: value
	oneRegion bool     // exactly one homeRegion: tag
	onDefault bool     // a baseBranch: value is the default branch
	resources []string // distinct resource: names
	threshold int      // the smallest valid threshold:N (N ≥ 1); 0 when none
	owner     string   // the first non-empty ruling-owner: value
	topic     string   // the first non-empty ruling-topic: value
	claim     ClaimState
	clean     bool // read proved CheckTags(tags, true) finds nothing

	// Filled on demand.
	problems     []TagProblem // CheckTags plus park-without-route and epic-child-on-main
	problemsDone bool
}

// index is a snapshot read once: items by id, the reverse partOf and
// integrates relations, and what is in flight. ComputeReady builds one over the
// whole repository; Claimable builds one over a partial snapshot. Both then ask
// the same questions of it (exclusionOf), so they agree by construction on
// everything the partial snapshot holds.
type refIndex struct {
	s        *Snapshot
	es       []refEntry
	byID     map[ItemID]int32
	partOfBy map[ItemID][]int32 // items (other than the key itself) partOf the key
	integBy  map[ItemID][]int32 // items (other than the key itself) integrating the key
	flight   []int32            // items whose claim is held or lapsed, in number order
	resUsers map[string][]int32 // resource name → in-flight items naming it
	anchors  *refAnchorIndex    // in-flight items' anchoredTo radius, built on first use
}

func refNewIndex(s *Snapshot) *refIndex {
	x := &refIndex{
		s:        s,
		es:       make([]refEntry, 0, len(s.Items)),
		byID:     make(map[ItemID]int32, len(s.Items)),
		partOfBy: map[ItemID][]int32{},
		integBy:  map[ItemID][]int32{},
		resUsers: map[string][]int32{},
	}
	for k := range s.Items {
		c := &s.Items[k]
		if c.Item == nil {
			continue
		}
		if _, dup := x.byID[c.Item.ID]; dup {
			continue // a store never yields two rows for one id; the first wins
		}
		i := int32(len(x.es))
		x.byID[c.Item.ID] = i
		x.es = append(x.es, refEntry{c: c, id: c.Item.ID, num: refIDNumber(c.Item.ID)})
		e := &x.es[i]
		e.read(s)
		for _, l := range c.Item.Links {
			t := ItemID(l.Target)
			if t == e.id {
				continue
			}
			switch l.Rel {
			case PartOf:
				refAppendOnce(x.partOfBy, t, i)
			case Integrates:
				refAppendOnce(x.integBy, t, i)
			}
		}
		if e.claim.InFlight() {
			x.flight = append(x.flight, i)
		}
	}
	// In flight in number order, so every detail naming in-flight items is
	// independent of the snapshot's order.
	slices.SortFunc(x.flight, func(a, b int32) int { return refCompareIDs(x.es[a].id, x.es[b].id) })
	for _, i := range x.flight {
		for _, r := range x.es[i].resources {
			x.resUsers[r] = append(x.resUsers[r], i)
		}
	}
	return x
}

// appendOnce appends i to m[k] unless i was the last one appended there (the
// items are visited in order, so this drops an item's repeated links).
func refAppendOnce(m map[ItemID][]int32, k ItemID, i int32) {
	l := m[k]
	if n := len(l); n > 0 && l[n-1] == i {
		return
	}
	m[k] = append(l, i)
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
func (e *refEntry) read(s *Snapshot) {
	e.prio = -1
	prios, phases, regions, bases, owners, topics := 0, 0, 0, 0, 0, 0
	backlog, phaseOK, empty := false, false, false
	for _, t := range e.c.Item.Tags {
		p, v, ok := SplitTag(t)
		if !ok {
			backlog = backlog || t == "backlog"
			continue
		}
		switch p {
		case "priority":
			prios++
			e.prioStr = v
		case "phase":
			phases++
			phaseOK = slices.Contains(Phases, v)
		case "state":
			if e.nStates == 0 {
				e.state1 = v
			}
			e.nStates++
		case "homeRegion":
			regions++
			empty = empty || v == ""
			if e.region == "" {
				e.region = v
			}
		case "baseBranch":
			bases++
			empty = empty || v == ""
			e.onDefault = e.onDefault || v == s.DefaultBranch && v != ""
		case "resource":
			if v != "" && !slices.Contains(e.resources, v) {
				e.resources = append(e.resources, v)
			}
		case "threshold":
			if n, err := strconv.Atoi(v); err == nil && n >= 1 {
				if e.threshold == 0 || n < e.threshold {
					e.threshold = n
				}
			}
		case "ruling-owner":
			owners++
			empty = empty || v == ""
			if e.owner == "" {
				e.owner = v
			}
		case "ruling-topic":
			topics++
			empty = empty || v == ""
			if e.topic == "" {
				e.topic = v
			}
		}
	}
	if prios == 1 && len(e.prioStr) == 2 && e.prioStr[0] == 'P' && e.prioStr[1] >= '0' && e.prioStr[1] <= '3' {
		e.prio = int8(e.prioStr[1] - '0')
	}
	switch {
	case e.nStates == 0:
		e.st = refStLive
	case e.nStates > 1:
		e.st = refStInvalid
	case e.state1 == "complete":
		e.st = refStComplete
	case e.state1 == "parked":
		e.st = refStParked
	default:
		e.st = refStInvalid
	}
	e.oneRegion = regions == 1
	e.clean = backlog && e.prio >= 0 && phases == 1 && phaseOK && regions == 1 && bases == 1 && !empty &&
		owners <= 1 && topics <= 1 && e.st != refStInvalid
	e.claim = ClaimStateOf(e.c.Claim, s.Now, s.Quarantine)
}

// pending: not complete and not parked (an unknown state is pending: its real
// condition is unknown and needs a human).
func (e *refEntry) pending() bool { return e.st == refStLive || e.st == refStInvalid }

// route describes a parked item's ruling route.
func (e *refEntry) route() string {
	if ParkRoute(e.c.Item.Tags) != nil {
		return "no ruling route (park-without-route)"
	}
	return "ruling-owner:" + e.owner + " ruling-topic:" + e.topic
}

// stateWhy describes an invalid state for diagnostics.
func (e *refEntry) stateWhy() string {
	if e.nStates > 1 {
		var vs []string
		for _, t := range e.c.Item.Tags {
			if strings.HasPrefix(t, "state:") {
				vs = append(vs, t)
			}
		}
		return fmt.Sprintf("%d state: tags (%s): the item's state is unknown", e.nStates, strings.Join(vs, ", "))
	}
	return "state:" + e.state1 + " is not a recognised state (only state:complete and state:parked exist; absent means live)"
}

// describe is a one-word account of an item's condition as a blocker or a
// grouping member sees it.
func (e *refEntry) describe() string {
	switch e.st {
	case refStComplete:
		return "complete"
	case refStParked:
		return "parked; " + e.route()
	case refStInvalid:
		if e.nStates > 1 {
			return fmt.Sprintf("%d state: tags", e.nStates)
		}
		return "state:" + e.state1 + " is not a recognised state"
	}
	return "live"
}

// tagProblems returns every step-1 finding on the item's tags: CheckTags with
// the mandatory set, a park without a route, and an epic's member on the
// default branch.
func (x *refIndex) tagProblems(i int32) []TagProblem {
	e := &x.es[i]
	if e.problemsDone {
		return e.problems
	}
	e.problemsDone = true
	if !e.clean {
		e.problems = CheckTags(e.c.Item.Tags, true)
	}
	if e.nStates > 0 && slices.Contains(e.c.Item.Tags, "state:parked") {
		if p := ParkRoute(e.c.Item.Tags); p != nil {
			e.problems = append(e.problems, *p)
		}
	}
	if db := x.s.DefaultBranch; e.onDefault {
		if epics := e.c.Item.Targets(PartOf); len(epics) > 0 {
			e.problems = append(e.problems, TagProblem{"epic-child-on-main", fmt.Sprintf(
				"%s is partOf %s but its baseBranch:%s is the default branch; a member targets its epic's branch",
				e.id, strings.Join(epics, ", "), db)})
		}
	}
	return e.problems
}

// edge is one classified blockedBy edge.
type refEdge struct {
	target ItemID
	ti     int32 // the target's entry, or -1 when missing
	v      EdgeVerdict
	why    string
}

// edgesOf classifies every distinct blockedBy edge of item i (the protocol's
// table: missing or invalid → invalid, parked → stalled, live → waiting,
// complete → satisfied).
func (x *refIndex) edgesOf(i int32) []refEdge { return x.appendEdges(nil, i) }

// appendEdges appends item i's classified edges to buf; the new ones are
// buf[len(buf):] of the result.
func (x *refIndex) appendEdges(buf []refEdge, i int32) []refEdge {
	start := len(buf)
	out := buf
	links := x.es[i].c.Item.Links
	var seen map[ItemID]bool // for a wide fan-in; a short list is scanned
	if len(links) > 32 {
		seen = make(map[ItemID]bool, len(links))
	}
	for _, l := range links {
		if l.Rel != BlockedBy {
			continue
		}
		t := ItemID(l.Target)
		if seen != nil {
			if seen[t] {
				continue
			}
			seen[t] = true
		} else if refHasTarget(out[start:], t) {
			continue
		}
		ti, ok := x.byID[t]
		if !ok {
			out = append(out, refEdge{target: t, ti: -1, v: EdgeInvalid, why: "no such item"})
			continue
		}
		te := &x.es[ti]
		ed := refEdge{target: t, ti: ti}
		switch te.st {
		case refStComplete:
			ed.v, ed.why = EdgeSatisfied, "complete"
		case refStLive:
			ed.v, ed.why = EdgeWaiting, "live"
		case refStParked:
			ed.v, ed.why = EdgeStalled, te.describe()
		default:
			ed.v, ed.why = EdgeInvalid, te.describe()
		}
		out = append(out, ed)
	}
	return out
}

func refHasTarget(es []refEdge, t ItemID) bool {
	for k := range es {
		if es[k].target == t {
			return true
		}
	}
	return false
}

// worst is the dependent's verdict: the worst of its edges.
func refWorst(es []refEdge) EdgeVerdict {
	w := EdgeSatisfied
	for k := range es {
		w = max(w, es[k].v)
	}
	return w
}

// edgeDetail names every unsatisfied edge, worst first.
func refEdgeDetail(es []refEdge) string {
	var arr [8]*refEdge
	open := arr[:0]
	size := len("blockedBy ")
	for k := range es {
		if es[k].v != EdgeSatisfied {
			open = append(open, &es[k])
			size += len(es[k].target) + len(es[k].why) + 5
		}
	}
	slices.SortFunc(open, func(a, c *refEdge) int {
		if a.v != c.v {
			return int(c.v) - int(a.v)
		}
		return refCompareIDs(a.target, c.target)
	})
	var b strings.Builder
	b.Grow(size)
	b.WriteString("blockedBy ")
	for n, ed := range open {
		if n > 0 {
			b.WriteString(", ")
		}
		b.WriteString(string(ed.target))
		b.WriteString(" (")
		b.WriteString(ed.why)
		b.WriteString(")")
	}
	return b.String()
}

// edgeDefect is the defect an unsatisfied edge reports, if any (a waiting
// edge is ordinary and reports none).
func (x *refIndex) edgeDefect(dep ItemID, ed *refEdge) (code, detail string, ok bool) {
	switch {
	case ed.ti < 0:
		return "dangling-blocker", fmt.Sprintf("%s is blockedBy %s, which does not exist: a missing blocker is not a satisfied dependency", dep, ed.target), true
	case ed.v == EdgeInvalid:
		return "invalid-blocker", fmt.Sprintf("%s is blockedBy %s, whose %s", dep, ed.target, x.es[ed.ti].stateWhy()), true
	case ed.v == EdgeStalled:
		te := &x.es[ed.ti]
		if ParkRoute(te.c.Item.Tags) != nil {
			return "stalled-by-parked", fmt.Sprintf("%s is stalled by parked %s, which has no ruling route (park-without-route): it is never ready without a human ruling", dep, ed.target), true
		}
		o, t := te.owner, te.topic
		return "stalled-by-parked", fmt.Sprintf("%s is stalled by parked %s: never ready until ruling owner %s rules on %s (ruling-owner:%s ruling-topic:%s)",
			dep, ed.target, o, t, o, t), true
	}
	return "", "", false
}

// groupWait lists the members item i, as an integration item, waits on: every
// other member of each grouping it integrates (the items partOf it, and any
// other item integrating it) must be complete and none may be in flight.
func (x *refIndex) groupWait(i int32) (waits []int32, detail string, flying bool) {
	e := &x.es[i]
	var parts []string
	var seenE []string
	for _, l := range e.c.Item.Links {
		if l.Rel != Integrates || ItemID(l.Target) == e.id || slices.Contains(seenE, l.Target) {
			continue
		}
		seenE = append(seenE, l.Target)
		g := ItemID(l.Target)
		members := slices.Concat(x.partOfBy[g], x.integBy[g])
		slices.SortFunc(members, func(a, b int32) int { return refCompareIDs(x.es[a].id, x.es[b].id) })
		members = slices.Compact(members)
		var named []string
		for _, m := range members {
			if m == i {
				continue
			}
			me := &x.es[m]
			switch {
			case me.claim.InFlight():
				named = append(named, fmt.Sprintf("%s (in flight: %s by %s)", me.id, me.claim, me.c.Claim.Owner))
				flying = true
			case me.st != refStComplete:
				named = append(named, fmt.Sprintf("%s (%s)", me.id, me.describe()))
			default:
				continue
			}
			waits = append(waits, m)
		}
		if len(named) > 0 {
			parts = append(parts, fmt.Sprintf("integrates %s and waits on its members %s", g, strings.Join(named, ", ")))
		}
	}
	if len(parts) == 0 {
		return nil, "", false
	}
	return waits, strings.Join(parts, "; ") + ": the integration item is claimable only when every other member is complete and none is in flight", flying
}

// integrationHolders follows the deliberate change of integration-in-flight
// (the grouping quiesced while its integration item is in flight).
func (x *refIndex) integrationHolders(i int32) (holders []int32, detail string) {
	e := &x.es[i]
	var parts []string
	var seenE []string
	for _, l := range e.c.Item.Links {
		if l.Rel != PartOf || ItemID(l.Target) == e.id || slices.Contains(seenE, l.Target) {
			continue
		}
		seenE = append(seenE, l.Target)
		var flying []int32 // rare: sorted only when there is one
		for _, j := range x.integBy[ItemID(l.Target)] {
			if j != i && x.es[j].claim.InFlight() {
				flying = append(flying, j)
			}
		}
		slices.SortFunc(flying, func(a, b int32) int { return refCompareIDs(x.es[a].id, x.es[b].id) })
		for _, j := range flying {
			je := &x.es[j]
			parts = append(parts, fmt.Sprintf("%s integrates %s and is in flight (%s by %s, fence %d)", je.id, l.Target, je.claim, je.c.Claim.Owner, je.c.Claim.Fence))
			if !slices.Contains(holders, j) {
				holders = append(holders, j)
			}
		}
	}
	if len(parts) == 0 {
		return nil, ""
	}
	slices.SortFunc(holders, func(a, b int32) int { return refCompareIDs(x.es[a].id, x.es[b].id) })
	return holders, strings.Join(parts, "; ") + ": the grouping is quiesced while its integration item is in flight; no member is claimed until that claim ends"
}

// threshold is the poison threshold for item i: the smallest threshold:N on
// an epic it is partOf, else the snapshot's.
func (x *refIndex) threshold(i int32) int {
	best := 0
	for _, l := range x.es[i].c.Item.Links {
		if l.Rel != PartOf {
			continue
		}
		if ei, ok := x.byID[ItemID(l.Target)]; ok {
			if n := x.es[ei].threshold; n > 0 && (best == 0 || n < best) {
				best = n
			}
		}
	}
	if best > 0 {
		return best
	}
	if x.s.PoisonThreshold > 0 {
		return x.s.PoisonThreshold
	}
	return DefaultPoisonThreshold
}

// poisoned: attempts at or over the threshold with no claim held or lapsed.
func (x *refIndex) poisoned(i int32) (bool, int) {
	e := &x.es[i]
	th := x.threshold(i)
	return e.c.Attempts >= th && !e.claim.InFlight(), th
}

// admission says why item i is not admitted ("" when it is), and whether that
// is the admission-unrecorded defect.
func refAdmission(c *Candidate) (why string, unrecorded bool) {
	switch {
	case c.AdmissionLabel:
		return "the issue carries the admission label: a human with triage or more admits it by removing the label or running /backlog admit", false
	case !c.AdmissionRecorded:
		return "the admission label is absent but no human admission act is recorded (admission-unrecorded): not admitted until the issue's label events are read", true
	}
	return "", false
}

func refFmtTime(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// mergedNotComplete is the exclusion detail for a candidate carrying a live
// merged-not-complete finding ("" when it carries none): every such
// finding's detail, in order, and what lets the item be offered again.
func refMergedNotComplete(c *Candidate) string {
	var ds []string
	for k := range c.Findings {
		if c.Findings[k].Code == ExMergedNotComplete {
			ds = append(ds, c.Findings[k].Detail)
		}
	}
	if len(ds) == 0 {
		return ""
	}
	slices.Sort(ds)
	ds = slices.Compact(ds)
	return "a merged pull request delivers it and no state:complete is recorded (" + strings.Join(ds, "; ") +
		"): not offered until the completion is recorded (by its holder, or under a maintenance claim) or a human with triage or more runs /backlog undelivered #<pr> for a pull request that did not deliver it"
}

// unrouted says whether pending item i names, in its one homeRegion: tag, a
// region other than the one this deployment serves, and words the
// unrouted-region finding. A missing, empty or repeated homeRegion: is a
// tag problem instead.
func (x *refIndex) unrouted(i int32) (string, bool) {
	e := &x.es[i]
	if !e.oneRegion || e.region == "" || e.region == x.s.Region {
		return "", false
	}
	return fmt.Sprintf("homeRegion:%s names region %q, but this deployment serves region %q (WARDEN_REGION): no replica here can claim it; "+
		"retag it homeRegion:%s, or serve %q from a deployment of its own", e.region, e.region, x.s.Region, x.s.Region, e.region), true
}
