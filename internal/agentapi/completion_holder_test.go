package agentapi

import (
	"strconv"
	"testing"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/mirror/store"
)

// TestHolderLogin: the claim holder's login is the author of the first
// trusted claim marker of the current grant; warden's marker (post_markers)
// or none leaves it unknown.
func TestHolderLogin(t *testing.T) {
	cur := &store.Item{ID: "issue-5", Fence: gating.Fence{Token: 3}, Grant: &store.Grant{Fence: 3, Owner: "w1/run"}}
	mk := func(owner string, fence int) string {
		return "<!-- backlog-worker: claim item=issue-5 owner=" + owner + " region=local fence=" + strconv.Itoa(fence) + " at=2026-12-01T10:00:00Z -->"
	}
	rec := func(author, body string, agent, warden, write bool) store.TrailRecord {
		return store.TrailRecord{Author: author, EarliestBody: body, IsAgent: agent, IsWarden: warden, HasWrite: write}
	}
	cases := []struct {
		name  string
		trail []store.TrailRecord
		want  string
	}{
		{"the agent's marker", []store.TrailRecord{rec("w1-bot", mk("w1/run", 3), true, false, false)}, "w1-bot"},
		{"a collaborator with write access", []store.TrailRecord{rec("dana", mk("w1/run", 3), false, false, true)}, "dana"},
		{"a forged marker does not count", []store.TrailRecord{rec("mallory", mk("w1/run", 3), false, false, false)}, ""},
		{"an older fence's marker", []store.TrailRecord{rec("w1-bot", mk("w1/run", 2), true, false, false)}, ""},
		{"another owner's marker", []store.TrailRecord{rec("w2-bot", mk("w2/run", 3), true, false, false)}, ""},
		{"warden posted it", []store.TrailRecord{rec("warden[bot]", mk("w1/run", 3), true, true, false), rec("w1-bot", mk("w1/run", 3), true, false, false)}, ""},
		{"the first marker wins", []store.TrailRecord{rec("w1-bot", mk("w1/run", 3), true, false, false), rec("w2-bot", mk("w1/run", 3), true, false, false)}, "w1-bot"},
		{"prose", []store.TrailRecord{rec("w1-bot", "Findings: yes", true, false, false)}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := holderLogin(tc.trail, cur, "warden[bot]"); got != tc.want {
				t.Errorf("holderLogin = %q, want %q", got, tc.want)
			}
		})
	}
}
