package gating

import (
	"strings"
	"testing"
	"time"
)

func TestEdgeRemovalReported(t *testing.T) {
	cases := []struct {
		role Role
		rel  Rel
		want bool
	}{
		{RolePM, BlockedBy, true},
		{RolePM, PartOf, true},
		{RolePM, Related, false},
		{RolePM, AnchoredTo, false},
		{RoleHuman, BlockedBy, false},
		{RoleHuman, PartOf, false},
		{RoleWorker, BlockedBy, false},
		{RoleWarden, BlockedBy, false},
	}
	for _, c := range cases {
		if got := EdgeRemovalReported(c.role, c.rel); got != c.want {
			t.Errorf("EdgeRemovalReported(%s, %s) = %v, want %v", c.role, c.rel, got, c.want)
		}
	}
}

func TestEdgeRemovedDetailNamesEdgeActorAndTime(t *testing.T) {
	at := time.Date(2026, 12, 1, 18, 30, 5, 0, time.FixedZone("x", 3600))
	d := EdgeRemovedDetail(BlockedBy, "issue-7", "pm-bot", RolePM, at)
	for _, want := range []string{"blockedBy issue-7", "pm-bot (pm token)", "2026-12-01T17:30:05Z"} {
		if !strings.Contains(d, want) {
			t.Errorf("detail %q lacks %q", d, want)
		}
	}
	r := ReopenedAfterCompleteDetail(12, "maria", at)
	for _, want := range []string{"#12", "maria", "2026-12-01T17:30:05Z", "does not close it again"} {
		if !strings.Contains(r, want) {
			t.Errorf("reopen detail %q lacks %q", r, want)
		}
	}
	if r := ReopenedAfterCompleteDetail(12, "", at); !strings.Contains(r, "someone") {
		t.Errorf("reopen detail without an actor %q does not say someone", r)
	}
}

func TestCompletionClose(t *testing.T) {
	cases := []struct {
		name    string
		setting bool
		dry     bool
		state   string
		want    string
	}{
		{"open issue is closed", true, false, "open", CloseIssue},
		{"setting off", false, false, "open", CloseSkipSetting},
		{"setting off wins over dry run", false, true, "open", CloseSkipSetting},
		{"already closed", true, false, "closed", CloseSkipClosed},
		{"closed under dry run needs nothing", true, true, "closed", CloseSkipClosed},
		{"deleted", true, false, "deleted", CloseSkipGone},
		{"transferred", true, false, "transferred", CloseSkipGone},
		{"unknown is read first", true, false, "", CloseReadFirst},
		{"unrecognised is read first", true, false, "locked", CloseReadFirst},
		{"dry run holds the close", true, true, "open", CloseHeldByDryRun},
	}
	for _, c := range cases {
		if got := CompletionClose(c.setting, c.dry, c.state); got != c.want {
			t.Errorf("%s: CompletionClose(%v, %v, %q) = %q, want %q", c.name, c.setting, c.dry, c.state, got, c.want)
		}
	}
}

func TestPlanSubIssue(t *testing.T) {
	cases := []struct {
		name         string
		want, actual int
		ours         []int
		out          SubIssueMove
		refused      bool
	}{
		{"already there", 5, 5, []int{0, 5}, SubIssueMove{}, false},
		{"nothing wanted, none there", 0, 0, []int{5, 0}, SubIssueMove{}, false},
		{"added", 5, 0, []int{0, 5}, SubIssueMove{Add: 5}, false},
		{"moved from warden's parent", 6, 5, []int{5, 6}, SubIssueMove{Add: 6, Replace: true}, false},
		{"someone else's parent is not replaced", 6, 9, []int{5, 6}, SubIssueMove{}, true},
		{"removed", 0, 5, []int{5, 0}, SubIssueMove{Remove: 5}, false},
		{"someone else's parent is not removed", 0, 9, []int{5, 0}, SubIssueMove{}, false},
		{"zero in ours is no parent", 0, 9, []int{0, 0}, SubIssueMove{}, false},
	}
	for _, c := range cases {
		got := PlanSubIssue(c.want, c.actual, c.ours)
		if c.refused {
			if got.Refuse == "" || got.Add != 0 || got.Remove != 0 {
				t.Errorf("%s: PlanSubIssue(%d, %d, %v) = %+v, want a refusal and no write", c.name, c.want, c.actual, c.ours, got)
			} else if !strings.Contains(got.Refuse, "#9") {
				t.Errorf("%s: refusal %q does not name the parent #9", c.name, got.Refuse)
			}
			continue
		}
		if got != c.out {
			t.Errorf("%s: PlanSubIssue(%d, %d, %v) = %+v, want %+v", c.name, c.want, c.actual, c.ours, got, c.out)
		}
	}
}
