package store

import (
	"testing"
	"time"
)

type grantSpec struct {
	owner, purpose string
	released       bool
}

func specGrants(specs []grantSpec) []Grant {
	var out []Grant
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	// Listed newest first, to show the order is the fence's, not the slice's.
	for i := len(specs) - 1; i >= 0; i-- {
		s := specs[i]
		g := Grant{Fence: int64(i + 1), Owner: s.owner, Purpose: s.purpose, GrantedAt: at.Add(time.Duration(i) * time.Minute),
			LeaseExpiresAt: at.Add(time.Duration(i)*time.Minute + 30*time.Second)}
		if s.released {
			r := g.GrantedAt.Add(time.Second)
			g.ReleasedAt = &r
		}
		out = append(out, g)
	}
	return out
}

func TestAttemptsCountCustodyChanges(t *testing.T) {
	cases := []struct {
		name     string
		grants   []grantSpec
		want     int
		reclaims []int64 // fences of the clean re-claims
	}{
		{"never claimed", nil, 0, nil},
		{"one claim", []grantSpec{{"a", "", false}}, 1, nil},
		{"same owner re-claims its lapsed claim", []grantSpec{{"a", "", false}, {"a", "", false}}, 1, []int64{2}},
		{"same owner after a release", []grantSpec{{"a", "", true}, {"a", "", false}}, 2, nil},
		{"takeover", []grantSpec{{"a", "", false}, {"b", "", false}}, 2, nil},
		{"maintenance claims are no attempt", []grantSpec{{"a", "", true}, {"pm/fix", "maintenance", true}, {"a", "", false}}, 2, nil},
		// A maintenance claim supersedes the worker's claim (its writes are
		// refused from then on): the worker's next claim changes custody
		// again and counts (fail-safe: counting too few is the danger).
		{"maintenance between re-claims", []grantSpec{{"a", "", false}, {"warden", "maintenance", true}, {"a", "", false}}, 1, []int64{3}},
		{"two lapses", []grantSpec{{"a", "", false}, {"a", "", false}, {"a", "", true}}, 1, []int64{2, 3}},
	}
	for _, c := range cases {
		gs := specGrants(c.grants)
		if got := Attempts(gs); got != c.want {
			t.Errorf("%s: %d attempts, want %d", c.name, got, c.want)
		}
		rc := CleanReclaims("issue-1", gs)
		if len(rc) != len(c.reclaims) {
			t.Errorf("%s: clean re-claims %+v, want fences %v", c.name, rc, c.reclaims)
			continue
		}
		for i, r := range rc {
			if r.Fence != c.reclaims[i] || r.Item != "issue-1" || r.Owner != "a" || r.PriorFence >= r.Fence || r.AtUtc.IsZero() {
				t.Errorf("%s: clean re-claim %+v, want fence %d", c.name, r, c.reclaims[i])
			}
		}
	}
}
