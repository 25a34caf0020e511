package gating

import (
	"fmt"
	"testing"
)

func TestTrailFence(t *testing.T) {
	claim := func(fence int64) string {
		return fmt.Sprintf("<!-- backlog-worker: claim item=issue-3 owner=w/%d region=local fence=%d at=2030-01-02T03:04:05Z -->", fence, fence)
	}
	agent := func(body string) TrailComment { return TrailComment{Author: "w[bot]", AuthorIsAgent: true, Body: body} }
	cases := []struct {
		name string
		cs   []TrailComment
		want int64
	}{
		{"no comment", nil, 0},
		{"prose", []TrailComment{agent("working on it")}, 0},
		{"claims", []TrailComment{agent(claim(1)), agent(claim(3)), agent(claim(2))}, 3},
		{"an outcome", []TrailComment{agent(claim(2)), agent("<!-- backlog-worker: outcome item=issue-3 owner=w/2 fence=5 result=released -->")}, 5},
		{"a takeover's prior fence", []TrailComment{agent("<!-- backlog-worker: claim item=issue-3 owner=w/9 region=local fence=6 at=2030-01-02T03:04:05Z prior-owner=w/2 prior-fence=7 -->")}, 7},
		{"untrusted author", []TrailComment{{Author: "mallory", Body: claim(40)}, agent(claim(2))}, 2},
		{"a login with write access", []TrailComment{{Author: "dev", AuthorHasWrite: true, Body: claim(4)}}, 4},
		{"another item's marker", []TrailComment{agent("<!-- backlog-worker: claim item=issue-4 owner=w/1 region=local fence=9 at=2030-01-02T03:04:05Z -->")}, 0},
		{"beyond the bound", []TrailComment{agent(claim(MaxAdoptedFence + 1)), agent(claim(8))}, 8},
	}
	for _, c := range cases {
		got, claim := TrailFence("issue-3", c.cs)
		if got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
		if claim != nil && (claim.Fence != got || claim.Owner != fmt.Sprintf("w/%d", got)) {
			t.Errorf("%s: the claim of fence %d is %+v", c.name, got, claim)
		}
		if wantClaim := c.name == "claims" || c.name == "untrusted author" || c.name == "a login with write access" || c.name == "beyond the bound"; wantClaim != (claim != nil) {
			t.Errorf("%s: claim %+v, want one: %v", c.name, claim, wantClaim)
		}
	}
}
