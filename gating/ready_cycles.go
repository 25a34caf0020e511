package gating

import (
	"fmt"
	"slices"
	"strings"
)

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
//
// Tarjan runs only over what a cycle can reach: peelAcyclic first takes
// away, in one pass over the edges, every item no cycle reaches, which in a
// healthy repository is every item.
func findCycles(x *index) []cycle {
	n := len(x.es)
	left := peelAcyclic(x)
	if left == nil {
		return nil
	}
	order := make([]int32, n) // 0: unvisited; else visit order + 1
	low := make([]int32, n)
	onStack := make([]bool, n)
	var stack []int32
	type frame struct{ v, next int32 }
	var calls []frame
	var counter int32
	var comps [][]int32
	for root := range int32(n) {
		if order[root] != 0 || left[root] == 0 {
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
			if es := x.depsOf(v); int(f.next) < len(es) {
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
				if len(comp) > 1 || selfLoop(x.depsOf(v), v) {
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
			for _, ed := range x.depsOf(u) {
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

func selfLoop(es []dep, v int32) bool {
	for k := range es {
		if es[k].ti == v {
			return true
		}
	}
	return false
}

// peelAcyclic removes, again and again, the items nothing left is blockedBy
// (Kahn's algorithm, on the dependents' side), and returns how many
// dependents each item still has: non-zero exactly for the items on a cycle
// or reachable from one along blockedBy edges. Every cycle's component lies
// in that set, and the set is closed under blockedBy, so Tarjan from its
// items alone finds the same components. It returns nil when nothing is
// left: the graph is acyclic.
func peelAcyclic(x *index) []int32 {
	n := len(x.es)
	dependents := make([]int32, n)
	for _, d := range x.edges {
		if d.ti >= 0 {
			dependents[d.ti]++
		}
	}
	free := make([]int32, 0, n) // items with no dependent left, to remove
	for v := range int32(n) {
		if dependents[v] == 0 {
			free = append(free, v)
		}
	}
	for k := 0; k < len(free); k++ {
		for _, d := range x.depsOf(free[k]) {
			if d.ti >= 0 {
				if dependents[d.ti]--; dependents[d.ti] == 0 {
					free = append(free, d.ti)
				}
			}
		}
	}
	if len(free) == n {
		return nil
	}
	return dependents
}
