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
	Summary       ReportSummary  `json:"summary"`
}

// InFlightEntry is an item under a held or lapsed claim.
type InFlightEntry struct {
	Item              ItemID     `json:"item"`
	Owner             string     `json:"owner"`
	Branch            string     `json:"branch"`
	LeaseExpiresAtUtc time.Time  `json:"leaseExpiresAtUtc"`
	State             ClaimState `json:"state"` // held or lapsed
	Maintenance       bool       `json:"maintenance"`
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
	x := newIndex(&s)
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
	}
	if rep.Ready == nil {
		rep.Ready = []ReadyEntry{}
	}
	if rep.Defects == nil {
		rep.Defects = []Defect{}
	}
	blocked := make(map[ItemID]bool)
	for _, e := range r.Excluded {
		if e.Reason == ExBlocked || e.Reason == ExInvalid {
			blocked[e.Item] = true
		}
	}
	order := make([]int32, len(x.es))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(a, b int32) int { return compareIDs(x.es[a].id, x.es[b].id) })

	stalledItems := 0
	var buf []edge
	for _, i := range order {
		e := &x.es[i]
		cv := &e.c.Claim
		if e.claim.InFlight() {
			rep.InFlight = append(rep.InFlight, InFlightEntry{
				Item: e.id, Owner: cv.Owner, Branch: cv.Branch, LeaseExpiresAtUtc: cv.LeaseExpiresAt.UTC(),
				State: e.claim, Maintenance: cv.Purpose == "maintenance",
			})
		}
		if e.claim == StateLapsed {
			rep.Lapsed = append(rep.Lapsed, LapsedEntry{
				Item: e.id, Owner: cv.Owner, Since: cv.LeaseExpiresAt.UTC(),
				QuarantineEndsAtUtc: QuarantineEnds(*cv, s.Quarantine).UTC(),
			})
		}
		switch e.st {
		case stComplete:
			rep.Summary.Complete++
		case stParked:
			rep.Parked = append(rep.Parked, ParkedEntry{
				Item: e.id, Attempts: e.c.Attempts, RulingOwner: e.owner,
				RulingTopic: e.topic, Unpark: UnparkHint,
			})
		}
		if !e.pending() {
			continue
		}
		if why, _ := admission(e.c); why != "" {
			rep.AwaitingAdmission = append(rep.AwaitingAdmission, AdmissionEntry{Item: e.id, Detail: why})
		}
		buf = x.appendEdges(buf[:0], i)
		edges := buf
		stalled := false
		for _, ed := range edges {
			if ed.v != EdgeStalled {
				continue
			}
			te := &x.es[ed.ti]
			rep.Stalled = append(rep.Stalled, StalledEntry{
				Item: e.id, Blocker: ed.target,
				RulingOwner: te.owner, RulingTopic: te.topic,
			})
			stalled = true
		}
		if stalled {
			stalledItems++
		}
		if blocked[e.id] {
			var on []ItemID
			for _, ed := range edges {
				if ed.v != EdgeSatisfied {
					on = append(on, ed.target)
				}
			}
			if len(on) == 0 {
				w, _ := x.groupWait(i)
				for _, m := range w {
					on = append(on, x.es[m].id)
				}
			}
			slices.SortFunc(on, compareIDs)
			on = slices.Compact(on)
			if on == nil {
				on = []ItemID{}
			}
			rep.Blocked = append(rep.Blocked, BlockedEntry{Item: e.id, WaitingOn: on})
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
