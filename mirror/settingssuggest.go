package mirror

import (
	"strings"
	"unicode/utf8"
)

// suggestKey names the known setting an unknown key (dotted: labels.itme)
// probably meant: the same key but for case, hyphens or a dot written as
// an underscore, else the nearest known key by edit distance. Empty when
// nothing is near or the key is not text.
func suggestKey(key string, scalar bool) string {
	if !scalar || key == "" {
		return ""
	}
	known := append(sortedKeys(settingFields), settingGroups...)
	norm := func(s string) string { return strings.ReplaceAll(strings.ToLower(s), "-", "_") }
	for _, k := range known {
		if norm(k) == norm(key) || norm(k) == norm(strings.ReplaceAll(key, "_", ".")) {
			return k
		}
	}
	// A misspelling is compared with the keys at its own level: labels.itme
	// with labels.*, a top-level key with the top-level keys.
	prefix := ""
	if i := strings.LastIndex(key, "."); i >= 0 && isSettingGroup(key[:i]) {
		prefix = key[:i+1]
	}
	var level []string
	for _, k := range known {
		if strings.HasPrefix(k, prefix) && !strings.Contains(k[len(prefix):], ".") {
			level = append(level, k[len(prefix):])
		}
	}
	if s := nearest(norm(key[len(prefix):]), level); s != "" {
		return prefix + s
	}
	return ""
}

// nearest returns the choice closest to s: an exact case-insensitive match,
// else the one choice within edit distance max(1, len/3) of s (ties: the
// first in choices). Empty when none is that close.
func nearest(s string, choices []string) string {
	if s == "" {
		return ""
	}
	for _, c := range choices {
		if strings.EqualFold(c, s) {
			return c
		}
	}
	best, bestD := "", 0
	limit := max(1, utf8.RuneCountInString(s)/3)
	for _, c := range choices {
		d := editDistance(strings.ToLower(s), strings.ToLower(c))
		if d <= limit && (best == "" || d < bestD) {
			best, bestD = c, d
		}
	}
	return best
}

// editDistance is the optimal string alignment distance between a and b
// (insertions, deletions, substitutions and adjacent transpositions, each
// one edit), over runes. Inputs are cut at 64 runes: a key longer than that
// is near no setting.
func editDistance(a, b string) int {
	ra, rb := []rune(cut(a, 64)), []rune(cut(b, 64))
	// d[i][j]: distance between ra[:i] and rb[:j]; three rows suffice.
	prev2 := make([]int, len(rb)+1)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
}
