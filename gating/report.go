package gating

import (
	"slices"
	"time"
)

// UnparkHint is what would unpark a parked item.
const UnparkHint = "a human with triage or more removes the parked label or runs /backlog unpark"

// Report is the "where are we" report (CONTRACT.md §9 GET /report). Every
// list is present (empty, never null) and ordered by item number, except
// Ready (claim order) and Defects (the Result's order).
type Report struct {
	InFlight          []InFlightEntry  `json:"inFlight"`
	Ready             []ReadyEntry     `json:"ready"`
	Blocked           []BlockedEntry   `json:"blocked"`
	Stalled           []StalledEntry   `json:"stalled"`
	Parked            []ParkedEntry    `json:"parked"`
	AwaitingAdmission []AdmissionEntry `json:"awaitingAdmission"`
	Lapsed            []LapsedEntry    `json:"lapsed"`
	Defects           []Defect         `json:"defects"`
	// CleanReclaims is left empty here: the store fills it from the grant log
	// (a holder that lapsed and re-claimed its own item inside the quarantine).
	CleanReclaims []CleanReclaim `json:"cleanReclaims"`
	// Lines are the report lines that are no item's defect
	// (lease-defaulted: NoteLeaseDefaults), by item then code.
	Lines   []ReportLine  `json:"lines"`
	Summary ReportSummary `json:"summary"`
}

// InFlightEntry is an item under a held or lapsed claim.
type InFlightEntry struct {
	Item              ItemID     `json:"item"`
	Owner             string     `json:"owner"`
	Branch            string     `json:"branch"`
	LeaseExpiresAtUtc time.Time  `json:"leaseExpiresAtUtc"`
	State             ClaimState `json:"state"` // held or lapsed
	Maintenance       bool       `json:"maintenance"`
	// LeaseDefaulted: the claim's lease is the short default, granted or
	// last renewed without leaseSeconds (NoteLeaseDefaults).
	LeaseDefaulted bool `json:"leaseDefaulted,omitempty"`
	// LastEvidence is the holder's latest evidence of work: what keeps a
	// lapsed claim quarantined.
	LastEvidence *ClaimEvidence `json:"lastEvidence,omitempty"`
}

// BlockedEntry is an item excluded as blocked (a live blocker, or an
// integration item waiting on its grouping) or invalid (a missing or invalid
// blocker): WaitingOn names every blocker not yet satisfied, or for an
// integration item the members it waits on.
type BlockedEntry struct {
	Item      ItemID   `json:"item"`
	WaitingOn []ItemID `json:"waitingOn"`
}

// StalledEntry is one blockedBy edge to a parked blocker, with the ruling
// route out (empty when the blocker has none: park-without-route).
type StalledEntry struct {
	Item        ItemID `json:"item"`
	Blocker     ItemID `json:"blocker"`
	RulingOwner string `json:"rulingOwner"`
	RulingTopic string `json:"rulingTopic"`
}

// ParkedEntry is an item tagged state:parked.
type ParkedEntry struct {
	Item        ItemID `json:"item"`
	Attempts    int    `json:"attempts"`
	RulingOwner string `json:"rulingOwner"`
	RulingTopic string `json:"rulingTopic"`
	Unpark      string `json:"unpark"`
}

// AdmissionEntry is a pending item not yet admitted.
type AdmissionEntry struct {
	Item   ItemID `json:"item"`
	Detail string `json:"detail"`
}

// LapsedEntry is an item whose claim lapsed and is in quarantine: only its
// owner may re-claim it before QuarantineEndsAtUtc.
type LapsedEntry struct {
	Item                ItemID    `json:"item"`
	Owner               string    `json:"owner"`
	Since               time.Time `json:"since"`
	QuarantineEndsAtUtc time.Time `json:"quarantineEndsAtUtc"`
	// LastEvidence is what the quarantine runs from: the holder's latest
	// evidence of work, its kind and what it was.
	LastEvidence *ClaimEvidence `json:"lastEvidence"`
}

// CleanReclaim is a same-owner re-claim of a lapsed claim inside the
// quarantine: a near miss the protocol requires reported.
type CleanReclaim struct {
	Item       ItemID    `json:"item"`
	Owner      string    `json:"owner"`
	PriorFence int64     `json:"priorFence"`
	Fence      int64     `json:"fence"`
	AtUtc      time.Time `json:"atUtc"`
}

// ReportSummary counts the report's sections. Stalled counts distinct
// stalled dependents; Complete counts items tagged exactly state:complete.
type ReportSummary struct {
	Items             int `json:"items"`
	Ready             int `json:"ready"`
	InFlight          int `json:"inFlight"`
	Blocked           int `json:"blocked"`
	Stalled           int `json:"stalled"`
	Parked            int `json:"parked"`
	AwaitingAdmission int `json:"awaitingAdmission"`
	Complete          int `json:"complete"`
}

// BuildReport is the "where are we" report (CONTRACT.md §9 GET /report) from
// a snapshot and its result (ComputeReady of the same snapshot).
func BuildReport(s Snapshot, r Result) Report {
	x := indexSnapshot(&s, forReport)
	defer x.release()
	rep := Report{
		InFlight:          []InFlightEntry{},
		Ready:             slices.Clone(r.Ready),
		Blocked:           []BlockedEntry{},
		Stalled:           []StalledEntry{},
		Parked:            []ParkedEntry{},
		AwaitingAdmission: []AdmissionEntry{},
		Lapsed:            []LapsedEntry{},
		Defects:           slices.Clone(r.Defects),
		CleanReclaims:     []CleanReclaim{},
		Lines:             []ReportLine{},
	}
	if rep.Ready == nil {
		rep.Ready = []ReadyEntry{}
	}
	if rep.Defects == nil {
		rep.Defects = []Defect{}
	}
	blocked := make([]bool, len(x.es)) // excluded as blocked or invalid
	nBlocked := 0
	for _, e := range r.Excluded {
		if e.Reason == ExBlocked || e.Reason == ExInvalid || e.Reason == ExIntegrationInFlight {
			if i, ok := x.ids.get(e.Item); ok {
				blocked[i] = true
				nBlocked++
			}
		}
	}
	rep.Blocked = make([]BlockedEntry, 0, nBlocked)
	var open []dep  // one item's unsatisfied edges
	var on []ItemID // its WaitingOn, before it is copied into lists
	var lists idLists

	stalledItems := 0
	for _, i := range x.order() {
		e := &x.es[i]
		cv := &e.c.Claim
		if e.claim.InFlight() {
			rep.InFlight = append(rep.InFlight, InFlightEntry{
				Item: e.id, Owner: cv.Owner, Branch: cv.Branch, LeaseExpiresAtUtc: cv.LeaseExpiresAt.UTC(),
				State: e.claim, Maintenance: cv.Purpose == "maintenance", LastEvidence: cv.Evidence(),
			})
		}
		if e.claim == StateLapsed {
			rep.Lapsed = append(rep.Lapsed, LapsedEntry{
				Item: e.id, Owner: cv.Owner, Since: cv.LeaseExpiresAt.UTC(),
				QuarantineEndsAtUtc: QuarantineEnds(*cv, s.Quarantine).UTC(), LastEvidence: cv.Evidence(),
			})
		}
		switch e.st {
		case stComplete:
			rep.Summary.Complete++
		case stParked:
			rep.Parked = append(rep.Parked, ParkedEntry{
				Item: e.id, Attempts: e.c.Attempts, RulingOwner: e.tagValue("ruling-owner"),
				RulingTopic: e.tagValue("ruling-topic"), Unpark: UnparkHint,
			})
		}
		if !e.pending() {
			continue
		}
		if why, _ := admission(e.c); why != "" {
			rep.AwaitingAdmission = append(rep.AwaitingAdmission, AdmissionEntry{Item: e.id, Detail: why})
		}
		edges := x.depsOf(i)
		stalled := false
		for _, ed := range edges {
			if ed.v != EdgeStalled {
				continue
			}
			te := &x.es[ed.ti]
			rep.Stalled = append(rep.Stalled, StalledEntry{
				Item: e.id, Blocker: te.id,
				RulingOwner: te.tagValue("ruling-owner"), RulingTopic: te.tagValue("ruling-topic"),
			})
			stalled = true
		}
		if stalled {
			stalledItems++
		}
		if blocked[i] {
			open = open[:0]
			for _, ed := range edges {
				if ed.v != EdgeSatisfied {
					open = append(open, ed)
				}
			}
			slices.SortFunc(open, x.compareTargets) // an item's edges name distinct targets
			on = on[:0]
			for _, ed := range open {
				on = append(on, x.target(ed))
			}
			if len(on) == 0 {
				w, _, _ := x.groupWait(i)
				for _, m := range w {
					on = append(on, x.es[m].id)
				}
				h, _ := x.integrationHolders(i)
				for _, m := range h {
					on = append(on, x.es[m].id)
				}
				slices.SortFunc(on, compareIDs)
				on = slices.Compact(on)
			}
			rep.Blocked = append(rep.Blocked, BlockedEntry{Item: e.id, WaitingOn: lists.clone(on)})
		}
	}
	rep.Summary.Items = len(x.es)
	rep.Summary.Ready = len(rep.Ready)
	rep.Summary.InFlight = len(rep.InFlight)
	rep.Summary.Blocked = len(rep.Blocked)
	rep.Summary.Stalled = stalledItems
	rep.Summary.Parked = len(rep.Parked)
	rep.Summary.AwaitingAdmission = len(rep.AwaitingAdmission)
	return rep
}

// idLists hands out many short lists of ids from a few shared arrays: a
// report names what each blocked item waits on, and one allocation per
// blocked item would be most of the report's. Each list's capacity is its
// length, so appending to one copies it rather than overwriting the next.
type idLists struct{ buf []ItemID }

// clone copies ids into a list of their own (empty, never nil, when there
// are none).
func (l *idLists) clone(ids []ItemID) []ItemID {
	if cap(l.buf)-len(l.buf) < len(ids) || l.buf == nil {
		l.buf = make([]ItemID, 0, max(len(ids), 1024))
	}
	start := len(l.buf)
	l.buf = append(l.buf, ids...)
	return l.buf[start:len(l.buf):len(l.buf)]
}
