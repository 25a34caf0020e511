package gating

import (
	"slices"
	"testing"
)

func TestKnownCodes(t *testing.T) {
	got := KnownCodes()
	if !slices.IsSorted(got) || len(slices.Compact(slices.Clone(got))) != len(got) {
		t.Errorf("KnownCodes is not sorted and unique: %v", got)
	}
	for _, c := range []string{"cycle", CodeForgedMarker, ExAwaitingAdmission, CodeUnroutedRegion} {
		if !slices.Contains(got, c) {
			t.Errorf("KnownCodes lacks %s", c)
		}
	}
	for _, c := range got {
		if ResolveHint(c) == genericHint {
			t.Errorf("KnownCodes lists %s, which has no hint of its own", c)
		}
	}
}
