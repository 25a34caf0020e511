package gating

import (
	"fmt"
	"time"
)

// Transitions warden mirrors to GitHub after a ledger write (CONTRACT.md §2
// close_on_complete, §9 "Groupings" and "Writes the ledger refuses"): the
// epic an item is partOf is its issue's native parent, a recorded
// completion closes the issue, and an edge a pm token removed is reported
// until a human acknowledges it.

// Codes of the transitions' report lines.
const (
	// CodeEdgeRemoved is a blockedBy (or partOf) edge a pm token removed:
	// the protocol forbids deleting an edge to make work ready, and only a
	// human can judge whether this removal did. Listed until a human runs
	// /backlog resolve or the edge is written again.
	CodeEdgeRemoved = "edge-removed"
	// CodeReopenedAfterComplete is an item's issue reopened after warden
	// closed it for a recorded completion (or after the completion found it
	// closed). warden does not close it again for that completion.
	CodeReopenedAfterComplete = "reopened-after-complete"
)

// EdgeRemovalReported reports whether removing an edge of rel with a token
// of role is recorded as edge-removed: a pm's removal of a blockedBy or
// partOf edge is; a human's is the human judgement itself, and the ledger
// refuses every other role's removal (CheckEdgeEdits).
func EdgeRemovalReported(role Role, rel Rel) bool {
	return role == RolePM && (rel == BlockedBy || rel == PartOf)
}

// EdgeRemovedDetail is the edge-removed line's detail: the edge, who
// removed it (token name and role) and when.
func EdgeRemovedDetail(rel Rel, target, by string, role Role, at time.Time) string {
	return fmt.Sprintf("%s %s removed by %s (%s token) at %s; the protocol forbids removing an edge to make work ready: a human judges whether this one should go",
		rel, target, by, role, at.UTC().Format(time.RFC3339))
}

// ReopenedAfterCompleteDetail is the reopened-after-complete line's detail.
func ReopenedAfterCompleteDetail(issue int, by string, at time.Time) string {
	who := by
	if who == "" {
		who = "someone"
	}
	return fmt.Sprintf("issue #%d was reopened by %s at %s after its completion was recorded; warden does not close it again for this completion",
		issue, who, at.UTC().Format(time.RFC3339))
}

// Close decisions of CompletionClose.
const (
	CloseIssue        = "close"          // close the issue as completed
	CloseSkipSetting  = "setting-off"    // close_on_complete: false
	CloseSkipClosed   = "already-closed" // the issue is closed already
	CloseSkipGone     = "issue-gone"     // the issue was deleted or transferred
	CloseReadFirst    = "read-first"     // the issue's state is unknown: read it, then decide
	CloseHeldByDryRun = "dry-run"        // dry_run: nothing is written
)

// CompletionClose decides what a recorded completion does to the item's
// issue: closeOnComplete is the setting, dryRun dry_run, and issueState the
// issue's state as warden last recorded it ("open", "closed", "deleted",
// "transferred", or "" when never recorded). Only an open issue is closed;
// an unknown state is read before anything is written (fail closed: warden
// never writes over a state it has not seen).
func CompletionClose(closeOnComplete, dryRun bool, issueState string) string {
	switch {
	case !closeOnComplete:
		return CloseSkipSetting
	case issueState == "closed":
		return CloseSkipClosed
	case issueState == "deleted" || issueState == "transferred":
		return CloseSkipGone
	case issueState != "open": // never recorded (""), or a state warden does not know
		return CloseReadFirst
	case dryRun:
		return CloseHeldByDryRun
	}
	return CloseIssue
}

// SubIssueMove is what brings an item's issue under the parent the ledger
// names (want: the epic's issue number, 0 for none), given the parent
// GitHub shows (actual, 0 for none) and the parents warden itself set or
// meant to set for this item (ours: the item's partOf before and after the
// write). Add means POST …/sub_issues on want (with replace_parent when
// Replace); Remove means DELETE …/sub_issue on actual. A parent that is not
// warden's is never replaced nor removed: Refuse names it.
type SubIssueMove struct {
	Add     int
	Replace bool
	Remove  int
	Refuse  string
}

// PlanSubIssue computes the SubIssueMove (see its doc); the zero move means
// GitHub already agrees.
func PlanSubIssue(want, actual int, ours []int) SubIssueMove {
	isOurs := func(n int) bool {
		for _, o := range ours {
			if o != 0 && o == n {
				return true
			}
		}
		return false
	}
	switch {
	case want == actual:
		return SubIssueMove{}
	case want != 0 && actual == 0:
		return SubIssueMove{Add: want}
	case want != 0 && isOurs(actual):
		return SubIssueMove{Add: want, Replace: true}
	case want != 0:
		return SubIssueMove{Refuse: fmt.Sprintf("issue already has parent #%d, which the ledger does not name (a person set it on GitHub); warden does not replace it", actual)}
	case isOurs(actual):
		return SubIssueMove{Remove: actual}
	}
	// want == 0 and GitHub's parent is not one warden set: not warden's to
	// remove.
	return SubIssueMove{}
}
