package gating

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Trail defect codes (CONTRACT.md §6). Stable: never rename one.
const (
	CodeClaimedUnmarked      = "claimed-unmarked"
	CodeUnbackedMarker       = "unbacked-marker"
	CodeMalformedMarker      = "malformed-marker"
	CodeDuplicateClaimMarker = "duplicate-claim-marker"
	CodeUnannouncedTakeover  = "unannounced-takeover"
	CodeTakeoverMismatch     = "takeover-mismatch"
	CodeTakeoverCollision    = "takeover-collision"
	CodeMarkerEdited         = "marker-edited"
	CodeMarkerDeleted        = "marker-deleted"
	CodeOutcomeWithoutTag    = "outcome-without-tag"
	CodeForgedMarker         = "forged-marker"
	CodeUndeclaredAgent      = "undeclared-agent"
)

// ClaimMarkerGrace is how long a fresh grant may go without its claim marker
// before it is reported claimed-unmarked (the worker posts it right after
// the grant; the webhook can take a moment). It applies only when
// TrailInput.Now is set; the grant counts as an attempt either way.
const ClaimMarkerGrace = 2 * time.Minute

// TrailComment is one comment on the item's issue. The caller decides who
// its author is (CONTRACT.md §4) and keeps its earliest known text.
type TrailComment struct {
	ID        int64
	Author    string // login
	CreatedAt time.Time
	// AuthorIsAgent: a Bot account, a configured agent, or a login already
	// recorded as an agent. AuthorIsWarden: the App's own bot.
	// AuthorHasWrite: the login has write access (or more) to the repository.
	AuthorIsAgent  bool
	AuthorIsWarden bool
	AuthorHasWrite bool
	// Body is the earliest known text (an edited delivery's
	// changes.body.from; a comment first seen already edited is held to the
	// text first seen). It alone is parsed.
	Body string
	// Edited: the current text differs from Body. CurrentBody, when given,
	// is the current text, quoted in the finding (and an edit that turned
	// prose into a marker is reported too).
	Edited      bool
	CurrentBody string
	// Deleted: the comment was deleted; its earliest text still counts.
	Deleted bool
}

// GrantEntry is one row of the ledger's grant log: every claim it granted.
type GrantEntry struct {
	Fence          int64
	Owner          string
	Maintenance    bool   // purpose "maintenance": no marker, no attempt
	Branch         string // the working branch recorded with the claim, if any
	GrantedAt      time.Time
	ReleasedAt     time.Time // zero: never released on this fence
	LeaseExpiresAt time.Time
}

// BranchPush is a push to a branch: to a branch recorded for one of the
// item's claims, or (after a takeover) to any branch by a login that posted
// a prior owner's markers. Login, when known, is the pusher's login (the
// push event's sender). Rewrite says it force-pushed or deleted the branch
// (RewriteForced, RewriteDeleted; "" for a push that only added commits).
type BranchPush struct {
	At      time.Time
	Branch  string
	Login   string
	Rewrite string
}

// TrailInput is everything EvaluateTrail reads about one item. Comments,
// Grants and Pushes may come in any order (no decision depends on the order
// of receipt): comments are ordered by (CreatedAt, ID), grants by fence.
type TrailInput struct {
	Item     ItemID
	Comments []TrailComment
	// Grants is the grant log, maintenance claims included; empty when the
	// issue's history predates the ledger.
	Grants []GrantEntry
	// Fence is the record's fencing high-water mark. With no grant log it
	// is a fence imported with an item whose history predates the ledger;
	// with one, the fences below its first grant are that history, and the
	// fences up to Fence the log has no grant for are claims a lost ledger
	// granted (a ledger restored from an older backup raised its fence to
	// the trail's highest token; a ledger that kept its log has no gaps).
	Fence int64
	// LedgerSince is when the ledger began keeping this item's grant log:
	// a claim or outcome marker posted before it with no grant behind it is
	// history that predates the ledger and counts as the trail says. Zero:
	// the first grant's GrantedAt (with no grant log, all history).
	LedgerSince time.Time
	// EpochStart is the last human unpark (zero: never unparked). Attempts
	// granted at or after it are this epoch's.
	EpochStart time.Time
	Pushes     []BranchPush
	// Tags are the item's current tags (outcome-without-tag).
	Tags []string
	// CollisionResolvedAt is the last /backlog resolve (zero: never):
	// collisions whose evidence is at or before it are resolved.
	CollisionResolvedAt time.Time
	// Now, when set, grants younger than ClaimMarkerGrace are not yet
	// reported claimed-unmarked, and a history line can say a lease lapsed.
	Now time.Time
}

// AttemptLine is one attempt as the park comment and the report list it.
type AttemptLine struct {
	Owner   string    `json:"owner"`             // "" when unknown (claimed, unmarked, before the grant log)
	Fence   int64     `json:"fence,omitempty"`   // the fence custody changed at (0: unknown)
	At      time.Time `json:"at,omitzero"`       // the grant (or, before the ledger, the marker's created_at)
	Outcome string    `json:"outcome"`           // complete, released, parked, or what became of it in words
	InEpoch bool      `json:"inEpoch,omitempty"` // counted in the current epoch
	// Prior is, for a takeover, the unclosed claim custody was taken from
	// (across maintenance claims: the last worker's); nil otherwise.
	Prior *PriorClaim `json:"prior,omitempty"`
}

// Custody says what the grant with fence is in the trail: an attempt (a
// custody change of the work, which a claim marker announces) or not (a
// same-owner re-claim, a maintenance claim, or no such record), and for a
// takeover the claim it took over (the marker's prior-owner and
// prior-fence).
func (r TrailResult) Custody(fence int64) (attempt bool, prior *PriorClaim) {
	for _, a := range r.History {
		if a.Fence == fence && fence > 0 {
			return true, a.Prior
		}
	}
	return false, nil
}

// TrailMarker is a marker the trail establishes.
type TrailMarker struct {
	CommentID int64     `json:"commentId"`
	Author    string    `json:"author"`
	CreatedAt time.Time `json:"createdAt"`
	Marker    Marker    `json:"marker"`
	// PreLedger: no grant backs it; it counts as history that predates the
	// ledger (TrailInput.LedgerSince).
	PreLedger bool `json:"preLedger,omitempty"`
}

// TrailFinding is one divergence between the trail and the ledger (or
// within the trail): its code, the comments involved (oldest first; none
// for a grant that no comment announces), the fence concerned if any, and a
// short detail quoting both sides.
type TrailFinding struct {
	Code     string  `json:"code"`
	Item     ItemID  `json:"item"`
	Comments []int64 `json:"comments,omitempty"`
	Fence    int64   `json:"fence,omitempty"`
	Detail   string  `json:"detail"`
}

// Defect is the finding as the ready set's defect list carries it.
func (f TrailFinding) Defect() Defect { return Defect{Code: f.Code, Item: f.Item, Detail: f.Detail} }

// TrailResult is what the trail establishes.
type TrailResult struct {
	// Attempts counts this epoch's attempts (the poison threshold's);
	// LifetimeAttempts every attempt. AttemptsUnknown: the fence is above
	// zero but nothing evidences who held it; the count is floored at one,
	// never reported as zero.
	Attempts         int  `json:"attempts"`
	LifetimeAttempts int  `json:"lifetimeAttempts"`
	AttemptsUnknown  bool `json:"attemptsUnknown,omitempty"`
	// History is every attempt, in order.
	History []AttemptLine `json:"history"`
	// Backed lists the claim and outcome markers that count: backed by a
	// grant, or history before the ledger. Warden lists warden's own park
	// and report comments.
	Backed   []TrailMarker  `json:"backed"`
	Warden   []TrailMarker  `json:"warden"`
	Findings []TrailFinding `json:"findings"`
	// CollisionHold: a takeover-collision not yet resolved holds the item
	// out of the ready set and claims.
	CollisionHold bool `json:"collisionHold"`
	// NewAgents are logins with write access, not yet agents, that posted a
	// valid backlog-worker marker: record them as agents (each is reported
	// undeclared-agent). Sorted.
	NewAgents []string `json:"newAgents"`
}

// EpochHistory is the current epoch's attempts (what the park comment lists).
func (r TrailResult) EpochHistory() []AttemptLine {
	var out []AttemptLine
	for _, a := range r.History {
		if a.InEpoch {
			out = append(out, a)
		}
	}
	return out
}

// trlMark is a trusted, well-formed worker marker at its place in the trail.
type trlMark struct {
	idx   int // position in the ordered trail
	c     *TrailComment
	m     Marker
	entry int // the custody entry it belongs to; -1: none
}

// trlEntry is one custody record: a grant, a claim before the ledger, or a
// placeholder for claims before the grant log that no marker evidences.
type trlEntry struct {
	owner    string
	fence    int64
	at       time.Time
	grant    *GrantEntry // nil: before the ledger
	unknown  bool        // the placeholder
	maint    bool
	marker   *trlMark   // the first claim marker announcing it
	repeats  []*trlMark // further claim markers for it
	outcomes []*trlMark // outcome markers closing it, in trail order
	attempt  bool
	takeover bool // custody taken from another owner's unclosed claim
	// prior is the index of the last non-maintenance record before it (-1:
	// none): a maintenance claim holds the item but not its work, so custody
	// of the work passes from prior to this record.
	prior int
}

type trlEval struct {
	in       *TrailInput
	comments []TrailComment
	grants   []GrantEntry
	findings []TrailFinding
	marks    []*trlMark
	warden   []TrailMarker
	entries  []*trlEntry
}

func (e *trlEval) report(code string, fence int64, detail string, ids ...int64) {
	e.findings = append(e.findings, TrailFinding{Code: code, Item: e.in.Item, Comments: ids, Fence: fence, Detail: detail})
}

// EvaluateTrail reads an item's comment trail against its grant log
// (CONTRACT.md §6, PROTOCOL.md "Attempts against the fencing token").
//
// Custody is the ledger's: a claim marker counts when its owner and fence
// match a non-maintenance grant (several markers for one grant are one).
// Each grant is a custody record; before the grant log (no log, or a marker
// posted before LedgerSince), each distinct claim marker by an agent is one.
// A record is an attempt when it changes custody of the work: the first
// claim, a claim by another owner, or any claim after the previous one was
// released or closed by an outcome. A maintenance claim is none, and changes
// no custody of work: the record before it is the one a later claim is
// judged against (A, maintenance, B is a takeover of A's unclosed claim; A,
// maintenance, A is A's re-claim). A same-owner re-claim of its own lapsed,
// unreleased claim is no attempt (and posts no marker: a second claim
// marker by the same owner is duplicate-claim-marker), unless an unpark
// started a new epoch between them: then it is the epoch's first attempt.
// So attempts are counted from the trail and floored by the grant log: a
// grant whose marker is missing still counts (claimed-unmarked). An
// item whose fence is above zero with nothing evidencing its claims counts
// one attempt, flagged unknown.
func EvaluateTrail(in TrailInput) TrailResult {
	res, _ := evaluateTrail(in)
	return res
}

// evaluateTrail is EvaluateTrail with the evaluation it ran (its custody
// records, for SummarizeTrail).
func evaluateTrail(in TrailInput) (TrailResult, *trlEval) {
	e := &trlEval{in: &in}
	e.canonical()
	e.readComments()
	e.buildCustody()
	res := TrailResult{Backed: []TrailMarker{}, Warden: []TrailMarker{}, History: []AttemptLine{}, NewAgents: []string{}}
	e.attempts(&res)
	e.collisions(&res)
	e.outcomeTags()
	for _, mk := range e.marks {
		if mk.entry >= 0 {
			res.Backed = append(res.Backed, TrailMarker{CommentID: mk.c.ID, Author: mk.c.Author, CreatedAt: mk.c.CreatedAt,
				Marker: mk.m, PreLedger: e.entries[mk.entry].grant == nil})
		}
	}
	e.wardenAndAgents(&res)
	res.Findings = e.findings
	if res.Findings == nil {
		res.Findings = []TrailFinding{}
	}
	return res, e
}

// canonical orders comments by (CreatedAt, ID) and grants by fence, and
// merges duplicates (a comment delivered twice), so that the order of
// receipt changes nothing.
func (e *trlEval) canonical() {
	cs := slices.Clone(e.in.Comments)
	slices.SortFunc(cs, func(a, b TrailComment) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.ID, b.ID),
			strings.Compare(a.Body, b.Body), strings.Compare(a.CurrentBody, b.CurrentBody))
	})
	out := cs[:0]
	for _, c := range cs {
		if n := len(out); n > 0 && out[n-1].ID == c.ID && out[n-1].CreatedAt.Equal(c.CreatedAt) {
			k := &out[n-1]
			k.Edited = k.Edited || c.Edited || c.Body != k.Body
			k.Deleted = k.Deleted || c.Deleted
			if k.CurrentBody == "" {
				if c.CurrentBody != "" {
					k.CurrentBody = c.CurrentBody
				} else if c.Body != k.Body {
					k.CurrentBody = c.Body
				}
			}
			k.AuthorIsAgent = k.AuthorIsAgent || c.AuthorIsAgent
			k.AuthorIsWarden = k.AuthorIsWarden || c.AuthorIsWarden
			k.AuthorHasWrite = k.AuthorHasWrite || c.AuthorHasWrite
			continue
		}
		out = append(out, c)
	}
	e.comments = out

	gs := slices.Clone(e.in.Grants)
	slices.SortFunc(gs, func(a, b GrantEntry) int {
		return cmp.Or(cmp.Compare(a.Fence, b.Fence), a.GrantedAt.Compare(b.GrantedAt), strings.Compare(a.Owner, b.Owner))
	})
	e.grants = slices.CompactFunc(gs, func(a, b GrantEntry) bool { return a.Fence == b.Fence })
}

// readComments parses each comment's earliest text and reports what is
// wrong with the comment itself: forged, malformed, edited, deleted.
func (e *trlEval) readComments() {
	for i := range e.comments {
		c := &e.comments[i]
		m, st := ParseMarker(c.Body, e.in.Item)
		if st == MarkerNone {
			if c.Edited && c.CurrentBody != "" {
				if now, st2 := ParseMarker(c.CurrentBody, e.in.Item); st2 != MarkerNone && now.Kind.Worker() && e.trusted(c, now.Kind) {
					e.report(CodeMarkerEdited, 0, fmt.Sprintf("comment %d by %s was edited into a marker (%s); its earliest text, which is no marker, is what counts",
						c.ID, mkrQuote(c.Author), mkrQuote(now.Line)), c.ID)
				}
			}
			continue
		}
		if !e.trusted(c, m.Kind) {
			who := "neither an agent nor a collaborator with write access"
			if !m.Kind.Worker() {
				who = "not warden, the only author of backlog-warden markers"
			}
			e.report(CodeForgedMarker, m.Fence, fmt.Sprintf("comment %d by %s (%s) starts with a %s marker %s: it establishes nothing and makes nobody an agent",
				c.ID, mkrQuote(c.Author), who, m.Kind, mkrQuote(m.Line)), c.ID)
			continue
		}
		if m.Kind.Worker() {
			if c.Edited {
				now := "other text (not kept)"
				if c.CurrentBody != "" {
					first, _, _ := strings.Cut(c.CurrentBody, "\n")
					now = mkrQuote(strings.TrimSuffix(first, "\r"))
				}
				e.report(CodeMarkerEdited, m.Fence, fmt.Sprintf("marker comment %d by %s was edited: its earliest text %s counts; it now reads %s",
					c.ID, mkrQuote(c.Author), mkrQuote(m.Line), now), c.ID)
			}
			if c.Deleted {
				e.report(CodeMarkerDeleted, m.Fence, fmt.Sprintf("marker comment %d by %s (%s) was deleted: it still counts as first posted",
					c.ID, mkrQuote(c.Author), mkrQuote(m.Line)), c.ID)
			}
		}
		if st == MarkerMalformed {
			e.report(CodeMalformedMarker, 0, fmt.Sprintf("comment %d by %s: %s: %s; it establishes nothing",
				c.ID, mkrQuote(c.Author), mkrQuote(m.Line), m.Reason), c.ID)
			continue
		}
		if m.Kind.Worker() {
			e.marks = append(e.marks, &trlMark{idx: i, c: c, m: m, entry: -1})
		} else {
			e.warden = append(e.warden, TrailMarker{CommentID: c.ID, Author: c.Author, CreatedAt: c.CreatedAt, Marker: m})
		}
	}
}

// trusted: worker markers count from agents, warden, and logins with write
// access (who become agents by posting one); warden's own markers only from
// warden.
func (e *trlEval) trusted(c *TrailComment, k MarkerKind) bool {
	if !k.Worker() {
		return c.AuthorIsWarden
	}
	return c.AuthorIsWarden || c.AuthorIsAgent || c.AuthorHasWrite
}

// buildCustody ties markers to grants and builds the custody records in
// order: the history before the ledger, then the grants by fence.
func (e *trlEval) buildCustody() {
	hasLog := len(e.grants) > 0
	since := e.in.LedgerSince
	var preFence int64
	if hasLog {
		if since.IsZero() {
			since = e.grants[0].GrantedAt
			for _, g := range e.grants {
				if g.GrantedAt.Before(since) {
					since = g.GrantedAt
				}
			}
		}
		preFence = e.grants[0].Fence - 1
	} else {
		preFence = e.in.Fence
	}
	preLedger := func(mk *trlMark) bool {
		return !hasLog && (since.IsZero() || mk.c.CreatedAt.Before(since)) || hasLog && mk.c.CreatedAt.Before(since)
	}
	byFence := make(map[int64]int, len(e.grants))
	for i := range e.grants {
		byFence[e.grants[i].Fence] = i
	}
	// The log's gaps: fences above its first grant, up to the record's
	// fence, that it has no grant for. Fences are issued one by one and
	// every grant is kept, so a gap is a claim a lost ledger granted (a
	// restore from an older backup): its marker stands for it.
	var gaps int64
	inGap := func(f int64) bool {
		_, granted := byFence[f]
		return hasLog && f > preFence+1 && f <= e.in.Fence && !granted
	}
	if hasLog && e.in.Fence > preFence+1 {
		gaps = e.in.Fence - preFence - 1 // the fences above the first grant, up to the record's
		for f := range byFence {
			if f > preFence+1 && f <= e.in.Fence {
				gaps--
			}
		}
	}

	// Claims before the ledger (and after its log): one record per
	// distinct (owner, fence).
	var pre, post []*trlEntry
	preKey := map[[2]string]*trlEntry{}
	var grantMarks = make([][]*trlMark, len(e.grants))
	for _, mk := range e.marks {
		if mk.m.Kind != KindClaim {
			continue
		}
		m := mk.m
		if gi, ok := byFence[m.Fence]; ok && e.grants[gi].Owner == m.Owner {
			if e.grants[gi].Maintenance {
				e.report(CodeUnbackedMarker, m.Fence, fmt.Sprintf("claim marker %s (comment %d) names fence %d, a maintenance claim of %s, which posts no marker and is no attempt: it does not count",
					mkrQuote(m.Line), mk.c.ID, m.Fence, mkrQuote(m.Owner)), mk.c.ID)
				continue
			}
			grantMarks[gi] = append(grantMarks[gi], mk)
			continue
		}
		before, gap := preLedger(mk) && (preFence <= 0 || m.Fence <= preFence), inGap(m.Fence) && !preLedger(mk)
		if before || gap {
			k := [2]string{m.Owner, strconv.FormatInt(m.Fence, 10)}
			if en, ok := preKey[k]; ok {
				e.sameGrant(en, mk)
				continue
			}
			en := &trlEntry{owner: m.Owner, fence: m.Fence, at: mk.c.CreatedAt, marker: mk}
			preKey[k] = en
			if before {
				pre = append(pre, en)
			} else {
				post = append(post, en)
			}
			continue
		}
		e.report(CodeUnbackedMarker, m.Fence, fmt.Sprintf("claim marker %s (comment %d by %s) has no grant behind it: %s; it does not count",
			mkrQuote(m.Line), mk.c.ID, mkrQuote(mk.c.Author), e.grantSide(m.Fence, preFence, hasLog)), mk.c.ID)
	}

	// The record before the ledger's first grant: fences the log does not
	// cover, with no marker evidencing them.
	if preFence > 0 {
		switch {
		case len(pre) == 0:
			e.entries = append(e.entries, &trlEntry{unknown: true, fence: preFence})
			e.report(CodeClaimedUnmarked, preFence, fmt.Sprintf("the fencing token reached %d %s, but the trail has no claim marker: attempts are unknown, not zero (counted as one)", preFence, trlBeforeLog(hasLog)))
		case int64(len(pre)) < preFence:
			e.report(CodeClaimedUnmarked, preFence, fmt.Sprintf("the fencing token reached %d %s, ahead of the trail's %d claim marker(s): markers were dropped, or claims lapsed and were re-claimed", preFence, trlBeforeLog(hasLog), len(pre)))
		}
	}
	e.entries = append(e.entries, pre...)
	for gi := range e.grants {
		g := &e.grants[gi]
		en := &trlEntry{owner: g.Owner, fence: g.Fence, at: g.GrantedAt, grant: g, maint: g.Maintenance}
		for _, mk := range grantMarks[gi] {
			if en.marker == nil {
				en.marker = mk
			} else {
				e.sameGrant(en, mk)
			}
		}
		e.entries = append(e.entries, en)
	}
	// The log's gaps: claims a lost ledger granted, each evidenced by its
	// marker; gaps without one are reported, and count once.
	if gaps > 0 {
		if missing := gaps - int64(len(post)); missing > 0 {
			if len(post) == 0 {
				e.entries = append(e.entries, &trlEntry{unknown: true, fence: e.in.Fence})
			}
			e.report(CodeClaimedUnmarked, e.in.Fence, fmt.Sprintf("the grant log lacks %d fence(s) up to %d (a ledger restored from an older backup), and the trail has claim markers for %d of them: the rest are counted as one",
				gaps, e.in.Fence, len(post)))
		}
		e.entries = append(e.entries, post...)
		slices.SortStableFunc(e.entries, func(a, b *trlEntry) int { return cmp.Compare(a.fence, b.fence) })
	}
	for i, en := range e.entries {
		if en.marker != nil {
			en.marker.entry = i
		}
		for _, mk := range en.repeats {
			mk.entry = i
		}
	}

	// Outcomes close the record they name.
	for _, mk := range e.marks {
		if mk.m.Kind != KindOutcome {
			continue
		}
		m := mk.m
		if gi, ok := byFence[m.Fence]; ok && e.grants[gi].Owner == m.Owner {
			e.attach(mk, func(en *trlEntry) bool { return en.grant == &e.grants[gi] })
			continue
		}
		// Before the ledger a re-claim posts no marker, so the outcome
		// carries a fence at or above its claim marker's; a claim a lost
		// ledger granted (a gap) is closed by an outcome naming its fence.
		pre, gap := preLedger(mk) && (preFence <= 0 || m.Fence <= preFence), inGap(m.Fence) && !preLedger(mk)
		if pre || gap {
			best := -1
			for i, en := range e.entries {
				if en.grant == nil && !en.unknown && en.owner == m.Owner && en.marker.idx < mk.idx &&
					(pre && en.fence <= m.Fence || gap && en.fence == m.Fence) {
					best = i
				}
			}
			if best >= 0 {
				e.attach(mk, func(en *trlEntry) bool { return en == e.entries[best] })
				continue
			}
		}
		e.report(CodeUnbackedMarker, m.Fence, fmt.Sprintf("outcome marker %s (comment %d by %s) closes no claim: %s",
			mkrQuote(m.Line), mk.c.ID, mkrQuote(mk.c.Author), e.grantSide(m.Fence, preFence, hasLog)), mk.c.ID)
	}
}

func trlBeforeLog(hasLog bool) string {
	if hasLog {
		return "before the grant log began"
	}
	return "with no grant log behind it"
}

func (e *trlEval) attach(mk *trlMark, is func(*trlEntry) bool) {
	for i, en := range e.entries {
		if is(en) {
			en.outcomes = append(en.outcomes, mk)
			mk.entry = i
			return
		}
	}
}

// sameGrant handles a further claim marker for a record that already has
// one: one grant, one marker; a second one is a duplicate, by the same
// login or another (a comment delivered twice is one comment, merged
// before).
func (e *trlEval) sameGrant(en *trlEntry, mk *trlMark) {
	en.repeats = append(en.repeats, mk)
	first := en.marker
	e.report(CodeDuplicateClaimMarker, en.fence, fmt.Sprintf("fence %d of %s is announced twice: by %s (comment %d) and again by %s (comment %d); one grant, one marker",
		en.fence, mkrQuote(en.owner), mkrQuote(first.c.Author), first.c.ID, mkrQuote(mk.c.Author), mk.c.ID), first.c.ID, mk.c.ID)
}

// grantSide says what the ledger holds for a fence a marker names.
func (e *trlEval) grantSide(fence, preFence int64, hasLog bool) string {
	for i := range e.grants {
		if g := &e.grants[i]; g.Fence == fence {
			kind := "claim"
			if g.Maintenance {
				kind = "maintenance claim"
			}
			return fmt.Sprintf("the grant log has fence %d as a %s of %s", fence, kind, mkrQuote(g.Owner))
		}
	}
	switch {
	case hasLog:
		return fmt.Sprintf("the grant log has no fence %d (its fences run %d to %d)", fence, e.grants[0].Fence, e.grants[len(e.grants)-1].Fence)
	case preFence > 0:
		return fmt.Sprintf("the fencing token is %d, below it: the trail is ahead of the token", preFence)
	}
	return "the ledger granted no claim since it began keeping this item"
}

// closedBefore reports whether prev's custody ended (a release, or an
// outcome posted before cur's grant or before cur's marker) by the time cur
// was granted.
func closedBefore(prev, cur *trlEntry) bool {
	if prev.grant != nil && !prev.grant.ReleasedAt.IsZero() {
		return true
	}
	for _, o := range prev.outcomes {
		if outcomeBefore(o, cur) {
			return true
		}
	}
	return false
}

// outcomeBefore: o was posted before cur took custody. With a claim marker
// for cur, the trail's order (created_at, id) decides. Without one, o must
// be before the grant's second: GitHub's created_at has one-second
// resolution, the grant milliseconds, so an outcome in the grant's own
// second is not known to precede it and does not close the prior claim (the
// fail-safe reading: a collision is reported rather than missed).
func outcomeBefore(o *trlMark, cur *trlEntry) bool {
	if cur.marker != nil {
		return o.idx < cur.marker.idx
	}
	return cur.grant != nil && o.c.CreatedAt.Before(cur.grant.GrantedAt.Truncate(time.Second))
}

func (e *trlEval) inEpoch(t time.Time) bool {
	return e.in.EpochStart.IsZero() || !t.IsZero() && !t.Before(e.in.EpochStart)
}

// attempts classifies each record and runs the cross-checks against the
// markers: claimed-unmarked, unannounced-takeover, takeover-mismatch.
func (e *trlEval) attempts(res *TrailResult) {
	for i, cur := range e.entries {
		cur.prior = -1
		for j := i - 1; j >= 0; j-- {
			if !e.entries[j].maint {
				cur.prior = j
				break
			}
		}
		if cur.maint {
			continue
		}
		var prev *trlEntry
		if cur.prior >= 0 {
			prev = e.entries[cur.prior]
		}
		switch {
		case cur.unknown, prev == nil, prev.unknown:
			cur.attempt = true
		case closedBefore(prev, cur):
			cur.attempt = true
		case prev.owner != cur.owner:
			cur.attempt, cur.takeover = true, true
		case !e.inEpoch(prev.at) && e.inEpoch(cur.at):
			cur.attempt = true // an unpark came between: the new epoch's first claim
		default:
			// the same owner re-claiming its own lapsed, unreleased claim
		}
		if cur.attempt {
			res.LifetimeAttempts++
			if e.inEpoch(cur.at) {
				res.Attempts++
			}
		}
		if cur.unknown {
			res.AttemptsUnknown = true
			continue
		}
		mk := cur.marker
		if mk == nil {
			young := !e.in.Now.IsZero() && e.in.Now.Sub(cur.at) < ClaimMarkerGrace
			if cur.attempt && !young {
				d := fmt.Sprintf("fence %d was granted to %s at %s, but no claim marker announces it", cur.fence, mkrQuote(cur.owner), fmtTime(cur.at))
				if cur.takeover {
					d += fmt.Sprintf(" (it took custody from %s's unreleased fence %d)", mkrQuote(prev.owner), prev.fence)
				}
				e.report(CodeClaimedUnmarked, cur.fence, d+"; it counts as an attempt all the same")
			}
			continue
		}
		if !cur.attempt && !mk.m.Takeover() {
			e.reclaimMarker(cur, mk)
		}
		// Across a maintenance claim the prior grant was the maintenance
		// claim, released: the new holder cannot know whose work it takes
		// over, so a plain marker is accepted (collisions are watched all
		// the same).
		if cur.takeover && !mk.m.Takeover() && cur.prior == i-1 {
			e.report(CodeUnannouncedTakeover, cur.fence, fmt.Sprintf("%s claimed fence %d (comment %d: %s) while %s's fence %d was neither released nor closed by an outcome, without the takeover form (prior-owner=%s prior-fence=%d); it counts as an attempt",
				mkrQuote(cur.owner), cur.fence, mk.c.ID, mkrQuote(mk.m.Line), mkrQuote(prev.owner), prev.fence, MarkerValue(prev.owner), prev.fence), mk.c.ID)
		}
		if mk.m.Takeover() {
			if why := e.takeoverMismatch(i, mk.m); why != "" {
				e.report(CodeTakeoverMismatch, cur.fence, fmt.Sprintf("takeover marker %s (comment %d) names prior-owner=%s prior-fence=%d, but %s",
					mkrQuote(mk.m.Line), mk.c.ID, mkrQuote(mk.m.PriorOwner), mk.m.PriorFence, why), mk.c.ID)
			}
		}
	}
	for i, cur := range e.entries {
		if cur.attempt {
			res.History = append(res.History, e.historyLine(i))
		}
	}
}

// reclaimMarker reports a claim marker on a same-owner re-claim (no custody
// change): the protocol posts none, so it is a second claim marker by the
// owner that already announced its custody.
func (e *trlEval) reclaimMarker(cur *trlEntry, mk *trlMark) {
	// The custody's earliest claim marker: its attempt's, or (when that
	// was unmarked) an earlier re-claim's.
	var first *trlMark
	for en := e.entries[cur.prior]; ; en = e.entries[en.prior] {
		if en.marker != nil && en.marker.idx < mk.idx {
			first = en.marker
		}
		if en.attempt || en.prior < 0 {
			break
		}
	}
	if first == nil {
		return // the custody's first marker, if late: claimed-unmarked says the rest
	}
	e.report(CodeDuplicateClaimMarker, cur.fence, fmt.Sprintf("%s's fence %d is a re-claim of its own lapsed, unreleased custody (announced by comment %d, fence %d), yet comment %d by %s posts a second claim marker %s: custody did not change, and a re-claim posts none",
		mkrQuote(cur.owner), cur.fence, first.c.ID, first.m.Fence, mk.c.ID, mkrQuote(mk.c.Author), mkrQuote(mk.m.Line)), first.c.ID, mk.c.ID)
}

// takeoverMismatch checks the prior a takeover marker names against the
// record before it ("" when it matches).
func (e *trlEval) takeoverMismatch(i int, m Marker) string {
	if m.PriorOwner == m.Owner {
		return "a claim cannot take over its own owner's claim: a same-owner re-claim posts no marker"
	}
	if i == 0 {
		return "no claim precedes it"
	}
	cur := e.entries[i]
	var cands []*trlEntry
	for j := i - 1; j >= 0; j-- {
		cands = append(cands, e.entries[j])
		if !e.entries[j].maint {
			break
		}
	}
	for _, p := range cands {
		switch {
		case p.unknown:
			return "" // the prior is unknown: nothing to check against
		case p.owner != m.PriorOwner:
		case p.grant != nil && p.fence == m.PriorFence:
			return ""
		case p.grant == nil && cur.grant != nil:
			return "" // the ledger's first grant: its fences need not continue the history's
		case p.grant == nil && m.PriorFence >= p.fence && m.PriorFence < m.Fence:
			return "" // before the ledger, re-claims move the fence unannounced
		}
	}
	p := cands[0]
	return fmt.Sprintf("the prior claim was %s's fence %d", mkrQuote(p.owner), p.fence)
}

// historyLine describes attempt i: its owner, fence and what became of it.
func (e *trlEval) historyLine(i int) AttemptLine {
	a := e.entries[i]
	l := AttemptLine{Owner: a.owner, Fence: a.fence, At: a.at, InEpoch: e.inEpoch(a.at)}
	if a.takeover && a.prior >= 0 {
		p := e.entries[a.prior]
		l.Prior = &PriorClaim{Owner: p.owner, Fence: p.fence}
	}
	if a.unknown {
		l.Fence = 0
		l.Outcome = "unknown: claimed before the grant log, with no claim marker"
		return l
	}
	// The attempt runs to the next one: its re-claims, and maintenance
	// claims between them, are part of it.
	end := i + 1
	for end < len(e.entries) && !e.entries[end].attempt {
		end++
	}
	var next *trlEntry
	if end < len(e.entries) {
		next = e.entries[end]
	}
	maint := e.entries[end-1] // a maintenance claim it ended with, if any
	var last, late *trlMark
	released := false
	var lease time.Time
	for _, en := range e.entries[i:end] {
		if en.maint {
			continue
		}
		for _, o := range en.outcomes {
			switch {
			case next != nil && !outcomeBefore(o, next):
				late = o // posted after custody passed on: a collision's evidence, not this attempt's end
			case last == nil || o.idx > last.idx:
				last = o
			}
		}
		if en.grant != nil {
			released = released || !en.grant.ReleasedAt.IsZero()
			lease = en.grant.LeaseExpiresAt
		}
	}
	switch {
	case last != nil:
		l.Outcome = last.m.Result
	case released:
		l.Outcome = "released, with no outcome marker"
	case maint.maint:
		l.Outcome = "no outcome: superseded by a maintenance claim of " + maint.owner
	case end < len(e.entries):
		l.Outcome = "no outcome: custody passed to " + e.entries[end].owner
	case !e.in.Now.IsZero() && !lease.IsZero() && !e.in.Now.Before(lease):
		l.Outcome = "no outcome yet: the lease lapsed at " + fmtTime(lease)
	default:
		l.Outcome = "no outcome yet: in progress"
	}
	if late != nil && last == nil {
		l.Outcome += fmt.Sprintf(" (its outcome result=%s came later, in comment %d)", late.m.Result, late.c.ID)
	}
	return l
}

// outcomeTags checks the latest outcome against the tags: completion and
// parking are read from the tag only.
func (e *trlEval) outcomeTags() {
	// Only the current custody's outcome speaks for the item: an outcome
	// followed by a later claim is history, and one from a holder already
	// superseded could not have written the tag (a collision, not this).
	current := -1
	for i, en := range e.entries {
		if en.attempt {
			current = i
		}
	}
	var last *trlMark
	for _, mk := range e.marks {
		if mk.m.Kind == KindOutcome && mk.entry >= 0 && mk.entry >= current {
			last = mk
		}
	}
	if last == nil || !e.inEpoch(last.c.CreatedAt) {
		return
	}
	tag := ""
	switch last.m.Result {
	case ResultComplete:
		tag = "state:complete"
	case ResultParked:
		tag = "state:parked"
	default:
		return
	}
	if slices.Contains(e.in.Tags, tag) {
		return
	}
	e.report(CodeOutcomeWithoutTag, last.m.Fence, fmt.Sprintf("outcome marker %s (comment %d by %s) says result=%s, but the item has no %s tag: the tag is the half with effect, so the item reads as not %s",
		mkrQuote(last.m.Line), last.c.ID, mkrQuote(last.c.Author), last.m.Result, tag, last.m.Result), last.c.ID)
}

// wardenAndAgents lists warden's own markers and the logins that became
// agents by posting a marker.
func (e *trlEval) wardenAndAgents(res *TrailResult) {
	res.Warden = append(res.Warden, e.warden...)
	seen := map[string]bool{}
	for _, mk := range e.marks {
		c := mk.c
		if c.AuthorIsAgent || c.AuthorIsWarden || !c.AuthorHasWrite || seen[c.Author] {
			continue
		}
		seen[c.Author] = true
		res.NewAgents = append(res.NewAgents, c.Author)
		e.report(CodeUndeclaredAgent, 0, fmt.Sprintf("%s has write access, is not a configured agent, and posted the %s marker %s (comment %d): it is recorded as an agent",
			mkrQuote(c.Author), mk.m.Kind, mkrQuote(mk.m.Line), c.ID), c.ID)
	}
	slices.Sort(res.NewAgents)
}
