package gating

import (
	"fmt"
	"path"
	"sort"
	"strings"
)

// Refusal is a write the ledger refuses, whole: Reason is a defect code or a
// verdict ("HumanActRequired"), Detail says what was wrong in words, and
// Rejected lists each offending value (each rejected blocker, say).
type Refusal struct {
	Reason   string   `json:"reason"`
	Detail   string   `json:"detail"`
	Rejected []string `json:"rejected,omitempty"`
}

func (r *Refusal) Error() string { return r.Reason + ": " + r.Detail }

func refuse(reason, format string, a ...any) *Refusal {
	return &Refusal{Reason: reason, Detail: fmt.Sprintf(format, a...)}
}

// WriteKind says what a write does.
type WriteKind int

// The kinds of write.
const (
	Create WriteKind = iota
	Update
	Delete
)

// Write is a proposed write to one item, with what the rules need to judge
// it. Lookup reads other items from the same snapshot (the same transaction)
// as Before.
type Write struct {
	Kind          WriteKind
	Before        *Item // nil on create
	After         *Item // nil on delete
	Role          Role
	DefaultBranch string
	Lookup        func(ItemID) (*Item, bool)
	// Dependents are the items with a blockedBy, partOf or integrates link to this one
	// (checked on delete).
	Dependents []ItemID
	// CompletionProven says the caller verified the completion proof for a
	// write that adds state:complete; without it such a write is refused.
	CompletionProven bool
	// CompletionDetail explains a failed proof (e.g. "PR #7 is still open").
	CompletionDetail string
	CompletionReason string // completion-unproven or complete-with-open-pr
}

// CheckWrite applies every write-time rule of CONTRACT.md §9 ("Writes the
// ledger refuses") and returns the first refusal, or nil. It never modifies
// the write.
func CheckWrite(w Write) *Refusal {
	if w.Kind == Delete {
		if len(w.Dependents) > 0 {
			ds := make([]string, len(w.Dependents))
			for i, d := range w.Dependents {
				ds[i] = string(d)
			}
			sort.Strings(ds)
			r := refuse("has-dependents", "%s cannot be forgotten while %s depend on it (blockedBy or partOf)", w.Before.ID, strings.Join(ds, ", "))
			r.Rejected = ds
			return r
		}
		return nil
	}
	a := w.After
	for _, t := range a.Tags {
		if err := ValidTagSyntax(t); err != nil {
			return refuse("invalid-tag", "%v", err)
		}
	}
	if probs := CheckTags(a.Tags, true); len(probs) > 0 {
		return &Refusal{Reason: probs[0].Code, Detail: probs[0].Detail}
	}
	if r := checkLinkSyntax(a); r != nil {
		return r
	}
	var before []string
	var beforeLinks []Link
	if w.Before != nil {
		before, beforeLinks = w.Before.Tags, w.Before.Links
	}
	added, removed := Diff(before, a.Tags)
	// Acts reserved to humans.
	if w.Role != RoleHuman {
		for _, t := range removed {
			p, _, _ := SplitTag(t)
			if t == "state:parked" || t == "state:complete" || p == "ruling-owner" || p == "ruling-topic" {
				return refuse("HumanActRequired", "removing %s is a human act (a human's label removal, command or token)", t)
			}
		}
	}
	pmLike := w.Role == RolePM || w.Role == RoleWarden
	if w.Kind == Update && !pmLike {
		if b, _ := w.Before.Tag("phase"); b != "" {
			if v, _ := a.Tag("phase"); v != b {
				return refuse("HumanActRequired", "changing phase:%s to phase:%s after creation needs a pm token", b, v)
			}
		}
	}
	if !pmLike && w.Role != RoleHuman {
		_, gone := Diff(beforeLinks, a.Links)
		for _, l := range gone {
			if l.Rel == BlockedBy || l.Rel == PartOf {
				return refuse("HumanActRequired", "removing the %s edge to %s needs a pm or human token (it would be reported edge-removed)", l.Rel, l.Target)
			}
		}
	}
	// Parking: the route travels in the same write as state:parked.
	if a.HasTag("state:parked") {
		if p := ParkRoute(a.Tags); p != nil {
			return &Refusal{Reason: p.Code, Detail: p.Detail}
		}
	}
	// Completion needs proof.
	if contains(added, "state:complete") && !w.CompletionProven {
		reason := w.CompletionReason
		if reason == "" {
			reason = "completion-unproven"
		}
		detail := w.CompletionDetail
		if detail == "" {
			detail = "state:complete needs a pr:<n> tag naming a pull request merged into the item's baseBranch that links it"
		}
		return refuse(reason, "%s", detail)
	}
	// Edges added in this write.
	newLinks, _ := Diff(beforeLinks, a.Links)
	if r := checkNewLinks(w, newLinks); r != nil {
		return r
	}
	// Research is a leaf: a research grouping never informs another.
	if r := checkResearchNested(w, a, newLinks); r != nil {
		return r
	}
	// An epic's member never targets the default branch.
	if len(a.Targets(PartOf)) > 0 {
		if bb, _ := a.Tag("baseBranch"); bb == w.DefaultBranch && w.DefaultBranch != "" {
			return refuse("epic-child-on-main", "%s is partOf %s but its baseBranch:%s is the default branch; a member targets its epic's branch", a.ID, strings.Join(a.Targets(PartOf), ", "), bb)
		}
		// A member's base is its epic's (branch inheritance).
		if w.Lookup != nil {
			for _, ep := range a.Targets(PartOf) {
				if epic, ok := w.Lookup(ItemID(ep)); ok && epic != nil {
					if d, bad := EpicBaseMismatch(a, epic, w.DefaultBranch); bad {
						r := refuse(CodeEpicBaseMismatch, "%s", d)
						r.Rejected = []string{ep}
						return r
					}
				}
			}
		}
	}
	return nil
}

// CodeResearchNested is the refusal of an informs edge from a research
// grouping to another research grouping (CONTRACT.md §11): a research
// grouping is a leaf phase; whatever it emits is an implementation grouping.
const CodeResearchNested = "research-nested"

// researchSide says whether it belongs to a research grouping: it carries
// phase:research, or it is partOf or integrates an item that does (the
// epic of a research grouping, or its design-integration item's).
func researchSide(it *Item, lookup func(ItemID) (*Item, bool)) (bool, string) {
	if v, _ := it.Tag("phase"); v == "research" {
		return true, fmt.Sprintf("%s is phase:research", it.ID)
	}
	if lookup == nil {
		return false, ""
	}
	for _, l := range it.Links {
		if (l.Rel != PartOf && l.Rel != Integrates) || ItemID(l.Target) == it.ID {
			continue
		}
		if g, ok := lookup(ItemID(l.Target)); ok && g != nil {
			if v, _ := g.Tag("phase"); v == "research" {
				return true, fmt.Sprintf("%s %s phase:research %s", it.ID, l.Rel, g.ID)
			}
		}
	}
	return false, ""
}

// checkResearchNested refuses a write that adds an informs edge from a
// research grouping (or its design-integration item) to a research grouping.
func checkResearchNested(w Write, a *Item, added []Link) *Refusal {
	var src *bool
	srcWhy := ""
	var rejected []string
	for _, l := range added {
		if l.Rel != Informs || w.Lookup == nil {
			continue
		}
		if src == nil {
			r, why := researchSide(a, w.Lookup)
			src, srcWhy = &r, why
		}
		if !*src {
			return nil
		}
		t, ok := w.Lookup(ItemID(l.Target))
		if !ok || t == nil {
			continue
		}
		if r, why := researchSide(t, w.Lookup); r {
			rejected = append(rejected, fmt.Sprintf("%s (%s)", l.Target, why))
		}
	}
	if len(rejected) == 0 {
		return nil
	}
	r := refuse(CodeResearchNested, "%s informs a research grouping, but %s: a research grouping is a leaf and never gets a research grouping of its own; what it emits is an implementation grouping (rejected %s)",
		a.ID, srcWhy, strings.Join(rejected, ", "))
	r.Rejected = rejected
	return r
}

// CodeEpicBaseMismatch is the refusal and defect of an item partOf an epic
// whose baseBranch: differs from the epic's (CONTRACT.md §11): every
// sub-item inherits its epic's branch as its own baseBranch:.
const CodeEpicBaseMismatch = "epic-base-mismatch"

// EpicBaseMismatch says whether member, partOf epic, carries a baseBranch:
// other than the epic's, and words the finding. A member on the default
// branch is epic-child-on-main instead, and an item or epic without a
// baseBranch: value is a tag problem (missing-mandatory-tag), so neither is
// reported here.
func EpicBaseMismatch(member, epic *Item, defaultBranch string) (string, bool) {
	mb, _ := member.Tag("baseBranch")
	eb, _ := epic.Tag("baseBranch")
	if mb == "" || eb == "" || mb == eb || mb == defaultBranch && defaultBranch != "" {
		return "", false
	}
	return fmt.Sprintf("%s is partOf %s but its baseBranch:%s differs from the epic's baseBranch:%s: a member inherits its epic's branch (retag it baseBranch:%s)",
		member.ID, epic.ID, mb, eb, eb), true
}

// Diff returns the elements of after that are not in before, and those of
// before that are not in after, each in its slice's order.
func Diff[T comparable](before, after []T) (added, removed []T) {
	b, a := make(map[T]bool, len(before)), make(map[T]bool, len(after))
	for _, x := range before {
		b[x] = true
	}
	for _, x := range after {
		a[x] = true
		if !b[x] {
			added = append(added, x)
		}
	}
	for _, x := range before {
		if !a[x] {
			removed = append(removed, x)
		}
	}
	return added, removed
}

func checkLinkSyntax(a *Item) *Refusal {
	for _, l := range a.Links {
		if !ValidRel(l.Rel) {
			return refuse("invalid-link", "%q is not a relation (blockedBy, anchoredTo, partOf, integrates, informs, related, claims)", l.Rel)
		}
		if l.Rel == AnchoredTo {
			if !ValidAnchor(l.Target) {
				return refuse("invalid-link", "anchoredTo %q is not a repository-relative path", l.Target)
			}
			continue
		}
		if l.Rel == Claims {
			if l.Target == "" || len(l.Target) > 300 || ValidTagSyntax(l.Target) != nil {
				return refuse("invalid-link", "claims link target must be 1 to 300 printable characters without spaces")
			}
			continue
		}
		if _, err := ParseID(l.Target); err != nil {
			return refuse("invalid-link", "%s target: %v", l.Rel, err)
		}
		if ItemID(l.Target) == a.ID {
			return refuse("invalid-link", "%s links to itself through %s", a.ID, l.Rel)
		}
	}
	return nil
}

// ValidAnchor reports whether p is a clean repository-relative path.
func ValidAnchor(p string) bool {
	if p == "" || len(p) > 1024 || strings.HasPrefix(p, "/") || strings.Contains(p, "\\") || strings.ContainsRune(p, 0) {
		return false
	}
	clean := path.Clean(p)
	if clean == ".." || strings.HasPrefix(clean, "../") {
		return false
	}
	return clean == strings.TrimSuffix(p, "/") || clean+"/" == p
}

// checkNewLinks is the preflight on every write that adds a blockedBy,
// partOf or integrates edge: the whole write is refused, naming the
// dependent and each rejected target.
func checkNewLinks(w Write, added []Link) *Refusal {
	a := w.After
	var rejected []string
	reason := ""
	note := func(code, target, why string) {
		if reason == "" {
			reason = code
		}
		rejected = append(rejected, fmt.Sprintf("%s (%s)", target, why))
	}
	for _, l := range added {
		if l.Rel != BlockedBy && l.Rel != PartOf && l.Rel != Integrates {
			continue
		}
		t, ok := w.Lookup(ItemID(l.Target))
		if !ok {
			code := "dangling-link"
			if l.Rel == BlockedBy {
				code = "dangling-blocker"
			}
			note(code, l.Target, "no such item")
			continue
		}
		if l.Rel != BlockedBy {
			continue
		}
		st, hasState := t.Tag("state")
		switch {
		case hasState && !contains(States, st):
			note("invalid-blocker", l.Target, "state:"+st+" is not a recognised state")
		case st == "parked":
			note("stalled-by-parked", l.Target, "parked")
		case len(CheckTags(t.Tags, false)) > 0:
			note("invalid-blocker", l.Target, CheckTags(t.Tags, false)[0].Code)
		}
	}
	if len(rejected) > 0 {
		r := refuse(reason, "%s: rejected %s", a.ID, strings.Join(rejected, ", "))
		r.Rejected = rejected
		return r
	}
	// A new blockedBy edge must not close a cycle.
	for _, l := range added {
		if l.Rel != BlockedBy {
			continue
		}
		if cyc := pathTo(w.Lookup, ItemID(l.Target), a.ID, a); cyc != nil {
			names := make([]string, len(cyc))
			for i, c := range cyc {
				names[i] = string(c)
			}
			r := refuse("cycle", "%s blockedBy %s closes a cycle: %s", a.ID, l.Target, strings.Join(append([]string{string(a.ID)}, names...), " → "))
			r.Rejected = names
			return r
		}
	}
	return nil
}

// pathTo returns a blockedBy path from 'from' to 'to' (inclusive), using
// self for the item being written, or nil.
func pathTo(lookup func(ItemID) (*Item, bool), from, to ItemID, self *Item) []ItemID {
	seen := map[ItemID]bool{}
	var walk func(id ItemID) []ItemID
	walk = func(id ItemID) []ItemID {
		if id == to {
			return []ItemID{id}
		}
		if seen[id] {
			return nil
		}
		seen[id] = true
		var it *Item
		if id == self.ID {
			it = self
		} else if x, ok := lookup(id); ok {
			it = x
		} else {
			return nil
		}
		for _, t := range it.Targets(BlockedBy) {
			if p := walk(ItemID(t)); p != nil {
				return append([]ItemID{id}, p...)
			}
		}
		return nil
	}
	return walk(from)
}
