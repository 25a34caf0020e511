package gating

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The marker prefixes (CONTRACT.md §6). A comment is a marker only when its
// body starts with one of them, byte for byte: the protocol counts attempts
// with startswith, so quoting a marker anywhere else is never a marker.
const (
	ClaimPrefix   = "<!-- backlog-worker: claim "   // note the trailing space
	OutcomePrefix = "<!-- backlog-worker: outcome " // never counted as an attempt
	ParkPrefix    = "<!-- backlog-warden: park "
	ReportPrefix  = "<!-- backlog-warden: report "
	markerSuffix  = " -->"
)

// MaxMarkerLine is the longest first line ParseMarker reads as a marker, in
// bytes; a longer one is malformed. (The grammar sets no bound; a marker is
// a few dozen bytes, and every value may be quoted back in a finding.)
const MaxMarkerLine = 1024

// MarkerKind is the verb of a marker.
type MarkerKind string

// The four kinds: the workers' claim and outcome, warden's park and report.
const (
	KindClaim   MarkerKind = "claim"
	KindOutcome MarkerKind = "outcome"
	KindPark    MarkerKind = "park"
	KindReport  MarkerKind = "report"
)

// Worker reports whether the kind is a backlog-worker marker (claim or
// outcome), as opposed to one warden writes (park, report).
func (k MarkerKind) Worker() bool { return k == KindClaim || k == KindOutcome }

// Outcome results (the `result` field of an outcome marker).
const (
	ResultComplete = "complete"
	ResultReleased = "released"
	ResultParked   = "parked"
)

// MarkerStatus says what ParseMarker made of a comment body.
type MarkerStatus int

// MarkerNone: the body does not start with a marker prefix (prose, a quoted
// marker, a command). MarkerValid: a well-formed marker about the expected
// item. MarkerMalformed: it starts with a marker prefix but breaks the
// grammar or names another item; it establishes nothing and is reported.
const (
	MarkerNone MarkerStatus = iota
	MarkerValid
	MarkerMalformed
)

func (s MarkerStatus) String() string {
	switch s {
	case MarkerNone:
		return "none"
	case MarkerValid:
		return "valid"
	case MarkerMalformed:
		return "malformed"
	}
	return "MarkerStatus(" + strconv.Itoa(int(s)) + ")"
}

// Marker is a parsed first line. Only the fields of its kind are set; for a
// malformed marker, Kind, Line and Reason are set and the other fields hold
// whatever was read before the first problem (for quoting, never for
// deciding).
type Marker struct {
	Kind MarkerKind `json:"kind"`
	Item ItemID     `json:"item"`
	// Claim and outcome.
	Owner string `json:"owner,omitempty"`
	Fence int64  `json:"fence,omitempty"`
	// Claim.
	Region string    `json:"region,omitempty"`
	At     time.Time `json:"at,omitzero"`
	// Claim, takeover form: both or neither.
	PriorOwner string `json:"priorOwner,omitempty"`
	PriorFence int64  `json:"priorFence,omitempty"`
	// Outcome: complete, released or parked.
	Result string `json:"result,omitempty"`
	// Park.
	Attempts    int    `json:"attempts,omitempty"`
	RulingOwner string `json:"rulingOwner,omitempty"`
	RulingTopic string `json:"rulingTopic,omitempty"`
	// Line is the first line as read (without its line ending, cut at
	// MaxMarkerLine bytes).
	Line string `json:"line"`
	// Reason says why a malformed marker is malformed.
	Reason string `json:"reason,omitempty"`
}

// Takeover reports whether a claim marker is in the takeover form.
func (m Marker) Takeover() bool { return m.Kind == KindClaim && m.PriorOwner != "" }

// markerGrammar is each kind's prefix and fields.
var markerGrammar = []struct {
	kind     MarkerKind
	prefix   string
	required []string
	optional []string
}{
	{KindClaim, ClaimPrefix, []string{"item", "owner", "region", "fence", "at"}, []string{"prior-owner", "prior-fence"}},
	{KindOutcome, OutcomePrefix, []string{"item", "owner", "fence", "result"}, nil},
	{KindPark, ParkPrefix, []string{"item", "attempts", "ruling-owner", "ruling-topic"}, nil},
	{KindReport, ReportPrefix, []string{"item"}, nil},
}

// ParseMarker reads the marker on the first line of a comment body.
//
// The body must start with a marker prefix, with nothing before it (no
// whitespace, no quote); otherwise the result is MarkerNone. The first line
// ends at the first "\n" (one "\r" before it is dropped) and must end with
// " -->". Between prefix and suffix: space-separated key=value fields, one
// space apart, keys unique and all known for the kind, every required key
// present, values printable ASCII without spaces and without "-->" or
// "--!>" (which would end the HTML comment early). Values: item an item id
// equal to expect (expect "" accepts any item id); fence and prior-fence
// positive integers without leading zeros; at UTC ISO 8601
// (YYYY-MM-DDTHH:MM:SSZ, optionally with 1 to 9 fractional digits); result
// complete, released or parked; attempts a non-negative integer without
// leading zeros; prior-owner and prior-fence both or neither. Any violation is MarkerMalformed with
// the first problem found as Reason. Every byte is treated as hostile: it
// never panics and never allocates more than a few copies of the line.
func ParseMarker(body string, expect ItemID) (Marker, MarkerStatus) {
	g := -1
	for i := range markerGrammar {
		if strings.HasPrefix(body, markerGrammar[i].prefix) {
			g = i
			break
		}
	}
	if g < 0 {
		return Marker{}, MarkerNone
	}
	gr := &markerGrammar[g]
	m := Marker{Kind: gr.kind}
	line := body
	if i := strings.IndexByte(line, '\n'); i >= 0 {
		line = line[:i]
	}
	line = strings.TrimSuffix(line, "\r")
	if len(line) > MaxMarkerLine {
		m.Line = line[:MaxMarkerLine]
		return mkrBad(m, "the marker line is longer than %d bytes", MaxMarkerLine)
	}
	m.Line = line
	rest := line[len(gr.prefix):]
	if rest == "-->" || rest == "" {
		return mkrBad(m, "the marker has no fields")
	}
	fields, ok := strings.CutSuffix(rest, markerSuffix)
	if !ok {
		return mkrBad(m, "the marker line does not end with \" -->\" (a marker is one line)")
	}
	seen := make(map[string]string, 8)
	for f := range strings.SplitSeq(fields, " ") {
		if f == "" {
			return mkrBad(m, "fields are separated by exactly one space")
		}
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			return mkrBad(m, "field %s is not key=value", mkrQuote(f))
		}
		if !mkrKnown(gr.required, k) && !mkrKnown(gr.optional, k) {
			return mkrBad(m, "unknown key %s in a %s marker", mkrQuote(k), gr.kind)
		}
		if _, dup := seen[k]; dup {
			return mkrBad(m, "key %s appears twice", k)
		}
		if why := mkrValueProblem(v); why != "" {
			return mkrBad(m, "%s=%s: %s", k, mkrQuote(v), why)
		}
		seen[k] = v
		if why := mkrSet(&m, k, v, expect); why != "" {
			return mkrBad(m, "%s=%s: %s", k, mkrQuote(v), why)
		}
	}
	for _, k := range gr.required {
		if _, ok := seen[k]; !ok {
			return mkrBad(m, "missing key %s", k)
		}
	}
	if m.Kind == KindClaim {
		_, po := seen["prior-owner"]
		_, pf := seen["prior-fence"]
		if po != pf {
			return mkrBad(m, "a takeover marker carries both prior-owner and prior-fence")
		}
	}
	return m, MarkerValid
}

func mkrBad(m Marker, format string, a ...any) (Marker, MarkerStatus) {
	m.Reason = fmt.Sprintf(format, a...)
	return m, MarkerMalformed
}

func mkrKnown(keys []string, k string) bool {
	for _, x := range keys {
		if x == k {
			return true
		}
	}
	return false
}

// mkrValueProblem checks the common value grammar: non-empty printable
// ASCII without spaces, and nothing that would end the HTML comment.
func mkrValueProblem(v string) string {
	if v == "" {
		return "empty value"
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < 0x21 || c > 0x7e {
			return "values are printable ASCII without spaces"
		}
	}
	if strings.Contains(v, "-->") || strings.Contains(v, "--!>") {
		return "a value may not end the HTML comment"
	}
	return ""
}

// mkrSet stores one field's value, checking its own grammar.
func mkrSet(m *Marker, k, v string, expect ItemID) string {
	switch k {
	case "item":
		if _, err := ParseID(v); err != nil {
			return "not an item id (issue-<number>)"
		}
		m.Item = ItemID(v)
		if expect != "" && m.Item != expect {
			return "names another item than " + string(expect)
		}
	case "owner":
		m.Owner = v
	case "region":
		m.Region = v
	case "prior-owner":
		m.PriorOwner = v
	case "ruling-owner":
		m.RulingOwner = v
	case "ruling-topic":
		m.RulingTopic = v
	case "fence", "prior-fence":
		n, ok := mkrNumber(v, false)
		if !ok {
			return "not a positive integer without leading zeros"
		}
		if k == "fence" {
			m.Fence = n
		} else {
			m.PriorFence = n
		}
	case "attempts":
		n, ok := mkrNumber(v, true)
		if !ok || n > int64(^uint32(0)>>1) {
			return "not a non-negative integer without leading zeros"
		}
		m.Attempts = int(n)
	case "at":
		t, ok := mkrTime(v)
		if !ok {
			return "not UTC ISO 8601 (YYYY-MM-DDTHH:MM:SSZ)"
		}
		m.At = t
	case "result":
		switch v {
		case ResultComplete, ResultReleased, ResultParked:
			m.Result = v
		default:
			return "result is complete, released or parked"
		}
	}
	return ""
}

// mkrNumber reads a decimal integer without sign or leading zeros that fits
// an int64; zero only when zeroOK.
func mkrNumber(v string, zeroOK bool) (int64, bool) {
	if v == "" || len(v) > 19 || (v[0] == '0' && (len(v) > 1 || !zeroOK)) {
		return 0, false
	}
	for i := 0; i < len(v); i++ {
		if v[i] < '0' || v[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(v, 10, 64)
	return n, err == nil
}

// mkrTime reads YYYY-MM-DDTHH:MM:SS[.f{1,9}]Z as a real UTC instant.
func mkrTime(v string) (time.Time, bool) {
	const shape = "dddd-dd-ddTdd:dd:dd"
	if len(v) < len(shape)+1 || v[len(v)-1] != 'Z' {
		return time.Time{}, false
	}
	for i := 0; i < len(shape); i++ {
		c := v[i]
		if shape[i] == 'd' {
			if c < '0' || c > '9' {
				return time.Time{}, false
			}
		} else if c != shape[i] {
			return time.Time{}, false
		}
	}
	if frac := v[len(shape) : len(v)-1]; frac != "" {
		if frac[0] != '.' || len(frac) < 2 || len(frac) > 10 {
			return time.Time{}, false
		}
		for i := 1; i < len(frac); i++ {
			if frac[i] < '0' || frac[i] > '9' {
				return time.Time{}, false
			}
		}
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, false
	}
	return t.UTC(), true
}

// mkrQuote quotes a hostile value for a reason or a detail: Go-quoted (so
// control characters and invalid UTF-8 are escaped), cut at 200 bytes.
func mkrQuote(s string) string {
	const max = 200
	if len(s) > max {
		return strconv.Quote(s[:max]) + "…"
	}
	return strconv.Quote(s)
}

// PriorClaim names the claim a takeover takes custody from.
type PriorClaim struct {
	Owner string `json:"owner"`
	Fence int64  `json:"fence"`
}

// ClaimMarker is the exact claim marker line warden posts (post_markers) for
// a grant it made, without a line ending: the protocol's fields in the
// protocol's order, then prior-owner and prior-fence when prior is not nil
// (the takeover form). at is written in UTC, to the second, with fractional
// seconds only when it has them. Values are expected to satisfy the marker
// grammar (ParseMarker reads back what was given); a byte outside it is
// written %XX-escaped so that the line stays one well-formed HTML comment.
func ClaimMarker(item, owner, region string, fence int64, at time.Time, prior *PriorClaim) string {
	var b strings.Builder
	b.WriteString(ClaimPrefix)
	b.WriteString("item=" + MarkerValue(item))
	b.WriteString(" owner=" + MarkerValue(owner))
	b.WriteString(" region=" + MarkerValue(region))
	b.WriteString(" fence=" + strconv.FormatInt(fence, 10))
	b.WriteString(" at=" + MarkerTime(at))
	if prior != nil {
		b.WriteString(" prior-owner=" + MarkerValue(prior.Owner))
		b.WriteString(" prior-fence=" + strconv.FormatInt(prior.Fence, 10))
	}
	b.WriteString(markerSuffix)
	return b.String()
}

// MarkerTime formats an instant as a marker's at value: UTC ISO 8601, with
// fractional seconds (trailing zeros dropped) only when there are any.
func MarkerTime(t time.Time) string {
	t = t.UTC()
	if t.Nanosecond() == 0 {
		return t.Format("2006-01-02T15:04:05Z")
	}
	return t.Format("2006-01-02T15:04:05.999999999Z")
}

// MarkerValue makes s a marker value: every byte outside printable ASCII
// (and the ">" of a "-->" or "--!>") is written %XX, and an empty value is
// "-". It is the identity on every value ParseMarker accepts.
func MarkerValue(s string) string {
	if s == "" {
		return "-"
	}
	if mkrValueProblem(s) == "" {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c < 0x21 || c > 0x7e:
			fmt.Fprintf(&b, "%%%02X", c)
		case c == '>' && (strings.HasSuffix(b.String(), "--") || strings.HasSuffix(b.String(), "--!")):
			b.WriteString("%3E")
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// MaxParkQuestion bounds the question quoted in a park comment, in bytes
// (a GitHub comment holds 65,536 characters).
const MaxParkQuestion = 50000

// ParkComment is warden's park comment (CONTRACT.md §6): first line exactly
// `<!-- backlog-warden: park item=issue-N attempts=A ruling-owner=X ruling-topic=Y -->`,
// then the question the ruling owner must answer (quoted), each attempt's
// owner and outcome, and what unparks the item. Marker values are written
// with MarkerValue; names in the prose are set in code spans, so no `@`
// mention or `#` reference in them is live. The question is the ruling
// route's prose and is quoted as written.
func ParkComment(item ItemID, attempts int, rulingOwner, rulingTopic, question string, history []AttemptLine) string {
	if attempts < 0 {
		attempts = 0
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%sitem=%s attempts=%d ruling-owner=%s ruling-topic=%s%s\n",
		ParkPrefix, MarkerValue(string(item)), attempts, MarkerValue(rulingOwner), MarkerValue(rulingTopic), markerSuffix)
	fmt.Fprintf(&b, "**Parked** %s after %d attempt%s. Ruling owner: %s, topic: %s.\n\n",
		mkrSpan(string(item)), attempts, mkrPlural(attempts), mkrSpan(rulingOwner), mkrSpan(rulingTopic))
	fmt.Fprintf(&b, "**The question %s must answer:**\n\n", mkrSpan(rulingOwner))
	q := strings.TrimSpace(strings.ReplaceAll(question, "\r\n", "\n"))
	if len(q) > MaxParkQuestion {
		q = strings.ToValidUTF8(q[:MaxParkQuestion], "") + " …"
	}
	if q == "" {
		b.WriteString("_No question was recorded: the ruling owner must be told what to decide._\n")
	} else {
		for l := range strings.SplitSeq(q, "\n") {
			b.WriteString(strings.TrimRight("> "+l, " ") + "\n")
		}
	}
	b.WriteString("\n**Attempts:**\n\n")
	if len(history) == 0 {
		b.WriteString("No attempt is on record.\n")
	}
	for i, a := range history {
		who := "an unknown holder"
		if a.Owner != "" {
			who = mkrSpan(a.Owner)
		}
		fmt.Fprintf(&b, "%d. %s", i+1, who)
		if a.Fence > 0 {
			fmt.Fprintf(&b, ", fence %d", a.Fence)
		}
		if !a.At.IsZero() {
			b.WriteString(", claimed " + a.At.UTC().Format(time.RFC3339))
		}
		outcome := a.Outcome
		if outcome == "" {
			outcome = "no outcome"
		}
		b.WriteString(": " + mkrOneLine(outcome) + "\n")
	}
	b.WriteString("\nUnparking is a human act: " + UnparkHint + ". It starts a new attempt epoch.\n")
	return b.String()
}

func mkrPlural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// mkrOneLine keeps a value on one line of Markdown.
func mkrOneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, strings.ToValidUTF8(s, "\uFFFD"))
}

// mkrSpan sets a value, on one line, in a Markdown code span (see
// reportSpan), where mentions and references are inert.
func mkrSpan(s string) string {
	s = mkrOneLine(s)
	if s == "" {
		return "(none)"
	}
	return reportSpan(s)
}
