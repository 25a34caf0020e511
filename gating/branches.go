package gating

import (
	"fmt"
	"slices"
	"strings"
)

// Branch rules of the protocol's "Branch inheritance" (CONTRACT.md §11).

// CodeNestedEpicBranch is the refusal (claim) and check failure (pull
// request) of a working branch nested under, or over, the name of a branch
// it must live beside: git stores a branch as a file at refs/heads/<name>,
// so refs/heads/X and refs/heads/X/anything cannot both exist.
const CodeNestedEpicBranch = "nested-epic-branch"

// CodeBranchNameNit is the finding, never a failure, of a sub-item branch
// named off the protocol's convention (<epic-branch>-<item-slug>) whose pull
// request still keeps both branch invariants: cut from the epic branch and
// targeting it.
const CodeBranchNameNit = "branch-name-nit"

// GitRefRule is the sentence that explains a nested-epic-branch refusal.
const GitRefRule = "git stores a branch as a file at refs/heads/<name>, so refs/heads/X and refs/heads/X/anything cannot coexist " +
	"(the push is refused: \"cannot lock ref ... exists\"); name a sub-item's branch beside its epic's, <epic-branch>-<item-slug>, not under it"

// NamedBranch is a branch a working branch must not nest under or over,
// with what it is (e.g. "issue-12's baseBranch:").
type NamedBranch struct {
	What string
	Name string
}

// BranchesNest reports whether a and b cannot be branches of one git
// repository together: one is the other followed by a slash and more.
// Equal names, or either empty, do not nest.
func BranchesNest(a, b string) bool {
	if a == "" || b == "" || a == b {
		return false
	}
	return strings.HasPrefix(a, b+"/") || strings.HasPrefix(b, a+"/")
}

// ItemBranches are the branches an item's working branch must live beside:
// the item's baseBranch: and the baseBranch: of each epic it is partOf that
// lookup finds (the epic branch). Duplicates are dropped; an empty or
// ambiguous (several values) baseBranch: is skipped, as a tag problem.
func ItemBranches(it *Item, lookup func(ItemID) (*Item, bool)) []NamedBranch {
	if it == nil {
		return nil
	}
	var out []NamedBranch
	add := func(what, name string) {
		if name == "" || slices.ContainsFunc(out, func(b NamedBranch) bool { return b.Name == name }) {
			return
		}
		out = append(out, NamedBranch{What: what, Name: name})
	}
	if b, ok := soleTag(it, "baseBranch"); ok {
		add(fmt.Sprintf("%s's baseBranch:", it.ID), b)
	}
	if lookup == nil {
		return out
	}
	for _, ep := range it.Targets(PartOf) {
		if e, ok := lookup(ItemID(ep)); ok && e != nil {
			if b, ok := soleTag(e, "baseBranch"); ok {
				add(fmt.Sprintf("epic %s's branch (its baseBranch:)", e.ID), b)
			}
		}
	}
	return out
}

// NestedBranch says whether branch nests under or over one of against, and
// words the finding (without the code): which branch, which way, and git's
// rule. The first nesting in against's order is named.
func NestedBranch(branch string, against []NamedBranch) (string, bool) {
	for _, b := range against {
		if !BranchesNest(branch, b.Name) {
			continue
		}
		way := "is nested under"
		if strings.HasPrefix(b.Name, branch+"/") {
			way = "has nested under it"
		}
		return fmt.Sprintf("branch %s %s %s %s: %s", branch, way, b.What, b.Name, GitRefRule), true
	}
	return "", false
}

// CheckClaimBranch refuses (nested-epic-branch) a claim's branch that nests
// under or over the item's baseBranch: or its epic's branch; nil when the
// branch is empty or lives beside them.
func CheckClaimBranch(branch string, it *Item, lookup func(ItemID) (*Item, bool)) *Refusal {
	if branch == "" || it == nil {
		return nil
	}
	against := ItemBranches(it, lookup)
	d, bad := NestedBranch(branch, against)
	if !bad {
		return nil
	}
	r := refuse(CodeNestedEpicBranch, "the claim's %s", d)
	r.Rejected = []string{branch}
	return r
}

// ConventionalSubItemBranch reports whether head follows the protocol's
// naming of a sub-item branch of epicBranch: <epic-branch>-<item-slug>, or,
// for an epic parked on <prefix>/integration (the layout that leaves the
// namespace free), <prefix>/<item-slug>. The slug is at least one character
// and holds no further slash.
func ConventionalSubItemBranch(head, epicBranch string) bool {
	if head == "" || epicBranch == "" {
		return false
	}
	if slug, ok := strings.CutPrefix(head, epicBranch+"-"); ok && slug != "" && !strings.Contains(slug, "/") {
		return true
	}
	if prefix, ok := strings.CutSuffix(epicBranch, "/integration"); ok && prefix != "" {
		slug, ok := strings.CutPrefix(head, prefix+"/")
		return ok && slug != "" && slug != "integration" && !strings.Contains(slug, "/")
	}
	return false
}

// branchFindings are the branch-name findings of a delivered item's pull
// request: nested-epic-branch (a failure) when the head, in this repository,
// nests under or over the pull request's base, the item's baseBranch: or
// its epic's branch; else branch-name-nit (never a failure) when the item
// is an epic's member, the pull request keeps both invariants (it targets
// the epic branch and its head was not shown cut from the default branch)
// and the head is off the convention. A fork's head lives in another
// repository, so it nests nothing here.
func (x *index) branchFindings(i int32, p CheckPR, repo string) []checkFinding {
	e := &x.es[i]
	it := e.c.Item
	pr := p.PR
	lookup := func(id ItemID) (*Item, bool) {
		if k, ok := x.byID[id]; ok {
			return x.es[k].c.Item, true
		}
		return nil, false
	}
	if !pr.FromFork(repo) {
		against := append([]NamedBranch{{What: "the pull request's base", Name: pr.BaseRef}}, ItemBranches(it, lookup)...)
		if d, bad := NestedBranch(pr.HeadRef, against); bad {
			return []checkFinding{{CodeNestedEpicBranch, ConclusionFailure, "the head " + d}}
		}
	}
	base, ok := soleTag(it, "baseBranch")
	if !ok || base == "" || base == x.s.DefaultBranch || pr.BaseRef != base || p.HeadFromDefault[e.id] {
		return nil
	}
	for _, ep := range it.Targets(PartOf) {
		epic, ok := lookup(ItemID(ep))
		if !ok || epic == nil {
			continue
		}
		if eb, ok := soleTag(epic, "baseBranch"); !ok || eb != base {
			continue
		}
		if ConventionalSubItemBranch(pr.HeadRef, base) {
			return nil
		}
		return []checkFinding{{CodeBranchNameNit, ConclusionSuccess, fmt.Sprintf(
			"the head %s is off the protocol's naming of a sub-item branch of epic %s (%s-<item-slug>), but it keeps both invariants that matter: the pull request targets the epic branch %s and its head was not cut from the default branch; a naming nit, never a failure",
			pr.HeadRef, epic.ID, base, base)}}
	}
	return nil
}
