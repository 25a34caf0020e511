package gating

import (
	"strconv"
	"time"
)

// Act kinds (Act.Kind).
const (
	ActPush    = "push"
	ActPull    = "pull"
	ActComment = "comment"
)

// Act is one act seen on GitHub that may show a claim's holder alive
// (evidence of work, PROTOCOL.md: "a branch pushed, an issue comment, or a
// fencing token that has moved") or, after a takeover, its prior holder
// alive (a collision).
type Act struct {
	Kind    string
	Login   string // who acted ("" unknown: no holder's act)
	Branch  string // push: the branch pushed; pull, and a comment on a PR: the PR's head branch (same repository only)
	BaseRef string // push: the branch at whose head it was created, if any
	Rewrite string // push: RewriteForced, RewriteDeleted or ""
	Item    int    // comment: the item commented on (0: not an item)
	PR      int    // pull: the PR; comment: the PR commented on (0: none)
	Action  string // pull: the delivery's action
	At      time.Time
}

// MayEvidence reports whether the act can be evidence of work at all: a
// deletion is none.
func (a Act) MayEvidence() bool { return !(a.Kind == ActPush && a.Rewrite == RewriteDeleted) }

// ActClaim is a current, unreleased claim as an act is judged against it:
// its item, owner and recorded branch, and whether the act's login acts for
// its holder (it posted the current grant's claim marker, pushed the
// claim's branch since the grant, or opened a pull request from it).
type ActClaim struct {
	Item   int
	Owner  string
	Branch string
	Holder bool
}

// SharedLogin reports whether the act's login acts for the live claims of
// more than one owner (one bot account running several workers): then its
// acts elsewhere show none of them alive.
func SharedLogin(claims []ActClaim) bool {
	owner := ""
	for _, c := range claims {
		if !c.Holder {
			continue
		}
		if owner != "" && c.Owner != owner {
			return true
		}
		owner = c.Owner
	}
	return false
}

// ActEvidence is the evidence of work act is for claim c (kind "" for
// none), and what it was in words: a branch created at the head of the
// claim's branch, by anyone (EvidencePushDescendant); activity on a pull
// request from the claim's branch, by anyone, or a comment on that PR by a
// login acting for the holder (EvidencePullRequest; prHead is the head
// branch of the PR a comment is on); a comment on the item by a login
// acting for the holder (EvidenceComment); and a push elsewhere, a pull
// request from another branch or a comment elsewhere by a login acting for
// the holder, unless shared (SharedLogin). A push to the claim's own branch
// is found by branch, not here (EvidencePush).
func ActEvidence(act Act, c ActClaim, prHead string, shared bool) (kind, detail string) {
	if !act.MayEvidence() {
		return "", ""
	}
	by, q := byLogin(act.Login), strconv.Quote
	switch act.Kind {
	case ActPush:
		switch {
		case c.Branch != "" && act.Branch == c.Branch:
			return "", ""
		case c.Branch != "" && act.BaseRef == c.Branch:
			return EvidencePushDescendant, "a push creating " + q(act.Branch) + " at the head of " + q(c.Branch) + by
		case c.Holder && !shared:
			return EvidencePushByHolder, "a push to " + q(act.Branch) + by + ", which acts for " + q(c.Owner)
		}
	case ActPull:
		switch {
		case c.Branch != "" && act.Branch == c.Branch:
			return EvidencePullRequest, "pull request #" + strconv.Itoa(act.PR) + " from " + q(c.Branch) + " " + act.Action + by
		case c.Holder && !shared:
			return EvidencePullRequest, "pull request #" + strconv.Itoa(act.PR) + " " + act.Action + by + ", which acts for " + q(c.Owner)
		}
	case ActComment:
		switch {
		case !c.Holder:
		case act.Item == c.Item:
			return EvidenceComment, "a comment on the item" + by
		case act.PR > 0 && c.Branch != "" && prHead == c.Branch:
			return EvidencePullRequest, "a comment on pull request #" + strconv.Itoa(act.PR) + " from " + q(c.Branch) + by
		case !shared:
			return EvidenceComment, "a comment elsewhere" + by + ", which acts for " + q(c.Owner)
		}
	}
	return "", ""
}

// PushEvidenceDetail is the evidence line of a push to the claim's own
// branch (EvidencePush).
func PushEvidenceDetail(branch, login string) string {
	return "a push to " + strconv.Quote(branch) + byLogin(login)
}

// byLogin is " by <login>" ("" when unknown).
func byLogin(login string) string {
	if login == "" {
		return ""
	}
	return " by " + strconv.Quote(login)
}
