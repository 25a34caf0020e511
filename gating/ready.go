package gating

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ExMissing is Claimable's answer for an item the snapshot does not hold (the
// store answers "missing" before it gets that far).
const ExMissing = "missing"

// DefaultPoisonThreshold is the protocol's poison threshold, used when a
// snapshot carries none (PoisonThreshold ≤ 0).
const DefaultPoisonThreshold = 3

// stateKind is an item's state: tags read against the closed vocabulary.
type stateKind uint8

const (
	stLive     stateKind = iota // no state: tag
	stComplete                  // exactly state:complete
	stParked                    // exactly state:parked
	stInvalid                   // several state: tags, or an unrecognised value
)

// entry is one item of a snapshot with its tags read once.
type entry struct {
	c         *Candidate
	id        ItemID
	num       int
	st        stateKind
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
type index struct {
	s        *Snapshot
	es       []entry
	byID     map[ItemID]int32
	partOfBy map[ItemID][]int32 // items (other than the key itself) partOf the key
	integBy  map[ItemID][]int32 // items (other than the key itself) integrating the key
	flight   []int32            // items whose claim is held or lapsed, in number order
	resUsers map[string][]int32 // resource name → in-flight items naming it
	anchors  *anchorIndex       // in-flight items' anchoredTo radius, built on first use
}

func newIndex(s *Snapshot) *index {
	x := &index{
		s:        s,
		es:       make([]entry, 0, len(s.Items)),
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
		x.es = append(x.es, entry{c: c, id: c.Item.ID, num: c.Item.ID.Number()})
		e := &x.es[i]
		e.read(s)
		for _, l := range c.Item.Links {
			t := ItemID(l.Target)
			if t == e.id {
				continue
			}
			switch l.Rel {
			case PartOf:
				appendOnce(x.partOfBy, t, i)
			case Integrates:
				appendOnce(x.integBy, t, i)
			}
		}
		if e.claim.InFlight() {
			x.flight = append(x.flight, i)
		}
	}
	// In flight in number order, so every detail naming in-flight items is
	// independent of the snapshot's order.
	slices.SortFunc(x.flight, func(a, b int32) int { return compareIDs(x.es[a].id, x.es[b].id) })
	for _, i := range x.flight {
		for _, r := range x.es[i].resources {
			x.resUsers[r] = append(x.resUsers[r], i)
		}
	}
	return x
}

// appendOnce appends i to m[k] unless i was the last one appended there (the
// items are visited in order, so this drops an item's repeated links).
func appendOnce(m map[ItemID][]int32, k ItemID, i int32) {
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
func (e *entry) read(s *Snapshot) {
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
		e.st = stLive
	case e.nStates > 1:
		e.st = stInvalid
	case e.state1 == "complete":
		e.st = stComplete
	case e.state1 == "parked":
		e.st = stParked
	default:
		e.st = stInvalid
	}
	e.oneRegion = regions == 1
	e.clean = backlog && e.prio >= 0 && phases == 1 && phaseOK && regions == 1 && bases == 1 && !empty &&
		owners <= 1 && topics <= 1 && e.st != stInvalid
	e.claim = ClaimStateOf(e.c.Claim, s.Now, s.Quarantine)
}

// pending: not complete and not parked (an unknown state is pending: its real
// condition is unknown and needs a human).
func (e *entry) pending() bool { return e.st == stLive || e.st == stInvalid }

// route describes a parked item's ruling route.
func (e *entry) route() string {
	if ParkRoute(e.c.Item.Tags) != nil {
		return "no ruling route (park-without-route)"
	}
	return "ruling-owner:" + e.owner + " ruling-topic:" + e.topic
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
	return "state:" + e.state1 + " is not a recognised state (only state:complete and state:parked exist; absent means live)"
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
		return "state:" + e.state1 + " is not a recognised state"
	}
	return "live"
}

// tagProblems returns every step-1 finding on the item's tags: CheckTags with
// the mandatory set, a park without a route, and an epic's member on the
// default branch.
func (x *index) tagProblems(i int32) []TagProblem {
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
type edge struct {
	target ItemID
	ti     int32 // the target's entry, or -1 when missing
	v      EdgeVerdict
	why    string
}

// edgesOf classifies every distinct blockedBy edge of item i (the protocol's
// table: missing or invalid → invalid, parked → stalled, live → waiting,
// complete → satisfied).
func (x *index) edgesOf(i int32) []edge { return x.appendEdges(nil, i) }

// appendEdges appends item i's classified edges to buf; the new ones are
// buf[len(buf):] of the result.
func (x *index) appendEdges(buf []edge, i int32) []edge {
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
		} else if hasTarget(out[start:], t) {
			continue
		}
		ti, ok := x.byID[t]
		if !ok {
			out = append(out, edge{target: t, ti: -1, v: EdgeInvalid, why: "no such item"})
			continue
		}
		te := &x.es[ti]
		ed := edge{target: t, ti: ti}
		switch te.st {
		case stComplete:
			ed.v, ed.why = EdgeSatisfied, "complete"
		case stLive:
			ed.v, ed.why = EdgeWaiting, "live"
		case stParked:
			ed.v, ed.why = EdgeStalled, te.describe()
		default:
			ed.v, ed.why = EdgeInvalid, te.describe()
		}
		out = append(out, ed)
	}
	return out
}

func hasTarget(es []edge, t ItemID) bool {
	for k := range es {
		if es[k].target == t {
			return true
		}
	}
	return false
}

// worst is the dependent's verdict: the worst of its edges.
func worst(es []edge) EdgeVerdict {
	w := EdgeSatisfied
	for k := range es {
		w = max(w, es[k].v)
	}
	return w
}

// edgeDetail names every unsatisfied edge, worst first.
func edgeDetail(es []edge) string {
	var arr [8]*edge
	open := arr[:0]
	size := len("blockedBy ")
	for k := range es {
		if es[k].v != EdgeSatisfied {
			open = append(open, &es[k])
			size += len(es[k].target) + len(es[k].why) + 5
		}
	}
	slices.SortFunc(open, func(a, c *edge) int {
		if a.v != c.v {
			return int(c.v) - int(a.v)
		}
		return compareIDs(a.target, c.target)
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
func (x *index) edgeDefect(dep ItemID, ed *edge) (code, detail string, ok bool) {
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
func (x *index) groupWait(i int32) (waits []int32, detail string) {
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
		slices.SortFunc(members, func(a, b int32) int { return compareIDs(x.es[a].id, x.es[b].id) })
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
			case me.st != stComplete:
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
		return nil, ""
	}
	return waits, strings.Join(parts, "; ") + ": the integration item is claimable only when every other member is complete and none is in flight"
}

// threshold is the poison threshold for item i: the smallest threshold:N on
// an epic it is partOf, else the snapshot's.
func (x *index) threshold(i int32) int {
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
func (x *index) poisoned(i int32) (bool, int) {
	e := &x.es[i]
	th := x.threshold(i)
	return e.c.Attempts >= th && !e.claim.InFlight(), th
}

// admission says why item i is not admitted ("" when it is), and whether that
// is the admission-unrecorded defect.
func admission(c *Candidate) (why string, unrecorded bool) {
	switch {
	case c.AdmissionLabel:
		return "the issue carries the admission label: a human with triage or more admits it by removing the label or running /backlog admit", false
	case !c.AdmissionRecorded:
		return "the admission label is absent but no human admission act is recorded (admission-unrecorded): not admitted until the issue's label events are read", true
	}
	return "", false
}

func fmtTime(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// mergedNotComplete is the exclusion detail for a candidate carrying a live
// merged-not-complete finding ("" when it carries none): every such
// finding's detail, in order, and what lets the item be offered again.
func mergedNotComplete(c *Candidate) string {
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
func (x *index) unrouted(i int32) (string, bool) {
	e := &x.es[i]
	if !e.oneRegion || e.region == "" || e.region == x.s.Region {
		return "", false
	}
	return fmt.Sprintf("homeRegion:%s names region %q, but this deployment serves region %q (WARDEN_REGION): no replica here can claim it; "+
		"retag it homeRegion:%s, or serve %q from a deployment of its own", e.region, e.region, x.s.Region, x.s.Region, e.region), true
}

// exclusionOf runs the narrowing steps on item i and returns the first that
// drops it ("" when none does). claimant is nil for ComputeReady; Claimable
// passes the would-be owner, and then the item's own held claim is ignored (the
// store answers "contended") and its own lapsed claim is ignored for that
// owner.
func (x *index) exclusionOf(i int32, edges []edge, claimant *string) (reason, detail string) {
	e := &x.es[i]
	// Step 2 (state), ahead of the tag checks: a terminal or unknown state is
	// the truest reason the item is not work.
	switch e.st {
	case stInvalid:
		return ExUnknownState, e.stateWhy()
	case stComplete:
		return ExComplete, "state:complete"
	case stParked:
		return ExParked, "state:parked; " + e.route()
	}
	// Step 1: a malformed tag set is never offered.
	if probs := x.tagProblems(i); len(probs) > 0 {
		parts := make([]string, len(probs))
		for k, p := range probs {
			parts[k] = p.Code + ": " + p.Detail
		}
		return ExMalformed, strings.Join(parts, "; ")
	}
	// Step 2: a live claim.
	cv := &e.c.Claim
	switch e.claim {
	case StateHeld:
		if claimant == nil {
			return ExHeld, fmt.Sprintf("held by %s (fence %d) until %s", cv.Owner, cv.Fence, fmtTime(cv.LeaseExpiresAt))
		}
	case StateLapsed:
		if claimant == nil || cv.Owner == "" || *claimant != cv.Owner {
			return ExLapsed, fmt.Sprintf("the lease of %s (fence %d) lapsed at %s; it is quarantined until %s and only %s may re-claim it before then",
				cv.Owner, cv.Fence, fmtTime(cv.LeaseExpiresAt), fmtTime(QuarantineEnds(*cv, x.s.Quarantine)), cv.Owner)
		}
	}
	// Step 3: groupings.
	if m := x.partOfBy[e.id]; len(m) > 0 {
		return ExGrouping, fmt.Sprintf("a grouping of %d items (partOf it): it is completed by its integration item, never claimed", len(m))
	}
	// A finished-looking item: a merged pull request delivers it and no
	// state:complete is recorded. Like an unknown state:, its real condition
	// needs a record before it is work again; it comes after the terminal
	// states, the tags, a live claim (its holder records the completion)
	// and the grouping rule, and before every rule that would only delay a
	// fresh claim. A lapsed holder is refused too: it records the
	// completion under its fence without re-claiming.
	if d := mergedNotComplete(e.c); d != "" {
		return ExMergedNotComplete, d
	}
	// An item whose issue lost the item label left the backlog on GitHub:
	// it stays in the ledger (forgetting is explicit) and is not offered
	// until the label is back.
	if e.c.ItemLabelRemoved {
		return ExItemLabelRemoved, "the issue no longer carries the item label: it is out of the backlog until the label is added back (the item stays in the ledger; DELETE /items/{id} forgets it)"
	}
	// Step 4: dependencies, then the integration join.
	switch worst(edges) {
	case EdgeInvalid:
		return ExInvalid, edgeDetail(edges)
	case EdgeStalled:
		return ExStalled, edgeDetail(edges)
	case EdgeWaiting:
		return ExBlocked, edgeDetail(edges)
	}
	if w, d := x.groupWait(i); len(w) > 0 {
		return ExBlocked, d
	}
	// Step 5: admission.
	if why, _ := admission(e.c); why != "" {
		return ExAwaitingAdmission, why
	}
	// Poison, collision holds, region.
	if p, th := x.poisoned(i); p {
		return ExPoisoned, fmt.Sprintf("%d attempts reached the poison threshold of %d with no claim held or lapsed: it is parked for a human ruling", e.c.Attempts, th)
	}
	if e.c.CollisionHold {
		return ExCollisionHold, "held by a takeover collision until a human with triage or more runs /backlog resolve"
	}
	if e.region != x.s.Region {
		return ExForeignRegion, fmt.Sprintf("homeRegion:%s is not this deployment's region %q", e.region, x.s.Region)
	}
	// Step 8: resource collision with an in-flight item.
	var busy []string
	for _, r := range e.resources {
		for _, j := range x.resUsers[r] {
			if j != i {
				busy = append(busy, fmt.Sprintf("resource:%s is in use by in-flight %s (%s by %s)", r, x.es[j].id, x.es[j].claim, x.es[j].c.Claim.Owner))
			}
		}
	}
	if len(busy) > 0 {
		return ExResourceBusy, strings.Join(busy, "; ")
	}
	return "", ""
}

// compareIDs orders item ids numerically (issue-9 before issue-10), with any
// malformed id after the well-formed ones, by text.
func compareIDs(a, b ItemID) int {
	na, nb := a.Number(), b.Number()
	switch {
	case na == nb:
		return strings.Compare(string(a), string(b))
	case na == 0:
		return 1
	case nb == 0:
		return -1
	case na < nb:
		return -1
	}
	return 1
}

// ComputeReady runs the protocol's eight steps over a whole repository
// snapshot (PROTOCOL.md "The ready set"; backlog-protocol.md "Computing the
// ready set"): every item's tags and every blockedBy edge are checked before
// any narrowing, each item left out is named with the first step that drops
// it, every defect is reported, and cycles and a starved backlog raise
// alarms. The result is deterministic: Ready in claim order, Excluded and
// Defects by item number then code.
func ComputeReady(s Snapshot) Result {
	x := newIndex(&s)
	n := len(x.es)
	var ds defects
	edges := make([][]edge, n)
	nLinks := 0
	for i := range x.es {
		nLinks += len(x.es[i].c.Item.Links)
	}
	buf := make([]edge, 0, nLinks)
	var unrouted []int32 // pending items whose homeRegion: is not served here

	// Step 1: every item's tags, parking route and edges; admission, poison
	// and region findings on pending items.
	for i := range int32(n) {
		e := &x.es[i]
		for _, p := range x.tagProblems(i) {
			ds.add(p.Code, e.id, 0, p.Detail)
		}
		for _, f := range e.c.Findings {
			ds.add(f.Code, e.id, 0, f.Detail)
		}
		start := len(buf)
		buf = x.appendEdges(buf, i)
		edges[i] = buf[start:len(buf):len(buf)]
		for k := range edges[i] {
			if code, d, ok := x.edgeDefect(e.id, &edges[i][k]); ok {
				ds.add(code, e.id, edges[i][k].target.Number(), d)
			}
		}
		if !e.pending() {
			continue
		}
		if _, unrec := admission(e.c); unrec {
			ds.add("admission-unrecorded", e.id, 0, "the admission label is absent but no human admission act is recorded: warden reads the issue's label events to repair it; until then the item is not admitted")
		}
		if p, th := x.poisoned(i); p {
			ds.add("poisoned", e.id, 0, fmt.Sprintf("%d attempts (this epoch) reached the poison threshold of %d with no claim held or lapsed: park it with a ruling route", e.c.Attempts, th))
		}
		if d, ok := x.unrouted(i); ok {
			ds.add(CodeUnroutedRegion, e.id, 0, d)
			unrouted = append(unrouted, i)
		}
	}
	x.groupingDefects(&ds)

	// Cycles, then each unrouted item (in number order).
	var alarms []string
	for _, cyc := range findCycles(x, edges) {
		ds.add("cycle", "", x.es[cyc.path[0]].num, cyc.detail)
		alarms = append(alarms, "cycle: "+cyc.detail)
	}
	slices.SortFunc(unrouted, func(a, b int32) int { return compareIDs(x.es[a].id, x.es[b].id) })
	for _, i := range unrouted {
		d, _ := x.unrouted(i)
		alarms = append(alarms, CodeUnroutedRegion+": "+string(x.es[i].id)+": "+d)
	}

	// Steps 2–5 and 8, item by item; then sort (6) and prefer disjoint radii (7).
	reasons := make([]Exclusion, n)
	excluded := make([]Exclusion, 0, n)
	var survivors []int32
	for i := range int32(n) {
		r, d := x.exclusionOf(i, edges[i], nil)
		if r == "" {
			survivors = append(survivors, i)
			continue
		}
		reasons[i] = Exclusion{Item: x.es[i].id, Reason: r, Detail: d}
		excluded = append(excluded, reasons[i])
	}
	slices.SortFunc(survivors, func(a, b int32) int {
		ea, eb := &x.es[a], &x.es[b]
		if ea.prio != eb.prio {
			return int(ea.prio) - int(eb.prio)
		}
		if c := ea.c.Item.CreatedAt.Compare(eb.c.Item.CreatedAt); c != 0 {
			return c
		}
		return compareIDs(ea.id, eb.id)
	})
	ready := make([]ReadyEntry, 0, len(survivors))
	var later []ReadyEntry
	for _, i := range survivors {
		re := ReadyEntry{Item: x.es[i].id, Priority: x.es[i].prioStr, Overlaps: x.overlaps(i)}
		if len(re.Overlaps) > 0 {
			later = append(later, re)
		} else {
			ready = append(ready, re)
		}
	}
	ready = append(ready, later...)

	// A starved backlog: nothing ready, nothing in flight, work pending. While
	// anything is in flight the backlog is moving (its dependents wait on it).
	if len(ready) == 0 {
		var pend []string
		moving := false
		for i := range int32(n) {
			if reasons[i].Reason == ExHeld || reasons[i].Reason == ExLapsed {
				moving = true
			}
			if x.es[i].pending() {
				pend = append(pend, fmt.Sprintf("%s waits on %s (%s)", x.es[i].id, reasons[i].Reason, reasons[i].Detail))
			}
		}
		if len(pend) > 0 && !moving {
			slices.SortFunc(pend, func(a, b string) int { return compareIDs(ItemID(firstWord(a)), ItemID(firstWord(b))) })
			d := fmt.Sprintf("the ready set is empty while %d items are pending (a cycle or a stall): %s", len(pend), strings.Join(pend, "; "))
			ds.add("ready-empty-pending", "", 0, d)
			alarms = append(alarms, "ready-empty-pending: "+d)
		}
	}

	slices.SortFunc(excluded, func(a, b Exclusion) int {
		if c := compareIDs(a.Item, b.Item); c != 0 {
			return c
		}
		if c := strings.Compare(a.Reason, b.Reason); c != 0 {
			return c
		}
		return strings.Compare(a.Detail, b.Detail)
	})
	if alarms == nil {
		alarms = []string{}
	}
	return Result{Ready: ready, Excluded: excluded, Defects: ds.sorted(), Alarms: alarms}
}

func firstWord(s string) string {
	if k := strings.IndexByte(s, ' '); k >= 0 {
		return s[:k]
	}
	return s
}

// groupingDefects reports, on each grouping in the snapshot, a missing or
// duplicated integration item, and a fan-out complete while its integration
// item is not.
func (x *index) groupingDefects(ds *defects) {
	for g, members := range x.partOfBy {
		if _, ok := x.byID[g]; !ok {
			continue // a partOf to a missing item: the grouping does not exist
		}
		ints := x.integBy[g]
		switch len(ints) {
		case 0:
			ds.add("integration-missing", g, 0, fmt.Sprintf("%s is a grouping of %d items but no item integrates it: exactly one integration item closes a grouping", g, len(members)))
		case 1:
		default:
			ds.add("integration-duplicate", g, 0, fmt.Sprintf("%s is integrated by %d items (%s): exactly one integration item closes a grouping", g, len(ints), x.names(ints)))
		}
		if len(ints) == 0 {
			continue
		}
		fanout, done := 0, true
		for _, m := range members {
			if slices.Contains(ints, m) {
				continue
			}
			fanout++
			if x.es[m].st != stComplete {
				done = false
				break
			}
		}
		if fanout == 0 || !done {
			continue
		}
		var open []int32
		for _, m := range ints {
			if x.es[m].st != stComplete {
				open = append(open, m)
			}
		}
		if len(open) > 0 {
			ds.add("integration-incomplete", g, 0, fmt.Sprintf("every member of %s is complete but its integration item %s is not: the grouping is not complete; the integration item is the next work", g, x.names(open)))
		}
	}
}

// names lists the items' ids in number order.
func (x *index) names(is []int32) string {
	ids := make([]ItemID, len(is))
	for k, i := range is {
		ids[k] = x.es[i].id
	}
	slices.SortFunc(ids, compareIDs)
	var b strings.Builder
	for k, id := range ids {
		if k > 0 {
			b.WriteString(", ")
		}
		b.WriteString(string(id))
	}
	return b.String()
}

// Claimable says whether owner may claim id now, from a snapshot that may be
// partial. The snapshot must hold:
//
//   - the candidate;
//   - its blockedBy targets (those that exist);
//   - the items partOf it (to know it is a grouping);
//   - for each grouping it integrates, that grouping's members: the items
//     partOf it and any other item integrating it;
//   - the epics it is partOf (their threshold:N tag sets its poison threshold);
//   - every item in flight (held or lapsed), for resource collisions.
//
// Given those, the answer is the one ComputeReady gives for the item over the
// whole repository. The exclusion is returned when not claimable. A lapsed
// claim may be re-claimed by its own owner during the quarantine (ok); by
// anyone else: ExLapsed. A held claim is not an exclusion here (the store
// answers "contended"): Claimable ignores the candidate's own held claim.
// While the candidate's own claim is held or lapsed the poison rule does not
// apply (a holder continuing its attempt is not a new one).
func Claimable(s Snapshot, id ItemID, owner string) (bool, Exclusion) {
	x := newIndex(&s)
	i, ok := x.byID[id]
	if !ok {
		return false, Exclusion{Item: id, Reason: ExMissing, Detail: "no such item"}
	}
	if r, d := x.exclusionOf(i, x.edgesOf(i), &owner); r != "" {
		return false, Exclusion{Item: id, Reason: r, Detail: d}
	}
	return true, Exclusion{}
}

// defects collects findings with their sort keys.
type defects struct{ list []keyedDefect }

type keyedDefect struct {
	d   Defect
	num int // the item's number (0 for repository-wide findings)
	sub int // a secondary number (the blocker, the cycle's first item)
}

func (ds *defects) add(code string, item ItemID, sub int, detail string) {
	ds.list = append(ds.list, keyedDefect{Defect{Code: code, Item: item, Detail: detail}, item.Number(), sub})
}

func (ds *defects) sorted() []Defect {
	slices.SortFunc(ds.list, func(a, b keyedDefect) int {
		if a.d.Item != b.d.Item {
			switch {
			case a.d.Item == "": // repository-wide findings first
				return -1
			case b.d.Item == "":
				return 1
			case a.num != b.num && a.num != 0 && b.num != 0:
				return a.num - b.num
			}
			return compareIDs(a.d.Item, b.d.Item)
		}
		if c := strings.Compare(a.d.Code, b.d.Code); c != 0 {
			return c
		}
		if a.sub != b.sub {
			return a.sub - b.sub
		}
		return strings.Compare(a.d.Detail, b.d.Detail)
	})
	out := make([]Defect, len(ds.list))
	for k := range ds.list {
		out[k] = ds.list[k].d
	}
	return out
}

// cycle is one strongly connected knot of blockedBy edges: path is a cycle
// through its lowest-numbered item, in edge order (dependent → blocker).
type cycle struct {
	path   []int32
	detail string
}

// findCycles finds every strongly connected component of the blockedBy graph
// that holds a cycle (more than one item, or an item blockedBy itself), with
// an iterative Tarjan, so depth is bounded by the heap, not the stack. Each
// is named by a shortest cycle through its lowest-numbered item, in order.
func findCycles(x *index, edges [][]edge) []cycle {
	n := len(x.es)
	order := make([]int32, n) // 0: unvisited; else visit order + 1
	low := make([]int32, n)
	onStack := make([]bool, n)
	var stack []int32
	type frame struct{ v, next int32 }
	var calls []frame
	var counter int32
	var comps [][]int32
	for root := range int32(n) {
		if order[root] != 0 {
			continue
		}
		counter++
		order[root], low[root] = counter, counter
		stack = append(stack, root)
		onStack[root] = true
		calls = append(calls, frame{root, 0})
		for len(calls) > 0 {
			f := &calls[len(calls)-1]
			v := f.v
			if es := edges[v]; int(f.next) < len(es) {
				w := es[f.next].ti
				f.next++
				if w < 0 {
					continue
				}
				if order[w] == 0 {
					counter++
					order[w], low[w] = counter, counter
					stack = append(stack, w)
					onStack[w] = true
					calls = append(calls, frame{w, 0})
				} else if onStack[w] {
					low[v] = min(low[v], order[w])
				}
				continue
			}
			if low[v] == order[v] {
				k := len(stack) - 1
				for stack[k] != v {
					k--
				}
				comp := stack[k:]
				for _, w := range comp {
					onStack[w] = false
				}
				if len(comp) > 1 || selfLoop(edges[v], v) {
					comps = append(comps, slices.Clone(comp))
				}
				stack = stack[:k]
			}
			calls = calls[:len(calls)-1]
			if len(calls) > 0 {
				u := calls[len(calls)-1].v
				low[u] = min(low[u], low[v])
			}
		}
	}
	if len(comps) == 0 {
		return nil
	}
	// Name each component by a shortest cycle through its lowest item (BFS
	// inside the component).
	comp := make([]int32, n)
	for k := range comp {
		comp[k] = -1
	}
	parent := make([]int32, n)
	out := make([]cycle, 0, len(comps))
	for ci, c := range comps {
		for _, v := range c {
			comp[v] = int32(ci)
			parent[v] = -1
		}
		start := slices.MinFunc(c, func(a, b int32) int { return compareIDs(x.es[a].id, x.es[b].id) })
		queue := []int32{start}
		last := int32(-1)
	bfs:
		for len(queue) > 0 {
			u := queue[0]
			queue = queue[1:]
			for _, ed := range edges[u] {
				w := ed.ti
				if w < 0 || comp[w] != int32(ci) {
					continue
				}
				if w == start {
					last = u
					break bfs
				}
				if parent[w] == -1 {
					parent[w] = u
					queue = append(queue, w)
				}
			}
		}
		var path []int32
		for v := last; v != start; v = parent[v] {
			path = append(path, v)
		}
		path = append(path, start)
		slices.Reverse(path)
		names := make([]string, 0, len(path)+1)
		for _, v := range path {
			names = append(names, string(x.es[v].id))
		}
		names = append(names, string(x.es[start].id))
		d := "blockedBy cycle " + strings.Join(names, " → ")
		if len(c) > len(path) {
			d += fmt.Sprintf(" (one cycle of a knot of %d items: %s)", len(c), x.names(c))
		}
		d += ": every item on it waits forever; a pm or human removes an edge"
		out = append(out, cycle{path: path, detail: d})
	}
	slices.SortFunc(out, func(a, b cycle) int { return compareIDs(x.es[a.path[0]].id, x.es[b.path[0]].id) })
	return out
}

func selfLoop(es []edge, v int32) bool {
	for k := range es {
		if es[k].ti == v {
			return true
		}
	}
	return false
}

// anchorIndex is the in-flight items' anchoredTo radius, for step 7. Anchors
// are normalised without a trailing "/"; "" (an anchor of "." or "/") is the
// whole repository. A directory covers every path below it.
type anchorIndex struct {
	exact map[string][]int32 // an in-flight anchor → its items
	under map[string][]int32 // a proper ancestor directory of an in-flight anchor → its items
	root  []int32            // in-flight items anchored to the whole repository
	any   []int32            // in-flight items with any anchor
}

func normAnchor(p string) string {
	p = strings.TrimSuffix(p, "/")
	if p == "." {
		return ""
	}
	return p
}

func buildAnchorIndex(x *index) *anchorIndex {
	a := &anchorIndex{exact: map[string][]int32{}, under: map[string][]int32{}}
	for _, i := range x.flight {
		has := false
		for _, l := range x.es[i].c.Item.Links {
			if l.Rel != AnchoredTo {
				continue
			}
			has = true
			p := normAnchor(l.Target)
			if p == "" {
				a.root = append(a.root, i)
				continue
			}
			a.exact[p] = append(a.exact[p], i)
			for k := strings.IndexByte(p, '/'); k >= 0; k = nextSlash(p, k) {
				a.under[p[:k]] = append(a.under[p[:k]], i)
			}
		}
		if has {
			a.any = append(a.any, i)
		}
	}
	return a
}

func nextSlash(p string, k int) int {
	j := strings.IndexByte(p[k+1:], '/')
	if j < 0 {
		return -1
	}
	return k + 1 + j
}

// overlaps names the in-flight items (other than i) whose anchoredTo radius
// overlaps item i's, in number order.
func (x *index) overlaps(i int32) []ItemID {
	if x.anchors == nil {
		x.anchors = buildAnchorIndex(x)
	}
	if len(x.anchors.any) == 0 {
		return nil
	}
	var hit []int32
	for _, l := range x.es[i].c.Item.Links {
		if l.Rel != AnchoredTo {
			continue
		}
		p := normAnchor(l.Target)
		if p == "" {
			hit = append(hit, x.anchors.any...)
			continue
		}
		hit = append(hit, x.anchors.root...)
		hit = append(hit, x.anchors.exact[p]...)
		hit = append(hit, x.anchors.under[p]...)
		for k := strings.IndexByte(p, '/'); k >= 0; k = nextSlash(p, k) {
			hit = append(hit, x.anchors.exact[p[:k]]...)
		}
	}
	if len(hit) == 0 {
		return nil
	}
	ids := make([]ItemID, 0, len(hit))
	for _, j := range hit {
		if j != i {
			ids = append(ids, x.es[j].id)
		}
	}
	slices.SortFunc(ids, compareIDs)
	ids = slices.Compact(ids)
	if len(ids) == 0 {
		return nil
	}
	return ids
}
