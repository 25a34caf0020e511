package gating

import (
	"slices"
	"time"
)

// TrailSummaryVersion numbers the rules a stored TrailSummary was computed
// under. Bump it with any change to what EvaluateTrail counts or holds
// (attempts, custody records, collisions) or to the summary's own steps: a
// store discards a summary of another version and reads the whole history
// again. Version 2: a maintenance claim changes no custody of work and
// Prev is the last non-maintenance record; 3: after a takeover, prose and
// pushes to any branch may be collisions.
const TrailSummaryVersion = 3

// TrailSummary is what a claim's judgement reads of an item's history
// (EvaluateTrail's attempts, the unknown flag and the collision hold, and
// GrantAttempts' floor), with what it takes to extend it exactly when one
// more grant, release, comment or push is recorded, without reading the
// history again. SummarizeTrail makes one from the whole history; the With
// steps extend it and report false when they cannot know the answer
// without the whole history (the caller then reads it).
//
// It carries nothing that depends on the time of reading (the findings'
// grace, the history lines), so it stays true until the history changes.
type TrailSummary struct {
	// Attempts, LifetimeAttempts, AttemptsUnknown and CollisionHold are
	// EvaluateTrail's.
	Attempts         int  `json:"attempts"`
	LifetimeAttempts int  `json:"lifetimeAttempts"`
	AttemptsUnknown  bool `json:"attemptsUnknown,omitempty"`
	CollisionHold    bool `json:"collisionHold,omitempty"`
	// GrantAttempts and GrantLifetime are GrantAttempts' over the grant log.
	GrantAttempts int `json:"grantAttempts"`
	GrantLifetime int `json:"grantLifetime"`
	// Fence, EpochStart and CollisionResolvedAt are the inputs it was
	// computed against (TrailInput's).
	Fence               int64     `json:"fence"`
	EpochStart          time.Time `json:"epochStart,omitzero"`
	CollisionResolvedAt time.Time `json:"resolvedAt,omitzero"`
	// Takeovers are the custody's takeovers, in order: a push to a prior
	// branch, or a marker by a prior owner, may be a collision.
	Takeovers []TrailTakeover `json:"takeovers,omitempty"`

	// Extendable: the grant log covers every fence from its first grant to
	// Fence, its last grant is the last custody record, no marker names a
	// fence above Fence and nothing is held. Only then do the fields below
	// hold (zero otherwise) and WithGrant, WithRelease and a new marker
	// extend the summary.
	Extendable bool `json:"extendable,omitempty"`
	// Since is the earliest grant's time (where the ledger's history begins).
	Since time.Time `json:"since,omitzero"`
	// MaxFence is the highest fence a counted marker names.
	MaxFence int64 `json:"maxFence,omitempty"`
	// LastMarkAt and LastMarkID place the last counted marker in the
	// trail's order (created_at, comment id).
	LastMarkAt time.Time `json:"lastMarkAt,omitzero"`
	LastMarkID int64     `json:"lastMarkId,omitempty"`
	// Cur is the last custody record (the grant that owns Fence) and Prev
	// the last non-maintenance one before it, whose custody of the work a
	// next claim is judged against (Kind "" when none).
	Cur  TrailTail `json:"cur"`
	Prev TrailTail `json:"prev"`
}

// TrailTakeover is a takeover's prior custody: its owner and the branch
// recorded with its grant ("" when none, or before the grant log).
type TrailTakeover struct {
	Owner  string `json:"owner"`
	Branch string `json:"branch,omitempty"`
}

// TrailTail is one custody record as a TrailSummary keeps it.
type TrailTail struct {
	// Kind is "grant", "trail" (a claim marker's record, before or outside
	// the grant log), "unknown" (claims nothing evidences), or "" for none.
	Kind     string    `json:"kind,omitempty"`
	Fence    int64     `json:"fence,omitempty"`
	Owner    string    `json:"owner,omitempty"`
	Branch   string    `json:"branch,omitempty"`
	Maint    bool      `json:"maint,omitempty"`
	Released bool      `json:"released,omitempty"`
	At       time.Time `json:"at,omitzero"`
	Attempt  bool      `json:"attempt,omitempty"`
	Takeover bool      `json:"takeover,omitempty"`
	// Marked: a claim marker announces it. Closed: an outcome marker closes
	// it, the earliest posted at FirstOutcome.
	Marked       bool      `json:"marked,omitempty"`
	Closed       bool      `json:"closed,omitempty"`
	FirstOutcome time.Time `json:"firstOutcome,omitzero"`
}

// CandidateAttempts is the poison threshold's count as the ready set reads
// it: this epoch's attempts from the trail, floored by the grant log's.
func (s TrailSummary) CandidateAttempts() int { return max(s.GrantAttempts, s.Attempts) }

// SummarizeTrail evaluates the whole history (EvaluateTrail and
// GrantAttempts over in) into a summary.
func SummarizeTrail(in TrailInput) TrailSummary {
	res, e := evaluateTrail(in)
	s := TrailSummary{Attempts: res.Attempts, LifetimeAttempts: res.LifetimeAttempts, AttemptsUnknown: res.AttemptsUnknown,
		CollisionHold: res.CollisionHold, Fence: in.Fence, EpochStart: in.EpochStart, CollisionResolvedAt: in.CollisionResolvedAt}
	s.GrantAttempts, s.GrantLifetime = GrantAttempts(in.Item, in.Grants, in.EpochStart)
	for _, en := range e.entries {
		if en.takeover {
			s.Takeovers = append(s.Takeovers, takeoverOf(e.entries[en.prior]))
		}
	}
	n := len(e.grants)
	if n == 0 || !in.LedgerSince.IsZero() || res.CollisionHold || len(e.entries) == 0 {
		return s
	}
	last := e.entries[len(e.entries)-1]
	if last.grant != &e.grants[n-1] || e.grants[n-1].Fence != in.Fence || in.Fence-e.grants[0].Fence+1 != int64(n) {
		return s
	}
	var most int64
	for _, mk := range e.marks {
		most = max(most, mk.m.Fence)
	}
	if most > in.Fence {
		return s
	}
	s.Extendable, s.MaxFence = true, most
	s.Since = e.grants[0].GrantedAt
	for _, g := range e.grants {
		if g.GrantedAt.Before(s.Since) {
			s.Since = g.GrantedAt
		}
	}
	if k := len(e.marks); k > 0 {
		s.LastMarkAt, s.LastMarkID = e.marks[k-1].c.CreatedAt, e.marks[k-1].c.ID
	}
	s.Cur = tailOf(last)
	if last.prior >= 0 {
		s.Prev = tailOf(e.entries[last.prior])
	}
	return s
}

func takeoverOf(prior *trlEntry) TrailTakeover {
	t := TrailTakeover{Owner: prior.owner}
	if prior.grant != nil {
		t.Branch = prior.grant.Branch
	}
	return t
}

func tailOf(en *trlEntry) TrailTail {
	t := TrailTail{Kind: "trail", Fence: en.fence, Owner: en.owner, Maint: en.maint, At: en.at, Attempt: en.attempt,
		Takeover: en.takeover, Marked: en.marker != nil, Closed: len(en.outcomes) > 0}
	switch {
	case en.unknown:
		t.Kind = "unknown"
	case en.grant != nil:
		t.Kind = "grant"
		t.Branch, t.Released = en.grant.Branch, !en.grant.ReleasedAt.IsZero()
	}
	for _, o := range en.outcomes {
		if t.FirstOutcome.IsZero() || o.c.CreatedAt.Before(t.FirstOutcome) {
			t.FirstOutcome = o.c.CreatedAt
		}
	}
	return t
}

func (s TrailSummary) inEpoch(t time.Time) bool {
	return s.EpochStart.IsZero() || !t.IsZero() && !t.Before(s.EpochStart)
}

func (s TrailSummary) priorOwner(owner string) bool {
	return slices.ContainsFunc(s.Takeovers, func(t TrailTakeover) bool { return t.Owner == owner })
}

// WithGrant is the summary with grant g appended to the grant log (and the
// record's fence moved to it). It is false, and the whole history must be
// read, unless the summary is Extendable, g takes the next fence, is no
// older than the log's first grant, and is no takeover (a takeover's
// collisions depend on the pushes and markers after it).
func (s TrailSummary) WithGrant(g GrantEntry) (TrailSummary, bool) {
	if !s.Extendable || g.Fence != s.Fence+1 || g.GrantedAt.Before(s.Since) || s.MaxFence >= g.Fence {
		return s, false
	}
	cur := s.Cur
	en := TrailTail{Kind: "grant", Fence: g.Fence, Owner: g.Owner, Branch: g.Branch, Maint: g.Maintenance,
		Released: !g.ReleasedAt.IsZero(), At: g.GrantedAt}
	// p is the custody of the work g is judged against: a maintenance
	// claim changes none.
	p := cur
	if cur.Maint {
		p = s.Prev
	}
	if !g.Maintenance {
		// closedBefore without a claim marker for g: an outcome counts only
		// from before the grant's second.
		closed := p.Kind == "" || p.Kind == "unknown" || p.Released || p.Closed && p.FirstOutcome.Before(g.GrantedAt.Truncate(time.Second))
		newEpoch := !s.inEpoch(p.At) && s.inEpoch(g.GrantedAt)
		switch {
		case closed:
			en.Attempt = true
		case p.Owner != g.Owner:
			return s, false
		case newEpoch:
			en.Attempt = true
		}
		if en.Attempt {
			s.LifetimeAttempts++
			if s.inEpoch(g.GrantedAt) {
				s.Attempts++
			}
		}
		// The grant log alone: no outcome closes anything, and a record
		// the trail alone evidences is not there.
		if p.Kind != "grant" || p.Released || p.Owner != g.Owner || newEpoch {
			s.GrantLifetime++
			if s.inEpoch(g.GrantedAt) {
				s.GrantAttempts++
			}
		}
	}
	s.Takeovers = slices.Clone(s.Takeovers)
	if !cur.Maint {
		s.Prev = cur
	}
	s.Cur, s.Fence = en, g.Fence
	return s, true
}

// WithRelease is the summary with the grant at fence released. It is false
// unless the summary is Extendable and fence is its current grant's.
func (s TrailSummary) WithRelease(fence int64) (TrailSummary, bool) {
	if !s.Extendable || fence != s.Fence || s.Cur.Kind != "grant" || s.Cur.Fence != fence {
		return s, false
	}
	s.Takeovers = slices.Clone(s.Takeovers)
	s.Cur.Released = true
	return s, true
}

// WithPush is the summary with one more push recorded. A push counts only
// toward a collision after a takeover (to the prior's branch, or elsewhere
// by a login posting for the prior owner): with no takeover it changes
// nothing (a rewrite is a finding, which the summary does not keep); after
// one, it is false.
func (s TrailSummary) WithPush(p BranchPush) (TrailSummary, bool) {
	if len(s.Takeovers) > 0 {
		return s, false
	}
	return s, true
}

// countedMark is the marker c counts as (EvaluateTrail's readComments): a
// well-formed worker marker in its earliest text, by a trusted author.
func countedMark(c *TrailComment, item ItemID) (Marker, bool) {
	if c == nil {
		return Marker{}, false
	}
	m, st := ParseMarker(c.Body, item)
	if st != MarkerValid || !m.Kind.Worker() || !(c.AuthorIsWarden || c.AuthorIsAgent || c.AuthorHasWrite) {
		return Marker{}, false
	}
	return m, true
}

// WithComment is the summary with comment c of item recorded, where old is
// the same comment as recorded before (nil: c is new). A comment that
// counts as no marker before and after (prose, a command, warden's own
// markers, a forged or malformed marker), or whose counted marker is
// unchanged (an edit, a deletion), changes nothing. A new marker latest in
// the trail's order, claiming or closing the current grant by its owner,
// extends an Extendable summary. Anything else is false.
func (s TrailSummary) WithComment(old *TrailComment, c TrailComment, item ItemID) (TrailSummary, bool) {
	_, wasMark := countedMark(old, item)
	m, isMark := countedMark(&c, item)
	switch {
	case !wasMark && !isMark:
		// Prose by a prior owner's login after a takeover is a collision.
		return s, len(s.Takeovers) == 0
	case wasMark && isMark:
		same := old.ID == c.ID && old.Body == c.Body && old.Author == c.Author && old.CreatedAt.Equal(c.CreatedAt)
		return s, same
	case old != nil || !s.Extendable:
		return s, false
	}
	if c.CreatedAt.Before(s.LastMarkAt) || c.CreatedAt.Equal(s.LastMarkAt) && c.ID <= s.LastMarkID {
		return s, false // not the latest: it may come before markers it would reorder
	}
	cur := s.Cur
	if cur.Kind != "grant" || cur.Maint || m.Fence != s.Fence || m.Owner != cur.Owner || s.priorOwner(cur.Owner) {
		return s, false
	}
	s.Takeovers = slices.Clone(s.Takeovers)
	switch m.Kind {
	case KindClaim:
		if !cur.Marked {
			// closedBefore with a claim marker: every outcome of the record
			// before precedes it in the trail.
			cur.Marked = true
			p := s.Prev
			closed := p.Kind == "" || p.Kind == "unknown" || p.Released || p.Closed
			newEpoch := !s.inEpoch(p.At) && s.inEpoch(cur.At)
			attempt, takeover := closed || p.Owner != cur.Owner || newEpoch, !closed && p.Owner != cur.Owner
			if attempt && !cur.Attempt {
				s.LifetimeAttempts++
				if s.inEpoch(cur.At) {
					s.Attempts++
				}
			}
			if cur.Takeover && !takeover {
				s.Takeovers = s.Takeovers[:len(s.Takeovers)-1] // the current record's, the last
				if len(s.Takeovers) == 0 {
					s.Takeovers = nil
				}
			}
			cur.Attempt, cur.Takeover = attempt, takeover
		}
	case KindOutcome:
		if !cur.Closed || c.CreatedAt.Before(cur.FirstOutcome) {
			cur.FirstOutcome = c.CreatedAt
		}
		cur.Closed = true
	}
	s.LastMarkAt, s.LastMarkID, s.Cur = c.CreatedAt, c.ID, cur
	s.MaxFence = max(s.MaxFence, m.Fence)
	return s, true
}
