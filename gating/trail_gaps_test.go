package gating

import (
	"testing"
)

// A ledger restored from an older backup has a grant log with gaps: fences
// a lost ledger granted, up to the fence the store raised to the trail's
// highest token. Their markers count as that ledger's claims (attempts,
// outcomes), a gap no marker evidences counts once and is reported, and a
// marker beyond the fence is still unbacked.
func TestEvaluateTrailGrantLogGaps(t *testing.T) {
	cases := []struct {
		name     string
		fence    int64
		grants   []GrantEntry
		comments []TrailComment
		attempts int
		codes    map[string]int
	}{
		{"no gap: the log is whole", 2,
			[]GrantEntry{trGrant(1, "w/a", 0, trReleased(5)), trGrant(2, "w/b", 10, trReleased(15))},
			[]TrailComment{trClaimC(1, 1, "a[bot]", "w/a", 1), trClaimC(2, 11, "b[bot]", "w/b", 2)},
			2, map[string]int{}},
		{"two claims the log lost, with their outcomes", 3,
			[]GrantEntry{trGrant(1, "w/a", 0, trReleased(5))},
			[]TrailComment{trClaimC(1, 1, "a[bot]", "w/a", 1),
				trClaimC(2, 11, "b[bot]", "w/b", 2), trOutcomeC(3, 12, "b[bot]", "w/b", 2, "released"),
				trClaimC(4, 21, "c[bot]", "w/c", 3), trOutcomeC(5, 22, "c[bot]", "w/c", 3, "released")},
			3, map[string]int{}},
		{"a claim granted after the restore, above the gaps", 4,
			[]GrantEntry{trGrant(1, "w/a", 0, trReleased(5)), trGrant(4, "w/d", 40)},
			[]TrailComment{trClaimC(1, 1, "a[bot]", "w/a", 1),
				trClaimC(2, 11, "b[bot]", "w/b", 2), trOutcomeC(3, 12, "b[bot]", "w/b", 2, "released"),
				trClaimC(4, 21, "c[bot]", "w/c", 3), trOutcomeC(5, 22, "c[bot]", "w/c", 3, "released"),
				trClaimC(6, 41, "d[bot]", "w/d", 4)},
			4, map[string]int{}},
		{"a gap no marker evidences", 3,
			[]GrantEntry{trGrant(1, "w/a", 0, trReleased(5))},
			[]TrailComment{trClaimC(1, 1, "a[bot]", "w/a", 1), trClaimC(2, 11, "b[bot]", "w/b", 2)},
			2, map[string]int{CodeClaimedUnmarked: 1}},
		{"a marker beyond the fence is unbacked", 2,
			[]GrantEntry{trGrant(1, "w/a", 0, trReleased(5))},
			[]TrailComment{trClaimC(1, 1, "a[bot]", "w/a", 1), trClaimC(2, 11, "b[bot]", "w/b", 2), trClaimC(3, 21, "c[bot]", "w/c", 9)},
			2, map[string]int{CodeUnbackedMarker: 1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := EvaluateTrail(TrailInput{Item: trItem, Comments: c.comments, Grants: c.grants, Fence: c.fence, Now: trT(60)})
			if r.LifetimeAttempts != c.attempts {
				t.Errorf("lifetime attempts %d, want %d (history %+v)", r.LifetimeAttempts, c.attempts, r.History)
			}
			got := map[string]int{}
			for _, f := range r.Findings {
				got[f.Code]++
			}
			for _, code := range []string{CodeClaimedUnmarked, CodeUnbackedMarker, "unannounced-takeover"} {
				if got[code] != c.codes[code] {
					t.Errorf("%d %s findings, want %d: %+v", got[code], code, c.codes[code], r.Findings)
				}
			}
		})
	}
}
