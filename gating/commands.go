package gating

import (
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// The command verbs (CONTRACT.md §7).
const (
	VerbStatus  = "status"
	VerbRecheck = "recheck"
	VerbAdmit   = "admit"
	VerbUnpark  = "unpark"
	VerbPark    = "park"
	VerbResolve = "resolve"
	// VerbUndelivered is "/backlog undelivered #<pr>": a human rules that
	// merged pull request <pr> did not deliver the item, so it makes no
	// merged-not-complete for it (CONTRACT.md §11: the human-only verb to
	// rule that a merged PR did not deliver an item).
	VerbUndelivered = "undelivered"
	// VerbDispatch is "/backlog dispatch @<agent>": a human forces the
	// dispatch of an item to a dispatched agent (issue 20), taking a
	// maintenance claim for it whatever the ready set says.
	VerbDispatch = "dispatch"
)

// CommandVerbs lists the verbs, in the contract's order.
var CommandVerbs = []string{VerbStatus, VerbRecheck, VerbAdmit, VerbUnpark, VerbPark, VerbResolve, VerbUndelivered, VerbDispatch}

// CommandInterval is the rate limit of commands: one per user and item per
// interval.
const CommandInterval = time.Minute

// commandWord starts every command line.
const commandWord = "/backlog"

// maxRouteValue bounds a park's ruling-owner and ruling-topic values.
const maxRouteValue = 100

// maxPRDigits bounds the digits of undelivered's pull request number.
const maxPRDigits = 9

// Command is the command line of a comment. A Command with a Refusal was a
// command line (it starts with /backlog) that is not a well-formed command:
// warden answers it with a `confused` reaction and, to a person with triage
// or more, the Refusal as the reason. Verb is then the word as written
// (possibly empty or unknown); nothing else but Line is set.
type Command struct {
	Verb        string // one of CommandVerbs unless refused
	RulingOwner string // park only
	RulingTopic string // park only
	Question    string // park only: every other line of the comment, trimmed (may be empty)
	PR          int    // undelivered only: the pull request ruled not to have delivered the item
	Agent       string // dispatch only: the agent's login, as written after the "@"
	Line        int    // the command line's number in the comment, from 1
	Refusal     string // why the command is refused; empty when it is well-formed
}

// Refused reports a command line that is not a well-formed command.
func (c Command) Refused() bool { return c.Refusal != "" }

// ParseCommand finds a comment's command: its first command line, if any
// (false: the comment has none, and warden does not answer it).
//
// A command line is a line that starts, at its first character, with
// "/backlog" followed by whitespace or the end of the line, and that lies
// outside fenced code (``` or ~~~, with or without an info string, indented
// up to three spaces, closed by a like fence at least as long or by the end
// of the comment), indented code and indented lines (four columns or more),
// block quotes (a line starting with ">", and the lazy continuation lines
// that follow it up to a blank line), HTML comments and <pre>, <script>,
// <style> and <textarea> blocks. Only the ASCII word counts: a look-alike
// (a fullwidth slash, a Cyrillic letter, a zero-width space before it) is
// no command line. Mentioning the command inside prose ("please /backlog
// admit") is none either.
//
// The first command line counts, well-formed or not. It must be exactly
// "/backlog <verb>"; for park, "/backlog park ruling-owner=<x>
// ruling-topic=<y>" (the two fields once each, in either order); for
// undelivered, "/backlog undelivered #<pr>" (a pull request number: "#",
// then 1 to 9 digits with no leading zero); for dispatch, "/backlog
// dispatch @<login>" (a GitHub login: ValidLogin): lowercase,
// single ASCII spaces, nothing before or after on the line except a final
// "\r". Anything else (indented by one to three spaces, "/Backlog",
// "Admit", trailing whitespace, two spaces, a tab, an unknown verb,
// arguments to a verb that takes none, a missing, repeated, empty or
// unknown park field, a missing, extra or malformed pull request number)
// refuses the command with a reason: commands fail closed, and say why.
func ParseCommand(body string) (Command, bool) {
	lines := strings.Split(body, "\n")
	for i := range lines {
		lines[i] = strings.TrimSuffix(lines[i], "\r")
	}
	var sc blockScanner
	for i, line := range lines {
		if !sc.prose(line) {
			continue
		}
		rest, ok := commandCandidate(line)
		if !ok {
			continue
		}
		c := parseCommandLine(line, rest)
		c.Line = i + 1
		if c.Verb == VerbPark && !c.Refused() {
			other := make([]string, 0, len(lines)-1)
			other = append(other, lines[:i]...)
			other = append(other, lines[i+1:]...)
			c.Question = strings.TrimSpace(strings.Join(other, "\n"))
		}
		return c, true
	}
	return Command{}, false
}

// commandCandidate reports whether a prose line is a command line: up to
// three spaces, then "/backlog" in any ASCII case, then whitespace or the
// end. rest is what follows the word.
func commandCandidate(line string) (rest string, ok bool) {
	trimmed := strings.TrimLeft(line, " ")
	if len(line)-len(trimmed) > 3 {
		return "", false
	}
	if len(trimmed) < len(commandWord) || !strings.EqualFold(trimmed[:len(commandWord)], commandWord) {
		return "", false
	}
	rest = trimmed[len(commandWord):]
	if rest == "" {
		return rest, true
	}
	r, _ := utf8.DecodeRuneInString(rest)
	return rest, unicode.IsSpace(r)
}

// parseCommandLine parses a command line strictly; rest follows the word.
func parseCommandLine(line, rest string) Command {
	var c Command
	words := strings.Split(rest, " ")
	if f := strings.Fields(rest); len(f) > 0 {
		c.Verb = clip(f[0])
	}
	refuse := func(format string, a ...any) Command {
		c.Refusal = fmt.Sprintf(format, a...)
		return c
	}
	switch {
	case strings.HasPrefix(line, " "):
		return refuse("the command must start the line, not be indented")
	case !strings.HasPrefix(line, commandWord):
		return refuse("write %s in lowercase", commandWord)
	case strings.TrimSpace(rest) == "":
		return refuse("no verb: write %s <verb>, where <verb> is one of %s", commandWord, strings.Join(CommandVerbs, ", "))
	case strings.TrimRightFunc(rest, unicode.IsSpace) != rest:
		return refuse("the command line ends in whitespace; nothing may follow the command")
	case strings.IndexFunc(rest, func(r rune) bool { return r != ' ' && unicode.IsSpace(r) }) >= 0:
		return refuse("only plain spaces may separate the words of a command (found a tab or another space character)")
	}
	for _, w := range words[1:] {
		if w == "" {
			return refuse("separate the words of a command with single spaces")
		}
	}
	verb, args := words[1], words[2:]
	if !contains(CommandVerbs, verb) {
		if contains(CommandVerbs, strings.ToLower(verb)) {
			return refuse("verbs are lowercase: write %s %s", commandWord, strings.ToLower(verb))
		}
		return refuse("unknown verb %q; the verbs are %s", clip(verb), strings.Join(CommandVerbs, ", "))
	}
	if verb == VerbUndelivered {
		switch {
		case len(args) == 0:
			return refuse("undelivered names the pull request that did not deliver this item: write %s undelivered #<pr>", commandWord)
		case len(args) > 1:
			return refuse("undelivered takes one pull request, #<pr> (found %q)", clip(strings.Join(args, " ")))
		}
		n, why := parsePRRef(args[0])
		if why != "" {
			return refuse("%s", why)
		}
		c.PR = n
		return c
	}
	if verb == VerbDispatch {
		switch {
		case len(args) == 0:
			return refuse("dispatch names the agent to dispatch the item to: write %s dispatch @<login>", commandWord)
		case len(args) > 1:
			return refuse("dispatch takes one agent, @<login> (found %q)", clip(strings.Join(args, " ")))
		}
		login, ok := strings.CutPrefix(args[0], "@")
		if !ok {
			return refuse("write the agent as @%s, with the at sign", clip(args[0]))
		}
		if why := ValidLogin(login); why != "" {
			return refuse("%s", why)
		}
		c.Agent = login
		return c
	}
	if verb != VerbPark {
		if len(args) > 0 {
			return refuse("%s takes no arguments (found %q)", verb, clip(strings.Join(args, " ")))
		}
		return c
	}
	fields := map[string]string{}
	for _, a := range args {
		k, v, ok := strings.Cut(a, "=")
		switch {
		case !ok:
			return refuse("park takes ruling-owner=<x> ruling-topic=<y>; %q is not a field", clip(a))
		case k != "ruling-owner" && k != "ruling-topic":
			return refuse("park takes ruling-owner=<x> ruling-topic=<y>; %q is not one of them", clip(k))
		}
		if _, dup := fields[k]; dup {
			return refuse("%s is given twice", k)
		}
		if err := validRouteValue(v); err != "" {
			return refuse("%s %s", k, err)
		}
		fields[k] = v
	}
	var missing []string
	for _, k := range []string{"ruling-owner", "ruling-topic"} {
		if _, ok := fields[k]; !ok {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		return refuse("park needs both ruling-owner=<x> and ruling-topic=<y>; missing %s", strings.Join(missing, " and "))
	}
	c.RulingOwner, c.RulingTopic = fields["ruling-owner"], fields["ruling-topic"]
	return c
}

// maxLogin is the longest GitHub login (39), plus a "[bot]" suffix.
const maxLogin = 39 + len("[bot]")

// ValidLogin checks a GitHub login as a command names it: 1 to 39 ASCII
// letters, digits and single hyphens, neither first nor last, optionally
// followed by "[bot]" (an app's account). The empty string means valid;
// otherwise the reason.
func ValidLogin(login string) string {
	base := strings.TrimSuffix(login, "[bot]")
	switch {
	case base == "":
		return "the agent's login is missing after the at sign: write @<login>"
	case len(login) > maxLogin || len(base) > 39:
		return fmt.Sprintf("%q is not a GitHub login: at most 39 characters", clip(login))
	case strings.HasPrefix(base, "-") || strings.HasSuffix(base, "-") || strings.Contains(base, "--"):
		return fmt.Sprintf("%q is not a GitHub login: a hyphen may not start or end it, nor follow another", clip(login))
	}
	for _, r := range base {
		if !(r < utf8.RuneSelf && (unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-')) {
			return fmt.Sprintf("%q is not a GitHub login: only ASCII letters, digits and hyphens (found %q)", clip(login), r)
		}
	}
	return ""
}

// parsePRRef reads undelivered's argument: "#" then the pull request's
// number, decimal, 1 to maxPRDigits digits, no sign, no leading zero. The
// reason is empty when it is well-formed.
func parsePRRef(a string) (int, string) {
	digits, ok := strings.CutPrefix(a, "#")
	if !ok {
		if a != "" && strings.Trim(a, "0123456789") == "" {
			return 0, fmt.Sprintf("write the pull request as #%s, with the hash sign", clip(a))
		}
		return 0, fmt.Sprintf("%q is not a pull request: write it as #<pr>, its number after a hash sign", clip(a))
	}
	switch {
	case digits == "":
		return 0, "the pull request number is missing after the hash sign: write #<pr>"
	case strings.Trim(digits, "0123456789") != "":
		return 0, fmt.Sprintf("%q is not a pull request number: write #<pr> with the number in digits 0-9 only", clip(a))
	case digits[0] == '0':
		return 0, fmt.Sprintf("%q is not a pull request number: no pull request is numbered 0 or written with a leading zero", clip(a))
	case len(digits) > maxPRDigits:
		return 0, fmt.Sprintf("%q is not a pull request number: at most %d digits", clip(a), maxPRDigits)
	}
	n := 0
	for _, r := range digits {
		n = n*10 + int(r-'0')
	}
	return n, ""
}

// validRouteValue checks a park field's value: it becomes a tag
// (ruling-owner:<x>) and a field of the park comment's marker, so it is
// 1–100 ASCII letters, digits and - _ . / + : [ ]. The empty string
// means valid; otherwise the reason.
func validRouteValue(v string) string {
	if v == "" {
		return "is empty"
	}
	if len(v) > maxRouteValue {
		return fmt.Sprintf("is longer than %d characters", maxRouteValue)
	}
	for _, r := range v {
		if !(r < utf8.RuneSelf && (unicode.IsLetter(r) || unicode.IsDigit(r) || strings.ContainsRune("-_./+:[]", r))) {
			return fmt.Sprintf("%q may hold only ASCII letters, digits and - _ . / + : [ ] (found %q)", clip(v), r)
		}
	}
	return ""
}

// clip cuts a user-written word for a reason line: at most 40 bytes, on a
// rune boundary.
func clip(s string) string {
	const most = 40
	if len(s) <= most {
		return s
	}
	cut := most
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// CommandRule says who may run a verb (CONTRACT.md §7): status anyone who
// can read the repository; recheck anyone with triage or more; admit,
// unpark, park, resolve, undelivered and dispatch a human with triage or
// more. An
// unknown verb needs both (fail closed).
func CommandRule(verb string) (needsHuman, needsTriage bool) {
	switch verb {
	case VerbStatus:
		return false, false
	case VerbRecheck:
		return false, true
	case VerbAdmit, VerbUnpark, VerbPark, VerbResolve, VerbUndelivered, VerbDispatch:
		return true, true
	default:
		return true, true
	}
}

// RateLimited reports whether a command arriving now from a user on an item
// is over the limit of one a minute, given when that user's last command on
// that item was taken (zero: never). A last time in the future (clock skew)
// limits until a minute after it.
func RateLimited(last, now time.Time) bool {
	if last.IsZero() {
		return false
	}
	return now.Sub(last) < CommandInterval
}

// blockScanner follows the Markdown blocks of a comment line by line, far
// enough to tell prose lines from code, quotes and hidden HTML. It errs
// towards hiding: a line it is unsure of is not prose.
type blockScanner struct {
	fenceChar byte   // '`' or '~' inside a fenced code block, else 0
	fenceLen  int    // the opening fence's length
	htmlEnd   string // inside an HTML block: the text that ends it ("-->", "</pre>" …)
	quote     bool   // inside a block quote (a '>' line and its lazy continuation)
}

// htmlBlocks are the HTML blocks whose content is code: the tag that starts
// one (after up to three spaces, case-insensitively, followed by a space, a
// '>' or the end of the line) and the text that ends it. HTML comments are
// followed separately (openComment).
var htmlBlocks = [][2]string{{"<pre", "</pre>"}, {"<script", "</script>"}, {"<style", "</style>"}, {"<textarea", "</textarea>"}}

// prose takes the next line and reports whether it is a prose line (one
// that could be a command line).
func (s *blockScanner) prose(line string) bool {
	if s.fenceChar != 0 {
		if n, info, ok := fence(line); ok && line[indentBytes(line)] == s.fenceChar && n >= s.fenceLen && strings.TrimSpace(info) == "" {
			s.fenceChar = 0
		}
		return false
	}
	if s.htmlEnd != "" {
		if i := strings.Index(strings.ToLower(line), s.htmlEnd); i >= 0 {
			tail := line[i+len(s.htmlEnd):]
			s.htmlEnd = ""
			s.openComment(tail)
		}
		return false
	}
	if strings.TrimSpace(line) == "" {
		s.quote = false
		return false
	}
	cols := indentCols(line)
	if cols <= 3 {
		body := line[indentBytes(line):]
		if n, _, ok := fence(line); ok {
			s.fenceChar, s.fenceLen, s.quote = body[0], n, false
			return false
		}
		if body[0] == '>' {
			s.quote = true
			return false
		}
		lower := strings.ToLower(body)
		for _, b := range htmlBlocks {
			after, ok := strings.CutPrefix(lower, b[0])
			if ok && (after == "" || after[0] == ' ' || after[0] == '\t' || after[0] == '>') {
				if !strings.Contains(after, b[1]) {
					s.htmlEnd = b[1]
				}
				return false
			}
		}
	}
	s.openComment(line)
	if s.quote {
		return false // lazy continuation of the quote's paragraph
	}
	return cols <= 3
}

// openComment notes an HTML comment that a line opens and leaves open; the
// lines after it are hidden until one holds "-->". (Inline or not: either
// way GitHub shows nothing of it.)
func (s *blockScanner) openComment(line string) {
	for {
		i := strings.Index(line, "<!--")
		if i < 0 {
			return
		}
		line = line[i+len("<!--"):]
		j := strings.Index(line, "-->")
		if j < 0 {
			s.htmlEnd = "-->"
			return
		}
		line = line[j+len("-->"):]
	}
}

// fence reports a code fence line (CommonMark): up to three spaces, then
// three or more backticks or tildes, then an info string (which, after
// backticks, holds no backtick). n is the fence's length.
func fence(line string) (n int, info string, ok bool) {
	if indentCols(line) > 3 {
		return 0, "", false
	}
	body := line[indentBytes(line):]
	if body == "" || (body[0] != '`' && body[0] != '~') {
		return 0, "", false
	}
	for n < len(body) && body[n] == body[0] {
		n++
	}
	if n < 3 {
		return 0, "", false
	}
	info = body[n:]
	if body[0] == '`' && strings.Contains(info, "`") {
		return 0, "", false
	}
	return n, info, true
}

// indentBytes is the length of a line's leading spaces and tabs.
func indentBytes(line string) int {
	return len(line) - len(strings.TrimLeft(line, " \t"))
}

// indentCols is a line's indentation in columns, tabs advancing to the next
// multiple of four.
func indentCols(line string) int {
	cols := 0
	for i := 0; i < len(line); i++ {
		switch line[i] {
		case ' ':
			cols++
		case '\t':
			cols += 4 - cols%4
		default:
			return cols
		}
	}
	return cols
}
