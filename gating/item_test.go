package gating

import "testing"

func TestParseID(t *testing.T) {
	good := map[string]int{"issue-1": 1, "issue-2101": 2101}
	for s, n := range good {
		if got, err := ParseID(s); err != nil || got != n {
			t.Errorf("ParseID(%q) = %d, %v", s, got, err)
		}
	}
	for _, s := range []string{"", "issue-", "issue-0", "issue-01", "issue--1", "issue-1a", "Issue-1", "issue-99999999999", "pr-1", "issue-+1"} {
		if _, err := ParseID(s); err == nil {
			t.Errorf("ParseID(%q) accepted", s)
		}
	}
	if IDFor(7) != "issue-7" || ItemID("issue-7").Number() != 7 || ItemID("x").Number() != 0 {
		t.Error("IDFor/Number disagree")
	}
}

func TestValidAnchor(t *testing.T) {
	for _, p := range []string{"src/wal.go", "docs/", "a/b/c.txt", "README.md"} {
		if !ValidAnchor(p) {
			t.Errorf("%q refused", p)
		}
	}
	for _, p := range []string{"", "/etc/passwd", "../x", "a/../../x", "a//b", "a\\b", "./a", "a/./b"} {
		if ValidAnchor(p) {
			t.Errorf("%q accepted", p)
		}
	}
}

// ParseID and Number agree with the parser they replaced (refParseID, which
// allocated an error for every id that is not one), on near misses and on
// random bytes.
func TestParseIDMatchesFrozenReference(t *testing.T) {
	cases := []string{"", "issue-", "issue-0", "issue-01", "issue--1", "issue-1a", "Issue-1", "issue-99999999999",
		"issue-9999999999", "issue-1000000000", "issue-4294967296", "pr-1", "issue-+1", "issue-٣", "issue-1\xff",
		"issue- 1", "issue-1 ", "issue-7", "issue-2101", "xissue-1", "issue-1/2"}
	seed := []byte("issue-0123456789+- a\xff")
	for k := range 20000 {
		b := []byte("issue-")
		for j := range k % 12 {
			b = append(b, seed[(k*7+j*13)%len(seed)])
		}
		cases = append(cases, string(b), string(b[1:]))
	}
	for _, s := range cases {
		n, err := ParseID(s)
		wn, werr := refParseID(s)
		if n != wn || (err == nil) != (werr == nil) || err != nil && err.Error() != werr.Error() || ItemID(s).Number() != refIDNumber(ItemID(s)) {
			t.Fatalf("ParseID(%q) = %d, %v; reference %d, %v", s, n, err, wn, werr)
		}
	}
}
