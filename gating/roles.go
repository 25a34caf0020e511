package gating

import (
	"fmt"
	"strings"
	"unicode"
)

// OwnedBy reports whether a claim owner belongs to a worker token named
// tokenName: a worker claims, writes, renews and releases only under owners
// beginning with its token's name and "/" (CONTRACT.md §4), followed by a
// valid run name (RunNameProblem): "backlog-worker/" names no run and
// belongs to nobody.
func OwnedBy(owner, tokenName string) bool {
	if tokenName == "" {
		return false
	}
	run, ok := strings.CutPrefix(owner, tokenName+"/")
	return ok && RunNameProblem(run) == ""
}

// OwnerRunName splits a claim owner into its run name: for a worker, what
// follows its token's name and "/" (the protocol's
// "backlog-worker/<session-id>"); for any other role, what follows the
// owner's first "/". has is false when the owner has no such part (a
// worker's owner not beginning with its token's name and "/", or another
// role's owner without a "/", such as "pm"), and then there is no run name
// to check.
func OwnerRunName(owner string, role Role, tokenName string) (run string, has bool) {
	if role == RoleWorker {
		if tokenName == "" {
			return "", false
		}
		if run, has = strings.CutPrefix(owner, tokenName+"/"); !has {
			return "", false
		}
		return run, true
	}
	_, run, has = strings.Cut(owner, "/")
	return run, has
}

// RunNameProblem says what is wrong with run as the run name of a claim
// owner, or "" when nothing is. A run name names one run of an agent in
// claim markers and the grant log: it is not empty and not white space,
// begins with a letter or a digit, holds no white space or control
// character, and has no empty part between slashes.
func RunNameProblem(run string) string {
	switch {
	case run == "":
		return "its run name (the part after the \"/\") is empty"
	case strings.TrimSpace(run) == "":
		return fmt.Sprintf("its run name (the part after the \"/\") is only white space (%q)", run)
	case strings.IndexFunc(run, func(r rune) bool { return unicode.IsSpace(r) || !unicode.IsPrint(r) }) >= 0:
		return fmt.Sprintf("its run name %q holds white space or a control character", run)
	case strings.HasPrefix(run, "/") || strings.HasSuffix(run, "/") || strings.Contains(run, "//"):
		return fmt.Sprintf("its run name %q has an empty part (a \"/\" at its start or end, or a \"//\")", run)
	case !startsAlnum(run):
		return fmt.Sprintf("its run name %q does not begin with a letter or a digit", run)
	}
	return ""
}

func startsAlnum(s string) bool {
	for _, r := range s {
		return unicode.IsLetter(r) || unicode.IsDigit(r)
	}
	return false
}

// Authors reports whether a role may create and forget items and take
// maintenance claims: pm, human, and warden (which may do what a pm may).
func Authors(r Role) bool {
	return r == RolePM || r == RoleHuman || r == RoleWarden
}

// EdgeRels are the relations that are edges of the backlog's graph, the
// links CONTRACT.md §4 makes a pm power ("pm: also creates items, edits
// edges and phase:"): blockedBy (dependency), partOf (grouping
// membership), integrates (a grouping's integration join) and informs (a
// research grouping's lineage). Each joins one item to another and changes
// what is claimable, what a grouping holds or what completes it. The other
// links annotate the item itself and are no edges: anchoredTo (the files it
// concerns), related (near duplicates and learnings) and claims (per-run
// records).
var EdgeRels = []Rel{BlockedBy, PartOf, Integrates, Informs}

// IsEdge reports whether links of relation r are edges (EdgeRels).
func IsEdge(r Rel) bool {
	for _, e := range EdgeRels {
		if r == e {
			return true
		}
	}
	return false
}

// EditsEdges reports whether a role may add and remove edges: pm, human
// and warden (CONTRACT.md §4, §9).
func EditsEdges(r Role) bool { return Authors(r) }

// CheckEdgeEdits refuses (HumanActRequired, as CONTRACT.md §9 refuses a
// write a role may not make) a write by role to item that adds or removes
// an edge, when the role may not edit edges; nil otherwise. It judges the
// links the write names, whether or not the item already holds them: a
// worker sends no edge at all.
func CheckEdgeEdits(role Role, item ItemID, add, remove []Link) *Refusal {
	if EditsEdges(role) {
		return nil
	}
	for _, l := range add {
		if IsEdge(l.Rel) {
			r := refuse("HumanActRequired", "adding the %s edge from %s to %s needs a pm or human token: edges (%s) are edited by the pm, never under a worker's claim; this token is %s",
				l.Rel, item, l.Target, edgeNames(), roleName(role))
			r.Rejected = []string{string(l.Rel) + " " + l.Target}
			return r
		}
	}
	for _, l := range remove {
		if IsEdge(l.Rel) {
			why := "edges (" + edgeNames() + ") are edited by the pm"
			if l.Rel == BlockedBy || l.Rel == PartOf {
				why += ", and the removal is reported edge-removed"
			}
			r := refuse("HumanActRequired", "removing the %s edge from %s to %s needs a pm or human token: %s; this token is %s",
				l.Rel, item, l.Target, why, roleName(role))
			r.Rejected = []string{string(l.Rel) + " " + l.Target}
			return r
		}
	}
	return nil
}

func edgeNames() string {
	s := make([]string, len(EdgeRels))
	for i, r := range EdgeRels {
		s[i] = string(r)
	}
	return strings.Join(s, ", ")
}

func roleName(r Role) string {
	if r == "" {
		return "of no role"
	}
	return "a " + string(r) + " token"
}
