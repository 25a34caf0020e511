package gating

import (
	"testing"
	"time"
)

func TestClaimStateOf(t *testing.T) {
	t0 := time.Date(2026, 9, 6, 12, 0, 0, 0, time.UTC)
	q := time.Hour
	granted := t0.Add(-3 * time.Hour)
	expired := t0.Add(-90 * time.Minute) // the lease ran out 90 minutes ago
	base := ClaimView{Fence: 4, Released: 3, Owner: "w/1", GrantedAt: granted, LeaseExpiresAt: expired}
	with := func(f func(*ClaimView)) ClaimView { c := base; f(&c); return c }
	cases := []struct {
		name string
		c    ClaimView
		now  time.Time
		want ClaimState
	}{
		{"never claimed", ClaimView{}, t0, StateNever},
		{"never claimed, stray lease", ClaimView{LeaseExpiresAt: t0.Add(time.Hour)}, t0, StateNever},
		{"released at the fence", with(func(c *ClaimView) { c.Released = 4 }), t0, StateReleased},
		{"released with lease time left", with(func(c *ClaimView) { c.Released = 4; c.LeaseExpiresAt = t0.Add(time.Hour) }), t0, StateReleased},
		{"lease live", with(func(c *ClaimView) { c.LeaseExpiresAt = t0.Add(time.Second) }), t0, StateHeld},
		{"lease live, no evidence for ages", with(func(c *ClaimView) { c.LeaseExpiresAt = t0.Add(time.Minute); c.GrantedAt = t0.Add(-48 * time.Hour) }), t0, StateHeld},
		{"lease expires exactly now", with(func(c *ClaimView) { c.LeaseExpiresAt = t0; c.LastEvidence = t0.Add(-time.Minute) }), t0, StateLapsed},
		{"evidence just inside the quarantine", with(func(c *ClaimView) { c.LastEvidence = t0.Add(-q + time.Nanosecond) }), t0, StateLapsed},
		{"evidence exactly one quarantine ago", with(func(c *ClaimView) { c.LastEvidence = t0.Add(-q) }), t0, StateAbandoned},
		{"evidence just outside the quarantine", with(func(c *ClaimView) { c.LastEvidence = t0.Add(-q - time.Nanosecond) }), t0, StateAbandoned},
		{"no evidence: the grant counts", with(func(c *ClaimView) {
			c.GrantedAt = t0.Add(-30 * time.Minute)
			c.LeaseExpiresAt = t0.Add(-10 * time.Minute)
		}), t0, StateLapsed},
		{"grant later than stale evidence", with(func(c *ClaimView) {
			c.LastEvidence = t0.Add(-5 * time.Hour)
			c.GrantedAt = t0.Add(-20 * time.Minute)
			c.LeaseExpiresAt = t0.Add(-time.Minute)
		}), t0, StateLapsed},
		{"no evidence, old grant", base, t0, StateAbandoned},
	}
	for _, c := range cases {
		if got := ClaimStateOf(c.c, c.now, q); got != c.want {
			t.Errorf("%s: got %q, want %q", c.name, got, c.want)
		}
	}
}

func TestQuarantineEndsAndInFlight(t *testing.T) {
	t0 := time.Date(2026, 9, 6, 12, 0, 0, 0, time.UTC)
	c := ClaimView{GrantedAt: t0, LastEvidence: t0.Add(10 * time.Minute)}
	if got := QuarantineEnds(c, time.Hour); !got.Equal(t0.Add(70 * time.Minute)) {
		t.Errorf("QuarantineEnds = %s", got)
	}
	c.LastEvidence = t0.Add(-time.Hour)
	if got := QuarantineEnds(c, time.Hour); !got.Equal(t0.Add(time.Hour)) {
		t.Errorf("QuarantineEnds with evidence before the grant = %s", got)
	}
	for st, want := range map[ClaimState]bool{StateNever: false, StateHeld: true, StateLapsed: true, StateAbandoned: false, StateReleased: false} {
		if st.InFlight() != want {
			t.Errorf("%q.InFlight() = %v", st, !want)
		}
	}
}
