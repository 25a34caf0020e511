package gating

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// mnc gives the item the merged-not-complete finding a merged pull request
// pr makes (as the store loads it from the item's stored divergences).
func mnc(pr int) opt {
	return func(c *Candidate) {
		c.Findings = append(c.Findings, Defect{Code: ExMergedNotComplete, Item: c.Item.ID,
			Detail: fmt.Sprintf("ledger: %s has no state:complete (live; never claimed); GitHub: pull request #%d (head feat/x into main) was merged", c.Item.ID, pr)})
	}
}

// finding gives the item another finding with code.
func finding(code string) opt {
	return func(c *Candidate) {
		c.Findings = append(c.Findings, Defect{Code: code, Item: c.Item.ID, Detail: code + " detail"})
	}
}

// An item a merged pull request delivers, with no state:complete, is
// excluded merged-not-complete, and the finding stays among the defects; an
// item that is complete, parked, of an unknown state, malformed, in flight
// or a grouping keeps that exclusion; the rules that only delay a fresh
// claim (blockers, admission, poison, holds, region, resources) come after
// it.
func TestReadyMergedNotComplete(t *testing.T) {
	cases := []struct {
		name   string
		items  []Candidate
		reason string // "" = ready
		subs   []string
	}{
		{"live, a merged PR delivers it", []Candidate{mk(1, mnc(7))}, ExMergedNotComplete,
			[]string{"a merged pull request delivers it and no state:complete is recorded", "pull request #7", "/backlog undelivered"}},
		{"two merged PRs deliver it", []Candidate{mk(1, mnc(8), mnc(7))}, ExMergedNotComplete, []string{"#7", "#8"}},
		{"no finding", []Candidate{mk(1)}, "", nil},
		{"another finding does not exclude", []Candidate{mk(1, finding("resumable-green-pr"), finding("stale-anchor"))}, "", nil},
		{"state:complete recorded", []Candidate{mk(1, mnc(7), complete())}, ExComplete, nil},
		{"parked", []Candidate{mk(1, mnc(7), parked())}, ExParked, nil},
		{"unknown state", []Candidate{mk(1, mnc(7), tg("state:done"))}, ExUnknownState, nil},
		{"malformed", []Candidate{mk(1, mnc(7), drop("phase"))}, ExMalformed, nil},
		{"held: its holder records the completion", []Candidate{mk(1, mnc(7), held("w/1"))}, ExHeld, nil},
		{"lapsed", []Candidate{mk(1, mnc(7), lapsed("w/1"))}, ExLapsed, nil},
		{"abandoned", []Candidate{mk(1, mnc(7), abandoned("w/1"))}, ExMergedNotComplete, nil},
		{"released", []Candidate{mk(1, mnc(7), released("w/1"))}, ExMergedNotComplete, nil},
		{"a grouping stays a grouping", []Candidate{mk(1, mnc(7), set("baseBranch", "feat/epic/x")), mk(2, member(1))}, ExGrouping, nil},
		{"before a live blocker", []Candidate{mk(1, mnc(7), blockedBy(2)), mk(2)}, ExMergedNotComplete, nil},
		{"before a parked blocker", []Candidate{mk(1, mnc(7), blockedBy(2)), mk(2, parked())}, ExMergedNotComplete, nil},
		{"before admission", []Candidate{mk(1, mnc(7), labelled())}, ExMergedNotComplete, nil},
		{"before poison", []Candidate{mk(1, mnc(7), attempts(3))}, ExMergedNotComplete, nil},
		{"before a collision hold", []Candidate{mk(1, mnc(7), func(c *Candidate) { c.CollisionHold = true })}, ExMergedNotComplete, nil},
		{"before the region", []Candidate{mk(1, mnc(7), set("homeRegion", "eu"))}, ExMergedNotComplete, nil},
		{"before a busy resource", []Candidate{mk(1, mnc(7), tg("resource:box")), mk(2, tg("resource:box"), held("w/2"))}, ExMergedNotComplete, nil},
	}
	for _, c := range cases {
		r := ComputeReady(snap(c.items...))
		checkPartition(t, snap(c.items...), r)
		if c.reason == "" {
			if !isReady(r, 1) {
				t.Errorf("%s: not ready: %+v", c.name, r.Excluded)
			}
		} else {
			wantExcluded(t, c.name, r, 1, c.reason, c.subs...)
		}
		// The finding is reported whatever excludes the item.
		want := 0
		for _, f := range c.items[0].Findings {
			if f.Code == ExMergedNotComplete {
				want++
			}
		}
		if got := len(defectsOf(r, ExMergedNotComplete, 1)); got != want {
			t.Errorf("%s: %d merged-not-complete defects, want %d: %+v", c.name, got, want, r.Defects)
		}
	}
}

// A claim on such an item is refused with the exclusion (the store answers
// not-ready with it), whoever asks: the lapsed holder too, which records
// the completion under its fence without a new claim.
func TestClaimableMergedNotComplete(t *testing.T) {
	s := snap(
		mk(1, mnc(7)),
		mk(2, mnc(7), lapsed("w/2")),
		mk(3, mnc(7), held("w/3")),
		mk(4, mnc(7), complete()),
		mk(5, finding("resumable-green-pr")),
	)
	cases := []struct {
		id, owner string
		ok        bool
		reason    string
	}{
		{"issue-1", "w/1", false, ExMergedNotComplete},
		{"issue-2", "w/2", false, ExMergedNotComplete}, // its own lapsed holder
		{"issue-2", "w/9", false, ExLapsed},            // anyone else: the lapse comes first
		{"issue-3", "w/9", false, ExMergedNotComplete}, // the held claim is the store's "contended"
		{"issue-4", "w/1", false, ExComplete},
		{"issue-5", "w/1", true, ""},
	}
	for _, c := range cases {
		ok, e := Claimable(s, ItemID(c.id), c.owner)
		if ok != c.ok || e.Reason != c.reason {
			t.Errorf("Claimable(%s, %s) = %v %+v, want %v %s", c.id, c.owner, ok, e, c.ok, c.reason)
		}
		if e.Reason == ExMergedNotComplete && !strings.Contains(e.Detail, "pull request #7") {
			t.Errorf("Claimable(%s): detail %q does not name the pull request", c.id, e.Detail)
		}
	}
}

// A backlog whose only pending work is finished-looking is starved: the
// empty-ready alarm names what each item waits on.
func TestReadyMergedNotCompleteStarves(t *testing.T) {
	r := ComputeReady(snap(mk(1, mnc(7)), mk(2, complete())))
	ds := defectsOf(r, "ready-empty-pending", 0)
	if len(ds) != 1 || !strings.Contains(ds[0].Detail, "issue-1 waits on merged-not-complete") {
		t.Fatalf("defects %+v", r.Defects)
	}
}

// An item whose homeRegion: is not the region this deployment serves is
// reported unrouted-region, naming both regions, and raises an alarm of its
// own; it stays excluded foreign-region. Only pending items starve: a
// complete or parked one is quiet, and a missing, empty or repeated
// homeRegion: is a tag problem, not this.
func TestReadyUnroutedRegion(t *testing.T) {
	cases := []struct {
		name    string
		item    Candidate
		reason  string // the exclusion ("" = ready)
		flagged bool
	}{
		{"foreign region", mk(1, set("homeRegion", "eu")), ExForeignRegion, true},
		{"foreign region, held", mk(1, set("homeRegion", "eu"), held("w/1")), ExHeld, true},
		{"foreign region, awaiting admission", mk(1, set("homeRegion", "eu"), labelled()), ExAwaitingAdmission, true},
		{"foreign region, unknown state", mk(1, set("homeRegion", "eu"), tg("state:done")), ExUnknownState, true},
		{"foreign region, malformed otherwise", mk(1, set("homeRegion", "eu"), drop("phase")), ExMalformed, true},
		{"foreign region, complete", mk(1, set("homeRegion", "eu"), complete()), ExComplete, false},
		{"foreign region, parked", mk(1, set("homeRegion", "eu"), parked()), ExParked, false},
		{"this region", mk(1), "", false},
		{"case matters", mk(1, set("homeRegion", "Local")), ExForeignRegion, true},
		{"no homeRegion", mk(1, drop("homeRegion")), ExMalformed, false},
		{"empty homeRegion", mk(1, set("homeRegion", "")), ExMalformed, false},
		{"two homeRegion tags", mk(1, tg("homeRegion:eu")), ExMalformed, false},
	}
	for _, c := range cases {
		r := ComputeReady(snap(c.item))
		if c.reason == "" {
			if !isReady(r, 1) {
				t.Errorf("%s: not ready: %+v", c.name, r.Excluded)
			}
		} else {
			wantExcluded(t, c.name, r, 1, c.reason)
		}
		ds := defectsOf(r, CodeUnroutedRegion, 1)
		var alarms []string
		for _, a := range r.Alarms {
			if strings.HasPrefix(a, CodeUnroutedRegion+": ") {
				alarms = append(alarms, a)
			}
		}
		if !c.flagged {
			if len(ds) != 0 || len(alarms) != 0 {
				t.Errorf("%s: reported %+v, alarms %q", c.name, ds, alarms)
			}
			continue
		}
		if len(ds) != 1 || len(alarms) != 1 {
			t.Errorf("%s: %d unrouted-region defects %+v and %d alarms %q, want 1 and 1", c.name, len(ds), ds, len(alarms), alarms)
			continue
		}
		region, _ := soleTag(c.item.Item, "homeRegion")
		for _, sub := range []string{fmt.Sprintf("names region %q", region), `serves region "local"`, "WARDEN_REGION"} {
			if !strings.Contains(ds[0].Detail, sub) {
				t.Errorf("%s: detail %q lacks %q", c.name, ds[0].Detail, sub)
			}
		}
		if want := CodeUnroutedRegion + ": issue-1: " + ds[0].Detail; alarms[0] != want {
			t.Errorf("%s: alarm %q, want %q", c.name, alarms[0], want)
		}
	}
}

// One alarm per unrouted item, in item order, after the cycles and before
// the starved-backlog alarm; the result does not depend on the snapshot's
// order.
func TestReadyUnroutedRegionAlarms(t *testing.T) {
	items := []Candidate{
		mk(10, set("homeRegion", "eu")),
		mk(9, set("homeRegion", "us")),
		mk(3, blockedBy(4)), mk(4, blockedBy(3)),
		mk(5, set("homeRegion", "eu"), complete()),
	}
	r := ComputeReady(snap(items...))
	var prefixes []string
	for _, a := range r.Alarms {
		prefixes = append(prefixes, strings.Join(strings.SplitN(a, ":", 3)[:2], ":"))
	}
	want := []string{"cycle: blockedBy cycle issue-3 → issue-4 → issue-3", "unrouted-region: issue-9", "unrouted-region: issue-10", "ready-empty-pending: the ready set is empty while 4 items are pending (a cycle or a stall)"}
	if !slices.Equal(prefixes, want) {
		t.Errorf("alarms\n %q\nwant (prefixes)\n %q", r.Alarms, want)
	}
	if !strings.Contains(r.Alarms[1], `names region "us", but this deployment serves region "local"`) {
		t.Errorf("alarm %q does not name both regions", r.Alarms[1])
	}
	slices.Reverse(items)
	if r2 := ComputeReady(snap(items...)); !slices.Equal(r2.Alarms, r.Alarms) {
		t.Errorf("alarms depend on the snapshot's order:\n %q\n %q", r2.Alarms, r.Alarms)
	}
}
