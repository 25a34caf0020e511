package gating

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"sync"
)

// index is a snapshot read once: items by id, their classified blockedBy
// edges, the reverse partOf and integrates relations, and what is in flight.
// ComputeReady builds one over the whole repository; Claimable builds one over
// a partial snapshot. Both then ask the same questions of it (exclusionOf), so
// they agree by construction on everything the partial snapshot holds.
//
// Reading it is one pass over the items (each id, tag and link read once)
// and one over the edges it found; nothing later walks an item's links
// again except for a relation the item is known to use. Items are found by
// number (idTable), never by hashing their ids.
type index struct {
	s          *Snapshot
	es         []entry
	st         []stateKind // es[i].st, packed: every blockedBy edge reads its target's
	ids        idTable
	byID       map[ItemID]int32       // newIndex only: items by id, for callers that look them up in a map
	edges      []dep                  // every item's distinct blockedBy edges, item after item
	edgeEnd    []int32                // item i's edges end at edges[edgeEnd[i]] (and start where i-1's end)
	missing    []ItemID               // targets not indexed when their link was read; some are missing
	partOfBy   map[ItemID][]int32     // items (other than the key itself) partOf the key
	integBy    map[ItemID][]int32     // items (other than the key itself) integrating the key
	flight     []int32                // items whose claim is held or lapsed, in number order
	resUsers   map[string][]int32     // resource name → in-flight items naming it
	anchors    *anchorIndex           // in-flight items' anchoredTo radius, built on first use
	problems   map[int32][]TagProblem // tagProblems of the items read could not prove clean
	inOrder    []int32                // every item in id order, built on first use
	unordered  bool                   // the snapshot's rows are not in id order
	rank       []int32                // when they are not: each item's place in id order
	groupsRead bool                   // partOfBy and integBy are filled (readGroupings)
	thresholds []int                  // poison thresholds of items partOf an epic, worked out once (0: not yet)
	bufs       *buffers
}

// buffers are an index's largest slices, kept from one computation to the
// next: the ready set of a repository is computed again and again, and these
// are most of what a computation allocates (and the collector must then
// reclaim). A released index's buffers hold nothing of its snapshot.
type buffers struct {
	es      []entry
	st      []stateKind
	edgeEnd []int32
	edges   []dep
	dense   []int32
	order   []int32
}

var scratch sync.Pool // of *buffers

// release hands the index's buffers to the next index. Nothing read from the
// index may point into them: ComputeReady, BuildReport and Claimable
// release theirs as they return, and their answers copy what they keep.
func (x *index) release() {
	b := x.bufs
	if b == nil {
		return
	}
	x.bufs = nil
	clear(x.es) // its pointers: the pool must not keep the snapshot alive
	clear(x.ids.dense)
	b.es, b.st, b.edgeEnd, b.edges = x.es[:0], x.st[:0], x.edgeEnd[:0], x.edges[:0]
	if x.inOrder != nil {
		b.order = x.inOrder[:0]
	}
	// The table's slice now, cleared (nil when the table became a map: the
	// slice it started with holds ids and is dropped).
	b.dense = x.ids.dense[:0]
	scratch.Put(b)
}

// indexUse is what an index is read for.
type indexUse uint8

const (
	// forReady reads everything: the ready set's rules, and the findings
	// of checkrun and divergence.
	forReady indexUse = iota
	// forReport reads what BuildReport reads: each item's state and claim,
	// and the blockedBy edges of pending items only (entry.readState).
	forReport
)

// newIndex reads the snapshot, with items by id in a map too (byID), for a
// caller that keeps the index (it is never released).
func newIndex(s *Snapshot) *index {
	x := readIndex(s, forReady, &buffers{})
	x.bufs = nil
	x.byID = make(map[ItemID]int32, len(x.es))
	for i := range x.es {
		x.byID[x.es[i].id] = int32(i)
	}
	return x
}

// indexSnapshot reads the snapshot for the use (the first row of an id wins;
// a store never yields two). Its caller may release the index when done
// with it.
func indexSnapshot(s *Snapshot, use indexUse) *index {
	b, _ := scratch.Get().(*buffers)
	if b == nil {
		b = &buffers{}
	}
	return readIndex(s, use, b)
}

// readIndex reads the snapshot into an index whose largest slices reuse b's.
func readIndex(s *Snapshot, use indexUse, b *buffers) *index {
	x := &index{
		s:          s,
		es:         slices.Grow(b.es, len(s.Items)),
		ids:        newIDTable(len(s.Items), b.dense),
		partOfBy:   map[ItemID][]int32{},
		integBy:    map[ItemID][]int32{},
		groupsRead: use == forReady,
		resUsers:   map[string][]int32{},
		bufs:       b,
	}
	x.st = slices.Grow(b.st, len(s.Items))
	x.edgeEnd = slices.Grow(b.edgeEnd, len(s.Items))
	x.edges = slices.Grow(b.edges, 2*len(s.Items))
	// One pass: an item's blockers are mostly older items, found as its
	// links are read; a target not indexed yet waits in x.missing.
	for k := range s.Items {
		c := &s.Items[k]
		if c.Item == nil {
			continue
		}
		i, num := int32(len(x.es)), idNumber(string(c.Item.ID))
		if !x.ids.add(c.Item.ID, num, i) {
			continue
		}
		x.es = append(x.es, entry{c: c, id: c.Item.ID, num: num})
		x.unordered = x.unordered || i > 0 && x.compareByID(i-1, i) > 0
		e := &x.es[i]
		if use == forReport {
			e.readState(s)
		} else {
			e.read(s)
		}
		x.st = append(x.st, e.st)
		x.readLinks(i, use == forReady || e.pending(), use == forReady)
		x.edgeEnd = append(x.edgeEnd, int32(len(x.edges)))
		if e.claim.InFlight() {
			x.flight = append(x.flight, i)
		}
	}
	// Every id is known now: resolve the targets that waited (an item later
	// in the snapshot), and classify each edge by the protocol's table:
	// missing or invalid → invalid, parked → stalled, live → waiting,
	// complete → satisfied.
	for k := range x.edges {
		d := &x.edges[k]
		if d.ti < 0 {
			if ti, ok := x.ids.get(x.missing[-1-d.ti]); ok {
				d.ti = ti
			}
		}
		if d.ti < 0 {
			d.v = EdgeInvalid
			continue
		}
		switch x.st[d.ti] {
		case stComplete:
			d.v = EdgeSatisfied
		case stLive:
			d.v = EdgeWaiting
		case stParked:
			d.v = EdgeStalled
		default:
			d.v = EdgeInvalid
		}
	}
	if x.unordered {
		x.order() // and the ranks compare needs
	}
	if use == forReport {
		return x
	}
	// In flight in number order, so every detail naming in-flight items is
	// independent of the snapshot's order.
	slices.SortFunc(x.flight, x.compare)
	for _, i := range x.flight {
		for _, r := range x.es[i].resources() {
			x.resUsers[r] = append(x.resUsers[r], i)
		}
	}
	return x
}

// readLinks notes which relations item i's links use, records its partOf
// and integrates links in the reverse relations, and appends its distinct
// blockedBy targets to x.edges (unclassified; a target not indexed yet is
// named in x.missing). The same id is found, or not, throughout one item's
// links, so an item's targets are told apart by entry, or by name when not
// found. Without edges it skips blockedBy links, and without groups it
// leaves the reverse relations to readGroupings.
func (x *index) readLinks(i int32, edges, groups bool) {
	e := &x.es[i]
	links := e.c.Item.Links
	start := len(x.edges)
	var seen map[ItemID]bool // for a wide fan-in; a short list is scanned
	for _, l := range links {
		switch l.Rel {
		case BlockedBy:
			e.hasBlockedBy = true
			if !edges {
				continue
			}
			t := ItemID(l.Target)
			if len(links) > 32 {
				if seen == nil {
					seen = make(map[ItemID]bool, len(links))
				}
				if seen[t] {
					continue
				}
				seen[t] = true
			}
			ti, ok := x.ids.get(t)
			if !ok {
				ti = -1 - int32(len(x.missing))
			}
			if seen == nil && x.hasTarget(x.edges[start:], ti, t) {
				continue
			}
			if !ok {
				x.missing = append(x.missing, t)
			}
			x.edges = append(x.edges, dep{ti: ti})
		case AnchoredTo:
			e.hasAnchor = true
		case PartOf:
			e.hasPartOf = true
			if t := ItemID(l.Target); groups && t != e.id {
				appendOnce(x.partOfBy, t, i)
			}
		case Integrates:
			e.hasIntegrates = true
			if t := ItemID(l.Target); groups && t != e.id {
				appendOnce(x.integBy, t, i)
			}
		}
	}
}

// readGroupings fills partOfBy and integBy if the index was read without
// them (the report needs them only for an integration item none of whose
// blockers holds it back), as readLinks would have, item by item.
func (x *index) readGroupings() {
	if x.groupsRead {
		return
	}
	x.groupsRead = true
	for i := range int32(len(x.es)) {
		e := &x.es[i]
		if !e.hasPartOf && !e.hasIntegrates {
			continue
		}
		for _, l := range e.c.Item.Links {
			if t := ItemID(l.Target); t != e.id {
				switch l.Rel {
				case PartOf:
					appendOnce(x.partOfBy, t, i)
				case Integrates:
					appendOnce(x.integBy, t, i)
				}
			}
		}
	}
}

// hasTarget says whether edges name t (an item's ti, or a missing id) already.
func (x *index) hasTarget(edges []dep, ti int32, t ItemID) bool {
	for _, d := range edges {
		if d.ti == ti || d.ti < 0 && ti < 0 && x.missing[-1-d.ti] == t {
			return true
		}
	}
	return false
}

// depsOf is item i's distinct blockedBy edges, classified, in link order.
// The slice is the index's: read it, do not append to it.
func (x *index) depsOf(i int32) []dep {
	start := int32(0)
	if i > 0 {
		start = x.edgeEnd[i-1]
	}
	return x.edges[start:x.edgeEnd[i]:x.edgeEnd[i]]
}

// compare orders items a and b as compareIDs orders their ids, once the
// snapshot is read: by their place, when the rows came in id order (a
// store's), else by their rank in that order. It touches no entry, so the
// sorts that use it stay in the cache.
func (x *index) compare(a, b int32) int {
	if x.rank != nil {
		a, b = x.rank[a], x.rank[b]
	}
	return cmp.Compare(a, b)
}

// compareByID orders items a and b as compareIDs orders their ids, from the
// numbers read once.
func (x *index) compareByID(a, b int32) int {
	ea, eb := &x.es[a], &x.es[b]
	switch na, nb := ea.num, eb.num; {
	case na == nb:
		return strings.Compare(string(ea.id), string(eb.id))
	case na == 0:
		return 1
	case nb == 0:
		return -1
	case na < nb:
		return -1
	}
	return 1
}

// order lists every item in id order (compareIDs). A store yields its rows
// in that order, and then the index's order is the answer.
func (x *index) order() []int32 {
	if x.inOrder != nil || len(x.es) == 0 {
		return x.inOrder
	}
	o := slices.Grow(x.bufs.order, len(x.es))[:len(x.es)]
	for i := range o {
		o[i] = int32(i)
	}
	if x.unordered {
		slices.SortFunc(o, x.compareByID)
		x.rank = make([]int32, len(o))
		for k, i := range o {
			x.rank[i] = int32(k)
		}
	}
	x.inOrder = o
	return o
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

// tagProblems returns every step-1 finding on the item's tags: CheckTags with
// the mandatory set, a park without a route, and an epic's member on the
// default branch. Most items have none, and read proves it: a clean tag
// set has at most one state: tag, so it carries state:parked exactly when
// the item is parked.
func (x *index) tagProblems(i int32) []TagProblem {
	e := &x.es[i]
	if e.clean && e.st != stParked && !(e.onDefault && e.hasPartOf) {
		return nil
	}
	if p, ok := x.problems[i]; ok {
		return p
	}
	var problems []TagProblem
	if !e.clean {
		problems = CheckTags(e.c.Item.Tags, true)
	}
	if e.nStates > 0 && slices.Contains(e.c.Item.Tags, "state:parked") {
		if p := ParkRoute(e.c.Item.Tags); p != nil {
			problems = append(problems, *p)
		}
	}
	if db := x.s.DefaultBranch; e.onDefault && e.hasPartOf {
		if epics := e.c.Item.Targets(PartOf); len(epics) > 0 {
			problems = append(problems, TagProblem{"epic-child-on-main", fmt.Sprintf(
				"%s is partOf %s but its baseBranch:%s is the default branch; a member targets its epic's branch",
				e.id, strings.Join(epics, ", "), db)})
		}
	}
	if x.problems == nil {
		x.problems = map[int32][]TagProblem{}
	}
	x.problems[i] = problems
	return problems
}

// idTable finds an item by id without hashing its text: a well-formed id by
// its issue number, in a table indexed by number while the numbers stay
// compact (one repository's issues, the usual case) or else a map; any
// other id by its text. An issue number has one well-formed spelling, so
// finding a well-formed id by its number is finding it by its text.
type idTable struct {
	dense []int32 // issue number → item + 1 (0: none), while nums is nil
	limit int     // the largest number dense may hold
	items int     // how many items the table is for
	nums  map[int]int32
	odd   map[ItemID]int32
}

// newIDTable makes an empty table for so many items, in buf if it is large
// enough (buf must be all zeros).
func newIDTable(items int, buf []int32) idTable {
	if cap(buf) < items+1 {
		buf = make([]int32, items+1)
	}
	return idTable{dense: buf[:items+1], limit: 8*items + 1024, items: items}
}

// add records item i under id (num is id.Number()), unless the id is taken.
func (t *idTable) add(id ItemID, num int, i int32) bool {
	if num == 0 {
		if _, dup := t.odd[id]; dup {
			return false
		}
		if t.odd == nil {
			t.odd = map[ItemID]int32{}
		}
		t.odd[id] = i
		return true
	}
	if t.nums == nil && num > t.limit { // sparse: move to a map
		t.nums = make(map[int]int32, t.items)
		for n, v := range t.dense {
			if v != 0 {
				t.nums[n] = v - 1
			}
		}
		t.dense = nil
	}
	if t.nums != nil {
		if _, dup := t.nums[num]; dup {
			return false
		}
		t.nums[num] = i
		return true
	}
	if num >= len(t.dense) {
		t.dense = append(t.dense, make([]int32, min(max(num+1, 2*len(t.dense)), t.limit+1)-len(t.dense))...)
	}
	if t.dense[num] != 0 {
		return false
	}
	t.dense[num] = i + 1
	return true
}

// get returns the item with exactly this id.
func (t *idTable) get(id ItemID) (int32, bool) {
	num := idNumber(string(id))
	switch {
	case num == 0:
		i, ok := t.odd[id]
		return i, ok
	case t.nums != nil:
		i, ok := t.nums[num]
		return i, ok
	case num >= len(t.dense) || t.dense[num] == 0:
		return -1, false
	}
	return t.dense[num] - 1, true
}
