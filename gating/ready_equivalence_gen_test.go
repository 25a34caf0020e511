package gating

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"
)

// wildSnapshot builds a repository meant to reach every branch of the ready
// set: numbering that is dense, gapped or sparse (up to ten digits), ids
// that are malformed or repeated, nil items, rows in any order, blockedBy
// edges to anything (missing items, itself, newer items: cycles), wide
// fan-ins, repeated links, groupings over a few epics (members, integration
// items, self links, missing groupings), anchors of every shape, every claim
// state (and claims without an owner), tag sets right and wrong, findings,
// and now and then a starved backlog (nothing in flight, a cycle through
// every item).
func wildSnapshot(rng *rand.Rand, n int) Snapshot {
	pick := func(xs ...string) string { return xs[rng.IntN(len(xs))] }
	chance := func(p float64) bool { return rng.Float64() < p }
	s := Snapshot{Now: rnow, Region: "local", DefaultBranch: "main", Quarantine: rq, PoisonThreshold: 3}
	switch rng.IntN(8) {
	case 0:
		s.Region = "eu"
	case 1:
		s.DefaultBranch = ""
	case 2:
		s.Quarantine, s.PoisonThreshold = 0, 0
	case 3:
		s.PoisonThreshold, s.Quarantine = -1, 30*time.Minute
	case 4:
		s.Region = ""
	}
	starved := chance(0.1)

	// Ids first, so links can name them.
	nums := make([]int, n)
	switch rng.IntN(4) {
	case 0: // sparse: issue numbers far beyond the item count
		for k := range nums {
			nums[k] = 1 + rng.IntN(1_000_000_000)
			if chance(0.1) {
				nums[k] = 1_000_000_000 + rng.IntN(8_999_999_999)
			}
		}
	case 1: // gapped
		num := 0
		for k := range nums {
			num += 1 + rng.IntN(4)
			nums[k] = num
		}
	default: // dense
		for k := range nums {
			nums[k] = k + 1
		}
	}
	ids := make([]ItemID, n)
	for k := range ids {
		ids[k] = IDFor(nums[k])
		switch {
		case chance(0.03):
			ids[k] = ItemID(pick("issue-0", "issue-05", "issue-", "foo", "", "issue-12a", "issue-99999999999", "ISSUE-3", "issue-+3", "issue-٣", "issue 7", "issue-7 x", "issue--1"))
		case k > 0 && chance(0.03):
			ids[k] = ids[rng.IntN(k)] // a repeated row: the first wins
		}
	}
	target := func() string {
		switch {
		case chance(0.05):
			return pick("issue-424242", "issue-0", "nope", "", "issue-05", string(IDFor(n+1+rng.IntN(3))))
		case n == 0:
			return "issue-1"
		}
		return string(ids[rng.IntN(n)])
	}
	epics := ids[:min(n, 1+rng.IntN(4))]

	for k := range n {
		if chance(0.02) {
			s.Items = append(s.Items, Candidate{}) // a nil item
			continue
		}
		c := Candidate{Item: &Item{ID: ids[k], CreatedAt: rt0.Add(time.Duration(rng.IntN(6)) * time.Minute),
			Tags: []string{"backlog", "priority:" + pick("P0", "P1", "P2", "P3"), "phase:" + pick("implementation", "research", "integration"),
				"homeRegion:local", "baseBranch:main"}}, AdmissionRecorded: true}
		if chance(0.05) {
			c.Item.CreatedAt = time.Time{}
		} else if chance(0.05) {
			c.Item.CreatedAt = c.Item.CreatedAt.In(time.FixedZone("x", 3600))
		}
		tags := &c.Item.Tags
		switch {
		case chance(0.2):
			*tags = append(*tags, "state:complete")
		case chance(0.06):
			*tags = append(*tags, "state:parked", "ruling-owner:pm", "ruling-topic:"+pick("schema", "poison"))
		case chance(0.03):
			*tags = append(*tags, "state:parked", pick("ruling-owner:pm", "ruling-topic:x", "ruling-owner:", "ruling-owner:a"))
		case chance(0.04):
			*tags = append(*tags, "state:"+pick("delivered", "done", "", "Complete"))
		case chance(0.02):
			*tags = append(*tags, "state:complete", pick("state:parked", "state:complete"))
		}
		for range rng.IntN(2) {
			if chance(0.3) {
				*tags = append(*tags, pick("priority:P9", "priority:P1", "phase:review", "phase:complete", "homeRegion:", "homeRegion:eu",
					"baseBranch:", "baseBranch:feat/epic/x", "ruling-owner:pm", "ruling-topic:", "threshold:"+pick("0", "2", "x", "7"),
					"resource:", "stale", "x:y:z", ":v", "Backlog", "pr:12"))
			}
		}
		if k < len(epics) && chance(0.6) { // an epic's own poison threshold for its members
			*tags = append(*tags, "threshold:"+pick("1", "2", "4", "6", "0", "x"))
		}
		if chance(0.04) {
			i := rng.IntN(len(*tags))
			*tags = slices.Delete(*tags, i, i+1)
		}
		if chance(0.05) {
			(*tags)[3] = "homeRegion:" + pick("eu", "local", "")
		}
		if chance(0.2) {
			*tags = append(*tags, "resource:"+pick("box", "gpu", "db"))
			if chance(0.2) {
				*tags = append(*tags, "resource:box")
			}
		}
		if chance(0.15) {
			rng.Shuffle(len(*tags), func(i, j int) { (*tags)[i], (*tags)[j] = (*tags)[j], (*tags)[i] })
		}
		links := &c.Item.Links
		for range rng.IntN(5) {
			*links = append(*links, Link{BlockedBy, target()})
		}
		switch {
		case chance(0.02): // a wide fan-in: the seen-set path
			for range 33 + rng.IntN(20) {
				*links = append(*links, Link{BlockedBy, target()})
			}
		case chance(0.03):
			*links = append(*links, Link{BlockedBy, string(ids[k])}) // itself
		}
		if chance(0.3) {
			*links = append(*links, Link{PartOf, string(epics[rng.IntN(len(epics))])})
			if chance(0.5) {
				c.Item.Tags = append(slices.DeleteFunc(c.Item.Tags, func(t string) bool { return t == "baseBranch:main" }), "baseBranch:feat/epic/x")
			}
			if chance(0.05) {
				*links = append(*links, (*links)[len(*links)-1]) // repeated
			}
		}
		if chance(0.1) {
			*links = append(*links, Link{Integrates, pick(string(epics[rng.IntN(len(epics))]), string(ids[k]), "issue-777777")})
		}
		if chance(0.03) {
			*links = append(*links, Link{PartOf, string(ids[k])})
		}
		for range rng.IntN(3) {
			*links = append(*links, Link{AnchoredTo, pick("", ".", "/", "src", "src/", "src/a.go", "src/b/c.go", "src/b/", "docs", "docs/x.md", "a//b", "srcx/q.go", "pkg/z.go")})
		}
		if chance(0.1) {
			*links = append(*links, Link{Rel(pick("informs", "related", "claims", "bogus")), target()})
		}
		if chance(0.1) {
			rng.Shuffle(len(*links), func(i, j int) { (*links)[i], (*links)[j] = (*links)[j], (*links)[i] })
		}
		owner := pick("a/1", "b/2", "c/3", "")
		if !starved {
			switch r := rng.IntN(12); {
			case r < 4:
			case r < 5:
				held(owner)(&c)
			case r < 6:
				lapsed(owner)(&c)
			case r < 7:
				abandoned(owner)(&c)
			case r < 8:
				claim(owner, -10*time.Minute, rq-time.Nanosecond)(&c)
			case r < 9:
				released(owner)(&c)
			case r < 10:
				held(owner)(&c)
				c.Claim.Purpose, c.Claim.Branch = "maintenance", ""
			}
		}
		if chance(0.1) {
			c.AdmissionLabel = true
		} else if chance(0.08) {
			c.AdmissionRecorded = false
		}
		c.Attempts = rng.IntN(7)
		c.CollisionHold = chance(0.03)
		c.ItemLabelRemoved = chance(0.03)
		for range rng.IntN(3) {
			if chance(0.3) {
				c.Findings = append(c.Findings, Defect{Code: pick(ExMergedNotComplete, "claimed-unmarked", ExMergedNotComplete),
					Item: ids[k], Detail: pick("pull request #4 merged", "pull request #2 merged", "x")})
			}
		}
		s.Items = append(s.Items, c)
	}
	if starved && n > 1 { // a cycle through every item: nothing can be ready
		for k := range s.Items {
			if it := s.Items[k].Item; it != nil {
				it.Links = append(it.Links, Link{BlockedBy, string(ids[(k+1)%n])})
			}
		}
	}
	switch rng.IntN(4) {
	case 0:
		rng.Shuffle(len(s.Items), func(i, j int) { s.Items[i], s.Items[j] = s.Items[j], s.Items[i] })
	case 1:
		slices.Reverse(s.Items)
	}
	return s
}

// benchCommandSnapshot is the bench command's repository (bench/ready.go),
// with cycles when back is set: some edges then point at newer items.
func benchCommandSnapshot(rng *rand.Rand, n, edges int, back bool) Snapshot {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	items := make([]Candidate, n)
	for i := range items {
		num := i + 1
		tags := []string{"backlog", fmt.Sprintf("priority:P%d", rng.IntN(4)), "phase:implementation", "homeRegion:local", "baseBranch:main"}
		if rng.IntN(10) == 0 {
			tags = append(tags, "state:complete")
		}
		if rng.IntN(50) == 0 {
			tags = append(tags, fmt.Sprintf("resource:box-%d", rng.IntN(5)))
		}
		it := &Item{ID: IDFor(num), CreatedAt: now.Add(-time.Duration(num) * time.Minute), Tags: tags}
		if rng.IntN(20) == 0 {
			it.Links = append(it.Links, Link{Rel: AnchoredTo, Target: fmt.Sprintf("pkg/m%d/", rng.IntN(40))})
		}
		c := Candidate{Item: it, AdmissionRecorded: true}
		if rng.IntN(25) == 0 {
			c.Claim = ClaimView{Fence: 1, Owner: "w/1", Region: "local", GrantedAt: now.Add(-time.Minute),
				LeaseExpiresAt: now.Add(time.Minute), LastEvidence: now.Add(-time.Minute)}
		}
		items[i] = c
	}
	for range edges {
		from := 1 + rng.IntN(n-1)
		to := rng.IntN(from)
		if back && rng.IntN(200) == 0 {
			to = rng.IntN(n)
		}
		items[from].Item.Links = append(items[from].Item.Links, Link{Rel: BlockedBy, Target: string(IDFor(to + 1))})
	}
	return Snapshot{Items: items, Now: now, Region: "local", DefaultBranch: "main", Quarantine: time.Hour, PoisonThreshold: 3}
}
