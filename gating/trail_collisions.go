package gating

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Push rewrites (BranchPush.Rewrite): a push that moved a branch to a
// commit that does not descend from its old head, or deleted it.
const (
	RewriteForced  = "forced"
	RewriteDeleted = "deleted"
)

// CodePriorBranchRewritten: the branch a prior attempt recorded was
// force-pushed or deleted, after custody passed, by someone other than that
// attempt's holder (PROTOCOL.md: "never force-push or rewrite the prior
// attempt's branch"). A finding, not a hold.
const CodePriorBranchRewritten = "prior-branch-rewritten"

// trlLogins says which logins act for an owner, and how warden knows.
type trlLogins struct {
	marked map[string]map[string]bool // owner → logins that posted its counted markers
	pushed map[string]map[string]bool // owner → logins that pushed its recorded branch during its custody
}

// custodyEnd is when custody of entry i's work ended: the time of the first
// later non-maintenance record of another owner (zero: it has not).
func (e *trlEval) custodyEnd(i int) time.Time {
	for _, en := range e.entries[i+1:] {
		if !en.maint && en.owner != e.entries[i].owner {
			return en.at
		}
	}
	return time.Time{}
}

// holderLogins reads, per owner, the logins its markers were posted by and
// the logins that pushed the branch recorded for its claims while it held
// them (a holder whose marker warden posted is known by its pushes).
func (e *trlEval) holderLogins(pushes []BranchPush) trlLogins {
	l := trlLogins{marked: map[string]map[string]bool{}, pushed: map[string]map[string]bool{}}
	add := func(m map[string]map[string]bool, owner, login string) {
		if login == "" {
			return
		}
		if m[owner] == nil {
			m[owner] = map[string]bool{}
		}
		m[owner][login] = true
	}
	for _, mk := range e.marks {
		add(l.marked, mk.m.Owner, mk.c.Author)
	}
	for i, en := range e.entries {
		if en.maint || en.grant == nil || en.grant.Branch == "" {
			continue
		}
		end := e.custodyEnd(i)
		for _, p := range pushes {
			if p.Branch == en.grant.Branch && p.Rewrite != RewriteDeleted && !p.At.Before(en.at.Truncate(time.Second)) && (end.IsZero() || p.At.Before(end)) &&
				!l.marksForOther(en.owner, p.Login) {
				add(l.pushed, en.owner, p.Login)
			}
		}
	}
	return l
}

// marksForOther: login posted the markers of an owner other than owner (a
// push by it to a branch owner shares is that other owner's, not evidence
// of who owner is).
func (l trlLogins) marksForOther(owner, login string) bool {
	for o, ls := range l.marked {
		if o != owner && ls[login] && !l.marked[owner][login] {
			return true
		}
	}
	return false
}

func (l trlLogins) of(owner string) map[string]bool {
	out := map[string]bool{}
	for k := range l.marked[owner] {
		out[k] = true
	}
	for k := range l.pushed[owner] {
		out[k] = true
	}
	return out
}

// collisions looks, after each takeover of an unclosed claim, for activity by
// the prior owner (PROTOCOL.md: "if the prior owner posted activity after the
// takeover marker, it was case 2 and is still alive"): a marker naming it; a
// comment on the item by a login that acts for it and for no later holder; a
// push to the branch recorded for its claim; or a push to any other branch
// by a login that posted its markers and acts for no later holder. A login
// shared by the prior and a later holder (one bot account running both) is
// no evidence either way, except through markers naming the prior owner.
func (e *trlEval) collisions(res *TrailResult) {
	pushes := slices.Clone(e.in.Pushes)
	slices.SortFunc(pushes, func(a, b BranchPush) int {
		return cmp.Or(a.At.Compare(b.At), strings.Compare(a.Branch, b.Branch), strings.Compare(a.Login, b.Login))
	})
	logins := e.holderLogins(pushes)
	resolved := e.in.CollisionResolvedAt
	for i, cur := range e.entries {
		if !cur.takeover {
			continue
		}
		prior := e.entries[cur.prior]
		tTime, tIdx := cur.at, -1
		var ids []int64
		what := fmt.Sprintf("%s took over %s's unclosed fence %d at fence %d (granted %s)", mkrQuote(cur.owner), mkrQuote(prior.owner), prior.fence, cur.fence, fmtTime(cur.at))
		if cur.marker != nil {
			tTime, tIdx = cur.marker.c.CreatedAt, cur.marker.idx
			ids = []int64{cur.marker.c.ID}
			what = fmt.Sprintf("%s took over %s's unclosed fence %d at fence %d (comment %d, %s)", mkrQuote(cur.owner), mkrQuote(prior.owner), prior.fence, cur.fence, cur.marker.c.ID, fmtTime(tTime))
		}
		// The prior owner regains custody legitimately with a later claim:
		// its markers for that claim, and its pushes after it, are no
		// collision.
		regain := time.Time{}
		for _, en := range e.entries[i+1:] {
			if en.owner == prior.owner && !en.maint {
				regain = en.at
				break
			}
		}
		flag := func(at time.Time, evidence string, extra ...int64) {
			if !resolved.IsZero() && !at.After(resolved) {
				return
			}
			res.CollisionHold = true
			e.report(CodeTakeoverCollision, cur.fence, what+", but "+mkrQuote(prior.owner)+" was active after it: "+evidence+"; the item is held until a human runs /backlog resolve",
				append(slices.Clone(ids), extra...)...)
		}
		// Logins of the later holders: a login acting for one of them too
		// tells nothing about the prior owner.
		later := map[string]bool{}
		var sharers []string // later holders working on the prior's branch
		branch := ""
		if prior.grant != nil {
			branch = prior.grant.Branch
		}
		for _, en := range e.entries[i:] {
			if en.maint || en.owner == prior.owner {
				continue
			}
			for k := range logins.of(en.owner) {
				later[k] = true
			}
			if branch != "" && en.grant != nil && en.grant.Branch == branch {
				sharers = append(sharers, en.owner)
			}
		}
		marked := logins.marked[prior.owner]
		priorLogins := logins.of(prior.owner)
		afterTakeover := func(idx int, at time.Time) bool {
			after := tIdx >= 0 && idx > tIdx || tIdx < 0 && at.After(tTime)
			return after && (regain.IsZero() || at.Before(regain))
		}
		for _, mk := range e.marks {
			if mk.m.Owner != prior.owner {
				continue
			}
			after := tIdx >= 0 && mk.idx > tIdx || tIdx < 0 && mk.c.CreatedAt.After(tTime)
			if !after || mk.entry > i && e.entries[mk.entry].owner == prior.owner {
				continue
			}
			flag(mk.c.CreatedAt, fmt.Sprintf("%s marker %s (comment %d by %s, %s)", mk.m.Kind, mkrQuote(mk.m.Line), mk.c.ID, mkrQuote(mk.c.Author), fmtTime(mk.c.CreatedAt)), mk.c.ID)
		}
		for idx := range e.comments {
			c := &e.comments[idx]
			if c.AuthorIsWarden || later[c.Author] || !afterTakeover(idx, c.CreatedAt) {
				continue
			}
			// A marker is judged above; a login known only by its pushes is
			// the prior owner's in a comment only when it is an agent's (a
			// person who pushed the branch is not its holder).
			if _, isMark := countedMark(c, e.in.Item); isMark {
				continue
			}
			if !marked[c.Author] && !(priorLogins[c.Author] && c.AuthorIsAgent) {
				continue
			}
			flag(c.CreatedAt, fmt.Sprintf("comment %d by %s, %s", c.ID, mkrQuote(c.Author), fmtTime(c.CreatedAt)), c.ID)
		}
		for _, p := range pushes {
			if !p.At.After(tTime) || !regain.IsZero() && !p.At.Before(regain) {
				continue
			}
			by := ""
			if p.Login != "" {
				by = " by " + mkrQuote(p.Login)
			}
			if p.Rewrite != "" && (p.Login == "" || !priorLogins[p.Login] || later[p.Login]) {
				continue // a rewrite by someone else: prior-branch-rewritten, not the prior owner's activity
			}
			if branch == "" || p.Branch != branch {
				// Another branch: only a login that posted the prior
				// owner's markers, and acts for no later holder.
				if p.Login != "" && marked[p.Login] && !later[p.Login] {
					flag(p.At, fmt.Sprintf("a push%s to %s at %s (a login that posts for %s)", by, mkrQuote(p.Branch), fmtTime(p.At), mkrQuote(prior.owner)))
				}
				continue
			}
			if len(sharers) > 0 {
				// The new holder builds on the prior branch: only a push by a
				// login known to act for the prior owner, and for none of
				// the new holders, is the prior owner's.
				if p.Login == "" || !priorLogins[p.Login] || later[p.Login] {
					continue
				}
			}
			flag(p.At, fmt.Sprintf("a push to %s's branch %s%s at %s", mkrQuote(prior.owner), mkrQuote(branch), by, fmtTime(p.At)))
		}
	}
	e.rewrites(pushes, logins)
}

// rewrites reports each force-push or deletion of a branch recorded for a
// claim after custody of its work passed to another owner, by anyone but
// that claim's holder (prior-branch-rewritten). A deletion once the item is
// complete is the branch's ordinary end (a merged PR's head deleted), not a
// rewrite; one at or before the last /backlog resolve is acknowledged.
func (e *trlEval) rewrites(pushes []BranchPush, logins trlLogins) {
	complete := slices.Contains(e.in.Tags, "state:complete")
	seen := map[BranchPush]bool{}
	for i, en := range e.entries {
		if en.maint || en.unknown || en.grant == nil || en.grant.Branch == "" {
			continue
		}
		end := e.custodyEnd(i)
		if end.IsZero() {
			continue
		}
		holders := logins.of(en.owner)
		for _, p := range pushes {
			if p.Rewrite == "" || p.Branch != en.grant.Branch || p.At.Before(end.Truncate(time.Second)) || seen[p] {
				continue
			}
			if p.Login != "" && holders[p.Login] || p.Rewrite == RewriteDeleted && complete ||
				!e.in.CollisionResolvedAt.IsZero() && !p.At.After(e.in.CollisionResolvedAt) {
				continue
			}
			seen[p] = true
			by := "by an unknown login"
			if p.Login != "" {
				by = "by " + mkrQuote(p.Login)
			}
			how := "force-pushed"
			if p.Rewrite == RewriteDeleted {
				how = "deleted"
			}
			e.report(CodePriorBranchRewritten, en.fence, fmt.Sprintf("branch %s, recorded for %s's claim at fence %d, was %s %s at %s, after custody passed on (%s): the prior attempt's branch is the next attempt's input; build on it or beside it, never rewrite it",
				mkrQuote(p.Branch), mkrQuote(en.owner), en.fence, how, by, fmtTime(p.At), fmtTime(end)))
		}
	}
}
