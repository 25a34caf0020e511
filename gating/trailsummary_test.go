package gating

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// trSim is an item's history as a store keeps it, changed one recorded
// event at a time, with the summary carried along by the With steps.
type trSim struct {
	r        *rand.Rand
	now      time.Time
	grants   []GrantEntry
	comments []TrailComment // by id - 1
	pushes   []BranchPush
	fence    int64
	epoch    time.Time
	resolved time.Time
	sum      TrailSummary
	steps    map[string][2]int // op → {extended, fell back}
}

func (s *trSim) input() TrailInput {
	cs := append([]TrailComment(nil), s.comments...)
	s.r.Shuffle(len(cs), func(i, j int) { cs[i], cs[j] = cs[j], cs[i] }) // any order of receipt
	return TrailInput{Item: trItem, Comments: cs, Grants: append([]GrantEntry(nil), s.grants...), Fence: s.fence,
		EpochStart: s.epoch, CollisionResolvedAt: s.resolved, Pushes: append([]BranchPush(nil), s.pushes...), Now: s.now}
}

var trSimOwners = []string{"w1/a", "w1/b", "w2/c"}

func (s *trSim) owner() string {
	if n := len(s.grants); n > 0 && s.r.IntN(3) > 0 {
		return s.grants[n-1].Owner
	}
	return trSimOwners[s.r.IntN(len(trSimOwners))]
}

// commentAt is a comment time near now: mostly after, sometimes before (the
// order of receipt is not the trail's).
func (s *trSim) commentAt() time.Time {
	return s.now.Add(time.Duration(s.r.IntN(3000)-800) * time.Millisecond).Truncate(time.Second)
}

func (s *trSim) marker(kind MarkerKind, owner string, fence int64) string {
	if kind == KindClaim {
		var prior *PriorClaim
		if s.r.IntN(4) == 0 && fence > 1 {
			prior = &PriorClaim{trSimOwners[s.r.IntN(len(trSimOwners))], fence - 1}
		}
		return ClaimMarker(string(trItem), owner, "local", fence, s.now.Truncate(time.Second), prior) + "\nclaimed"
	}
	results := []string{ResultComplete, ResultReleased, ResultParked}
	return fmt.Sprintf("<!-- backlog-worker: outcome item=%s owner=%s fence=%d result=%s -->\ndone", trItem, owner, fence, results[s.r.IntN(3)])
}

// step records one random event and checks the summary against the whole
// history's.
func (s *trSim) step(t *testing.T) {
	t.Helper()
	s.now = s.now.Add(time.Duration(s.r.IntN(4000)) * time.Millisecond)
	if s.r.IntN(40) == 0 {
		s.now = s.now.Add(-2 * time.Second) // a clock moved back
	}
	var op string
	var next TrailSummary
	ok := false
	n := len(s.grants)
	switch k := s.r.IntN(100); {
	case k < 30:
		op = "grant"
		g := GrantEntry{Fence: s.fence + 1, Owner: s.owner(), GrantedAt: s.now, LeaseExpiresAt: s.now.Add(30 * time.Second),
			Branch: []string{"", "feat-1", "feat-2"}[s.r.IntN(3)], Maintenance: s.r.IntN(10) == 0}
		s.grants, s.fence = append(s.grants, g), g.Fence
		next, ok = s.sum.WithGrant(g)
	case k < 45 && n > 0 && s.grants[n-1].ReleasedAt.IsZero():
		op = "release"
		s.grants[n-1].ReleasedAt = s.now
		next, ok = s.sum.WithRelease(s.grants[n-1].Fence)
	case k < 75:
		op = "comment"
		c := TrailComment{ID: int64(len(s.comments) + 1), Author: "bot-" + fmt.Sprint(s.r.IntN(2)), AuthorIsAgent: s.r.IntN(8) > 0, CreatedAt: s.commentAt()}
		switch j := s.r.IntN(10); {
		case j < 3 && n > 0:
			c.Body = s.marker(KindClaim, s.grants[n-1].Owner, s.grants[n-1].Fence)
		case j < 6 && n > 0:
			c.Body = s.marker(KindOutcome, s.grants[n-1].Owner, s.grants[n-1].Fence)
		case j < 8:
			kind := []MarkerKind{KindClaim, KindOutcome}[s.r.IntN(2)]
			c.Body = s.marker(kind, trSimOwners[s.r.IntN(len(trSimOwners))], max(1, s.fence+int64(s.r.IntN(4))-2))
		case j < 9:
			c.Body = "<!-- backlog-worker: claim broken -->"
		default:
			c.Body = "looks good to me"
		}
		s.comments = append(s.comments, c)
		next, ok = s.sum.WithComment(nil, c, trItem)
	case k < 85 && len(s.comments) > 0:
		op = "edit"
		i := s.r.IntN(len(s.comments))
		old := s.comments[i]
		c := old
		switch s.r.IntN(4) {
		case 0:
			c.Edited, c.CurrentBody = true, "edited text"
		case 1:
			c.Deleted = true
		case 2:
			c.AuthorHasWrite = true
		default:
			c.Body, c.Edited, c.CurrentBody = "an older text", true, old.Body // the earliest text moved back
		}
		s.comments[i] = c
		next, ok = s.sum.WithComment(&old, c, trItem)
	case k < 95:
		op = "push"
		p := BranchPush{At: s.now, Branch: []string{"feat-1", "feat-2", "other"}[s.r.IntN(3)], Login: "bot-" + fmt.Sprint(s.r.IntN(3))}
		s.pushes = append(s.pushes, p)
		next, ok = s.sum.WithPush(p)
	case k < 97:
		op = "adopt" // a fence raised from the trail: no step, a full read
		s.fence += int64(1 + s.r.IntN(2))
	case k < 99:
		op = "epoch"
		s.epoch = s.now
	default:
		op = "resolve"
		s.resolved = s.now
	}
	full := SummarizeTrail(s.input())
	c := s.steps[op]
	if ok {
		c[0]++
		if a, b := trSumJSON(t, next), trSumJSON(t, full); a != b {
			t.Fatalf("after %s (step %d): the extended summary\n%s\nis not the whole history's\n%s", op, len(s.grants)+len(s.comments), a, b)
		}
	} else {
		c[1]++
	}
	s.steps[op] = c
	res := EvaluateTrail(s.input())
	ge, gl := GrantAttempts(trItem, s.grants, s.epoch)
	if full.Attempts != res.Attempts || full.LifetimeAttempts != res.LifetimeAttempts || full.CollisionHold != res.CollisionHold ||
		full.AttemptsUnknown != res.AttemptsUnknown || full.GrantAttempts != ge || full.GrantLifetime != gl {
		t.Fatalf("the summary %+v disagrees with EvaluateTrail %+v / GrantAttempts %d %d", full, res, ge, gl)
	}
	// What is stored is read back whole.
	var back TrailSummary
	if err := json.Unmarshal([]byte(trSumJSON(t, full)), &back); err != nil || trSumJSON(t, back) != trSumJSON(t, full) {
		t.Fatalf("the summary does not survive JSON: %v", err)
	}
	s.sum = full
}

func trSumJSON(t *testing.T, s TrailSummary) string {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestTrailSummaryStepsMatchTheWholeHistory: after every event of many
// random histories (grants, releases, markers in and out of order, edits,
// pushes, adopted fences, epochs), a summary a With step extended equals
// the one evaluated from the whole history, and that one agrees with
// EvaluateTrail and GrantAttempts. The steps must also extend often (the
// claim path relies on it).
func TestTrailSummaryStepsMatchTheWholeHistory(t *testing.T) {
	total := map[string][2]int{}
	for seed := range uint64(120) {
		s := &trSim{r: rand.New(rand.NewPCG(seed, 7)), now: trT(0), steps: map[string][2]int{}}
		if seed%5 == 0 {
			s.epoch = trT(0)
		}
		s.sum = SummarizeTrail(s.input())
		for range 100 {
			s.step(t)
		}
		for op, c := range s.steps {
			x := total[op]
			total[op] = [2]int{x[0] + c[0], x[1] + c[1]}
		}
	}
	t.Logf("extended / fell back, by event: %v", total)
	for _, op := range []string{"grant", "release", "comment", "edit", "push"} {
		if c := total[op]; c[0] < c[1]/4 || c[0] == 0 {
			t.Errorf("%s: extended %d times, fell back %d: the steps hardly ever apply", op, c[0], c[1])
		}
	}
}

// TestTrailSummaryReleaseThenReclaim pins the common cycle: claim, claim
// marker, outcome, release, re-claim by the same owner is an attempt each
// time; a lapsed re-claim without release or outcome is none.
func TestTrailSummaryReleaseThenReclaim(t *testing.T) {
	s := SummarizeTrail(TrailInput{Item: trItem})
	var ok bool
	g1 := trGrant(1, "w1/a", 0)
	if s, ok = s.WithGrant(g1); ok {
		t.Fatal("the first grant extended a summary with no grant log")
	}
	s = SummarizeTrail(TrailInput{Item: trItem, Grants: []GrantEntry{g1}, Fence: 1})
	if !s.Extendable || s.Attempts != 1 {
		t.Fatalf("one grant: %+v", s)
	}
	s, ok = s.WithComment(nil, trClaimC(1, 0, "bot", "w1/a", 1), trItem)
	if !ok {
		t.Fatal("the claim marker did not extend")
	}
	if s, ok = s.WithRelease(1); !ok {
		t.Fatal("the release did not extend")
	}
	if s, ok = s.WithGrant(trGrant(2, "w1/a", 5)); !ok || s.Attempts != 2 {
		t.Fatalf("a re-claim after a release: %v %+v", ok, s)
	}
	if s, ok = s.WithGrant(trGrant(3, "w1/a", 10)); !ok || s.Attempts != 2 {
		t.Fatalf("a lapsed re-claim by the same owner: %v %+v", ok, s)
	}
	if _, ok = s.WithGrant(trGrant(4, "w2/c", 15)); ok {
		t.Fatal("a takeover extended the summary")
	}
}

// TestTrailSummaryMaintenanceChangesNoCustody: the With steps judge a claim
// after a maintenance claim against the worker's claim before it, as
// EvaluateTrail does.
func TestTrailSummaryMaintenanceChangesNoCustody(t *testing.T) {
	g1, m2 := trGrant(1, "w1/a", 0), trGrant(2, "warden", 5, trMaint(), trReleased(6))
	cases := []struct {
		name     string
		g        GrantEntry
		epoch    time.Time
		extends  bool
		attempts int
	}{
		{"the same owner after it: its re-claim, no attempt", trGrant(3, "w1/a", 10), time.Time{}, true, 1},
		{"the same owner after an unpark: the epoch's first attempt", trGrant(3, "w1/a", 10), trT(8), true, 1},
		{"another owner after it: a takeover, read whole", trGrant(3, "w2/c", 10), time.Time{}, false, 2},
	}
	for _, c := range cases {
		in := TrailInput{Item: trItem, Grants: []GrantEntry{g1, m2}, Fence: 2, EpochStart: c.epoch,
			Comments: []TrailComment{trClaimC(1, 1, "bot", "w1/a", 1)}}
		s := SummarizeTrail(in)
		if !s.Extendable || s.Prev.Kind != "grant" || s.Prev.Fence != 1 {
			t.Fatalf("%s: %+v", c.name, s)
		}
		next, ok := s.WithGrant(c.g)
		in.Grants, in.Fence = append(in.Grants, c.g), c.g.Fence
		full := SummarizeTrail(in)
		if ok != c.extends || full.Attempts != c.attempts {
			t.Errorf("%s: extended %v, attempts %d, want %v, %d", c.name, ok, full.Attempts, c.extends, c.attempts)
		}
		if ok && trSumJSON(t, next) != trSumJSON(t, full) {
			t.Errorf("%s: extended\n%s\nwhole\n%s", c.name, trSumJSON(t, next), trSumJSON(t, full))
		}
	}
}
