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
