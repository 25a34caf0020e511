package gating

import (
	"slices"
	"strings"
	"testing"
)

func TestAnchorCovers(t *testing.T) {
	rows := []struct {
		anchor, path string
		want         bool
	}{
		{"a/b.go", "a/b.go", true},        // the file itself
		{"a/b", "a/b/c.go", true},         // a directory covers below it
		{"a/b/", "a/b/c/d.go", true},      // a trailing slash changes nothing
		{"a/b", "a/bc", false},            // not a segment prefix
		{"a/b", "a/bc/d.go", false},       // nor here
		{"a/b/c.go", "a/b", false},        // a file does not cover its directory
		{"a", "b/a", false},               // only from the root
		{".", "anything/at/all.go", true}, // the whole repository
		{"./", "x", true},                 // written with a slash
		{"src/wal.go", "src/wal.go.orig", false},
	}
	for _, r := range rows {
		if got := AnchorCovers(r.anchor, r.path); got != r.want {
			t.Errorf("AnchorCovers(%q, %q) = %v, want %v", r.anchor, r.path, got, r.want)
		}
	}
	// Overlap is symmetric: a directory and a file below it overlap.
	if !AnchorsOverlap("a/b/c.go", "a/b") || !AnchorsOverlap("a/b", "a/b/c.go") || AnchorsOverlap("a/b", "a/bc") {
		t.Error("AnchorsOverlap disagrees with AnchorCovers")
	}
}

func TestAnchorTouches(t *testing.T) {
	changes := []PathChange{
		{Path: "a/bc/x.go", Kind: ChangeModified, Commit: "1111111aaaa"},
		{Path: "docs/new.md", Previous: "a/b/old.md", Kind: ChangeRenamed, Commit: "2222222bbbb"},
		{Path: "lib/moved.go", Previous: "lib/orig.go", Kind: ChangeRenamed},
		{Path: "gone.go", Kind: ChangeRemoved, Commit: "3333333cccc"},
		{Path: "z/added.go", Kind: ChangeAdded, Commit: "4444444dddd"},
	}
	rows := []struct {
		anchor   string
		want     []int // indexes into changes
		removes  bool
		reasonIn string
	}{
		{"a/b", []int{1}, true, "commit 2222222 renamed a/b/old.md to docs/new.md"}, // renamed away: its old name
		{"a/bc", []int{0}, false, "commit 1111111 modified a/bc/x.go"},
		{"a", []int{0, 1}, true, "(and 1 more change)"},        // renamed out of a/: touched, and a path below it is gone
		{"docs/new.md", []int{1}, false, "renamed a/b/old.md"}, // renamed onto: its new name
		{"lib/orig.go", []int{2}, true, "renamed lib/orig.go to lib/moved.go"},
		{"gone.go", []int{3}, true, "removed gone.go"},
		{"z", []int{4}, false, "added z/added.go"},
		{"untouched.go", nil, false, ""},
	}
	for _, r := range rows {
		got := AnchorTouches(r.anchor, changes)
		var want []PathChange
		for _, i := range r.want {
			want = append(want, changes[i])
		}
		if !slices.Equal(got, want) {
			t.Errorf("AnchorTouches(%q) = %v, want %v", r.anchor, got, want)
		}
		if rm := RemovesUnder(r.anchor, changes); rm != r.removes {
			t.Errorf("RemovesUnder(%q) = %v, want %v", r.anchor, rm, r.removes)
		}
		reason := StaleReason(r.anchor, got)
		if (r.reasonIn == "") != (reason == "") || !strings.Contains(reason, r.reasonIn) {
			t.Errorf("StaleReason(%q) = %q, want it to contain %q", r.anchor, reason, r.reasonIn)
		}
	}
	// "a" loses a/b/old.md to docs/: a path below it was renamed out.
	if !RemovesUnder("a", changes) {
		t.Error("a rename out of a directory anchor is a removal under it")
	}
}

// Step 7's index (ready.go) and AnchorsOverlap apply the same rule: for
// every pair of anchors, a candidate with one overlaps an in-flight item
// with the other exactly when AnchorsOverlap says so.
func TestReadyOverlapAgreesWithAnchors(t *testing.T) {
	paths := []string{".", "a", "a/", "a/b", "a/bc", "a/b/c.go", "a/bc/c.go", "b", "ab", "a/b/c.go/x"}
	for _, inflight := range paths {
		for _, cand := range paths {
			r := ComputeReady(snap(mk(1, held("w/1"), anchored(inflight)), mk(2, anchored(cand))))
			var ov []ItemID
			for _, e := range r.Ready {
				if e.Item == "issue-2" {
					ov = e.Overlaps
				}
			}
			got := slices.Equal(ov, []ItemID{"issue-1"})
			if want := AnchorsOverlap(inflight, cand); got != want {
				t.Errorf("in flight %q, candidate %q: step 7 overlaps %v, AnchorsOverlap %v", inflight, cand, ov, want)
			}
		}
	}
}

func TestStaleAnchorDefect(t *testing.T) {
	d := StaleAnchorDefect("issue-4", "src/wal.go", "main", "commit 1234567 modified src/wal.go", false)
	if d.Code != "stale-anchor" || d.Item != "issue-4" || !strings.Contains(d.Detail, "moved on main: commit 1234567") {
		t.Errorf("stale defect %+v", d)
	}
	d = StaleAnchorDefect("issue-4", "src/wal.go", "main", "removed", true)
	if !strings.Contains(d.Detail, "no longer exists on main") {
		t.Errorf("dangling defect %+v", d)
	}
}
