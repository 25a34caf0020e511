package gating

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"
)

// TestReadyMatchesFrozenReference holds ComputeReady, BuildReport and
// Claimable to exactly the output of the frozen reference
// (ready_reference*_test.go: the implementation before the 50,000-item
// work), field by field with reflect.DeepEqual (so a nil list against an
// empty one is a difference too), over many random repositories: the
// adversarial ones of the table tests, the benchmark's realistic ones, the
// bench command's, and wildSnapshot's (numbering gaps, huge and malformed
// ids, duplicate rows, nil items, any row order, cycles and self loops,
// wide fan-ins, groupings with zero, one or two integration items, every
// claim state, findings, starved backlogs). Neither may change the snapshot.
func TestReadyMatchesFrozenReference(t *testing.T) {
	type gen struct {
		name  string
		seeds int
		make  func(rng *rand.Rand) Snapshot
	}
	gens := []gen{
		{"randomSnapshot", 300, func(rng *rand.Rand) Snapshot { return randomSnapshot(rng, 5+rng.IntN(80)) }},
		{"wild-small", 600, func(rng *rand.Rand) Snapshot { return wildSnapshot(rng, 1+rng.IntN(60)) }},
		{"wild-medium", 40, func(rng *rand.Rand) Snapshot { return wildSnapshot(rng, 200+rng.IntN(1500)) }},
		{"benchSnapshot", 3, func(rng *rand.Rand) Snapshot { n := 1000 + rng.IntN(4000); return benchSnapshot(n, 2*n) }},
		{"benchCommand", 6, func(rng *rand.Rand) Snapshot {
			n := 500 + rng.IntN(3000)
			return benchCommandSnapshot(rng, n, 2*n, rng.IntN(2) == 0)
		}},
	}
	if testing.Short() {
		for k := range gens {
			gens[k].seeds = max(1, gens[k].seeds/10)
		}
	}
	stats := map[string]int{}
	for _, g := range gens {
		for seed := range g.seeds {
			rng := rand.New(rand.NewPCG(uint64(seed), 0xf0220))
			s := g.make(rng)
			where := fmt.Sprintf("%s seed %d (%d items)", g.name, seed, len(s.Items))
			checkAgainstReference(t, where, s, rng, stats)
			if t.Failed() {
				return
			}
		}
	}
	for _, k := range []string{"ready-empty-pending", "cycle", "sparse", "claimable", "overlaps", "integration-incomplete",
		"ex:" + ExAwaitingAdmission, "ex:" + ExItemLabelRemoved, "ex:" + ExParked, "ex:" + ExPoisoned, "ex:" + ExGrouping,
		"ex:" + ExBlocked, "ex:" + ExStalled, "ex:" + ExInvalid, "ex:" + ExUnknownState, "ex:" + ExCollisionHold,
		"ex:" + ExResourceBusy, "ex:" + ExLapsed, "ex:" + ExComplete, "ex:" + ExHeld, "ex:" + ExForeignRegion,
		"ex:" + ExMalformed, "ex:" + ExMergedNotComplete, "ex:" + ExIntegrationInFlight} {
		if stats[k] == 0 {
			t.Errorf("the corpus never reaches %s: %v", k, stats)
		}
	}
	t.Logf("checked %v", stats)
}

func checkAgainstReference(t *testing.T, where string, s Snapshot, rng *rand.Rand, stats map[string]int) {
	t.Helper()
	before := cloneSnapshot(s)
	got, want := ComputeReady(s), refComputeReady(s)
	if d := firstDiff("Result", reflect.ValueOf(got), reflect.ValueOf(want)); d != "" {
		t.Errorf("%s: ComputeReady differs from the reference: %s", where, d)
		return
	}
	gotRep, wantRep := BuildReport(s, got), refBuildReport(s, want)
	if d := firstDiff("Report", reflect.ValueOf(gotRep), reflect.ValueOf(wantRep)); d != "" {
		t.Errorf("%s: BuildReport differs from the reference: %s", where, d)
		return
	}
	// BuildReport reads only the result it is given: a result of another
	// snapshot (a caller's mistake) must still be read the same way.
	if len(s.Items) > 1 {
		other := cloneSnapshot(s)
		other.Items = other.Items[:len(other.Items)/2]
		o := refComputeReady(other)
		if d := firstDiff("Report", reflect.ValueOf(BuildReport(s, o)), reflect.ValueOf(refBuildReport(s, o))); d != "" {
			t.Errorf("%s: BuildReport of a foreign result differs from the reference: %s", where, d)
			return
		}
	}
	// Claimable, on the whole snapshot and on the partial one the store
	// reads, for each item (a sample of a large snapshot) and two owners,
	// and for an id the snapshot lacks.
	ids := []ItemID{"issue-999999999", ""}
	for _, c := range s.Items {
		if c.Item != nil && (len(s.Items) <= 100 || rng.IntN(len(s.Items)) < 8) {
			ids = append(ids, c.Item.ID)
		}
	}
	for _, id := range ids {
		owners := []string{"z/9", ""}
		for _, c := range s.Items {
			if c.Item != nil && c.Item.ID == id {
				owners = append(owners, c.Claim.Owner)
				break
			}
		}
		views := []Snapshot{partialOf(s, id)}
		if len(s.Items) <= 100 {
			views = append(views, s)
		}
		for _, p := range views {
			for _, owner := range owners {
				ok, e := Claimable(p, id, owner)
				wok, we := refClaimable(p, id, owner)
				stats["claimable"]++
				if ok != wok || e != we {
					t.Errorf("%s: Claimable(%s, %q) on %d items = %v %+v, reference %v %+v", where, id, owner, len(p.Items), ok, e, wok, we)
					return
				}
			}
		}
	}
	if d := firstDiff("Snapshot", reflect.ValueOf(s), reflect.ValueOf(before)); d != "" {
		t.Errorf("%s: the snapshot was changed: %s", where, d)
	}
	for _, d := range want.Defects {
		stats[d.Code]++
	}
	for _, e := range want.Excluded {
		stats["ex:"+e.Reason]++
	}
	for _, e := range want.Ready {
		if len(e.Overlaps) > 0 {
			stats["overlaps"]++
		}
	}
	for _, c := range s.Items {
		if c.Item != nil && c.Item.ID.Number() > 4*len(s.Items)+1000 {
			stats["sparse"]++
			break
		}
	}
	stats["snapshots"]++
}

// firstDiff names the first place two values differ ("" when they are
// deeply equal), for a readable failure.
func firstDiff(path string, a, b reflect.Value) string {
	if a.IsValid() && b.IsValid() && a.Type() == b.Type() && reflect.DeepEqual(a.Interface(), b.Interface()) {
		return ""
	}
	return walkDiff(path, a, b)
}

func walkDiff(path string, a, b reflect.Value) string {
	if a.IsValid() != b.IsValid() {
		return path + ": one side is invalid"
	}
	if !a.IsValid() {
		return ""
	}
	if a.Type() != b.Type() {
		return fmt.Sprintf("%s: type %s against %s", path, a.Type(), b.Type())
	}
	switch a.Kind() {
	case reflect.Slice:
		if a.IsNil() != b.IsNil() {
			return fmt.Sprintf("%s: nil %v against nil %v (len %d, %d)", path, a.IsNil(), b.IsNil(), a.Len(), b.Len())
		}
		for k := range min(a.Len(), b.Len()) {
			if d := walkDiff(fmt.Sprintf("%s[%d]", path, k), a.Index(k), b.Index(k)); d != "" {
				return d
			}
		}
		if a.Len() != b.Len() {
			return fmt.Sprintf("%s: len %d against %d", path, a.Len(), b.Len())
		}
		return ""
	case reflect.Struct:
		if a.Type() == reflect.TypeOf(time.Time{}) {
			if !reflect.DeepEqual(a.Interface(), b.Interface()) {
				return fmt.Sprintf("%s: %v against %v", path, a.Interface(), b.Interface())
			}
			return ""
		}
		for k := range a.NumField() {
			if d := walkDiff(path+"."+a.Type().Field(k).Name, a.Field(k), b.Field(k)); d != "" {
				return d
			}
		}
		return ""
	case reflect.Pointer:
		if a.IsNil() || b.IsNil() {
			if a.IsNil() != b.IsNil() {
				return path + ": nil against non-nil"
			}
			return ""
		}
		return walkDiff(path, a.Elem(), b.Elem())
	}
	if !reflect.DeepEqual(a.Interface(), b.Interface()) {
		return fmt.Sprintf("%s: %#v against %#v", path, a.Interface(), b.Interface())
	}
	return ""
}

// cloneSnapshot copies everything a snapshot refers to.
func cloneSnapshot(s Snapshot) Snapshot {
	out := s
	out.Items = slices.Clone(s.Items)
	for k := range out.Items {
		c := &out.Items[k]
		if c.Item != nil {
			it := *c.Item
			it.Tags, it.Links = slices.Clone(it.Tags), slices.Clone(it.Links)
			c.Item = &it
		}
		c.Findings = slices.Clone(c.Findings)
	}
	return out
}

// partialOf is partialFor, tolerating nil items and a missing id.
func partialOf(s Snapshot, id ItemID) Snapshot {
	var full Snapshot = s
	full.Items = nil
	found := false
	for _, c := range s.Items {
		if c.Item != nil {
			full.Items = append(full.Items, c)
			found = found || c.Item.ID == id
		}
	}
	if !found {
		return full
	}
	return partialFor(full, id)
}
