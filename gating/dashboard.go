package gating

import (
	"cmp"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// DashboardMarker is the first line of the "Backlog dashboard" issue's body
// (CONTRACT.md §2 `dashboard: true`): warden finds its dashboard issue by it.
const DashboardMarker = "<!-- backlog-warden: dashboard -->"

// Dashboard bounds. The body is at most MaxDashboardBytes bytes (GitHub's
// issue body limit is 65,536 characters; counting bytes keeps a body of
// multi-byte characters within it too). An item finding's detail is cut at
// maxDashboardItemDetail runes (the item's report comment has all of it), a
// repository finding's at MaxReportDetail, an owner, branch or ruling value
// at maxDashboardValue.
const (
	MaxDashboardBytes      = 65536
	maxDashboardItemDetail = 300
	maxDashboardValue      = 200
)

// dashSection is one section of the dashboard: its rows in order, each a
// whole Markdown list item ending in a newline.
type dashSection struct {
	title string
	intro string // Markdown written by warden
	rows  []string
}

// RenderDashboard is the body of a repository's "Backlog dashboard" issue:
// the "where are we" report (CONTRACT.md §9 GET /report) and the
// repository-wide findings (CONTRACT.md §6: cycle, ready-empty-pending,
// settings-*, shared-identity, pr-without-item…), for a person.
//
// repo is the repository's full name (OWNER/REPO). Items are named by their
// id in a code span, linked to their issue at htmlBase/OWNER/REPO/issues/N
// (htmlBase is the web root, "https://github.com/" or a GitHub Enterprise
// Server's); never as "#N", which GitHub would turn into a cross-reference
// on every item at every edit. With htmlBase empty (or not an http(s) URL)
// the link is relative, "../issues/N", as Renovate's dashboard writes it:
// the browser resolves it against the dashboard issue's own URL.
//
// repoFindings are repository-wide findings found outside the report (the
// settings file, identities, pull requests); they are listed with the
// report's own item-less defects (cycle, ready-empty-pending), ordered by
// code and detail, without duplicates, each with what resolves it.
//
// The first line is exactly DashboardMarker. Every value that comes from
// users (owners, branches, ruling routes, details) is set in a code span and
// defused (see Defuse); no later line can start an HTML comment or a marker.
//
// The body is deterministic: the same arguments give the same bytes, and it
// holds no clock reading (GitHub shows when an issue body was last edited),
// so it changes only when the backlog's state does and a caller can compare
// bodies to skip a write. Sections are ordered by item (Ready keeps claim
// order) whatever the order of the input. An empty section is left out.
//
// It is at most MaxDashboardBytes bytes: when it does not fit, rows are
// dropped from the end of the largest section (in bytes) until it does, and
// each cut section ends with a line saying how many rows were left out and
// pointing to statusHint (warden's status page; a generic pointer when
// empty). A section's heading always counts all of its rows.
func RenderDashboard(repo, htmlBase string, rep Report, repoFindings []Defect, statusHint string) string {
	link := dashLinker(repo, htmlBase)
	secs := []dashSection{
		dashRepoFindings(rep.Defects, repoFindings, link),
		dashInFlight(rep.InFlight, link),
		dashReady(rep.Ready, link),
		dashBlocked(rep.Blocked, link),
		dashStalled(rep.Stalled, link),
		dashParked(rep.Parked, link),
		dashAdmission(rep.AwaitingAdmission, link),
		dashLapsed(rep.Lapsed, link),
		dashReclaims(rep.CleanReclaims, link),
		dashItemFindings(rep.Defects, link),
	}
	secs = slices.DeleteFunc(secs, func(s dashSection) bool { return len(s.rows) == 0 })

	var head strings.Builder
	head.WriteString(DashboardMarker + "\n")
	head.WriteString("**warden's backlog dashboard** for " + reportSpan(Defuse(reportCut(repo, maxDashboardValue))) +
		": where the backlog stands now. warden keeps this issue up to date and edits it in place " +
		"(an edit by hand is overwritten; closing it does not stop it). " +
		"To turn it off, set `dashboard: false` in `.github/backlog.yml`.\n\n")
	head.WriteString(dashSummary(rep, secs))

	heads := make([]string, len(secs))
	for i, s := range secs {
		heads[i] = fmt.Sprintf("\n## %s (%d)\n\n%s\n\n", s.title, len(s.rows), s.intro)
	}

	// Fit: fixed parts, then every row, then the notes of cut sections.
	kept := make([]int, len(secs)) // rows kept per section
	size := make([]int, len(secs)) // bytes of the kept rows
	total := head.Len()
	for i, s := range secs {
		kept[i] = len(s.rows)
		for _, r := range s.rows {
			size[i] += len(r)
		}
		total += len(heads[i]) + size[i]
	}
	notes := make([]string, len(secs))
	for total > MaxDashboardBytes {
		// The largest section still holding rows; the later one on a tie.
		j := -1
		for i := range secs {
			if kept[i] > 0 && (j < 0 || size[i] >= size[j]) {
				j = i
			}
		}
		if j < 0 {
			break // nothing left to drop (only with absurd fixed parts)
		}
		kept[j]--
		r := len(secs[j].rows[kept[j]])
		size[j] -= r
		n := dashCutNote(len(secs[j].rows)-kept[j], statusHint)
		total += len(n) - len(notes[j]) - r
		notes[j] = n
	}

	var out strings.Builder
	out.Grow(min(total, MaxDashboardBytes))
	out.WriteString(head.String())
	for i, s := range secs {
		out.WriteString(heads[i])
		for _, r := range s.rows[:kept[i]] {
			out.WriteString(r)
		}
		out.WriteString(notes[i])
	}
	body := out.String()
	if len(body) > MaxDashboardBytes {
		// Unreachable with the bounds above; never hand GitHub a body it
		// refuses.
		body = strings.ToValidUTF8(body[:MaxDashboardBytes], "")
	}
	return body
}

// dashSummary is the line of counts under the header.
func dashSummary(rep Report, secs []dashSection) string {
	s := rep.Summary
	if s.Items == 0 && len(secs) == 0 {
		return "The backlog is empty: no items, and nothing to report.\n"
	}
	count := func(title string) int {
		for _, sec := range secs {
			if sec.title == title {
				return len(sec.rows)
			}
		}
		return 0
	}
	return fmt.Sprintf("**%d item%s**: %d ready now, %d in flight, %d blocked, %d stalled, %d parked, "+
		"%d awaiting admission, %d lapsed, %d complete. Findings: %d about the repository, %d about items.\n",
		s.Items, dashPlural(s.Items), count(dashTitleReady), count(dashTitleInFlight), count(dashTitleBlocked),
		count(dashTitleStalled), count(dashTitleParked), count(dashTitleAdmission), count(dashTitleLapsed), s.Complete,
		count(dashTitleRepoFindings), count(dashTitleItemFindings))
}

// Section titles.
const (
	dashTitleRepoFindings = "Repository findings"
	dashTitleInFlight     = "In flight"
	dashTitleReady        = "Ready now"
	dashTitleBlocked      = "Blocked"
	dashTitleStalled      = "Stalled"
	dashTitleParked       = "Parked"
	dashTitleAdmission    = "Awaiting admission"
	dashTitleLapsed       = "Lapsed"
	dashTitleReclaims     = "Clean re-claims"
	dashTitleItemFindings = "Item findings"
)

// dashRepoFindings lists the repository-wide findings: the report's defects
// that name no item and the ones given.
func dashRepoFindings(defects, extra []Defect, link func(ItemID) string) dashSection {
	var fs []Defect
	for _, d := range defects {
		if d.Item == "" {
			fs = append(fs, d)
		}
	}
	fs = dashNormDefects(append(fs, extra...), false)
	rows := make([]string, len(fs))
	for i, d := range fs {
		var b strings.Builder
		b.WriteString("- **" + reportSpan(Defuse(reportCut(d.Code, 100))) + "**")
		if d.Item != "" {
			b.WriteString(" on " + link(d.Item))
		}
		if det := reportCut(d.Detail, MaxReportDetail); strings.TrimSpace(det) != "" {
			b.WriteString(": " + reportSpan(Defuse(det)))
		}
		b.WriteString("\n  Resolves: " + ResolveHint(d.Code) + "\n")
		rows[i] = b.String()
	}
	return dashSection{dashTitleRepoFindings,
		"Findings about the repository as a whole. Each leaves this list once it is resolved.", rows}
}

// dashItemFindings lists the report's defects about single items.
func dashItemFindings(defects []Defect, link func(ItemID) string) dashSection {
	var fs []Defect
	for _, d := range defects {
		if d.Item != "" {
			fs = append(fs, d)
		}
	}
	fs = dashNormDefects(fs, true)
	rows := make([]string, len(fs))
	for i, d := range fs {
		r := "- " + link(d.Item) + " " + reportSpan(Defuse(reportCut(d.Code, 100)))
		if det := reportCut(d.Detail, maxDashboardItemDetail); strings.TrimSpace(det) != "" {
			r += ": " + reportSpan(Defuse(det))
		}
		rows[i] = r + "\n"
	}
	return dashSection{dashTitleItemFindings,
		"Open findings about single items; each item's report comment says what resolves them.", rows}
}

// dashNormDefects orders defects (by item first when byItem, then code and
// detail) and drops duplicates.
func dashNormDefects(in []Defect, byItem bool) []Defect {
	fs := slices.Clone(in)
	slices.SortFunc(fs, func(a, b Defect) int {
		c := 0
		if byItem {
			c = compareIDs(a.Item, b.Item)
		}
		return cmp.Or(c, strings.Compare(a.Code, b.Code), strings.Compare(a.Detail, b.Detail), compareIDs(a.Item, b.Item))
	})
	return slices.Compact(fs)
}

func dashInFlight(es []InFlightEntry, link func(ItemID) string) dashSection {
	es = dashSorted(es, func(e InFlightEntry) ItemID { return e.Item })
	rows := make([]string, len(es))
	for i, e := range es {
		r := "- " + link(e.Item) + " held by " + dashValue(e.Owner)
		if e.Branch != "" {
			r += " on branch " + dashValue(e.Branch)
		}
		r += ", " + dashClaimState(e.State)
		if e.Maintenance {
			r += " (maintenance claim)"
		}
		rows[i] = r + "\n"
	}
	return dashSection{dashTitleInFlight, "Items under a claim: its holder, its branch and whether its lease is live.", rows}
}

func dashClaimState(s ClaimState) string {
	switch s {
	case StateHeld:
		return "lease live"
	case StateLapsed:
		return "lease lapsed (quarantined: see Lapsed)"
	}
	return "claim " + reportSpan(Defuse(reportCut(string(s), 40)))
}

func dashReady(es []ReadyEntry, link func(ItemID) string) dashSection {
	rows := make([]string, len(es))
	for i, e := range es {
		r := strconv.Itoa(i+1) + ". " + link(e.Item)
		if e.Priority != "" {
			r += " " + reportSpan(Defuse(reportCut(e.Priority, 20)))
		}
		if len(e.Overlaps) > 0 {
			r += ", overlaps in-flight " + dashLinks(e.Overlaps, link)
		}
		rows[i] = r + "\n"
	}
	return dashSection{dashTitleReady, "Claimable now, in the order workers take them.", rows}
}

func dashBlocked(es []BlockedEntry, link func(ItemID) string) dashSection {
	es = dashSorted(es, func(e BlockedEntry) ItemID { return e.Item })
	rows := make([]string, len(es))
	for i, e := range es {
		r := "- " + link(e.Item) + " waits on "
		if len(e.WaitingOn) == 0 {
			r += "its blockers"
		} else {
			r += dashLinks(e.WaitingOn, link)
		}
		rows[i] = r + "\n"
	}
	return dashSection{dashTitleBlocked, "Pending items waiting on other items (or on a missing or invalid blocker).", rows}
}

// dashStalled has one row per stalled item, naming each parked blocker and
// its ruling route.
func dashStalled(es []StalledEntry, link func(ItemID) string) dashSection {
	es = slices.Clone(es)
	slices.SortStableFunc(es, func(a, b StalledEntry) int {
		return cmp.Or(compareIDs(a.Item, b.Item), compareIDs(a.Blocker, b.Blocker))
	})
	es = slices.Compact(es)
	var rows []string
	for i := 0; i < len(es); {
		j := i
		var parts []string
		for ; j < len(es) && es[j].Item == es[i].Item; j++ {
			p := link(es[j].Blocker)
			if es[j].RulingOwner == "" && es[j].RulingTopic == "" {
				p += " (no ruling route: `park-without-route`)"
			} else {
				p += " (ruling owner " + dashValue(es[j].RulingOwner) + ", topic " + dashValue(es[j].RulingTopic) + ")"
			}
			parts = append(parts, p)
		}
		rows = append(rows, "- "+link(es[i].Item)+" is stalled by parked "+strings.Join(parts, "; ")+"\n")
		i = j
	}
	return dashSection{dashTitleStalled,
		"Pending items whose blocker is parked: they move once the blocker's ruling owner rules and a human unparks it.", rows}
}

func dashParked(es []ParkedEntry, link func(ItemID) string) dashSection {
	es = dashSorted(es, func(e ParkedEntry) ItemID { return e.Item })
	rows := make([]string, len(es))
	for i, e := range es {
		r := fmt.Sprintf("- %s after %d attempt%s, ruling owner %s, topic %s", link(e.Item), e.Attempts,
			dashPlural(e.Attempts), dashValue(e.RulingOwner), dashValue(e.RulingTopic))
		if e.Unpark != "" && e.Unpark != UnparkHint {
			r += "; to unpark: " + reportSpan(Defuse(reportCut(e.Unpark, maxDashboardItemDetail)))
		}
		rows[i] = r + "\n"
	}
	return dashSection{dashTitleParked, "Parked items wait for their ruling owner. To unpark one, " + UnparkHint + ".", rows}
}

func dashAdmission(es []AdmissionEntry, link func(ItemID) string) dashSection {
	es = dashSorted(es, func(e AdmissionEntry) ItemID { return e.Item })
	rows := make([]string, len(es))
	for i, e := range es {
		r := "- " + link(e.Item)
		if d := reportCut(e.Detail, maxDashboardItemDetail); strings.TrimSpace(d) != "" {
			r += ": " + reportSpan(Defuse(d))
		}
		rows[i] = r + "\n"
	}
	return dashSection{dashTitleAdmission,
		"Items no human has admitted yet. To admit one, a human with triage or more removes the admission label or runs `/backlog admit` on it.", rows}
}

func dashLapsed(es []LapsedEntry, link func(ItemID) string) dashSection {
	es = dashSorted(es, func(e LapsedEntry) ItemID { return e.Item })
	rows := make([]string, len(es))
	for i, e := range es {
		rows[i] = "- " + link(e.Item) + " held by " + dashValue(e.Owner) + ", lease expired " + dashTime(e.Since) +
			"; quarantined until " + dashTime(e.QuarantineEndsAtUtc) + "\n"
	}
	return dashSection{dashTitleLapsed,
		"Claims whose lease expired while the holder still showed work: only the holder may re-claim the item until its quarantine ends.", rows}
}

func dashReclaims(es []CleanReclaim, link func(ItemID) string) dashSection {
	es = slices.Clone(es)
	slices.SortStableFunc(es, func(a, b CleanReclaim) int {
		return cmp.Or(compareIDs(a.Item, b.Item), cmp.Compare(a.Fence, b.Fence))
	})
	rows := make([]string, len(es))
	for i, e := range es {
		rows[i] = fmt.Sprintf("- %s re-claimed by %s (fence %d to %d) %s\n", link(e.Item), dashValue(e.Owner),
			e.PriorFence, e.Fence, dashTime(e.AtUtc))
	}
	return dashSection{dashTitleReclaims,
		"Holders that re-claimed their own lapsed item inside the quarantine (no new attempt): near misses worth a look.", rows}
}

// dashSorted returns es ordered by item (stable), leaving es as it is.
func dashSorted[E any](es []E, id func(E) ItemID) []E {
	es = slices.Clone(es)
	slices.SortStableFunc(es, func(a, b E) int { return compareIDs(id(a), id(b)) })
	return es
}

// dashLinks is a comma-separated list of item links.
func dashLinks(ids []ItemID, link func(ItemID) string) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = link(id)
	}
	return strings.Join(parts, ", ")
}

// dashValue is a user-supplied value (an owner, a branch, a ruling route):
// cut, defused and in a code span.
func dashValue(s string) string {
	return reportSpan(Defuse(reportCut(s, maxDashboardValue)))
}

func dashTime(t time.Time) string {
	if t.IsZero() {
		return "(unknown)"
	}
	return "`" + t.UTC().Format(time.RFC3339) + "`"
}

func dashPlural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// dashLinker returns how an item is named: its id in a code span, linked to
// its issue when the id is well formed: absolute under htmlBase when it and
// the repository's name are sound, else relative to the dashboard issue.
func dashLinker(repo, htmlBase string) func(ItemID) string {
	prefix := "../issues/"
	owner, name, ok := strings.Cut(repo, "/")
	if u, err := url.Parse(strings.TrimSpace(htmlBase)); ok && dashNamePart(owner) && dashNamePart(name) &&
		err == nil && (u.Scheme == "https" || u.Scheme == "http") && u.Host != "" && u.User == nil {
		u.RawQuery, u.Fragment, u.RawFragment = "", "", ""
		s := u.JoinPath(owner, name, "issues").String() + "/"
		// A base that would break the Markdown link falls back to relative.
		if !strings.ContainsAny(s, " ()<>[]`\\\"'\n\r\t") {
			prefix = s
		}
	}
	return func(id ItemID) string {
		n := id.Number()
		if n == 0 {
			return reportSpan(Defuse(reportCut(string(id), 100)))
		}
		return "[`" + string(id) + "`](" + prefix + strconv.Itoa(n) + ")"
	}
}

// dashNamePart reports whether s is a possible owner or repository name on
// GitHub: letters, digits, '-', '_' and '.', nothing else.
func dashNamePart(s string) bool {
	if s == "" || len(s) > 100 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// dashCutNote ends a section cut for length.
func dashCutNote(left int, statusHint string) string {
	where := "warden's status page"
	if h := strings.TrimSpace(reportOneLine(statusHint)); h != "" {
		where = reportCut(h, maxReportHint)
	}
	return fmt.Sprintf("\n_%d more row%s left out: this dashboard is cut at %d bytes. Every row is listed on %s._\n",
		left, dashPlural(left), MaxDashboardBytes, where)
}
