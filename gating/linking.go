package gating

import (
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// PullRequest is a pull request as the rules see it: enough to link it to
// items (CONTRACT.md §8 "Linking"), judge its check run, reconcile it against
// the ledger and prove a completion. Every string is hostile (anyone who can
// open a pull request writes the body, the title and the branch names).
type PullRequest struct {
	Number  int
	State   string // "open" or "closed" (a merged pull request is closed and Merged)
	Merged  bool
	Draft   bool
	HeadRef string // the head branch's name, without refs/heads/
	HeadSHA string
	BaseRef string // the base branch's name, without refs/heads/
	Body    string
	Title   string
	// MergedAt is when it was merged (zero when it was not, or unknown).
	MergedAt time.Time
	// Mergeable is GitHub's mergeable flag: nil while GitHub is still
	// computing it (unknown).
	Mergeable *bool
	// HeadRepoFullName is the OWNER/REPO the head branch lives in: another
	// repository for a pull request from a fork. Empty is read as the
	// repository itself (the caller did not say otherwise).
	HeadRepoFullName string
}

// Open reports whether the pull request is open.
func (pr PullRequest) Open() bool { return pr.State == "open" }

// FromFork reports whether the head branch lives in a repository other than
// repoFullName (compared in ASCII case only). An empty HeadRepoFullName is
// the repository itself.
func (pr PullRequest) FromFork(repoFullName string) bool {
	return pr.HeadRepoFullName != "" && !asciiEqualFold(pr.HeadRepoFullName, repoFullName)
}

// PRLink is one item a pull request links, with every way it does
// (CONTRACT.md §8 "Linking"), in a fixed order: the body's keyword
// references in the order they appear ("closes #12", "refs #12",
// "part of OWNER/REPO#12"; the keyword lowercased, one space, no colon), then
// "issue-12 in the body", "pr:7 tag" and "claim branch <name>".
type PRLink struct {
	Item ItemID   `json:"item"`
	How  []string `json:"how"`
}

// Linking keywords (CONTRACT.md §8): GitHub's closing keywords, and the
// non-closing refs, part of and towards that sub-item pull requests use
// (GitHub honours closing keywords only on pull requests into the default
// branch). Longest first, so that "closes" is not read as "close".
var linkKeywords = []string{
	"resolved", "resolves", "resolve",
	"closed", "closes", "close",
	"fixed", "fixes", "fix",
	"towards", "part of", "refs",
}

// Link descriptions other than the body's keywords.
const (
	linkHowLiteral = " in the body" // after the item id
	linkHowPRTag   = " tag"         // after pr:<n>
	linkHowBranch  = "claim branch "
)

// PRLinks returns the items pull request pr of repository repoFullName
// (OWNER/REPO) links, from the items of s:
//
//   - a linking keyword (close, closes, closed, fix, fixes, fixed, resolve,
//     resolves, resolved, refs, part of, towards; ASCII, any case), an
//     optional colon, one or more spaces or tabs, then #N or this
//     repository's OWNER/REPO#N (ASCII case-insensitive), in the body's prose;
//   - the literal item id issue-N in the body's prose;
//   - a pr:<n> tag on the item naming this pull request;
//   - a head branch (in this repository, not a fork) equal to the branch
//     recorded with the item's live claim (held or lapsed, at s.Now).
//
// The body's prose excludes fenced and indented code, block quotes, HTML
// comments and code-like HTML blocks (the blockScanner commands use), inline
// code spans and inline <code>, <pre>, <kbd>, <samp> and <tt> elements. A
// keyword must stand alone (no letter, digit or underscore before or after
// it); a number has one to ten ASCII digits, no leading zero, and nothing
// word-like after it (#12abc, #12_ and #12é are no reference); the item id
// is lowercase and stands alone (xissue-12, fix-issue-12, issue-12.md and
// issue-12a are none). Only ASCII counts: a look-alike letter (Cyrillic,
// fullwidth, the Kelvin sign that Unicode case folding maps to k), digit or
// space, or an invisible character in the middle, makes no link. A
// reference to another repository, to a number that is no item of s, or to
// an item s does not hold, links nothing. The title is never read, nor is an
// item's body (prose, never parsed).
//
// The result has one PRLink per item, sorted by item number, each with every
// distinct way it is linked.
func PRLinks(pr PullRequest, repoFullName string, s Snapshot) []PRLink {
	byID := make(map[ItemID]*Candidate, len(s.Items))
	for k := range s.Items {
		c := &s.Items[k]
		if c.Item == nil {
			continue
		}
		if _, dup := byID[c.Item.ID]; !dup {
			byID[c.Item.ID] = c
		}
	}
	ways := map[ItemID][]string{}
	add := func(id ItemID, how string) {
		if _, ok := byID[id]; !ok {
			return
		}
		if !slices.Contains(ways[id], how) {
			ways[id] = append(ways[id], how)
		}
	}
	for _, r := range bodyRefs(pr.Body, repoFullName) {
		add(IDFor(r.num), r.how)
	}
	if pr.Number > 0 {
		tag := "pr:" + strconv.Itoa(pr.Number)
		for id, c := range byID {
			if c.Item.HasTag(tag) {
				add(id, tag+linkHowPRTag)
			}
		}
	}
	if pr.HeadRef != "" && !pr.FromFork(repoFullName) {
		for id, c := range byID {
			if c.Claim.Branch == pr.HeadRef && ClaimStateOf(c.Claim, s.Now, s.Quarantine).InFlight() {
				add(id, linkHowBranch+pr.HeadRef)
			}
		}
	}
	out := make([]PRLink, 0, len(ways))
	for id, how := range ways {
		out = append(out, PRLink{Item: id, How: how})
	}
	slices.SortFunc(out, func(a, b PRLink) int { return compareIDs(a.Item, b.Item) })
	return out
}

// bodyRef is one reference found in a pull request's body.
type bodyRef struct {
	num int
	how string
}

// bodyRefs finds the keyword references and literal item ids in a body's
// prose, in the order they appear (keyword references and item ids of one
// paragraph interleaved by position).
func bodyRefs(body, repoFullName string) []bodyRef {
	var out []bodyRef
	var sc blockScanner
	var para []string
	flush := func() {
		if len(para) == 0 {
			return
		}
		out = append(out, paragraphRefs(maskInline(strings.Join(para, "\n")), repoFullName)...)
		para = para[:0]
	}
	for line := range strings.SplitSeq(body, "\n") {
		line = strings.TrimSuffix(line, "\r")
		if sc.prose(line) {
			para = append(para, line)
		} else {
			flush()
		}
	}
	flush()
	return out
}

// maskedByte replaces every byte of hidden text (code spans, inline code
// elements, HTML comments): it is neither a space nor a word character, so
// a reference cannot be put together across it.
const maskedByte = '\x00'

// inlineCode are the inline HTML elements whose content is code.
var inlineCode = []string{"code", "pre", "kbd", "samp", "tt"}

// maskInline hides a paragraph's inline code spans (CommonMark: a run of n
// backticks up to the next run of exactly n; an unmatched run is literal), its
// inline code elements (<code>…</code> and the like, to the closing tag or
// the paragraph's end) and its HTML comments (<!-- … -->, to the paragraph's
// end when unclosed). A backslash escapes the next ASCII punctuation
// character outside them. It runs in linear time per backtick-run length.
func maskInline(p string) string {
	b := []byte(p)
	noCloser := map[int]bool{} // backtick-run lengths with no later run of that length
	hide := func(from, to int) {
		for k := from; k < to; k++ {
			b[k] = maskedByte
		}
	}
	for i := 0; i < len(p); {
		switch c := p[i]; {
		case c == '\\' && i+1 < len(p) && isASCIIPunct(p[i+1]):
			i += 2
		case c == '`':
			n := runLen(p, i, '`')
			if !noCloser[n] {
				if end := closingRun(p, i+n, n); end >= 0 {
					hide(i, end)
					i = end
					continue
				}
				noCloser[n] = true
			}
			i += n
		case c == '<' && strings.HasPrefix(p[i:], "<!--"):
			end := len(p)
			if j := strings.Index(p[i+4:], "-->"); j >= 0 {
				end = i + 4 + j + 3
			}
			hide(i, end)
			i = end
		case c == '<':
			if name := inlineCodeTag(p[i:]); name != "" {
				end := len(p)
				if j := indexFoldASCII(p[i+1:], "</"+name+">"); j >= 0 {
					end = i + 1 + j + len(name) + 3
				}
				hide(i, end)
				i = end
				continue
			}
			i++
		default:
			i++
		}
	}
	return string(b)
}

// runLen is the length of the run of c starting at i.
func runLen(s string, i int, c byte) int {
	n := 0
	for i+n < len(s) && s[i+n] == c {
		n++
	}
	return n
}

// closingRun finds the first run of exactly n backticks at or after from and
// returns the index just past it, or -1.
func closingRun(s string, from, n int) int {
	for i := from; i < len(s); {
		if s[i] != '`' {
			i++
			continue
		}
		m := runLen(s, i, '`')
		if m == n {
			return i + m
		}
		i += m
	}
	return -1
}

// inlineCodeTag returns the name of the inline code element s starts with
// ("<code>", "<CODE class=x>"), or "".
func inlineCodeTag(s string) string {
	for _, name := range inlineCode {
		if len(s) < len(name)+2 || !asciiEqualFold(s[1:1+len(name)], name) {
			continue
		}
		if c := s[1+len(name)]; c == '>' || c == ' ' || c == '\t' || c == '\n' {
			return name
		}
	}
	return ""
}

// indexFoldASCII is strings.Index with ASCII case folding only.
func indexFoldASCII(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if asciiEqualFold(s[i:i+len(sub)], sub) {
			return i
		}
	}
	return -1
}

// paragraphRefs scans a masked paragraph for keyword references and literal
// item ids.
func paragraphRefs(p, repoFullName string) []bodyRef {
	var out []bodyRef
	for i := 0; i < len(p); i++ {
		c := p[i] | 0x20
		if c < 'a' || c > 'z' || wordBefore(p, i) {
			continue
		}
		if p[i] == 'i' {
			if n, end, ok := literalID(p, i); ok {
				out = append(out, bodyRef{n, string(IDFor(n)) + linkHowLiteral})
				i = end - 1
				continue
			}
		}
		if r, end, ok := keywordRef(p, i, repoFullName); ok {
			out = append(out, r)
			i = end - 1
		}
	}
	return out
}

// keywordRef reads a linking keyword at i, an optional colon, spaces or tabs
// and a reference; end is just past the reference.
func keywordRef(p string, i int, repoFullName string) (bodyRef, int, bool) {
	for _, kw := range linkKeywords {
		j, ok := matchKeyword(p, i, kw)
		if !ok {
			continue
		}
		if j < len(p) && p[j] == ':' {
			j++
		}
		k := j
		for k < len(p) && (p[k] == ' ' || p[k] == '\t') {
			k++
		}
		if k == j {
			return bodyRef{}, 0, false
		}
		n, where, end, ok := refTarget(p, k, repoFullName)
		if !ok {
			return bodyRef{}, 0, false
		}
		return bodyRef{n, kw + " " + where}, end, true
	}
	return bodyRef{}, 0, false
}

// matchKeyword matches kw (ASCII, any case; the space of "part of" is one or
// more spaces or tabs) at i and returns the index just past it. (That it
// stands alone follows from what keywordRef requires next: a colon or a
// space, so "closest" and "fixing" are no keyword.)
func matchKeyword(p string, i int, kw string) (int, bool) {
	j := i
	for k := 0; k < len(kw); k++ {
		if kw[k] == ' ' {
			start := j
			for j < len(p) && (p[j] == ' ' || p[j] == '\t') {
				j++
			}
			if j == start {
				return 0, false
			}
			continue
		}
		if j >= len(p) || p[j]|0x20 != kw[k] || !isASCIILetter(p[j]) {
			return 0, false
		}
		j++
	}
	return j, true
}

// refTarget reads #N or OWNER/REPO#N (this repository's, ASCII
// case-insensitive) at k. where is "#N" or "OWNER/REPO#N" as the caller
// named the repository.
func refTarget(p string, k int, repoFullName string) (n int, where string, end int, ok bool) {
	if k < len(p) && p[k] == '#' {
		n, end, ok = refNumber(p, k+1)
		return n, "#" + strconv.Itoa(n), end, ok
	}
	j := k
	slash := 0
	for j < len(p) && (isRepoChar(p[j]) || p[j] == '/') {
		if p[j] == '/' {
			slash++
		}
		j++
	}
	if slash != 1 || j >= len(p) || p[j] != '#' || repoFullName == "" || !asciiEqualFold(p[k:j], repoFullName) {
		return 0, "", 0, false
	}
	n, end, ok = refNumber(p, j+1)
	return n, repoFullName + "#" + strconv.Itoa(n), end, ok
}

// refNumber reads an issue number at k: 1 to 10 ASCII digits, no leading zero,
// no word character after it, within an int.
func refNumber(p string, k int) (n, end int, ok bool) {
	j := k
	for j < len(p) && p[j] >= '0' && p[j] <= '9' {
		j++
	}
	if j == k || p[k] == '0' || j-k > 10 || wordAt(p, j) {
		return 0, 0, false
	}
	n, err := strconv.Atoi(p[k:j])
	if err != nil || n <= 0 {
		return 0, 0, false
	}
	return n, j, true
}

// literalID reads the item id issue-N at i, standing alone: nothing
// word-like after the number, nor a '-', '.' or '/' that continues a longer
// name (issue-12-fix, issue-12.md, issue-12/x). The character before i is
// checked by the caller (wordBefore) and by idJoinerBefore.
func literalID(p string, i int) (n, end int, ok bool) {
	if !strings.HasPrefix(p[i:], "issue-") || idJoinerBefore(p, i) {
		return 0, 0, false
	}
	n, end, ok = refNumber(p, i+len("issue-"))
	if !ok {
		return 0, 0, false
	}
	if end+1 < len(p) && strings.IndexByte("-./", p[end]) >= 0 && (wordAt(p, end+1) || p[end+1] == '-' || p[end+1] == '.' || p[end+1] == '/') {
		return 0, 0, false
	}
	return n, end, true
}

// idJoinerBefore reports a character before i that makes issue-N part of a
// longer name: a '-', '.', '/', '@' or '\'.
func idJoinerBefore(p string, i int) bool {
	return i > 0 && strings.IndexByte("-./@\\", p[i-1]) >= 0
}

// wordBefore reports a word character (a letter or a digit in any script,
// an underscore, or an invalid byte) just before i.
func wordBefore(p string, i int) bool {
	if i == 0 {
		return false
	}
	r, _ := utf8.DecodeLastRuneInString(p[:i])
	return isWordRune(r)
}

// wordAt reports a word character at i.
func wordAt(p string, i int) bool {
	if i >= len(p) {
		return false
	}
	r, _ := utf8.DecodeRuneInString(p[i:])
	return isWordRune(r)
}

// isWordRune: a letter or digit in any script, a combining mark, an
// underscore, or an invalid byte (errs towards no link).
func isWordRune(r rune) bool {
	return r == '_' || r == utf8.RuneError || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r)
}

func isASCIILetter(c byte) bool { return c|0x20 >= 'a' && c|0x20 <= 'z' }

// isRepoChar: a character of an owner or repository name.
func isRepoChar(c byte) bool {
	return isASCIILetter(c) || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.'
}

func isASCIIPunct(c byte) bool {
	return c >= '!' && c <= '/' || c >= ':' && c <= '@' || c >= '[' && c <= '`' || c >= '{' && c <= '~'
}

// asciiEqualFold compares in ASCII case only: unlike strings.EqualFold, the
// Kelvin sign is not k and the long s is not s.
func asciiEqualFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if x == y {
			continue
		}
		if !isASCIILetter(x) || x|0x20 != y|0x20 {
			return false
		}
	}
	return true
}
