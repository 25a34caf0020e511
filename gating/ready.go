package gating

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// ExMissing is Claimable's answer for an item the snapshot does not hold (the
// store answers "missing" before it gets that far).
const ExMissing = "missing"

// DefaultPoisonThreshold is the protocol's poison threshold, used when a
// snapshot carries none (PoisonThreshold ≤ 0).
const DefaultPoisonThreshold = 3

// threshold is the poison threshold for item i: the smallest threshold:N on
// an epic it is partOf, else the snapshot's.
func (x *index) threshold(i int32) int {
	if !x.es[i].hasPartOf { // no epic, and the links need not be read
		return x.snapshotThreshold()
	}
	if x.thresholds == nil {
		x.thresholds = make([]int, len(x.es))
	}
	if th := x.thresholds[i]; th > 0 {
		return th
	}
	best := 0
	for _, l := range x.es[i].c.Item.Links {
		if l.Rel != PartOf {
			continue
		}
		if ei, ok := x.ids.get(ItemID(l.Target)); ok {
			if n := x.es[ei].threshold; n > 0 && (best == 0 || n < best) {
				best = n
			}
		}
	}
	if best == 0 {
		best = x.snapshotThreshold()
	}
	x.thresholds[i] = best
	return best
}

// snapshotThreshold is the poison threshold where no epic sets one.
func (x *index) snapshotThreshold() int {
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
	case c.SpecChanged:
		return "the specification (the issue's title or body) changed after a human admitted it, by an agent or unseen (" + CodeSpecChangedByAgent +
			"): a human with triage or more admits it again by removing the admission label or running /backlog admit", false
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
	if !e.oneRegion || !e.hasRegion || e.inRegion {
		return "", false
	}
	region := e.region()
	return fmt.Sprintf("homeRegion:%s names region %q, but this deployment serves region %q (WARDEN_REGION): no replica here can claim it; "+
		"retag it homeRegion:%s, or serve %q from a deployment of its own", region, region, x.s.Region, x.s.Region, region), true
}

// exclusionOf runs the narrowing steps on item i and returns the first that
// drops it ("" when none does). claimant is nil for ComputeReady; Claimable
// passes the would-be owner, and then the item's own held claim is ignored (the
// store answers "contended") and its own lapsed claim is ignored for that
// owner.
func (x *index) exclusionOf(i int32, edges []dep, claimant *string) (reason, detail string) {
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
		return ExInvalid, x.edgeDetail(edges)
	case EdgeStalled:
		return ExStalled, x.edgeDetail(edges)
	case EdgeWaiting:
		return ExBlocked, x.edgeDetail(edges)
	}
	if w, d, flying := x.groupWait(i); len(w) > 0 {
		if flying {
			return ExIntegrationInFlight, d
		}
		return ExBlocked, d
	}
	if _, d := x.integrationHolders(i); d != "" {
		return ExIntegrationInFlight, d
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
	if !e.inRegion {
		return ExForeignRegion, fmt.Sprintf("homeRegion:%s is not this deployment's region %q", e.region(), x.s.Region)
	}
	// Step 8: resource collision with an in-flight item.
	var busy []string
	for _, r := range e.resources() {
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
	x := indexSnapshot(&s, forReady)
	defer x.release()
	n := len(x.es)
	var ds defects
	var unrouted []int32 // pending items whose homeRegion: is not served here

	// Item by item, in id order (so Excluded needs no sort: an item has one
	// exclusion): step 1's findings, then steps 2–5 and 8.
	excluded := make([]Exclusion, 0, n)
	exclusion := make([]int32, n) // item → its place in excluded + 1; 0: none
	var survivors []claimKey
	for _, i := range x.order() {
		if x.itemDefects(i, &ds) {
			unrouted = append(unrouted, i)
		}
		r, d := x.exclusionOf(i, x.depsOf(i), nil)
		if r == "" {
			e := &x.es[i]
			survivors = append(survivors, claimKey{prio: e.prio, created: e.c.Item.CreatedAt, i: i})
			continue
		}
		excluded = append(excluded, Exclusion{Item: x.es[i].id, Reason: r, Detail: d})
		exclusion[i] = int32(len(excluded))
	}
	x.groupingDefects(&ds)

	// Cycles, then each unrouted item (in number order).
	var alarms []string
	for _, cyc := range findCycles(x) {
		ds.add("cycle", "", x.es[cyc.path[0]].num, cyc.detail)
		alarms = append(alarms, "cycle: "+cyc.detail)
	}
	slices.SortFunc(unrouted, x.compare)
	for _, i := range unrouted {
		d, _ := x.unrouted(i)
		alarms = append(alarms, CodeUnroutedRegion+": "+string(x.es[i].id)+": "+d)
	}

	// Sort what is left (step 6) and prefer disjoint radii (7).
	slices.SortFunc(survivors, func(a, b claimKey) int {
		if a.prio != b.prio {
			return int(a.prio) - int(b.prio)
		}
		if c := a.created.Compare(b.created); c != 0 {
			return c
		}
		return x.compare(a.i, b.i)
	})
	ready := make([]ReadyEntry, 0, len(survivors))
	var later []ReadyEntry
	for _, k := range survivors {
		i := k.i
		re := ReadyEntry{Item: x.es[i].id, Priority: x.es[i].priority(), Overlaps: x.overlaps(i)}
		if len(re.Overlaps) > 0 {
			later = append(later, re)
		} else {
			ready = append(ready, re)
		}
	}
	ready = append(ready, later...)

	// A starved backlog: nothing ready and pending work with no path to
	// ready. The backlog is moving only while an in-flight item is a
	// (transitive) blocker of a pending item that is not itself in flight:
	// something unrelated in flight does not mute the alarm. With nothing
	// ready every item has its exclusion.
	if len(ready) == 0 {
		var pend []string
		var waiting []int32 // pending and not in flight
		for i := range int32(n) {
			r := excluded[exclusion[i]-1]
			if x.es[i].pending() {
				pend = append(pend, fmt.Sprintf("%s waits on %s (%s)", x.es[i].id, r.Reason, r.Detail))
				if !x.es[i].claim.InFlight() {
					waiting = append(waiting, i)
				}
			}
		}
		busy := func(i int32) bool { return excluded[exclusion[i]-1].Reason == ExResourceBusy }
		if len(waiting) > 0 && !x.movingFor(waiting, busy) {
			slices.SortFunc(pend, func(a, b string) int { return compareIDs(ItemID(firstWord(a)), ItemID(firstWord(b))) })
			d := fmt.Sprintf("the ready set is empty while %d items are pending (a cycle or a stall): %s", len(pend), strings.Join(pend, "; "))
			ds.add("ready-empty-pending", "", 0, d)
			alarms = append(alarms, "ready-empty-pending: "+d)
		}
	}
	if alarms == nil {
		alarms = []string{}
	}
	return Result{Ready: ready, Excluded: excluded, Defects: ds.sorted(), Alarms: alarms}
}

// movingFor says whether an in-flight item (held or lapsed) is a transitive
// blocker of any of the items: reached through unsatisfied blockedBy
// edges, an integration item's unfinished or in-flight members, a member's
// in-flight integration item, or, for an item excluded as resource-busy,
// an in-flight holder of its resource: the one thing whose end can make a
// starved backlog ready without a human.
func (x *index) movingFor(start []int32, busy func(int32) bool) bool {
	seen := make([]bool, len(x.es))
	stack := slices.Clone(start)
	for _, i := range start {
		seen[i] = true
	}
	push := func(j int32) bool {
		if x.es[j].claim.InFlight() {
			return true
		}
		if !seen[j] {
			seen[j] = true
			stack = append(stack, j)
		}
		return false
	}
	for len(stack) > 0 {
		i := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, d := range x.depsOf(i) {
			if d.ti >= 0 && d.v != EdgeSatisfied && push(d.ti) {
				return true
			}
		}
		w, _, _ := x.groupWait(i)
		h, _ := x.integrationHolders(i)
		for _, j := range slices.Concat(w, h) {
			if push(j) {
				return true
			}
		}
		if !busy(i) {
			continue
		}
		for _, r := range x.es[i].resources() {
			for _, j := range x.resUsers[r] {
				if j != i && push(j) {
					return true
				}
			}
		}
	}
	return false
}

// claimKey is a ready item's place in claim order (step 6): priority, then
// age, then id; read into one place so that the sort touches no entry.
type claimKey struct {
	prio    int8
	created time.Time
	i       int32
}

// itemDefects reports step 1's findings on item i: its tags, parking route
// and edges, and on a pending item admission, poison and region; it says
// whether the item is unrouted.
func (x *index) itemDefects(i int32, ds *defects) (unrouted bool) {
	e := &x.es[i]
	for _, p := range x.tagProblems(i) {
		ds.add(p.Code, e.id, 0, p.Detail)
	}
	for _, f := range e.c.Findings {
		ds.add(f.Code, e.id, 0, f.Detail)
	}
	for _, dp := range x.depsOf(i) {
		if code, d, ok := x.edgeDefect(e.id, dp); ok {
			ds.add(code, e.id, x.target(dp).Number(), d)
		}
	}
	if e.hasPartOf {
		var seenE []string
		for _, l := range e.c.Item.Links {
			if l.Rel != PartOf || ItemID(l.Target) == e.id || slices.Contains(seenE, l.Target) {
				continue
			}
			seenE = append(seenE, l.Target)
			if ei, ok := x.ids.get(ItemID(l.Target)); ok {
				if d, bad := EpicBaseMismatch(e.c.Item, x.es[ei].c.Item, x.s.DefaultBranch); bad {
					ds.add(CodeEpicBaseMismatch, e.id, ItemID(l.Target).Number(), d)
				}
			}
		}
	}
	if !e.pending() {
		return false
	}
	if _, unrec := admission(e.c); unrec {
		ds.add("admission-unrecorded", e.id, 0, "the admission label is absent but no human admission act is recorded: warden reads the issue's label events to repair it; until then the item is not admitted")
	}
	if p, th := x.poisoned(i); p {
		ds.add("poisoned", e.id, 0, fmt.Sprintf("%d attempts (this epoch) reached the poison threshold of %d with no claim held or lapsed: park it with a ruling route", e.c.Attempts, th))
	}
	d, ok := x.unrouted(i)
	if ok {
		ds.add(CodeUnroutedRegion, e.id, 0, d)
	}
	return ok
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
		if _, ok := x.ids.get(g); !ok {
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
//   - every item in flight (held or lapsed), for resource collisions and
//     integration quiescence (an in-flight item integrating an epic the
//     candidate is partOf excludes it: integration-in-flight).
//
// Given those, the answer is the one ComputeReady gives for the item over the
// whole repository. The exclusion is returned when not claimable. A lapsed
// claim may be re-claimed by its own owner during the quarantine (ok); by
// anyone else: ExLapsed. A held claim is not an exclusion here (the store
// answers "contended"): Claimable ignores the candidate's own held claim.
// While the candidate's own claim is held or lapsed the poison rule does not
// apply (a holder continuing its attempt is not a new one).
func Claimable(s Snapshot, id ItemID, owner string) (bool, Exclusion) {
	x := indexSnapshot(&s, forReady)
	defer x.release()
	i, ok := x.ids.get(id)
	if !ok {
		return false, Exclusion{Item: id, Reason: ExMissing, Detail: "no such item"}
	}
	if r, d := x.exclusionOf(i, x.depsOf(i), &owner); r != "" {
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
