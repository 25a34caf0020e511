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
	"strings"
)

// exclusionOf runs the narrowing steps on item i and returns the first that
// drops it ("" when none does). claimant is nil for ComputeReady; Claimable
// passes the would-be owner, and then the item's own held claim is ignored (the
// store answers "contended") and its own lapsed claim is ignored for that
// owner.
func (x *refIndex) exclusionOf(i int32, edges []refEdge, claimant *string) (reason, detail string) {
	e := &x.es[i]
	// Step 2 (state), ahead of the tag checks: a terminal or unknown state is
	// the truest reason the item is not work.
	switch e.st {
	case refStInvalid:
		return ExUnknownState, e.stateWhy()
	case refStComplete:
		return ExComplete, "state:complete"
	case refStParked:
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
			return ExHeld, fmt.Sprintf("held by %s (fence %d) until %s", cv.Owner, cv.Fence, refFmtTime(cv.LeaseExpiresAt))
		}
	case StateLapsed:
		if claimant == nil || cv.Owner == "" || *claimant != cv.Owner {
			return ExLapsed, fmt.Sprintf("the lease of %s (fence %d) lapsed at %s; it is quarantined until %s and only %s may re-claim it before then",
				cv.Owner, cv.Fence, refFmtTime(cv.LeaseExpiresAt), refFmtTime(QuarantineEnds(*cv, x.s.Quarantine)), cv.Owner)
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
	if d := refMergedNotComplete(e.c); d != "" {
		return ExMergedNotComplete, d
	}
	// An item whose issue lost the item label left the backlog on GitHub:
	// it stays in the ledger (forgetting is explicit) and is not offered
	// until the label is back.
	if e.c.ItemLabelRemoved {
		return ExItemLabelRemoved, "the issue no longer carries the item label: it is out of the backlog until the label is added back (the item stays in the ledger; DELETE /items/{id} forgets it)"
	}
	// Step 4: dependencies, then the integration join.
	switch refWorst(edges) {
	case EdgeInvalid:
		return ExInvalid, refEdgeDetail(edges)
	case EdgeStalled:
		return ExStalled, refEdgeDetail(edges)
	case EdgeWaiting:
		return ExBlocked, refEdgeDetail(edges)
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
	if why, _ := refAdmission(e.c); why != "" {
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
func refCompareIDs(a, b ItemID) int {
	na, nb := refIDNumber(a), refIDNumber(b)
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
func refComputeReady(s Snapshot) Result {
	x := refNewIndex(&s)
	n := len(x.es)
	var ds refDefects
	edges := make([][]refEdge, n)
	nLinks := 0
	for i := range x.es {
		nLinks += len(x.es[i].c.Item.Links)
	}
	buf := make([]refEdge, 0, nLinks)
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
				ds.add(code, e.id, refIDNumber(edges[i][k].target), d)
			}
		}
		// Deliberate change: a member's base is its epic's (epic-base-mismatch).
		var seenE []string
		for _, l := range e.c.Item.Links {
			if l.Rel != PartOf || ItemID(l.Target) == e.id || slices.Contains(seenE, l.Target) {
				continue
			}
			seenE = append(seenE, l.Target)
			if ei, ok := x.byID[ItemID(l.Target)]; ok {
				if d, bad := EpicBaseMismatch(e.c.Item, x.es[ei].c.Item, x.s.DefaultBranch); bad {
					ds.add(CodeEpicBaseMismatch, e.id, refIDNumber(ItemID(l.Target)), d)
				}
			}
		}
		if !e.pending() {
			continue
		}
		if _, unrec := refAdmission(e.c); unrec {
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
	for _, cyc := range refFindCycles(x, edges) {
		ds.add("cycle", "", x.es[cyc.path[0]].num, cyc.detail)
		alarms = append(alarms, "cycle: "+cyc.detail)
	}
	slices.SortFunc(unrouted, func(a, b int32) int { return refCompareIDs(x.es[a].id, x.es[b].id) })
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
		return refCompareIDs(ea.id, eb.id)
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
	// Deliberate change: only an in-flight (transitive) blocker of a pending
	// item not itself in flight mutes the alarm.
	if len(ready) == 0 {
		var pend []string
		var waiting []int32
		for i := range int32(n) {
			if x.es[i].pending() {
				pend = append(pend, fmt.Sprintf("%s waits on %s (%s)", x.es[i].id, reasons[i].Reason, reasons[i].Detail))
				if !x.es[i].claim.InFlight() {
					waiting = append(waiting, i)
				}
			}
		}
		if len(waiting) > 0 && !x.movingFor(waiting, edges, reasons) {
			slices.SortFunc(pend, func(a, b string) int { return refCompareIDs(ItemID(refFirstWord(a)), ItemID(refFirstWord(b))) })
			d := fmt.Sprintf("the ready set is empty while %d items are pending (a cycle or a stall): %s", len(pend), strings.Join(pend, "; "))
			ds.add("ready-empty-pending", "", 0, d)
			alarms = append(alarms, "ready-empty-pending: "+d)
		}
	}

	slices.SortFunc(excluded, func(a, b Exclusion) int {
		if c := refCompareIDs(a.Item, b.Item); c != 0 {
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

// movingFor follows the deliberate change of the starvation alarm.
func (x *refIndex) movingFor(start []int32, edges [][]refEdge, reasons []Exclusion) bool {
	seen := map[int32]bool{}
	var stack []int32
	for _, i := range start {
		seen[i] = true
		stack = append(stack, i)
	}
	for len(stack) > 0 {
		i := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		var next []int32
		for _, ed := range edges[i] {
			if ed.ti >= 0 && ed.v != EdgeSatisfied {
				next = append(next, ed.ti)
			}
		}
		w, _, _ := x.groupWait(i)
		h, _ := x.integrationHolders(i)
		next = append(append(next, w...), h...)
		for _, r := range x.es[i].resources {
			for _, j := range x.resUsers[r] {
				if j != i && reasons[i].Reason == ExResourceBusy {
					next = append(next, j)
				}
			}
		}
		for _, j := range next {
			if x.es[j].claim.InFlight() {
				return true
			}
			if !seen[j] {
				seen[j] = true
				stack = append(stack, j)
			}
		}
	}
	return false
}

func refFirstWord(s string) string {
	if k := strings.IndexByte(s, ' '); k >= 0 {
		return s[:k]
	}
	return s
}

// groupingDefects reports, on each grouping in the snapshot, a missing or
// duplicated integration item, and a fan-out complete while its integration
// item is not.
func (x *refIndex) groupingDefects(ds *refDefects) {
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
			if x.es[m].st != refStComplete {
				done = false
				break
			}
		}
		if fanout == 0 || !done {
			continue
		}
		var open []int32
		for _, m := range ints {
			if x.es[m].st != refStComplete {
				open = append(open, m)
			}
		}
		if len(open) > 0 {
			ds.add("integration-incomplete", g, 0, fmt.Sprintf("every member of %s is complete but its integration item %s is not: the grouping is not complete; the integration item is the next work", g, x.names(open)))
		}
	}
}

// names lists the items' ids in number order.
func (x *refIndex) names(is []int32) string {
	ids := make([]ItemID, len(is))
	for k, i := range is {
		ids[k] = x.es[i].id
	}
	slices.SortFunc(ids, refCompareIDs)
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
func refClaimable(s Snapshot, id ItemID, owner string) (bool, Exclusion) {
	x := refNewIndex(&s)
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
type refDefects struct{ list []refKeyedDefect }

type refKeyedDefect struct {
	d   Defect
	num int // the item's number (0 for repository-wide findings)
	sub int // a secondary number (the blocker, the cycle's first item)
}

func (ds *refDefects) add(code string, item ItemID, sub int, detail string) {
	ds.list = append(ds.list, refKeyedDefect{Defect{Code: code, Item: item, Detail: detail}, refIDNumber(item), sub})
}

func (ds *refDefects) sorted() []Defect {
	slices.SortFunc(ds.list, func(a, b refKeyedDefect) int {
		if a.d.Item != b.d.Item {
			switch {
			case a.d.Item == "": // repository-wide findings first
				return -1
			case b.d.Item == "":
				return 1
			case a.num != b.num && a.num != 0 && b.num != 0:
				return a.num - b.num
			}
			return refCompareIDs(a.d.Item, b.d.Item)
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
