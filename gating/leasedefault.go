package gating

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// CodeLeaseDefaulted is the report line of a claim whose lease is the
// short default: granted, or last renewed, without an explicit
// leaseSeconds (CONTRACT.md §11; the grant says leaseDefaulted: true). The
// protocol's rule is to always pass leaseSeconds; a claim on the default
// lapses under a single test run.
const CodeLeaseDefaulted = "lease-defaulted"

// ReportLine is one line of the report that is no item's defect (CONTRACT.md
// §11 "report line").
type ReportLine struct {
	Code   string `json:"code"`
	Item   ItemID `json:"item,omitempty"`
	Detail string `json:"detail"`
}

// LeaseDefault is a claim whose current lease is the default one: its
// grant (Via "claim") or its latest renew (Via "renew") named no
// leaseSeconds, At then.
type LeaseDefault struct {
	Item  ItemID
	Fence int64
	Via   string
	At    time.Time
}

// NoteLeaseDefaults marks the report's in-flight claims whose lease was
// defaulted (ds, each for the item's current fence) and lists each as a
// lease-defaulted line. An entry naming no in-flight item is ignored (a
// claim released since, or not in this report).
func (r *Report) NoteLeaseDefaults(ds []LeaseDefault) {
	if r.Lines == nil {
		r.Lines = []ReportLine{}
	}
	by := make(map[ItemID]LeaseDefault, len(ds))
	for _, d := range ds {
		by[d.Item] = d
	}
	for i := range r.InFlight {
		e := &r.InFlight[i]
		d, ok := by[e.Item]
		if !ok {
			continue
		}
		e.LeaseDefaulted = true
		what := "granted"
		if d.Via == "renew" {
			what = "last renewed"
		}
		r.Lines = append(r.Lines, ReportLine{Code: CodeLeaseDefaulted, Item: e.Item, Detail: fmt.Sprintf(
			"%s's claim by %s (fence %d) was %s without leaseSeconds at %s and holds the short default lease (%s until %s): pass leaseSeconds explicitly on every claim and renew",
			e.Item, e.Owner, d.Fence, what, fmtTime(d.At), e.State, fmtTime(e.LeaseExpiresAtUtc))})
	}
	slices.SortStableFunc(r.Lines, func(a, b ReportLine) int {
		if c := compareIDs(a.Item, b.Item); c != 0 {
			return c
		}
		return strings.Compare(a.Code, b.Code)
	})
}
