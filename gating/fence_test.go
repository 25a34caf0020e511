package gating

import (
	"testing"
	"time"
)

func ptr[T any](v T) *T { return &v }

// TestAdmitTable is the protocol's write-admission table, row by row.
func TestAdmitTable(t *testing.T) {
	never := Fence{}
	live := Fence{Token: 5, Released: 3, Region: "local"}
	released := Fence{Token: 5, Released: 5, Region: "local"}
	cases := []struct {
		name   string
		f      Fence
		token  *int64
		region string
		lock   *int64
		want   Verdict
	}{
		{"never claimed, no token", never, nil, "local", nil, Accepted},
		{"never claimed, any token", never, ptr[int64](9), "local", nil, Accepted},
		{"claim live, no token", live, nil, "local", nil, ClaimRequired},
		{"claim released, no token", released, nil, "local", nil, Accepted},
		{"live, token below the mark", live, ptr[int64](4), "local", nil, StaleToken},
		{"released, token below the mark", released, ptr[int64](1), "local", nil, StaleToken},
		{"live, token above, not issued", live, ptr[int64](6), "local", nil, UnissuedToken},
		{"live, token above, lock holds another", live, ptr[int64](7), "local", ptr[int64](6), UnissuedToken},
		{"released, token above, not issued", released, ptr[int64](6), "local", nil, UnissuedToken},
		{"released, token at the mark", released, ptr[int64](5), "local", nil, ClaimReleased},
		{"released, token above, issued by the lock", released, ptr[int64](6), "local", ptr[int64](6), ClaimReleased},
		{"live, current token, other region", live, ptr[int64](5), "eu", nil, ForeignRegion},
		{"live, current token, same region", live, ptr[int64](5), "local", nil, Accepted},
		{"live, token above, issued by the lock", live, ptr[int64](6), "local", ptr[int64](6), Accepted},
	}
	for _, c := range cases {
		if got := Admit(c.f, c.token, c.region, c.lock); got != c.want {
			t.Errorf("%s: got %s, want %s", c.name, got, c.want)
		}
	}
}

func TestFenceClaimed(t *testing.T) {
	for _, c := range []struct {
		f    Fence
		want bool
	}{{Fence{}, false}, {Fence{Token: 1}, true}, {Fence{Token: 2, Released: 1}, true}, {Fence{Token: 2, Released: 2}, false}} {
		if got := c.f.Claimed(); got != c.want {
			t.Errorf("%+v: claimed %v, want %v", c.f, got, c.want)
		}
	}
}

func TestClampLease(t *testing.T) {
	def, max := 30*time.Second, 30*time.Minute
	cases := []struct {
		req  *float64
		want time.Duration
	}{
		{nil, def},
		{ptr(0.0), def},
		{ptr(-5.0), def},
		{ptr(60.0), time.Minute},
		{ptr(1800.0), max},
		{ptr(36000.0), max},
		{ptr(1e300), max},
		{ptr(0.2), time.Second},
	}
	for _, c := range cases {
		if got := ClampLease(c.req, def, max); got != c.want {
			t.Errorf("ClampLease(%v) = %s, want %s", c.req, got, c.want)
		}
	}
}
