package gating

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// The ready set's tests build small snapshots from these helpers. Every item
// starts with the five mandatory tags (priority:P1, baseBranch:main), an
// admission act recorded, no claim, and createdAt n minutes after rt0.

var (
	rt0  = time.Date(2026, 9, 1, 0, 0, 0, 0, time.UTC)
	rnow = rt0.Add(48 * time.Hour)
)

const rq = time.Hour // the quarantine

type opt func(*Candidate)

func mk(n int, opts ...opt) Candidate {
	c := Candidate{Item: &Item{ID: IDFor(n), CreatedAt: rt0.Add(time.Duration(n) * time.Minute), Tags: with()}, AdmissionRecorded: true}
	for _, o := range opts {
		o(&c)
	}
	return c
}

func snap(cs ...Candidate) Snapshot {
	return Snapshot{Items: cs, Now: rnow, Region: "local", DefaultBranch: "main", Quarantine: rq, PoisonThreshold: 3}
}

func tg(ts ...string) opt { return func(c *Candidate) { c.Item.Tags = append(c.Item.Tags, ts...) } }

// drop removes every tag with the prefix ("backlog" for the plain tag).
func drop(prefix string) opt {
	return func(c *Candidate) {
		c.Item.Tags = slices.DeleteFunc(c.Item.Tags, func(t string) bool {
			p, _, ok := SplitTag(t)
			return t == prefix || ok && p == prefix
		})
	}
}

func set(prefix, value string) opt {
	return func(c *Candidate) { drop(prefix)(c); tg(prefix + ":" + value)(c) }
}

func link(rel Rel, targets ...string) opt {
	return func(c *Candidate) {
		for _, t := range targets {
			c.Item.Links = append(c.Item.Links, Link{rel, t})
		}
	}
}

func blockedBy(ns ...int) opt {
	return func(c *Candidate) {
		for _, n := range ns {
			link(BlockedBy, string(IDFor(n)))(c)
		}
	}
}

// member makes the item a member of epic n, on the epic's branch.
func member(n int) opt {
	return func(c *Candidate) { link(PartOf, string(IDFor(n)))(c); set("baseBranch", "feat/epic/x")(c) }
}

func integrates(n int) opt      { return link(Integrates, string(IDFor(n))) }
func anchored(ps ...string) opt { return link(AnchoredTo, ps...) }
func complete() opt             { return tg("state:complete") }
func parked() opt               { return tg("state:parked", "ruling-owner:pm", "ruling-topic:schema") }
func createdAt(d time.Duration) opt {
	return func(c *Candidate) { c.Item.CreatedAt = rt0.Add(d) }
}
func attempts(n int) opt { return func(c *Candidate) { c.Attempts = n } }
func labelled() opt      { return func(c *Candidate) { c.AdmissionLabel = true } }
func unrecorded() opt    { return func(c *Candidate) { c.AdmissionRecorded = false } }

func claim(owner string, leaseFromNow, evidenceAgo time.Duration) opt {
	return func(c *Candidate) {
		c.Claim = ClaimView{Fence: 5, Released: 4, Owner: owner, Region: "local", Branch: "feat/" + owner,
			GrantedAt: rnow.Add(-5 * time.Hour), LeaseExpiresAt: rnow.Add(leaseFromNow), LastEvidence: rnow.Add(-evidenceAgo)}
	}
}
func held(owner string) opt      { return claim(owner, 10*time.Minute, time.Minute) }
func lapsed(owner string) opt    { return claim(owner, -10*time.Minute, 20*time.Minute) }
func abandoned(owner string) opt { return claim(owner, -3*time.Hour, 2*time.Hour) }
func released(owner string) opt {
	return func(c *Candidate) { claim(owner, 10*time.Minute, time.Minute)(c); c.Claim.Released = 5 }
}

func exOf(r Result, n int) (Exclusion, bool) {
	for _, e := range r.Excluded {
		if e.Item == IDFor(n) {
			return e, true
		}
	}
	return Exclusion{}, false
}

func readyIDs(r Result) []ItemID {
	out := []ItemID{}
	for _, e := range r.Ready {
		out = append(out, e.Item)
	}
	return out
}

func isReady(r Result, n int) bool { return slices.Contains(readyIDs(r), IDFor(n)) }

// defectsOf returns the defects with code on item n (n = 0: repository-wide).
func defectsOf(r Result, code string, n int) []Defect {
	var out []Defect
	for _, d := range r.Defects {
		if d.Code == code && (n == 0 && d.Item == "" || n > 0 && d.Item == IDFor(n)) {
			out = append(out, d)
		}
	}
	return out
}

func codesOn(r Result, n int) []string {
	var out []string
	for _, d := range r.Defects {
		if d.Item == IDFor(n) {
			out = append(out, d.Code)
		}
	}
	return out
}

// wantExcluded fails unless item n is excluded with reason and a detail
// containing every substring.
func wantExcluded(t *testing.T, name string, r Result, n int, reason string, subs ...string) {
	t.Helper()
	e, ok := exOf(r, n)
	if !ok {
		t.Errorf("%s: issue-%d not excluded (ready %v), want %s", name, n, readyIDs(r), reason)
		return
	}
	if e.Reason != reason {
		t.Errorf("%s: issue-%d excluded %s (%s), want %s", name, n, e.Reason, e.Detail, reason)
	}
	for _, s := range subs {
		if !strings.Contains(e.Detail, s) {
			t.Errorf("%s: issue-%d detail %q lacks %q", name, n, e.Detail, s)
		}
	}
	if isReady(r, n) {
		t.Errorf("%s: issue-%d both ready and excluded", name, n)
	}
}

// checkPartition: every item is ready or excluded, exactly once.
func checkPartition(t *testing.T, s Snapshot, r Result) {
	t.Helper()
	seen := map[ItemID]int{}
	for _, e := range r.Ready {
		seen[e.Item]++
	}
	for _, e := range r.Excluded {
		seen[e.Item]++
	}
	for _, c := range s.Items {
		if seen[c.Item.ID] != 1 {
			t.Errorf("%s appears %d times across ready and excluded", c.Item.ID, seen[c.Item.ID])
		}
	}
	if len(seen) != len(s.Items) {
		t.Errorf("%d ids in the result, %d items", len(seen), len(s.Items))
	}
}

// Step 1: every item's tags.
func TestReadyStep1Tags(t *testing.T) {
	cases := []struct {
		name   string
		c      Candidate
		reason string // "" = ready
		code   string // a defect on the item
		sub    string // in the defect detail
	}{
		{"clean", mk(1), "", "", ""},
		{"missing phase", mk(1, drop("phase")), ExMalformed, "missing-mandatory-tag", "phase:"},
		{"missing homeRegion starves silently without the check", mk(1, drop("homeRegion")), ExMalformed, "missing-mandatory-tag", "homeRegion:"},
		{"missing the plain backlog tag", mk(1, drop("backlog")), ExMalformed, "missing-mandatory-tag", "backlog"},
		{"missing baseBranch", mk(1, drop("baseBranch")), ExMalformed, "missing-mandatory-tag", "baseBranch:"},
		{"missing priority", mk(1, drop("priority")), ExMalformed, "missing-mandatory-tag", "priority:"},
		{"two priorities", mk(1, tg("priority:P0")), ExMalformed, "duplicate-attribute-tag", "priority:P1, priority:P0"},
		{"two regions", mk(1, tg("homeRegion:eu")), ExMalformed, "duplicate-attribute-tag", "homeRegion"},
		{"priority P7", mk(1, set("priority", "P7")), ExMalformed, "invalid-priority", "P7"},
		{"phase:complete", mk(1, set("phase", "complete")), ExMalformed, "phase-carries-state", "phase:complete"},
		{"phase:review", mk(1, set("phase", "review")), ExMalformed, "phase-carries-state", "phase:review"},
		{"phase:design", mk(1, set("phase", "design")), ExMalformed, "invalid-phase", "design"},
		{"empty region", mk(1, set("homeRegion", "")), ExMalformed, "empty-tag-value", "homeRegion"},
		{"parked without a route", mk(1, tg("state:parked")), ExParked, "park-without-route", "has 0 and 0"},
		{"parked with an owner only", mk(1, tg("state:parked", "ruling-owner:pm")), ExParked, "park-without-route", "has 1 and 0"},
		{"parked with an empty topic", mk(1, tg("state:parked", "ruling-owner:pm", "ruling-topic:")), ExParked, "park-without-route", ""},
		{"epic child on main", mk(1, link(PartOf, "issue-9")), ExMalformed, "epic-child-on-main", "baseBranch:main is the default branch"},
		{"epic child on the epic branch", mk(1, member(9)), "", "", ""},
	}
	for _, c := range cases {
		r := ComputeReady(snap(c.c, mk(9, set("baseBranch", "feat/epic/x"))))
		checkPartition(t, snap(c.c, mk(9)), r)
		if c.reason == "" {
			if !isReady(r, 1) {
				e, _ := exOf(r, 1)
				t.Errorf("%s: not ready: %+v", c.name, e)
			}
			if codes := codesOn(r, 1); len(codes) > 0 {
				t.Errorf("%s: defects %v on a clean item", c.name, codes)
			}
			continue
		}
		wantExcluded(t, c.name, r, 1, c.reason)
		ds := defectsOf(r, c.code, 1)
		if len(ds) != 1 || !strings.Contains(ds[0].Detail, c.sub) {
			t.Errorf("%s: defects %+v, want one %s containing %q", c.name, r.Defects, c.code, c.sub)
		}
	}
}

// The protocol's four cautionary state: values, and their cousins: each is
// quarantined (never offered) and reported with its value.
func TestReadyCautionaryStates(t *testing.T) {
	for _, v := range []string{"delivered", "done", "in-review", "ready", "Complete", "parked-ish", ""} {
		s := snap(mk(1, tg("state:"+v)), mk(2))
		r := ComputeReady(s)
		checkPartition(t, s, r)
		wantExcluded(t, v, r, 1, ExUnknownState, "state:"+v+" is not a recognised state")
		ds := defectsOf(r, "unknown-state", 1)
		if len(ds) != 1 || !strings.Contains(ds[0].Detail, "state:"+v) {
			t.Errorf("state:%s: unknown-state defects %+v", v, ds)
		}
		if !isReady(r, 2) {
			t.Errorf("state:%s: the clean item is not ready", v)
		}
		// Claimable agrees.
		if ok, e := Claimable(s, "issue-1", "w/1"); ok || e.Reason != ExUnknownState {
			t.Errorf("state:%s: Claimable = %v %+v", v, ok, e)
		}
	}
	// Two recognised values at once: the state is unknown, not complete.
	r := ComputeReady(snap(mk(1, tg("state:complete", "state:parked", "ruling-owner:pm", "ruling-topic:x"))))
	wantExcluded(t, "two states", r, 1, ExUnknownState, "2 state: tags")
	if len(defectsOf(r, "duplicate-attribute-tag", 1)) != 1 {
		t.Errorf("two states: defects %+v", r.Defects)
	}
	// An unknown state quarantines an item even when it is also malformed.
	r = ComputeReady(snap(mk(1, tg("state:done"), drop("phase"))))
	wantExcluded(t, "unknown and malformed", r, 1, ExUnknownState)
	if codes := codesOn(r, 1); !slices.Contains(codes, "missing-mandatory-tag") || !slices.Contains(codes, "unknown-state") {
		t.Errorf("unknown and malformed: defects %v", codes)
	}
}

// Step 1: every blockedBy edge, by the protocol's table.
func TestReadyEdgeClassification(t *testing.T) {
	cases := []struct {
		name    string
		blocker []Candidate // issue-2, or none (deleted)
		reason  string
		code    string // defect on the dependent issue-1
		subs    []string
	}{
		{"complete blocker satisfies", []Candidate{mk(2, complete())}, "", "", nil},
		{"complete blocker with a malformed tag set still satisfies", []Candidate{mk(2, complete(), drop("phase"))}, "", "", nil},
		{"live blocker waits", []Candidate{mk(2)}, ExBlocked, "", []string{"blockedBy issue-2 (live)"}},
		{"held blocker waits", []Candidate{mk(2, held("w/2"))}, ExBlocked, "", []string{"issue-2 (live)"}},
		{"deleted blocker is dangling, not satisfied", nil, ExInvalid, "dangling-blocker", []string{"issue-2 (no such item)"}},
		{"blocker with state:done is invalid", []Candidate{mk(2, tg("state:done"))}, ExInvalid, "invalid-blocker", []string{"state:done"}},
		{"blocker with two state: tags is invalid", []Candidate{mk(2, tg("state:complete", "state:parked"))}, ExInvalid, "invalid-blocker", []string{"2 state: tags"}},
		{"parked blocker stalls", []Candidate{mk(2, parked())}, ExStalled, "stalled-by-parked", []string{"issue-2 (parked; ruling-owner:pm ruling-topic:schema)"}},
		{"parked blocker without a route stalls", []Candidate{mk(2, tg("state:parked"))}, ExStalled, "stalled-by-parked", []string{"no ruling route"}},
	}
	for _, c := range cases {
		s := snap(append([]Candidate{mk(1, blockedBy(2))}, c.blocker...)...)
		r := ComputeReady(s)
		checkPartition(t, s, r)
		if c.reason == "" {
			if !isReady(r, 1) {
				t.Errorf("%s: not ready: %+v", c.name, r.Excluded)
			}
		} else {
			wantExcluded(t, c.name, r, 1, c.reason, c.subs...)
		}
		for _, code := range []string{"dangling-blocker", "invalid-blocker", "stalled-by-parked"} {
			ds := defectsOf(r, code, 1)
			switch {
			case code == c.code && len(ds) != 1:
				t.Errorf("%s: %s defects %+v", c.name, code, ds)
			case code != c.code && len(ds) != 0:
				t.Errorf("%s: unexpected %+v", c.name, ds)
			case len(ds) == 1 && (!strings.Contains(ds[0].Detail, "issue-1") || !strings.Contains(ds[0].Detail, "issue-2")):
				t.Errorf("%s: %s does not name both keys: %q", c.name, code, ds[0].Detail)
			}
		}
	}
	// The stalled edge names the route out; a missing route is its own defect
	// on the blocker.
	r := ComputeReady(snap(mk(1, blockedBy(2)), mk(2, parked())))
	if d := defectsOf(r, "stalled-by-parked", 1); len(d) != 1 || !strings.Contains(d[0].Detail, "ruling owner pm rules on schema") {
		t.Errorf("stalled-by-parked does not name the route: %+v", d)
	}
	r = ComputeReady(snap(mk(1, blockedBy(2)), mk(2, tg("state:parked"))))
	if len(defectsOf(r, "park-without-route", 2)) != 1 {
		t.Errorf("park-without-route missing on the blocker: %+v", r.Defects)
	}
	// An edge to something that is not an item id dangles.
	r = ComputeReady(snap(mk(1, link(BlockedBy, "#12"))))
	wantExcluded(t, "non-id blocker", r, 1, ExInvalid, "#12 (no such item)")
	// A repeated edge is one edge.
	r = ComputeReady(snap(mk(1, blockedBy(2, 2))))
	if len(defectsOf(r, "dangling-blocker", 1)) != 1 {
		t.Errorf("a repeated edge reported twice: %+v", r.Defects)
	}
}

// A dependent with mixed blockers takes the worst verdict and keeps every
// edge's diagnostic.
func TestReadyMixedBlockers(t *testing.T) {
	// issue-10 complete, 11 live, 12 parked, 13 missing, 14 invalid.
	pool := []Candidate{mk(10, complete()), mk(11), mk(12, parked()), mk(14, tg("state:in-review"))}
	cases := []struct {
		blockers []int
		reason   string
		defects  []string // codes on the dependent, sorted
	}{
		{[]int{10}, "", nil},
		{[]int{10, 11}, ExBlocked, nil},
		{[]int{11, 10, 12}, ExStalled, []string{"stalled-by-parked"}},
		{[]int{10, 12}, ExStalled, []string{"stalled-by-parked"}},
		{[]int{11, 12, 13}, ExInvalid, []string{"dangling-blocker", "stalled-by-parked"}},
		{[]int{12, 14}, ExInvalid, []string{"invalid-blocker", "stalled-by-parked"}},
		{[]int{13}, ExInvalid, []string{"dangling-blocker"}},
		{[]int{10, 13}, ExInvalid, []string{"dangling-blocker"}},
		{[]int{14, 11}, ExInvalid, []string{"invalid-blocker"}},
		{[]int{10, 11, 12, 13, 14}, ExInvalid, []string{"dangling-blocker", "invalid-blocker", "stalled-by-parked"}},
	}
	why := map[int]string{11: "issue-11 (live)", 12: "issue-12 (parked", 13: "issue-13 (no such item)", 14: "issue-14 (state:in-review"}
	for _, c := range cases {
		name := fmt.Sprint(c.blockers)
		s := snap(append([]Candidate{mk(1, blockedBy(c.blockers...))}, pool...)...)
		r := ComputeReady(s)
		checkPartition(t, s, r)
		if c.reason == "" {
			if !isReady(r, 1) {
				t.Errorf("%s: not ready", name)
			}
		} else {
			var subs []string
			for _, b := range c.blockers {
				if b != 10 {
					subs = append(subs, why[b])
				}
			}
			wantExcluded(t, name, r, 1, c.reason, subs...)
			if e, _ := exOf(r, 1); strings.Contains(e.Detail, "issue-10") {
				t.Errorf("%s: a satisfied edge named: %q", name, e.Detail)
			}
		}
		got := codesOn(r, 1)
		slices.Sort(got)
		if !slices.Equal(got, c.defects) {
			t.Errorf("%s: defects %v, want %v", name, got, c.defects)
		}
	}
	// The detail lists the edges worst first.
	r := ComputeReady(snap(append([]Candidate{mk(1, blockedBy(11, 12, 13, 14))}, pool...)...))
	e, _ := exOf(r, 1)
	i13, i14, i12, i11 := strings.Index(e.Detail, "issue-13"), strings.Index(e.Detail, "issue-14"), strings.Index(e.Detail, "issue-12"), strings.Index(e.Detail, "issue-11")
	if !(i13 < i14 && i14 < i12 && i12 < i11) {
		t.Errorf("edges not worst first: %q", e.Detail)
	}
}

// Edge diagnostics are kept whatever else excludes the dependent.
func TestReadyEdgeDiagnosticsRetained(t *testing.T) {
	for _, c := range []struct {
		name   string
		opt    opt
		reason string
	}{
		{"held", held("w/1"), ExHeld},
		{"parked", parked(), ExParked},
		{"complete", complete(), ExComplete},
		{"unknown state", tg("state:done"), ExUnknownState},
		{"malformed", drop("priority"), ExMalformed},
	} {
		r := ComputeReady(snap(mk(1, c.opt, blockedBy(2, 3, 4)), mk(3, parked()), mk(4, tg("state:done"))))
		wantExcluded(t, c.name, r, 1, c.reason)
		for _, code := range []string{"dangling-blocker", "stalled-by-parked", "invalid-blocker"} {
			if len(defectsOf(r, code, 1)) != 1 {
				t.Errorf("%s: %s not retained: %+v", c.name, code, r.Defects)
			}
		}
	}
	// And even when other work is ready.
	r := ComputeReady(snap(mk(1, blockedBy(2)), mk(2, parked()), mk(5)))
	if !isReady(r, 5) || len(defectsOf(r, "stalled-by-parked", 1)) != 1 {
		t.Errorf("stalled diagnostic dropped when work is ready: %+v", r)
	}
}

// Step 2: state: tags and live claims.
func TestReadyStep2StateAndClaims(t *testing.T) {
	cases := []struct {
		name   string
		c      Candidate
		reason string
		subs   []string
	}{
		{"complete, silently", mk(1, complete()), ExComplete, nil},
		{"parked, silently", mk(1, parked()), ExParked, []string{"ruling-owner:pm"}},
		{"held", mk(1, held("w/1")), ExHeld, []string{"held by w/1 (fence 5)"}},
		{"lapsed, in quarantine", mk(1, lapsed("w/1")), ExLapsed, []string{"w/1", "quarantined until 2026-09-03T00:40:00Z"}},
		{"abandoned", mk(1, abandoned("w/1")), "", nil},
		{"released", mk(1, released("w/1")), "", nil},
		{"never claimed", mk(1), "", nil},
	}
	for _, c := range cases {
		r := ComputeReady(snap(c.c))
		if c.reason == "" {
			if !isReady(r, 1) {
				t.Errorf("%s: not ready: %+v", c.name, r.Excluded)
			}
		} else {
			wantExcluded(t, c.name, r, 1, c.reason, c.subs...)
		}
		if codes := codesOn(r, 1); len(codes) > 0 {
			t.Errorf("%s: defects %v", c.name, codes)
		}
	}
}

// The lapsed/abandoned boundary as the ready set and Claimable see it.
func TestReadyQuarantineBoundary(t *testing.T) {
	ev := func(ago time.Duration) opt { return claim("w/1", -2*time.Hour, ago) }
	for _, c := range []struct {
		name  string
		ago   time.Duration
		state ClaimState
	}{
		{"evidence just inside the window", rq - time.Nanosecond, StateLapsed},
		{"evidence at the window's edge", rq, StateAbandoned},
		{"evidence just outside the window", rq + time.Nanosecond, StateAbandoned},
	} {
		s := snap(mk(1, ev(c.ago)))
		s.Items[0].Claim.GrantedAt = rnow.Add(-c.ago - time.Hour)
		r := ComputeReady(s)
		okOther, eOther := Claimable(s, "issue-1", "w/2")
		okOwn, _ := Claimable(s, "issue-1", "w/1")
		switch c.state {
		case StateLapsed:
			wantExcluded(t, c.name, r, 1, ExLapsed)
			if okOther || eOther.Reason != ExLapsed || !okOwn {
				t.Errorf("%s: Claimable other %v %+v, own %v", c.name, okOther, eOther, okOwn)
			}
		case StateAbandoned:
			if !isReady(r, 1) || !okOther || !okOwn {
				t.Errorf("%s: ready %v, Claimable other %v own %v", c.name, isReady(r, 1), okOther, okOwn)
			}
		}
	}
}

// Step 3: groupings and their integration item.
func TestReadyGroupings(t *testing.T) {
	epic := mk(1, set("baseBranch", "feat/epic/x"))
	t.Run("a grouping is never offered", func(t *testing.T) {
		s := snap(epic, mk(2, member(1)), mk(3, member(1), integrates(1), blockedBy(2)))
		r := ComputeReady(s)
		wantExcluded(t, "epic", r, 1, ExGrouping, "a grouping of 2 items")
		if !isReady(r, 2) {
			t.Errorf("member not ready: %+v", r.Excluded)
		}
		wantExcluded(t, "integration", r, 3, ExBlocked, "issue-2 (live)")
		if ok, e := Claimable(s, "issue-1", "w/1"); ok || e.Reason != ExGrouping {
			t.Errorf("Claimable(epic) = %v %+v", ok, e)
		}
		// Even complete members and a finished integration item never make the
		// epic itself claimable.
		r = ComputeReady(snap(epic, mk(2, member(1), complete()), mk(3, member(1), integrates(1), complete())))
		wantExcluded(t, "epic, all done", r, 1, ExGrouping)
	})
	t.Run("the integration item waits for every other member", func(t *testing.T) {
		// No blockedBy edges: the grouping rule alone holds it.
		s := snap(epic, mk(2, member(1)), mk(3, member(1), parked()), mk(4, member(1), complete()), mk(5, member(1), integrates(1)))
		r := ComputeReady(s)
		wantExcluded(t, "integration", r, 5, ExBlocked, "integrates issue-1", "issue-2 (live)", "issue-3 (parked")
		if e, _ := exOf(r, 5); strings.Contains(e.Detail, "issue-4") || strings.Contains(e.Detail, "issue-5 (") {
			t.Errorf("names a complete member or itself: %q", e.Detail)
		}
	})
	t.Run("the integration item waits until no member is in flight", func(t *testing.T) {
		s := snap(epic, mk(2, member(1), complete(), held("w/2")), mk(3, member(1), complete()), mk(5, member(1), integrates(1)))
		r := ComputeReady(s)
		wantExcluded(t, "integration", r, 5, ExIntegrationInFlight, "issue-2 (in flight: held by w/2)")
		s.Items[1].Claim.Released = 5
		if r := ComputeReady(s); !isReady(r, 5) {
			t.Errorf("not ready once the member released: %+v", r.Excluded)
		}
	})
	t.Run("an integration item outside the grouping still waits", func(t *testing.T) {
		r := ComputeReady(snap(epic, mk(2, member(1)), mk(5, integrates(1))))
		wantExcluded(t, "integration", r, 5, ExBlocked, "issue-2 (live)")
	})
	t.Run("two integration items wait on each other", func(t *testing.T) {
		s := snap(epic, mk(2, member(1), complete()), mk(5, integrates(1)), mk(6, integrates(1)))
		r := ComputeReady(s)
		wantExcluded(t, "first", r, 5, ExBlocked, "issue-6 (live)")
		wantExcluded(t, "second", r, 6, ExBlocked, "issue-5 (live)")
		if d := defectsOf(r, "integration-duplicate", 1); len(d) != 1 || !strings.Contains(d[0].Detail, "issue-5, issue-6") {
			t.Errorf("integration-duplicate: %+v", r.Defects)
		}
	})
	t.Run("integration defects", func(t *testing.T) {
		cases := []struct {
			name  string
			items []Candidate
			want  []string // codes on the epic
		}{
			{"missing", []Candidate{epic, mk(2, member(1))}, []string{"integration-missing"}},
			{"one, fan-out open", []Candidate{epic, mk(2, member(1)), mk(5, member(1), integrates(1))}, nil},
			{"one, fan-out complete", []Candidate{epic, mk(2, member(1), complete()), mk(3, member(1), complete()), mk(5, member(1), integrates(1))}, []string{"integration-incomplete"}},
			{"one, all complete", []Candidate{epic, mk(2, member(1), complete()), mk(5, member(1), integrates(1), complete())}, nil},
			{"duplicate", []Candidate{epic, mk(2, member(1)), mk(5, integrates(1)), mk(6, integrates(1))}, []string{"integration-duplicate"}},
			{"not a grouping", []Candidate{epic, mk(5, integrates(1))}, nil},
		}
		for _, c := range cases {
			r := ComputeReady(snap(c.items...))
			got := codesOn(r, 1)
			if !slices.Equal(got, c.want) {
				t.Errorf("%s: %v, want %v (%+v)", c.name, got, c.want, r.Defects)
			}
		}
		r := ComputeReady(snap(epic, mk(2, member(1), complete()), mk(5, member(1), integrates(1))))
		if d := defectsOf(r, "integration-incomplete", 1); len(d) != 1 || !strings.Contains(d[0].Detail, "issue-5") {
			t.Errorf("integration-incomplete does not name the integration item: %+v", d)
		}
		if !isReady(r, 5) {
			t.Errorf("the integration item is the next work: %+v", r.Excluded)
		}
	})
}

// Step 5: admission.
func TestReadyAdmission(t *testing.T) {
	cases := []struct {
		name      string
		c         Candidate
		ready     bool
		defect    bool
		detailSub string
	}{
		{"admitted", mk(1), true, false, ""},
		{"label present", mk(1, labelled()), false, false, "admission label"},
		{"label present, never recorded", mk(1, labelled(), unrecorded()), false, false, "admission label"},
		{"label absent, no act recorded", mk(1, unrecorded()), false, true, "admission-unrecorded"},
	}
	for _, c := range cases {
		s := snap(c.c)
		r := ComputeReady(s)
		if c.ready != isReady(r, 1) {
			t.Errorf("%s: ready %v", c.name, isReady(r, 1))
		}
		if !c.ready {
			wantExcluded(t, c.name, r, 1, ExAwaitingAdmission, c.detailSub)
		}
		if got := len(defectsOf(r, "admission-unrecorded", 1)) == 1; got != c.defect {
			t.Errorf("%s: admission-unrecorded %v", c.name, got)
		}
		if ok, _ := Claimable(s, "issue-1", "w/1"); ok != c.ready {
			t.Errorf("%s: Claimable %v", c.name, ok)
		}
	}
	// A complete item never reports an unrecorded admission.
	if r := ComputeReady(snap(mk(1, unrecorded(), complete()))); len(r.Defects) != 0 {
		t.Errorf("complete item: %+v", r.Defects)
	}
}

// Poison, collision holds and regions.
func TestReadyPoisonCollisionRegion(t *testing.T) {
	epic := func(extra ...string) Candidate { return mk(9, set("baseBranch", "feat/epic/x"), tg(extra...)) }
	cases := []struct {
		name   string
		items  []Candidate
		reason string
		defect string
	}{
		{"under the threshold", []Candidate{mk(1, attempts(2))}, "", ""},
		{"at the threshold", []Candidate{mk(1, attempts(3))}, ExPoisoned, "poisoned"},
		{"over the threshold", []Candidate{mk(1, attempts(7))}, ExPoisoned, "poisoned"},
		{"at the threshold, held", []Candidate{mk(1, attempts(3), held("w/1"))}, ExHeld, ""},
		{"at the threshold, lapsed", []Candidate{mk(1, attempts(3), lapsed("w/1"))}, ExLapsed, ""},
		{"at the threshold, abandoned", []Candidate{mk(1, attempts(3), abandoned("w/1"))}, ExPoisoned, "poisoned"},
		{"an epic raises it", []Candidate{mk(1, attempts(3), member(9)), epic("threshold:5")}, "", ""},
		{"an epic's raised threshold reached", []Candidate{mk(1, attempts(5), member(9)), epic("threshold:5")}, ExPoisoned, "poisoned"},
		{"an epic lowers it", []Candidate{mk(1, attempts(2), member(9)), epic("threshold:2")}, ExPoisoned, "poisoned"},
		{"a bad threshold tag is ignored", []Candidate{mk(1, attempts(2), member(9)), epic("threshold:zero")}, "", ""},
		{"the epic's tag is not the member's", []Candidate{mk(1, attempts(3), tg("threshold:9"))}, ExPoisoned, "poisoned"},
		{"a parked item is not reported poisoned", []Candidate{mk(1, attempts(3), parked())}, ExParked, ""},
		{"collision hold", []Candidate{mk(1, func(c *Candidate) { c.CollisionHold = true })}, ExCollisionHold, ""},
		{"foreign region", []Candidate{mk(1, set("homeRegion", "eu"))}, ExForeignRegion, ""},
	}
	for _, c := range cases {
		r := ComputeReady(snap(c.items...))
		if c.reason == "" {
			if !isReady(r, 1) {
				t.Errorf("%s: not ready: %+v", c.name, r.Excluded)
			}
		} else {
			wantExcluded(t, c.name, r, 1, c.reason)
		}
		if got := len(defectsOf(r, "poisoned", 1)) == 1; got != (c.defect == "poisoned") {
			t.Errorf("%s: poisoned defect %v", c.name, got)
		}
	}
	// A repository threshold of 0 means the protocol's 3.
	s := snap(mk(1, attempts(2)), mk(2, attempts(3)))
	s.PoisonThreshold = 0
	r := ComputeReady(s)
	if !isReady(r, 1) || isReady(r, 2) {
		t.Errorf("default threshold: %+v", r)
	}
}

// Step 6: (priority, createdAt, id numerically).
func TestReadyOrder(t *testing.T) {
	s := snap(
		mk(10, createdAt(time.Hour)),
		mk(3, set("priority", "P2"), createdAt(0)),
		mk(9, createdAt(time.Hour)),
		mk(20, set("priority", "P0"), createdAt(5*time.Hour)),
		mk(5, createdAt(30*time.Minute)),
		mk(100, createdAt(time.Hour)),
		mk(7, set("priority", "P3"), createdAt(-time.Hour)),
	)
	r := ComputeReady(s)
	want := []ItemID{"issue-20", "issue-5", "issue-9", "issue-10", "issue-100", "issue-3", "issue-7"}
	if got := readyIDs(r); !slices.Equal(got, want) {
		t.Errorf("order %v, want %v", got, want)
	}
	if r.Ready[0].Priority != "P0" || r.Ready[6].Priority != "P3" {
		t.Errorf("priorities %+v", r.Ready)
	}
}

// Step 7: a candidate whose anchors overlap an in-flight item's sorts after
// every disjoint one; a directory anchor covers the files below it.
func TestReadyAnchorOverlap(t *testing.T) {
	s := snap(
		mk(1, held("w/1"), anchored("src/")),             // in flight: a directory
		mk(2, held("w/2"), anchored("pkg/a/b.go")),       // in flight: a file
		mk(3, lapsed("w/3"), anchored("lib")),            // lapsed counts as in flight
		mk(4, abandoned("w/4"), anchored("tools/x.go")),  // abandoned does not
		mk(10, anchored("src/wal.go")),                   // under 1's directory
		mk(11, anchored("docs/x.md")),                    // disjoint
		mk(12, anchored("pkg")),                          // a directory over 2's file
		mk(13),                                           // no radius: disjoint
		mk(14, anchored("srcx/a.go")),                    // "src" is not a segment prefix
		mk(15, anchored("src/wal.go", "pkg/a/b.go")),     // overlaps 1 and 2
		mk(16, anchored("pkg/a/b.go")),                   // the same file
		mk(17, anchored("lib/deep/x.go")),                // under 3's anchor
		mk(18, anchored("tools/x.go")),                   // 4 is not in flight
		mk(19, set("priority", "P0"), anchored("src/")),  // a high priority does not jump the disjoint ones
		mk(20, set("priority", "P3"), anchored("pkg/b")), // disjoint from pkg/a/b.go
	)
	r := ComputeReady(s)
	want := []ItemID{"issue-4", "issue-11", "issue-13", "issue-14", "issue-18", "issue-20", "issue-19", "issue-10", "issue-12", "issue-15", "issue-16", "issue-17"}
	if got := readyIDs(r); !slices.Equal(got, want) {
		t.Errorf("order %v\nwant  %v", got, want)
	}
	overlaps := map[ItemID][]ItemID{}
	for _, e := range r.Ready {
		overlaps[e.Item] = e.Overlaps
	}
	wantOv := map[ItemID][]ItemID{
		"issue-10": {"issue-1"}, "issue-12": {"issue-2"}, "issue-15": {"issue-1", "issue-2"},
		"issue-16": {"issue-2"}, "issue-17": {"issue-3"}, "issue-19": {"issue-1"},
	}
	for id, got := range overlaps {
		if !slices.Equal(got, wantOv[id]) {
			t.Errorf("%s overlaps %v, want %v", id, got, wantOv[id])
		}
	}
	// The whole repository as an anchor overlaps every anchored in-flight item.
	r = ComputeReady(snap(mk(1, held("w/1"), anchored("a/b")), mk(2, anchored(".")), mk(3, held("w/3"), anchored("./")), mk(4, anchored("z"))))
	for _, e := range r.Ready {
		switch e.Item {
		case "issue-2":
			if !slices.Equal(e.Overlaps, []ItemID{"issue-1", "issue-3"}) {
				t.Errorf("root anchor overlaps %v", e.Overlaps)
			}
		case "issue-4":
			if !slices.Equal(e.Overlaps, []ItemID{"issue-3"}) {
				t.Errorf("under a root in-flight anchor: %v", e.Overlaps)
			}
		}
	}
}

// Step 8: resource collision excludes, it does not deprioritise.
func TestReadyResourceBusy(t *testing.T) {
	s := snap(
		mk(1, held("w/1"), tg("resource:box")),
		mk(2, lapsed("w/2"), tg("resource:gpu")),
		mk(3, abandoned("w/3"), tg("resource:dev")),
		mk(4, released("w/4"), tg("resource:tpu")),
		mk(10, tg("resource:box")),
		mk(11, tg("resource:gpu", "resource:fpga")),
		mk(12, tg("resource:dev")),
		mk(13, tg("resource:tpu")),
		mk(14, tg("resource:box"), set("priority", "P0"), anchored("far/away.go")),
		mk(15, tg("needs-box-exclusive")), // a bare tag is read by no step
	)
	r := ComputeReady(s)
	wantExcluded(t, "box", r, 10, ExResourceBusy, "resource:box", "issue-1")
	wantExcluded(t, "gpu", r, 11, ExResourceBusy, "resource:gpu", "issue-2")
	wantExcluded(t, "box, disjoint, P0", r, 14, ExResourceBusy, "resource:box", "issue-1")
	for _, n := range []int{12, 13, 15} {
		if !isReady(r, n) {
			t.Errorf("issue-%d not ready", n)
		}
	}
	// An item's own claim never collides with itself (Claimable ignores it).
	if ok, e := Claimable(s, "issue-1", "w/1"); !ok {
		t.Errorf("Claimable(own held) = %+v", e)
	}
}

// Cycles of length 1 (a self edge, as an import can bring), 2 and 5, named
// in order from their lowest item.
func TestReadyCycles(t *testing.T) {
	s := snap(
		mk(1, blockedBy(1)),
		mk(2, blockedBy(3)), mk(3, blockedBy(2)),
		mk(14, blockedBy(12)), mk(12, blockedBy(10)), mk(10, blockedBy(13)), mk(13, blockedBy(11)), mk(11, blockedBy(14)),
		mk(20, blockedBy(10)),                                                   // waits on the cycle, not on it
		mk(30, blockedBy(31)), mk(31, blockedBy(30, 32)), mk(32, blockedBy(31)), // a knot of three
		mk(40),
	)
	r := ComputeReady(s)
	var got []string
	for _, d := range defectsOf(r, "cycle", 0) {
		got = append(got, d.Detail)
	}
	want := []string{
		"blockedBy cycle issue-1 → issue-1",
		"blockedBy cycle issue-2 → issue-3 → issue-2",
		"blockedBy cycle issue-10 → issue-13 → issue-11 → issue-14 → issue-12 → issue-10",
		"blockedBy cycle issue-30 → issue-31 → issue-30 (one cycle of a knot of 3 items: issue-30, issue-31, issue-32)",
	}
	if len(got) != len(want) {
		t.Fatalf("cycles %q", got)
	}
	for k := range want {
		if !strings.HasPrefix(got[k], want[k]) {
			t.Errorf("cycle %d: %q, want %q", k, got[k], want[k])
		}
		if !strings.HasPrefix(r.Alarms[k], "cycle: "+want[k]) {
			t.Errorf("alarm %d: %q", k, r.Alarms[k])
		}
	}
	if len(r.Alarms) != 4 {
		t.Errorf("alarms %q", r.Alarms)
	}
	wantExcluded(t, "self", r, 1, ExBlocked, "issue-1 (live)")
	if !slices.Equal(readyIDs(r), []ItemID{"issue-40"}) {
		t.Errorf("ready %v", readyIDs(r))
	}
	// A cycle through a complete item is still a cycle in the data.
	r = ComputeReady(snap(mk(1, blockedBy(2)), mk(2, blockedBy(1), complete())))
	if len(defectsOf(r, "cycle", 0)) != 1 || !isReady(r, 1) {
		t.Errorf("cycle through a complete item: %+v", r)
	}
}

// Cycle detection is iterative: a 50,000-long chain and a 50,000-long ring.
func TestReadyCycleDepth(t *testing.T) {
	const n = 50000
	items := make([]Candidate, n)
	for i := range n {
		items[i] = mk(i+1, blockedBy(i+2))
	}
	items[n-1] = mk(n) // a chain ending in a live item
	r := ComputeReady(snap(items...))
	if len(defectsOf(r, "cycle", 0)) != 0 || !isReady(r, n) {
		t.Fatalf("chain: %d cycles", len(defectsOf(r, "cycle", 0)))
	}
	items[n-1] = mk(n, blockedBy(1)) // close the ring
	r = ComputeReady(snap(items...))
	cs := defectsOf(r, "cycle", 0)
	if len(cs) != 1 || !strings.HasPrefix(cs[0].Detail, "blockedBy cycle issue-1 → issue-2 → issue-3") || !strings.Contains(cs[0].Detail, "issue-50000 → issue-1:") {
		t.Fatalf("ring: %d cycles", len(cs))
	}
}

// An empty ready set with pending work alarms, naming what each pending item
// waits on; with nothing pending it is quiet.
func TestReadyEmptyPending(t *testing.T) {
	s := snap(
		mk(1, blockedBy(2)), mk(2, blockedBy(1)),
		mk(3, labelled()),
		mk(4, complete()),
		mk(5, parked()),
		mk(6, tg("state:done")),
	)
	r := ComputeReady(s)
	if len(r.Ready) != 0 {
		t.Fatalf("ready %v", readyIDs(r))
	}
	ds := defectsOf(r, "ready-empty-pending", 0)
	if len(ds) != 1 {
		t.Fatalf("defects %+v", r.Defects)
	}
	for _, sub := range []string{"4 items are pending", "issue-1 waits on blocked (blockedBy issue-2 (live))", "issue-2 waits on blocked",
		"issue-3 waits on awaiting-admission", "issue-6 waits on unknown-state"} {
		if !strings.Contains(ds[0].Detail, sub) {
			t.Errorf("detail lacks %q: %q", sub, ds[0].Detail)
		}
	}
	for _, not := range []string{"issue-4 ", "issue-5 "} {
		if strings.Contains(ds[0].Detail, not) {
			t.Errorf("names a finished item %q: %q", not, ds[0].Detail)
		}
	}
	if i1, i3 := strings.Index(ds[0].Detail, "issue-1 "), strings.Index(ds[0].Detail, "issue-3 "); i1 > i3 {
		t.Errorf("pending items out of order")
	}
	if last := r.Alarms[len(r.Alarms)-1]; !strings.HasPrefix(last, "ready-empty-pending: ") || !strings.Contains(last, "issue-3 waits on awaiting-admission") {
		t.Errorf("alarms %q", r.Alarms)
	}
	// Nothing pending: quiet.
	for _, s := range []Snapshot{snap(mk(4, complete()), mk(5, parked())), snap()} {
		r := ComputeReady(s)
		if len(r.Alarms) != 0 || len(defectsOf(r, "ready-empty-pending", 0)) != 0 {
			t.Errorf("alarm with nothing pending: %+v", r)
		}
		if r.Ready == nil || r.Excluded == nil || r.Defects == nil || r.Alarms == nil {
			t.Errorf("nil lists: %#v", r)
		}
	}
	// Work ready: quiet.
	if r := ComputeReady(snap(mk(1), mk(2, labelled()))); len(r.Alarms) != 0 {
		t.Errorf("alarm while work is ready: %q", r.Alarms)
	}
}

// With work in flight the backlog is moving: an empty ready set whose
// pending items wait on held claims raises no alarm.
func TestReadyEmptyWhileInFlightIsQuiet(t *testing.T) {
	r := ComputeReady(snap(mk(1, held("w/1")), mk(2, blockedBy(1))))
	if len(r.Ready) != 0 || len(defectsOf(r, "ready-empty-pending", 0)) != 0 || len(r.Alarms) != 0 {
		t.Fatalf("ready %v defects %+v alarms %v", readyIDs(r), r.Defects, r.Alarms)
	}
}

// Excluded and Defects are sorted by item number, then code; the result does
// not depend on the snapshot's order.
func TestReadyDeterministic(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for seed := range 20 {
		s := randomSnapshot(rand.New(rand.NewPCG(uint64(seed), 3)), 60)
		want := ComputeReady(s)
		for range 5 {
			s2 := s
			s2.Items = slices.Clone(s.Items)
			rng.Shuffle(len(s2.Items), func(i, j int) { s2.Items[i], s2.Items[j] = s2.Items[j], s2.Items[i] })
			if got := ComputeReady(s2); !reflect.DeepEqual(got, want) {
				t.Fatalf("seed %d: the result depends on the snapshot's order:\n%+v\n%+v", seed, got, want)
			}
		}
		for k := 1; k < len(want.Excluded); k++ {
			a, b := want.Excluded[k-1], want.Excluded[k]
			if a.Item.Number() > b.Item.Number() || a.Item == b.Item {
				t.Fatalf("seed %d: excluded out of order: %v then %v", seed, a.Item, b.Item)
			}
		}
		for k := 1; k < len(want.Defects); k++ {
			a, b := want.Defects[k-1], want.Defects[k]
			if a.Item.Number() > b.Item.Number() || a.Item == b.Item && a.Code > b.Code {
				t.Fatalf("seed %d: defects out of order: %+v then %+v", seed, a, b)
			}
		}
	}
	// issue-9 before issue-10, repository-wide findings first.
	r := ComputeReady(snap(mk(10, drop("phase")), mk(9, drop("phase")), mk(2, blockedBy(2))))
	var items []ItemID
	for _, d := range r.Defects {
		items = append(items, d.Item)
	}
	if !slices.Equal(items, []ItemID{"", "", "issue-9", "issue-10"}) {
		t.Errorf("defect order %v", items)
	}
}

func TestClaimable(t *testing.T) {
	s := snap(
		mk(1, lapsed("w/1")),
		mk(2, held("w/2")),
		mk(3, held("w/3"), attempts(3)),
		mk(4, lapsed("w/4"), attempts(3)),
		mk(5, lapsed("w/5"), labelled()),
		mk(6, abandoned("w/6")),
		mk(7, lapsed("")),
	)
	cases := []struct {
		id, owner string
		ok        bool
		reason    string
	}{
		{"issue-1", "w/1", true, ""},                   // its own owner re-claims during the quarantine
		{"issue-1", "w/9", false, ExLapsed},            // anyone else is refused
		{"issue-2", "w/2", true, ""},                   // a held claim is the store's "contended"
		{"issue-2", "w/9", true, ""},                   // ditto
		{"issue-3", "w/3", true, ""},                   // the holder continues its attempt: not poison
		{"issue-4", "w/4", true, ""},                   // a same-owner re-claim is not an attempt
		{"issue-4", "w/9", false, ExLapsed},            //
		{"issue-5", "w/5", false, ExAwaitingAdmission}, // the other rules still apply
		{"issue-6", "w/9", true, ""},                   // abandoned: anyone
		{"issue-7", "", false, ExLapsed},               // an empty owner matches nobody
		{"issue-99", "w/1", false, ExMissing},          //
	}
	for _, c := range cases {
		ok, e := Claimable(s, ItemID(c.id), c.owner)
		if ok != c.ok || e.Reason != c.reason {
			t.Errorf("Claimable(%s, %s) = %v %+v, want %v %s", c.id, c.owner, ok, e, c.ok, c.reason)
		}
		if ok && e != (Exclusion{}) {
			t.Errorf("ok with an exclusion %+v", e)
		}
		if !ok && e.Item != ItemID(c.id) {
			t.Errorf("exclusion names %s", e.Item)
		}
	}
}

// partialFor restricts a full snapshot to what Claimable documents it needs
// for id.
func partialFor(s Snapshot, id ItemID) Snapshot {
	var c *Candidate
	for k := range s.Items {
		if s.Items[k].Item.ID == id {
			c = &s.Items[k]
		}
	}
	keep := map[ItemID]bool{id: true}
	integrated := map[ItemID]bool{}
	for _, l := range c.Item.Links {
		switch l.Rel {
		case BlockedBy, PartOf:
			keep[ItemID(l.Target)] = true
		case Integrates:
			integrated[ItemID(l.Target)] = true
		}
	}
	for _, o := range s.Items {
		if ClaimStateOf(o.Claim, s.Now, s.Quarantine).InFlight() {
			keep[o.Item.ID] = true
		}
		for _, l := range o.Item.Links {
			t := ItemID(l.Target)
			if l.Rel == PartOf && t == id || (l.Rel == PartOf || l.Rel == Integrates) && integrated[t] {
				keep[o.Item.ID] = true
			}
		}
	}
	out := s
	out.Items = nil
	for _, o := range s.Items {
		if keep[o.Item.ID] {
			out.Items = append(out.Items, o)
		}
	}
	return out
}

// randomSnapshot builds an adversarial repository: gaps in the numbering
// (dangling blockers), cautionary states, parks with and without routes,
// groupings with zero, one or two integration items, every claim state,
// resources, anchors, admission gaps, attempts, holds, foreign regions,
// merged-not-complete findings and cycles.
func randomSnapshot(rng *rand.Rand, n int) Snapshot {
	pick := func(xs ...string) string { return xs[rng.IntN(len(xs))] }
	chance := func(p float64) bool { return rng.Float64() < p }
	s := snap()
	for num := 1; num <= n; num++ {
		if num > 4 && chance(0.06) {
			continue // a deleted item
		}
		c := mk(num, set("priority", pick("P0", "P1", "P2", "P3")), createdAt(time.Duration(rng.IntN(20))*time.Minute))
		switch {
		case chance(0.25):
			complete()(&c)
		case chance(0.06):
			parked()(&c)
		case chance(0.03):
			tg("state:parked")(&c)
		case chance(0.05):
			tg("state:" + pick("delivered", "done", "in-review", "ready"))(&c)
		case chance(0.01):
			tg("state:complete", "state:parked")(&c)
		}
		switch {
		case chance(0.03):
			drop(pick("backlog", "priority", "phase", "homeRegion", "baseBranch"))(&c)
		case chance(0.02):
			tg("priority:P0")(&c)
		case chance(0.05):
			set("homeRegion", "eu")(&c)
		}
		if chance(0.2) {
			tg("resource:" + pick("box", "gpu"))(&c)
		}
		if num <= 4 && chance(0.5) {
			tg("threshold:" + pick("2", "5", "x"))(&c)
		}
		for range rng.IntN(4) {
			blockedBy(1 + rng.IntN(n+3))(&c)
		}
		if num > 4 && chance(0.3) {
			member(1 + rng.IntN(4))(&c)
			if chance(0.1) {
				set("baseBranch", "main")(&c)
			}
		}
		if chance(0.08) {
			integrates(1 + rng.IntN(4))(&c)
		}
		if chance(0.5) {
			for range 1 + rng.IntN(2) {
				anchored(pick("src/", "src/a.go", "src/b/c.go", "docs", "docs/x.md", "pkg/z.go", ".", "srcx/q.go"))(&c)
			}
		}
		owner := pick("a/1", "b/2", "c/3")
		switch k := rng.IntN(10); {
		case k < 4:
		case k < 5:
			held(owner)(&c)
		case k < 6:
			lapsed(owner)(&c)
		case k < 7:
			abandoned(owner)(&c)
		case k < 8:
			claim(owner, -10*time.Minute, rq-time.Nanosecond)(&c) // lapsed at the edge
		default:
			released(owner)(&c)
		}
		if chance(0.1) {
			labelled()(&c)
		} else if chance(0.08) {
			unrecorded()(&c)
		}
		c.Attempts = rng.IntN(5)
		c.CollisionHold = chance(0.03)
		if chance(0.05) {
			mnc(1 + rng.IntN(n))(&c) // a merged pull request delivers it
		}
		s.Items = append(s.Items, c)
	}
	return s
}

type verdict struct {
	ok bool
	ex Exclusion
}

func verdictsOf(r Result) map[ItemID]verdict {
	m := map[ItemID]verdict{}
	for _, e := range r.Ready {
		m[e.Item] = verdict{ok: true}
	}
	for _, e := range r.Excluded {
		m[e.Item] = verdict{ex: e}
	}
	return m
}

// Claimable on a partial snapshot agrees with ComputeReady on the whole one,
// for every item of many random repositories and for its own owner and
// another. Where Claimable ignores the candidate's own claim (held, or lapsed
// for its owner), the reference is ComputeReady with that claim taken away
// (and its attempts, which the live claim shields from the poison rule).
func TestClaimableAgreesWithComputeReady(t *testing.T) {
	items, partialSizes, checks := 0, 0, 0
	for seed := range 300 {
		rng := rand.New(rand.NewPCG(uint64(seed), 0x5eed))
		s := randomSnapshot(rng, 20+rng.IntN(40))
		r := ComputeReady(s)
		checkPartition(t, s, r)
		full := verdictsOf(r)
		for k, c := range s.Items {
			id := c.Item.ID
			st := ClaimStateOf(c.Claim, s.Now, s.Quarantine)
			p := partialFor(s, id)
			items++
			partialSizes += len(p.Items)
			for _, owner := range []string{c.Claim.Owner, "z/9"} {
				want := full[id]
				if st == StateHeld || st == StateLapsed && owner == c.Claim.Owner && owner != "" {
					s2 := s
					s2.Items = slices.Clone(s.Items)
					s2.Items[k].Claim = ClaimView{}
					s2.Items[k].Attempts = 0
					want = verdictsOf(ComputeReady(s2))[id]
				}
				ok, e := Claimable(p, id, owner)
				checks++
				if ok != want.ok || e != want.ex {
					t.Fatalf("seed %d, %s (claim %s), owner %q:\n Claimable(partial %d items) = %v %+v\n ComputeReady = %v %+v",
						seed, id, st, owner, len(p.Items), ok, e, want.ok, want.ex)
				}
				if ok2, e2 := Claimable(s, id, owner); ok2 != ok || e2 != e {
					t.Fatalf("seed %d, %s: Claimable on the full snapshot disagrees with the partial one", seed, id)
				}
			}
		}
	}
	t.Logf("%d items, %d checks, partial snapshots %.1f items on average", items, checks, float64(partialSizes)/float64(items))
}

// Invariants of the ready set on random repositories: nothing offered has a
// state: tag, a malformed tag set, a live claim, members, an unsatisfied
// blocker, a missing admission, poison, a hold, a foreign region, a
// merged-not-complete finding or a busy resource; and every pending item of
// a foreign region is reported unrouted-region and raises an alarm.
func TestReadyInvariants(t *testing.T) {
	for seed := range 200 {
		s := randomSnapshot(rand.New(rand.NewPCG(uint64(seed), 99)), 50)
		r := ComputeReady(s)
		byID := map[ItemID]*Candidate{}
		partOf := map[ItemID]bool{}
		busy := map[string]ItemID{}
		for k := range s.Items {
			c := &s.Items[k]
			byID[c.Item.ID] = c
			for _, t := range c.Item.Targets(PartOf) {
				if ItemID(t) != c.Item.ID {
					partOf[ItemID(t)] = true
				}
			}
		}
		for _, c := range byID {
			if ClaimStateOf(c.Claim, s.Now, s.Quarantine).InFlight() {
				for _, t := range c.Item.Tags {
					if v, ok := strings.CutPrefix(t, "resource:"); ok {
						busy[v] = c.Item.ID
					}
				}
			}
		}
		for _, e := range r.Ready {
			c := byID[e.Item]
			_, hasState := c.Item.Tag("state")
			bad := hasState || len(CheckTags(c.Item.Tags, true)) > 0 || ClaimStateOf(c.Claim, s.Now, s.Quarantine).InFlight() ||
				partOf[e.Item] || c.AdmissionLabel || !c.AdmissionRecorded || c.CollisionHold || !c.Item.HasTag("homeRegion:local")
			for _, b := range c.Item.Targets(BlockedBy) {
				if bc, ok := byID[ItemID(b)]; !ok || !slices.Equal(stateTags(bc), []string{"state:complete"}) {
					bad = true
				}
			}
			for _, t := range c.Item.Tags {
				if v, ok := strings.CutPrefix(t, "resource:"); ok && busy[v] != "" {
					bad = true
				}
			}
			for _, f := range c.Findings {
				bad = bad || f.Code == ExMergedNotComplete
			}
			if bad {
				t.Fatalf("seed %d: %s offered: %+v", seed, e.Item, *c)
			}
		}
		for id, c := range byID {
			st := stateTags(c)
			pending := len(st) != 1 || st[0] != "state:complete" && st[0] != "state:parked"
			region, one := soleTag(c.Item, "homeRegion")
			want := pending && one && region != "" && region != s.Region
			got := len(defectsOf(r, CodeUnroutedRegion, id.Number())) == 1 &&
				slices.ContainsFunc(r.Alarms, func(a string) bool { return strings.HasPrefix(a, CodeUnroutedRegion+": "+string(id)+": ") })
			if got != want {
				t.Fatalf("seed %d: %s (tags %v) reported unrouted-region %v, want %v", seed, id, c.Item.Tags, got, want)
			}
		}
	}
}

func stateTags(c *Candidate) []string {
	var out []string
	for _, t := range c.Item.Tags {
		if strings.HasPrefix(t, "state:") {
			out = append(out, t)
		}
	}
	return out
}

// The fast path that lets ComputeReady skip CheckTags on a clean tag set
// must agree with CheckTags exactly, over every vocabulary value and its
// near misses, repeated and omitted.
func TestTagsCleanMatchesCheckTags(t *testing.T) {
	vocab := []string{"backlog", "backlog:x", "Backlog",
		"priority:P0", "priority:P1", "priority:P2", "priority:P3", "priority:P4", "priority:p1", "priority:",
		"phase:research", "phase:implementation", "phase:integration", "phase:complete", "phase:review", "phase:design", "phase:",
		"homeRegion:local", "homeRegion:eu", "homeRegion:",
		"baseBranch:main", "baseBranch:feat/epic/x", "baseBranch:",
		"state:complete", "state:parked", "state:done", "state:", "state:Complete",
		"ruling-owner:pm", "ruling-owner:", "ruling-topic:x", "ruling-topic:",
		"resource:box", "threshold:3", "pr:1", "stale", "x:y:z", ":v"}
	mandatory := []string{"backlog", "priority:P1", "phase:research", "homeRegion:local", "baseBranch:main"}
	rng := rand.New(rand.NewPCG(1, 1))
	s := snap()
	cleanSeen, dirtySeen := 0, 0
	for k := range 300000 {
		var tags []string
		if k%2 == 0 {
			// The mandatory set with a few changes: the cases that matter.
			tags = slices.Clone(mandatory)
			for range rng.IntN(3) {
				if len(tags) > 0 && rng.IntN(3) == 0 {
					tags = slices.Delete(tags, 0, 1)
				}
				tags = append(tags, vocab[rng.IntN(len(vocab))])
			}
			rng.Shuffle(len(tags), func(i, j int) { tags[i], tags[j] = tags[j], tags[i] })
		} else {
			for range rng.IntN(9) {
				tags = append(tags, vocab[rng.IntN(len(vocab))])
			}
		}
		e := entry{c: &Candidate{Item: &Item{ID: "issue-1", Tags: tags}}}
		e.read(&s)
		want := len(CheckTags(tags, true)) == 0
		if e.clean != want {
			t.Fatalf("%q: fast path says clean=%v, CheckTags finds %v", tags, e.clean, CheckTags(tags, true))
		}
		if want {
			cleanSeen++
		} else {
			dirtySeen++
		}
	}
	if cleanSeen < 1000 || dirtySeen < 1000 {
		t.Errorf("corpus too one-sided: %d clean, %d not", cleanSeen, dirtySeen)
	}
}
