package gating

import (
	"strings"
	"testing"
)

// Integration quiescence, both ways (CONTRACT.md §9 "Groupings", §11
// integration-in-flight): while a grouping's integration item is in flight no
// member may be claimed, a member added after that claim included; and the
// integration item is not claimable while any member is in flight.
func TestIntegrationQuiescence(t *testing.T) {
	epic := mk(1, set("baseBranch", "feat/epic/x"))
	cases := []struct {
		name   string
		items  []Candidate
		item   int    // the item asked about
		owner  string // who would claim it
		reason string // "" when claimable
		subs   []string
	}{
		{"member while the integration item is held",
			[]Candidate{epic, mk(2, member(1), complete()), mk(3, member(1)), mk(5, member(1), integrates(1), held("w/5"))},
			3, "w/3", ExIntegrationInFlight, []string{"issue-5 integrates issue-1 and is in flight (held by w/5"}},
		{"member while the integration item is lapsed",
			[]Candidate{epic, mk(2, member(1), complete()), mk(3, member(1)), mk(5, member(1), integrates(1), lapsed("w/5"))},
			3, "w/3", ExIntegrationInFlight, []string{"issue-5 integrates issue-1", "lapsed by w/5"}},
		{"member added after the claim (integration item outside the grouping)",
			[]Candidate{epic, mk(2, member(1), complete()), mk(5, integrates(1), held("w/5")), mk(7, member(1))},
			7, "w/7", ExIntegrationInFlight, []string{"issue-5 integrates issue-1"}},
		{"member once the integration item released",
			[]Candidate{epic, mk(3, member(1)), mk(5, member(1), integrates(1), released("w/5"))},
			3, "w/3", "", nil},
		{"member of another grouping is free",
			[]Candidate{epic, mk(2, set("baseBranch", "feat/epic/y")), mk(3, member(2)), mk(4, member(2), integrates(2), complete()), mk(5, member(1), integrates(1), held("w/5")), mk(6, member(1), complete())},
			3, "w/3", "", nil},
		{"integration item while a member is held",
			[]Candidate{epic, mk(2, member(1), complete(), held("w/2")), mk(5, member(1), integrates(1))},
			5, "w/5", ExIntegrationInFlight, []string{"issue-2 (in flight: held by w/2)"}},
		{"integration item re-claiming while a member added after its claim is held",
			[]Candidate{epic, mk(2, member(1), complete()), mk(5, member(1), integrates(1), lapsed("w/5")), mk(8, member(1), complete(), held("w/8"))},
			5, "w/5", ExIntegrationInFlight, []string{"issue-8 (in flight: held by w/8)"}},
		{"integration item with a live member still waits (blocked)",
			[]Candidate{epic, mk(2, member(1)), mk(5, member(1), integrates(1))},
			5, "w/5", ExBlocked, []string{"issue-2 (live)"}},
		{"integration item with every member complete and none in flight",
			[]Candidate{epic, mk(2, member(1), complete()), mk(5, member(1), integrates(1))},
			5, "w/5", "", nil},
	}
	for _, c := range cases {
		s := snap(c.items...)
		id := IDFor(c.item)
		for _, sv := range []struct {
			where string
			s     Snapshot
		}{{"full", s}, {"partial", partialFor(s, id)}} {
			ok, e := Claimable(sv.s, id, c.owner)
			if c.reason == "" {
				if !ok {
					t.Errorf("%s (%s): not claimable: %+v", c.name, sv.where, e)
				}
				continue
			}
			if ok || e.Reason != c.reason {
				t.Errorf("%s (%s): Claimable = %v %+v, want %s", c.name, sv.where, ok, e, c.reason)
				continue
			}
			for _, sub := range c.subs {
				if !strings.Contains(e.Detail, sub) {
					t.Errorf("%s (%s): detail %q lacks %q", c.name, sv.where, e.Detail, sub)
				}
			}
		}
		r := ComputeReady(s)
		if c.reason == "" {
			if !isReady(r, c.item) {
				t.Errorf("%s: not ready: %+v", c.name, r.Excluded)
			}
		} else {
			want := c.reason
			for _, it := range c.items {
				if it.Item.ID == id && ClaimStateOf(it.Claim, s.Now, s.Quarantine) == StateLapsed {
					want = ExLapsed // its own lapsed claim is the first reason; Claimable lets its owner through
				}
			}
			if e, ok := exOf(r, c.item); !ok || e.Reason != want {
				t.Errorf("%s: ComputeReady excludes it as %+v, want %s", c.name, e, want)
			}
		}
	}
}
