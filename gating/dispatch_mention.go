package gating

import (
	"fmt"
	"strings"
	"time"
)

// Mentions that summon an agent (issue 20): some agents start work when a
// comment mentions them. warden cannot stop them, but on an item that is not
// claimable it says so in the report comment, as it does for an assignment
// it undid, and the backlog check run fails the agent's pull request.

// Mentions lists the logins @-mentioned in a comment's prose, in order of
// first appearance, each once (as written the first time). A mention is
// "@" at the start of a line or after a character that cannot end a login
// or an e-mail address's local part, then a login (ValidLogin, optionally
// with "[bot]"), then the end of the line or a character that cannot
// continue a login. Code does not mention anyone: fenced and indented code,
// block quotes, HTML comments and blocks (the lines ParseCommand skips) and
// inline code spans are left out.
func Mentions(body string) []string {
	var out []string
	seen := map[string]bool{}
	var sc blockScanner
	for _, line := range strings.Split(body, "\n") {
		line = strings.TrimSuffix(line, "\r")
		if !sc.prose(line) {
			continue
		}
		for _, l := range lineMentions(stripComments(stripCodeSpans(line))) {
			if k := strings.ToLower(l); !seen[k] {
				seen[k] = true
				out = append(out, l)
			}
		}
	}
	return out
}

// stripCodeSpans blanks a line's inline code spans (a run of backticks up
// to the next run of the same length); an unclosed run is literal text.
func stripCodeSpans(line string) string {
	var b strings.Builder
	for i := 0; i < len(line); {
		if line[i] != '`' {
			b.WriteByte(line[i])
			i++
			continue
		}
		n := 0
		for i+n < len(line) && line[i+n] == '`' {
			n++
		}
		closeAt := -1
		for j := i + n; j < len(line); {
			if line[j] != '`' {
				j++
				continue
			}
			m := 0
			for j+m < len(line) && line[j+m] == '`' {
				m++
			}
			if m == n {
				closeAt = j
				break
			}
			j += m
		}
		if closeAt < 0 {
			b.WriteString(line[i : i+n])
			i += n
			continue
		}
		b.WriteByte(' ')
		i = closeAt + n
	}
	return b.String()
}

// stripComments blanks a prose line's HTML comments; one left open runs
// to the end of the line (the lines after it are not prose).
func stripComments(line string) string {
	for {
		i := strings.Index(line, "<!--")
		if i < 0 {
			return line
		}
		j := strings.Index(line[i+len("<!--"):], "-->")
		if j < 0 {
			return line[:i]
		}
		line = line[:i] + " " + line[i+len("<!--")+j+len("-->"):]
	}
}

func loginByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-'
}

// lineMentions finds the mentions of one prose line.
func lineMentions(line string) []string {
	var out []string
	for i := 0; i < len(line); i++ {
		if line[i] != '@' {
			continue
		}
		if i > 0 {
			p := line[i-1]
			if loginByte(p) || p == '_' || p == '.' || p == '@' || p == '/' || p == '`' || p >= 0x80 {
				continue // an e-mail address, a path, a scoped package
			}
		}
		j := i + 1
		for j < len(line) && loginByte(line[j]) {
			j++
		}
		if strings.HasPrefix(line[j:], "[bot]") {
			j += len("[bot]")
		}
		if j < len(line) && (line[j] == '_' || line[j] == '@' || line[j] >= 0x80) {
			continue
		}
		login := line[i+1 : j]
		if login != "" && ValidLogin(login) == "" {
			out = append(out, login)
		}
		i = j - 1
	}
	return out
}

// DispatchMentionDetail is the agent-dispatch-refused line's detail for a
// comment by author that mentioned login on issue n, which is not
// claimable (code, and the ledger's sentence why when it gave one): warden
// cannot stop an agent that reads mentions, so it says what holds instead.
func DispatchMentionDetail(login, author string, n int, code, why string, at time.Time) string {
	s := fmt.Sprintf("%s mentioned %s on issue #%d at %s, which is not claimable (%s", mkrQuote(author), mkrQuote(login), n, at.UTC().Format(time.RFC3339), code)
	if why != "" {
		s += ": " + why
	}
	return s + "); an agent that starts on the mention holds no claim, and the backlog check run fails its pull request. To make it claimable: " + ResolveHint(code)
}
