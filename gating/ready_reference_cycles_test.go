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

// cycle is one strongly connected knot of blockedBy edges: path is a cycle
// through its lowest-numbered item, in edge order (dependent → blocker).
type refCycle struct {
	path   []int32
	detail string
}

// findCycles finds every strongly connected component of the blockedBy graph
// that holds a cycle (more than one item, or an item blockedBy itself), with
// an iterative Tarjan, so depth is bounded by the heap, not the stack. Each
// is named by a shortest cycle through its lowest-numbered item, in order.
func refFindCycles(x *refIndex, edges [][]refEdge) []refCycle {
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
				if len(comp) > 1 || refSelfLoop(edges[v], v) {
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
	out := make([]refCycle, 0, len(comps))
	for ci, c := range comps {
		for _, v := range c {
			comp[v] = int32(ci)
			parent[v] = -1
		}
		start := slices.MinFunc(c, func(a, b int32) int { return refCompareIDs(x.es[a].id, x.es[b].id) })
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
		out = append(out, refCycle{path: path, detail: d})
	}
	slices.SortFunc(out, func(a, b refCycle) int { return refCompareIDs(x.es[a.path[0]].id, x.es[b.path[0]].id) })
	return out
}

func refSelfLoop(es []refEdge, v int32) bool {
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
type refAnchorIndex struct {
	exact map[string][]int32 // an in-flight anchor → its items
	under map[string][]int32 // a proper ancestor directory of an in-flight anchor → its items
	root  []int32            // in-flight items anchored to the whole repository
	any   []int32            // in-flight items with any anchor
}

func refNormAnchor(p string) string {
	p = strings.TrimSuffix(p, "/")
	if p == "." {
		return ""
	}
	return p
}

func refBuildAnchorIndex(x *refIndex) *refAnchorIndex {
	a := &refAnchorIndex{exact: map[string][]int32{}, under: map[string][]int32{}}
	for _, i := range x.flight {
		has := false
		for _, l := range x.es[i].c.Item.Links {
			if l.Rel != AnchoredTo {
				continue
			}
			has = true
			p := refNormAnchor(l.Target)
			if p == "" {
				a.root = append(a.root, i)
				continue
			}
			a.exact[p] = append(a.exact[p], i)
			for k := strings.IndexByte(p, '/'); k >= 0; k = refNextSlash(p, k) {
				a.under[p[:k]] = append(a.under[p[:k]], i)
			}
		}
		if has {
			a.any = append(a.any, i)
		}
	}
	return a
}

func refNextSlash(p string, k int) int {
	j := strings.IndexByte(p[k+1:], '/')
	if j < 0 {
		return -1
	}
	return k + 1 + j
}

// overlaps names the in-flight items (other than i) whose anchoredTo radius
// overlaps item i's, in number order.
func (x *refIndex) overlaps(i int32) []ItemID {
	if x.anchors == nil {
		x.anchors = refBuildAnchorIndex(x)
	}
	if len(x.anchors.any) == 0 {
		return nil
	}
	var hit []int32
	for _, l := range x.es[i].c.Item.Links {
		if l.Rel != AnchoredTo {
			continue
		}
		p := refNormAnchor(l.Target)
		if p == "" {
			hit = append(hit, x.anchors.any...)
			continue
		}
		hit = append(hit, x.anchors.root...)
		hit = append(hit, x.anchors.exact[p]...)
		hit = append(hit, x.anchors.under[p]...)
		for k := strings.IndexByte(p, '/'); k >= 0; k = refNextSlash(p, k) {
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
	slices.SortFunc(ids, refCompareIDs)
	ids = slices.Compact(ids)
	if len(ids) == 0 {
		return nil
	}
	return ids
}

// BuildReport is the "where are we" report (CONTRACT.md §9 GET /report) from
// a snapshot and its result (ComputeReady of the same snapshot).
func refBuildReport(s Snapshot, r Result) Report {
	x := refNewIndex(&s)
	rep := Report{
		InFlight:          []InFlightEntry{},
		Ready:             slices.Clone(r.Ready),
		Blocked:           []BlockedEntry{},
		Stalled:           []StalledEntry{},
		Parked:            []ParkedEntry{},
		AwaitingAdmission: []AdmissionEntry{},
		Lapsed:            []LapsedEntry{},
		Defects:           slices.Clone(r.Defects),
		CleanReclaims:     []CleanReclaim{},
		Lines:             []ReportLine{},
	}
	if rep.Ready == nil {
		rep.Ready = []ReadyEntry{}
	}
	if rep.Defects == nil {
		rep.Defects = []Defect{}
	}
	blocked := make(map[ItemID]bool)
	for _, e := range r.Excluded {
		if e.Reason == ExBlocked || e.Reason == ExInvalid || e.Reason == ExIntegrationInFlight {
			blocked[e.Item] = true
		}
	}
	order := make([]int32, len(x.es))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(a, b int32) int { return refCompareIDs(x.es[a].id, x.es[b].id) })

	stalledItems := 0
	var buf []refEdge
	for _, i := range order {
		e := &x.es[i]
		cv := &e.c.Claim
		if e.claim.InFlight() {
			rep.InFlight = append(rep.InFlight, InFlightEntry{
				Item: e.id, Owner: cv.Owner, Branch: cv.Branch, LeaseExpiresAtUtc: cv.LeaseExpiresAt.UTC(),
				State: e.claim, Maintenance: cv.Purpose == "maintenance", LastEvidence: cv.Evidence(),
			})
		}
		if e.claim == StateLapsed {
			rep.Lapsed = append(rep.Lapsed, LapsedEntry{
				Item: e.id, Owner: cv.Owner, Since: cv.LeaseExpiresAt.UTC(),
				QuarantineEndsAtUtc: QuarantineEnds(*cv, s.Quarantine).UTC(), LastEvidence: cv.Evidence(),
			})
		}
		switch e.st {
		case refStComplete:
			rep.Summary.Complete++
		case refStParked:
			rep.Parked = append(rep.Parked, ParkedEntry{
				Item: e.id, Attempts: e.c.Attempts, RulingOwner: e.owner,
				RulingTopic: e.topic, Unpark: UnparkHint,
			})
		}
		if !e.pending() {
			continue
		}
		if why, _ := refAdmission(e.c); why != "" {
			rep.AwaitingAdmission = append(rep.AwaitingAdmission, AdmissionEntry{Item: e.id, Detail: why})
		}
		buf = x.appendEdges(buf[:0], i)
		edges := buf
		stalled := false
		for _, ed := range edges {
			if ed.v != EdgeStalled {
				continue
			}
			te := &x.es[ed.ti]
			rep.Stalled = append(rep.Stalled, StalledEntry{
				Item: e.id, Blocker: ed.target,
				RulingOwner: te.owner, RulingTopic: te.topic,
			})
			stalled = true
		}
		if stalled {
			stalledItems++
		}
		if blocked[e.id] {
			var on []ItemID
			for _, ed := range edges {
				if ed.v != EdgeSatisfied {
					on = append(on, ed.target)
				}
			}
			if len(on) == 0 {
				w, _, _ := x.groupWait(i)
				for _, m := range w {
					on = append(on, x.es[m].id)
				}
				h, _ := x.integrationHolders(i)
				for _, m := range h {
					on = append(on, x.es[m].id)
				}
			}
			slices.SortFunc(on, refCompareIDs)
			on = slices.Compact(on)
			if on == nil {
				on = []ItemID{}
			}
			rep.Blocked = append(rep.Blocked, BlockedEntry{Item: e.id, WaitingOn: on})
		}
	}
	rep.Summary.Items = len(x.es)
	rep.Summary.Ready = len(rep.Ready)
	rep.Summary.InFlight = len(rep.InFlight)
	rep.Summary.Blocked = len(rep.Blocked)
	rep.Summary.Stalled = stalledItems
	rep.Summary.Parked = len(rep.Parked)
	rep.Summary.AwaitingAdmission = len(rep.AwaitingAdmission)
	return rep
}
