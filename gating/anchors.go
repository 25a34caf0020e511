package gating

import (
	"fmt"
	"slices"
	"strings"
)

// Code anchors (PROTOCOL.md "Why anchoredTo matters"; CONTRACT.md §3): an
// anchoredTo target is a repository-relative path, a file or a directory;
// a directory anchor covers every path below it, and "." the whole
// repository. These rules are the ones step 7 of the ready set applies
// (anchorIndex); the push handling applies them to the paths a push
// changed.

// DefectStaleAnchor is the ready set's finding for an item whose anchor
// moved (or no longer exists) on its baseBranch since the link was written.
const DefectStaleAnchor = "stale-anchor"

// AnchorCovers reports whether anchor covers path: the same path, or a
// path below the directory anchor. "a/b" covers "a/b" and "a/b/c", never
// "a/bc".
func AnchorCovers(anchor, path string) bool {
	a, p := normAnchor(anchor), normAnchor(path)
	if a == "" {
		return true
	}
	return p == a || strings.HasPrefix(p, a+"/")
}

// AnchorsOverlap reports whether two anchors' radii intersect: one covers
// the other.
func AnchorsOverlap(a, b string) bool {
	return AnchorCovers(a, b) || AnchorCovers(b, a)
}

// ChangeKind is how a push changed a path.
type ChangeKind string

// Change kinds, as GitHub names them in push payloads and compare files.
const (
	ChangeAdded    ChangeKind = "added"
	ChangeModified ChangeKind = "modified"
	ChangeRemoved  ChangeKind = "removed"
	ChangeRenamed  ChangeKind = "renamed" // Path is the new name, Previous the old
)

// PathChange is one path a push changed, in one commit (Commit is "" when
// the change comes from a compare).
type PathChange struct {
	Path     string
	Previous string // a rename's old path
	Kind     ChangeKind
	Commit   string
}

// touches reports whether the change concerns a path anchor covers (a
// rename concerns both its names).
func (c PathChange) touches(anchor string) bool {
	if AnchorCovers(anchor, c.Path) {
		return true
	}
	return c.Kind == ChangeRenamed && c.Previous != "" && AnchorCovers(anchor, c.Previous)
}

// AnchorTouches returns the changes that concern anchor, in order.
func AnchorTouches(anchor string, changes []PathChange) []PathChange {
	var out []PathChange
	for _, c := range changes {
		if c.touches(anchor) {
			out = append(out, c)
		}
	}
	return out
}

// RemovesUnder reports whether any change removed a path anchor covers (a
// rename away from it included): the anchor may no longer exist.
func RemovesUnder(anchor string, changes []PathChange) bool {
	for _, c := range changes {
		switch {
		case c.Kind == ChangeRemoved && AnchorCovers(anchor, c.Path):
			return true
		case c.Kind == ChangeRenamed && c.Previous != "" && AnchorCovers(anchor, c.Previous) && !AnchorCovers(anchor, c.Path):
			return true
		}
	}
	return false
}

// StaleReason says which change made an anchor stale: the first one, its
// commit, and how many more there were.
func StaleReason(anchor string, touches []PathChange) string {
	if len(touches) == 0 {
		return ""
	}
	c := touches[0]
	var what string
	switch c.Kind {
	case ChangeRenamed:
		what = fmt.Sprintf("renamed %s to %s", c.Previous, c.Path)
	case "":
		what = "changed " + c.Path
	default:
		what = string(c.Kind) + " " + c.Path
	}
	if c.Commit != "" {
		sha := c.Commit
		if len(sha) > 7 {
			sha = sha[:7]
		}
		what = "commit " + sha + " " + what
	}
	if n := len(touches) - 1; n > 0 {
		what += fmt.Sprintf(" (and %d more change", n)
		if n > 1 {
			what += "s"
		}
		what += ")"
	}
	return what
}

// StaleAnchorDefect is the stale-anchor finding for one anchor of an item.
func StaleAnchorDefect(id ItemID, anchor, base, reason string, dangling bool) Defect {
	d := fmt.Sprintf("anchoredTo %s moved on %s: %s; re-validate the specification and write the link again before spending a run on it", anchor, base, reason)
	if dangling {
		d = fmt.Sprintf("anchoredTo %s no longer exists on %s (%s): re-validate the specification and point the link at code that exists", anchor, base, reason)
	}
	return Defect{Code: DefectStaleAnchor, Item: id, Detail: d}
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
	if len(x.anchors.any) == 0 || !x.es[i].hasAnchor {
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
	slices.SortFunc(hit, x.compare) // one item, one id: sorting and compacting the items sorts the ids
	hit = slices.Compact(hit)
	var ids []ItemID
	for _, j := range hit {
		if j != i {
			ids = append(ids, x.es[j].id)
		}
	}
	return ids
}
