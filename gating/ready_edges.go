package gating

import (
	"fmt"
	"slices"
	"strings"
)

// dep is one distinct blockedBy edge of an item, classified. It holds no
// pointer (its target is an item, or a missing id kept in x.missing), so the
// index's edges cost the collector nothing: a repository has more of them
// than items.
type dep struct {
	ti int32 // the target's entry; when the target is missing, -1-k for x.missing[k]
	v  EdgeVerdict
}

// target is the id an edge names: its item's id, or the missing id.
func (x *index) target(d dep) ItemID {
	if d.ti >= 0 {
		return x.es[d.ti].id
	}
	return x.missing[-1-d.ti]
}

// why words the edge's target's condition.
func (x *index) why(d dep) string {
	if d.ti < 0 {
		return "no such item"
	}
	switch x.st[d.ti] {
	case stComplete:
		return "complete"
	case stLive:
		return "live"
	}
	return x.es[d.ti].describe()
}

// compareTargets orders edges as compareIDs orders their targets' ids. A
// found target's id is its item's: compare the items' places in id order.
func (x *index) compareTargets(a, c dep) int {
	if a.ti >= 0 && c.ti >= 0 {
		return x.compare(a.ti, c.ti)
	}
	return compareIDs(x.target(a), x.target(c))
}

// edge is one classified blockedBy edge in words (what checkrun shows of an
// item's blockers).
type edge struct {
	target ItemID
	ti     int32 // the target's entry, or -1 when missing
	v      EdgeVerdict
	why    string
}

// edgesOf is item i's distinct blockedBy edges, classified and worded, in
// link order.
func (x *index) edgesOf(i int32) []edge {
	ds := x.depsOf(i)
	out := make([]edge, len(ds))
	for k, d := range ds {
		out[k] = edge{target: x.target(d), ti: max(d.ti, -1), v: d.v, why: x.why(d)}
	}
	return out
}

// worst is the dependent's verdict: the worst of its edges.
func worst(ds []dep) EdgeVerdict {
	w := EdgeSatisfied
	for k := range ds {
		w = max(w, ds[k].v)
	}
	return w
}

// edgeDetail names every unsatisfied edge, worst first, then in id order.
func (x *index) edgeDetail(ds []dep) string {
	var arr [8]dep
	open := arr[:0]
	for _, d := range ds {
		if d.v != EdgeSatisfied {
			open = append(open, d)
		}
	}
	slices.SortFunc(open, func(a, c dep) int {
		if a.v != c.v {
			return int(c.v) - int(a.v)
		}
		return x.compareTargets(a, c)
	})
	var b strings.Builder
	b.Grow(len("blockedBy ") + 24*len(open))
	b.WriteString("blockedBy ")
	for n, d := range open {
		if n > 0 {
			b.WriteString(", ")
		}
		b.WriteString(string(x.target(d)))
		b.WriteString(" (")
		b.WriteString(x.why(d))
		b.WriteString(")")
	}
	return b.String()
}

// edgeDefect is the defect an unsatisfied edge of item dependent reports, if
// any (a waiting edge is ordinary and reports none).
func (x *index) edgeDefect(dependent ItemID, d dep) (code, detail string, ok bool) {
	switch {
	case d.ti < 0:
		return "dangling-blocker", fmt.Sprintf("%s is blockedBy %s, which does not exist: a missing blocker is not a satisfied dependency", dependent, x.target(d)), true
	case d.v == EdgeInvalid:
		return "invalid-blocker", fmt.Sprintf("%s is blockedBy %s, whose %s", dependent, x.target(d), x.es[d.ti].stateWhy()), true
	case d.v == EdgeStalled:
		te := &x.es[d.ti]
		if ParkRoute(te.c.Item.Tags) != nil {
			return "stalled-by-parked", fmt.Sprintf("%s is stalled by parked %s, which has no ruling route (park-without-route): it is never ready without a human ruling", dependent, te.id), true
		}
		o, t := te.tagValue("ruling-owner"), te.tagValue("ruling-topic")
		return "stalled-by-parked", fmt.Sprintf("%s is stalled by parked %s: never ready until ruling owner %s rules on %s (ruling-owner:%s ruling-topic:%s)",
			dependent, te.id, o, t, o, t), true
	}
	return "", "", false
}

// groupWait lists the members item i, as an integration item, waits on: every
// other member of each grouping it integrates (the items partOf it, and any
// other item integrating it) must be complete and none may be in flight.
// flying says that at least one of them is in flight (integration-in-flight:
// the integration item's claim is exclusive over its grouping, so it waits
// for every member's claim to end, whenever that member joined).
func (x *index) groupWait(i int32) (waits []int32, detail string, flying bool) {
	e := &x.es[i]
	if !e.hasIntegrates {
		return nil, "", false
	}
	x.readGroupings()
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
				flying = true
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
		return nil, "", false
	}
	return waits, strings.Join(parts, "; ") + ": the integration item is claimable only when every other member is complete and none is in flight", flying
}

// integrationHolders lists the in-flight items (held or lapsed) that
// integrate a grouping item i is partOf, other than i itself, in number
// order, and words the integration-in-flight exclusion ("" when none): while
// a grouping's integration item is in flight its members are quiesced, and
// none may be claimed, a member added after that claim included.
func (x *index) integrationHolders(i int32) (holders []int32, detail string) {
	e := &x.es[i]
	if !e.hasPartOf {
		return nil, ""
	}
	x.readGroupings()
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
		slices.SortFunc(flying, x.compare)
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
	slices.SortFunc(holders, x.compare)
	return holders, strings.Join(parts, "; ") + ": the grouping is quiesced while its integration item is in flight; no member is claimed until that claim ends"
}
