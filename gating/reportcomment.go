package gating

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// ReportCommentStart is how the report comment's first line starts; the line
// is exactly `<!-- backlog-warden: report item=issue-N -->` (CONTRACT.md §6).
const ReportCommentStart = ReportPrefix + "item="

// Report comment bounds. The whole comment is at most MaxReportChars
// characters (runes) and MaxReportBytes bytes (GitHub's body limit is 65,536
// characters; the byte bound keeps a body of multi-byte characters safe with
// any counting). A single detail is cut at MaxReportDetail runes and a
// refusal line at MaxReportRefusalChars, each with an ellipsis; at most
// MaxReportRefusals refusals (the newest) are listed.
const (
	MaxReportChars        = 60000
	MaxReportBytes        = 65536
	MaxReportDetail       = 4000
	MaxReportRefusals     = 10
	MaxReportRefusalChars = 1000
	maxReportHint         = 500
)

// ReportFinding is one open finding as the report comment lists it. Detail
// is free text that may quote hostile values (issue titles, logins, comment
// text); the comment renders it inert.
type ReportFinding struct {
	Code   string `json:"code"`
	Detail string `json:"detail"`
}

// RenderReportComment is an item's report comment (CONTRACT.md §6 "The
// report comment"): first line exactly
// `<!-- backlog-warden: report item=issue-N -->`, then every open finding,
// ordered by code then detail and without duplicates, each with its code, its
// detail in a code span (defused: see Defuse) and what resolves it
// (ResolveHint); with none, a line saying there are no open findings. The
// refusals (one line each for refused /backlog commands, oldest first) get
// their own section; only the newest MaxReportRefusals are shown.
//
// The comment is at most MaxReportChars runes and MaxReportBytes bytes: when
// the findings do not fit, whole findings are dropped from the end and a
// final line says how many were left out and points to statusHint (the
// status page; a generic pointer when empty). No line after the first can
// start a marker: every line begins with text the renderer chose.
func RenderReportComment(item ItemID, findings []ReportFinding, refusals []string, statusHint string) string {
	fs := slices.Clone(findings)
	slices.SortFunc(fs, func(a, b ReportFinding) int {
		return cmp.Or(strings.Compare(a.Code, b.Code), strings.Compare(a.Detail, b.Detail))
	})
	fs = slices.Compact(fs)

	var head strings.Builder
	fmt.Fprintf(&head, "%s%s%s\n", ReportCommentStart, MarkerValue(string(item)), markerSuffix)
	head.WriteString("**warden report** for " + reportSpan(Defuse(string(item))) + "\n\n")
	switch len(fs) {
	case 0:
		head.WriteString("No open findings: nothing about this item needs attention now. " +
			"warden keeps this comment and edits it in place if something changes.\n")
	case 1:
		head.WriteString("**1 open finding.** It leaves this list once it is resolved.\n\n")
	default:
		fmt.Fprintf(&head, "**%d open findings.** Each leaves this list once it is resolved.\n\n", len(fs))
	}

	lines := make([]string, len(fs))
	for i, f := range fs {
		lines[i] = reportFindingLine(f)
	}

	var tail strings.Builder
	if len(refusals) > 0 {
		rs := refusals
		if len(rs) > MaxReportRefusals {
			rs = rs[len(rs)-MaxReportRefusals:]
		}
		tail.WriteString("\n**Refused commands** (newest last):\n\n")
		for _, r := range rs {
			tail.WriteString("- " + reportProse(Defuse(reportCut(r, MaxReportRefusalChars))) + "\n")
		}
	}

	h, t := head.String(), tail.String()
	runes := utf8.RuneCountInString(h) + utf8.RuneCountInString(t)
	size := len(h) + len(t)
	fits := func(r, b int) bool { return r <= MaxReportChars && b <= MaxReportBytes }
	lr := make([]int, len(lines))
	total, totalB := runes, size
	for i, l := range lines {
		lr[i] = utf8.RuneCountInString(l)
		total += lr[i]
		totalB += len(l)
	}
	keep := len(lines)
	note := ""
	if !fits(total, totalB) {
		// Keep the longest prefix of findings that fits with the note saying
		// how many were left out.
		keep = 0
		r, b := runes, size
		for k := range lines {
			n := reportCutNote(len(lines)-(k+1), statusHint)
			if !fits(r+lr[k]+utf8.RuneCountInString(n), b+len(lines[k])+len(n)) {
				break
			}
			r, b = r+lr[k], b+len(lines[k])
			keep = k + 1
		}
		note = reportCutNote(len(lines)-keep, statusHint)
	}
	var out strings.Builder
	out.Grow(totalB + len(note))
	out.WriteString(h)
	for _, l := range lines[:keep] {
		out.WriteString(l)
	}
	out.WriteString(t)
	out.WriteString(note)
	return out.String()
}

// reportFindingLine is one finding as a two-line list item.
func reportFindingLine(f ReportFinding) string {
	var b strings.Builder
	b.WriteString("- **" + reportSpan(Defuse(reportCut(f.Code, 100))) + "**")
	if d := reportCut(f.Detail, MaxReportDetail); strings.TrimSpace(d) != "" {
		b.WriteString(": " + reportSpan(Defuse(d)))
	}
	b.WriteString("\n  Resolves: " + ResolveHint(f.Code) + "\n")
	return b.String()
}

// reportCutNote is the final line of a cut comment.
func reportCutNote(left int, statusHint string) string {
	where := "warden's status page"
	if h := strings.TrimSpace(reportOneLine(statusHint)); h != "" {
		where = reportCut(h, maxReportHint)
	}
	s := "s were"
	if left == 1 {
		s = " was"
	}
	return fmt.Sprintf("\n_%d more finding%s left out: this comment is cut at %d characters. Every finding is listed on %s._\n",
		left, s, MaxReportChars, where)
}

// reportCut keeps at most n runes of s (valid UTF-8), ending in an ellipsis
// when it cut.
func reportCut(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	i, k := 0, 0
	for i = range s {
		if k == n-1 {
			break
		}
		k++
	}
	return s[:i] + "…"
}

// reportOneLine replaces line breaks, other control characters and bidi
// controls with spaces.
func reportOneLine(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r < 0x20, r >= 0x7f && r < 0xa0, r == '\u2028', r == '\u2029':
			return ' '
		case r >= '\u202a' && r <= '\u202e', r >= '\u2066' && r <= '\u2069', r == '\u200e', r == '\u200f', r == '\u061c':
			return ' '
		}
		return r
	}, strings.ToValidUTF8(s, "\uFFFD"))
}

// zwsp is U+200B ZERO WIDTH SPACE: invisible, and it ends a mention, a
// reference, an entity, a tag or an autolink where it is inserted.
const zwsp = "\u200b"

// Defuse makes s inert wherever it is placed in a GitHub comment: one line
// (line breaks and other control characters become spaces, bidi controls
// too), valid UTF-8, and a zero-width space (U+200B) after every character
// that could start something GitHub acts on — `@` (a mention, a team, an
// e-mail), `#` (an issue reference, also in owner/repo#12), `&` (an entity
// that would render as one of those), `<` (HTML, comments, autolinks), the
// `-` of `GH-12`, the `:` of `scheme://` (bare URL autolinks, including
// issue URLs), `www` before a dot, `]` before `(` or `[` (Markdown links and
// images), and `--` before `>` (the end of an HTML comment). What is shown
// is unchanged but for those invisible spaces; backticks are left to the
// code span around the value (reportSpan), and Markdown emphasis to the
// caller.
func Defuse(s string) string {
	s = reportOneLine(s)
	var b strings.Builder
	b.Grow(len(s) + len(s)/8)
	for i := 0; i < len(s); i++ {
		c := s[i]
		b.WriteByte(c)
		next := byte(0)
		if i+1 < len(s) {
			next = s[i+1]
		}
		switch c {
		case '@', '#', '&', '<':
			b.WriteString(zwsp)
		case ']':
			if next == '(' || next == '[' {
				b.WriteString(zwsp)
			}
		case ':':
			if strings.HasPrefix(s[i+1:], "//") {
				b.WriteString(zwsp)
			}
		case '-':
			if i >= 2 && (s[i-2]|0x20) == 'g' && (s[i-1]|0x20) == 'h' && next >= '0' && next <= '9' {
				b.WriteString(zwsp)
			}
			if i >= 1 && s[i-1] == '-' && next == '>' {
				b.WriteString(zwsp)
			}
		case 'w', 'W':
			if i >= 2 && (s[i-2]|0x20) == 'w' && (s[i-1]|0x20) == 'w' && next == '.' {
				b.WriteString(zwsp)
			}
		}
	}
	return b.String()
}

// reportSpan sets a one-line value in a Markdown code span whose fence is one
// backtick longer than the longest run of backticks inside (CommonMark), with
// a space inside each fence when the value starts or ends with a backtick or
// a space (the renderer strips one on each side).
func reportSpan(s string) string {
	if s == "" {
		return "(empty)"
	}
	run, longest := 0, 0
	for i := 0; i < len(s); i++ {
		if s[i] == '`' {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	f := strings.Repeat("`", longest+1)
	if strings.Trim(s, " ") == "" {
		return f + s + f // all spaces: a renderer strips none
	}
	if s[0] == '`' || s[0] == ' ' || s[len(s)-1] == '`' || s[len(s)-1] == ' ' {
		return f + " " + s + " " + f
	}
	return f + s + f
}

// reportProse makes a defused line safe as Markdown prose: every ASCII
// punctuation character that Markdown or GitHub reads as syntax is escaped
// with a backslash, so it shows as written.
func reportProse(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if strings.IndexByte("\\`*_[]<>~|!&{}()#+-.", s[i]) >= 0 {
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// reportHints is what resolves each finding: the contract's defect codes
// (CONTRACT.md §6 "Defect codes"), the tag problems and exclusion reasons
// gating reports, and the ledger's write refusals.
var reportHints = map[string]string{
	// Tags and edges.
	"missing-mandatory-tag":   "add the missing tags: every item carries `backlog`, `priority:`, `phase:`, `homeRegion:` and `baseBranch:`.",
	"duplicate-attribute-tag": "a human removes all but one value of the single-valued tag (warden never picks a winner).",
	"unknown-state":           "replace the `state:` tag with `state:complete` or `state:parked`, or remove it (no `state:` means live).",
	"phase-carries-state":     "set `phase:` to `research`, `implementation` or `integration`; execution state lives in claims and `state:`.",
	"invalid-priority":        "set `priority:` to one of `P0`, `P1`, `P2`, `P3`.",
	"invalid-phase":           "set `phase:` to `research`, `implementation` or `integration` (a `pm` token changes it).",
	"empty-tag-value":         "give the tag a value, or remove it.",
	"park-without-route":      "give the parked item exactly one `ruling-owner:` and one `ruling-topic:` tag, or a human unparks it.",
	"park-without-question":   "post the question the ruling owner must answer: `/backlog park ruling-owner=<x> ruling-topic=<y>` with the question in the rest of the comment.",
	"dangling-blocker":        "remove the `blockedBy` link to the missing item, or restore that item.",
	"dangling-link":           "remove the link to the missing item, or restore that item.",
	"stalled-by-parked":       "the blocker's ruling owner rules and a human unparks the blocker, or a `pm` or `human` token removes the `blockedBy` link.",
	"invalid-blocker":         "fix the blocker's tags (its `state:` or its mandatory tags), or remove the `blockedBy` link.",
	"cycle":                   "remove one `blockedBy` link of the cycle (a `pm` or `human` token).",
	"edge-removed":            "a human with triage or more judges whether the removal made work ready that is not, then runs `/backlog resolve` on this issue; or a `pm` or `human` token writes the link again.",
	"issue-gone":              "restore or re-transfer the issue, or forget the item in the ledger (`DELETE`, once nothing depends on it).",
	// Admission and parking.
	"admission-unrecorded":    "nothing by hand: warden reads the issue's label events to find the admission; if none is found, a human with triage or more runs `/backlog admit`.",
	"agent-removed-admission": "warden re-added the admission label; a human with triage or more admits the item (removes the label or runs `/backlog admit`).",
	"agent-removed-park":      "warden re-added the parked label; " + UnparkHint + ".",
	CodeSpecChangedByAgent: "warden put the admission label back. See who changed what in the issue's edit history (the **edited** menu beside its description: GitHub keeps every revision of the title and body there); " +
		"a human with triage or more who agrees with the text as it is now admits the item again (removes the admission label or runs `/backlog admit`), or restores the admitted text and admits it.",
	"park-label-without-tag": "remove the parked label, or a human with triage or more parks the item with `/backlog park ruling-owner=<x> ruling-topic=<y>`.",
	"item-label-removed":     "re-add the item label, or forget the item through the ledger (forgetting is explicit).",
	"poisoned":               "the item is parked with a ruling route; once the ruling owner rules, " + UnparkHint + ".",
	// Comment trail.
	"claimed-unmarked":       "the holder posts its claim marker as the first line of a comment (or warden does, with `post_markers: true`).",
	"unbacked-marker":        "nothing to undo (the marker does not count); agents post markers only for grants the ledger made.",
	"malformed-marker":       "post a marker that follows the grammar of CONTRACT.md section 6 (the malformed one establishes nothing).",
	"duplicate-claim-marker": "only the holder announces its grant; the second marker does not count.",
	"unannounced-takeover":   "a takeover claim marker carries `prior-owner=` and `prior-fence=`; the attempt counts either way.",
	"takeover-mismatch":      "the takeover marker must name the prior claim's owner and fence as the ledger recorded them.",
	"takeover-collision":     "a human with triage or more checks both owners' work, stops one, and runs `/backlog resolve`.",
	CodePriorBranchRewritten: "restore the prior attempt's branch from its last good head (the push event names it) if work was lost, then a human with triage or more runs `/backlog resolve`.",
	"marker-edited":          "nothing: the earliest text counts; restore it to clear the confusion.",
	"marker-deleted":         "nothing: the marker still counts as first posted.",
	"outcome-without-tag":    "the holder writes the matching `state:complete` or `state:parked` tag (the tag has the effect), or posts a corrected outcome.",
	"forged-marker":          "nothing: the marker establishes nothing; only agents and warden post markers.",
	"undeclared-agent":       "add the login to `agents:` in `.github/backlog.yml` (or `WARDEN_AGENTS`) to declare it.",
	"shared-identity":        "give the agent its own account; the login is refused every human act until then.",
	// Completion and branches.
	"complete-with-open-pr":  "merge or close the open PR named by the `pr:` tag, or remove that tag.",
	"completion-unproven":    "tag `pr:<n>` with the merged PR that delivers this item into its `baseBranch:`.",
	"merged-not-complete":    "the holder writes `state:complete` under its claim (or a maintenance claim records the merge); until then the item is not offered. If that PR did not deliver this item, a human with triage or more comments `/backlog undelivered #<pr>` with its number.",
	"resumable-green-pr":     "claim the item and finish it through its green PR (the cheapest resume), or close the PR.",
	"epic-child-on-main":     "set `baseBranch:` to the epic's branch, not the default branch.",
	CodeEpicBaseMismatch:     "set the member's `baseBranch:` to its epic's branch.",
	"pr-wrong-base":          "retarget the PR to the item's `baseBranch:`.",
	"pr-not-from-base":       "rebase the PR's head onto the epic's branch.",
	"research-with-pr":       "a research item delivers findings as a comment: close the PR, or change the item's phase (a `pm` token).",
	"integration-missing":    "create one item that `integrates` the grouping.",
	"integration-duplicate":  "keep one integration item: remove the extra `integrates` links.",
	"integration-incomplete": "finish the integration item: it is the next work of the grouping.",
	"issue-closed-item-live": "reopen the issue, or finish or forget the item.",
	"complete-issue-open":    "close the issue (the item is complete).",
	"pr-without-item":        "link the PR to an item (`Refs` and the issue number in its body, or the item id), or create an item for it.",
	CodeBranchNameNit:        "optional: next time name a sub-item's branch `<epic-branch>-<item-slug>`; the pull request already targets the epic branch from a head cut from it, which is what matters.",
	CodeNestedEpicBranch:     "rename the branch beside the epic branch, `<epic-branch>-<item-slug>`, not under it: git cannot hold both `X` and `X/anything` (push it under the new name and reopen the pull request, or claim again with that `branch`).",
	CodeDAGMissing:           "add to the informed grouping's epic issue body a ```` ```mermaid ```` `flowchart` (or `graph`) that names every member (as `issue-N` or `#N`, nested epics' members too), then write `state:complete` again.",
	// Repository.
	"ready-empty-pending":       "resolve what each pending item waits on (listed on the status page): a cycle, a stall or admissions.",
	"settings-invalid":          "fix `.github/backlog.yml` on the default branch; the last good values apply meanwhile.",
	"settings-changed-by-agent": "a human pushes the settings change (or merges it); until then the previous settings apply.",
	"stale-anchor":              "update the item's `anchoredTo` links to paths that exist.",
	CodeUnroutedRegion:          "set the item's `homeRegion:` to the region this deployment serves (`WARDEN_REGION`), or serve the region it names from a deployment of its own (where several deployments share the repository, each reports the others' items: expected, if another deployment does serve that region).",
	// Exclusion reasons (why an item is not claimable now).
	ExAwaitingAdmission:   "a human with triage or more removes the admission label or runs `/backlog admit`.",
	ExParked:              UnparkHint + ".",
	ExGrouping:            "nothing: an epic is never claimed; its members are.",
	ExBlocked:             "finish the blockers named in the detail.",
	ExIntegrationInFlight: "wait for the in-flight claim named in the detail to end: a grouping's integration item and its members are never in flight together.",
	ExStalled:             "the parked blocker's ruling owner rules and a human unparks it.",
	ExInvalid:             "fix or remove the missing or invalid blocker named in the detail.",
	ExCollisionHold:       "a human with triage or more runs `/backlog resolve` after checking both owners' work.",
	ExResourceBusy:        "wait for the in-flight item holding the same `resource:` to finish.",
	ExLapsed:              "wait for the quarantine to end, or the lapsed owner re-claims it.",
	ExComplete:            "nothing: the item is complete.",
	ExHeld:                "nothing: the item is claimed; its holder works on it.",
	ExForeignRegion:       "claim it from its `homeRegion:`.",
	ExMalformed:           "fix the item's tags (missing mandatory or duplicate single-valued tags).",
	ExMissing:             "create or mirror the item.",

	// Transitions mirrored to GitHub (transitions.go).
	CodeReopenedAfterComplete: "nothing from warden: it leaves the issue open. Close the issue again if the work is done; if it is not, a human removes `state:complete` so the item is live again.",

	// Dispatch by assignment (dispatch.go).
	CodeAgentDispatchRefused: "make the item claimable (the reason in the detail says how), then assign the agent again; a later assignment that warden grants ends this line.",
}

// genericHint is ResolveHint's answer for a code it does not know.
const genericHint = "see warden's status page for what this finding means and what clears it."

// ResolveHint says what resolves a finding with the given code: every code
// of CONTRACT.md §6 "Defect codes" and every code gating reports has its own
// line; any other code gets a generic one. The line is Markdown written by
// warden (it may hold code spans), never user text.
func ResolveHint(code string) string {
	if h, ok := reportHints[code]; ok {
		return h
	}
	return genericHint
}
