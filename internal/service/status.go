package service

import (
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/mirror"
	"github.com/wardenhq/warden/webhooks"
)

// The status page (CONTRACT.md §3, admin listener GET /): when it was made,
// the inbox, GitHub (troubles and the rate-limit budget per installation),
// the shared passes, the recent deliveries and the dead letters, then per
// served repository the "where are we" report of §9 (in flight, ready now,
// blocked, stalled, parked, awaiting admission, lapsed, defects) with each
// item's attempts and pull requests, the repository's dead letters and its
// settings in effect. A section with nothing to show is left out; a page or
// a repository with nothing at all says so once. Server-rendered, no
// JavaScript (it refreshes itself with a meta refresh, off with
// ?refresh=0); html/template escapes every value (titles, owners,
// branches, details and errors come from GitHub or agents and are never
// trusted). status_data.go gathers what it shows.

const statusTime = "2006-01-02 15:04:05Z"

// statusRefresh is the page's auto-refresh period.
const statusRefresh = 30 * time.Second

//go:embed status.html
var statusHTML string

var statusTmpl = template.Must(template.New("status").Funcs(template.FuncMap{
	"utc": func(t time.Time) string {
		if t.IsZero() {
			return "—"
		}
		return t.UTC().Format(statusTime)
	},
	"iso": func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
	// ago is how long before now t was ("3m ago").
	"ago": func(now, t time.Time) string {
		if t.IsZero() {
			return "—"
		}
		return span(now.Sub(t)) + " ago"
	},
	// until is how long after now t is ("in 12m"; "passed" once it has).
	"until": func(now, t time.Time) string {
		if t.IsZero() {
			return "unknown"
		}
		if !t.After(now) {
			return "passed"
		}
		return "in " + span(t.Sub(now))
	},
}).Parse(statusHTML))

// span is a duration in its largest whole unit: 45s, 12m, 3h, 2d.
func span(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < time.Minute:
		return strconv.Itoa(int(d/time.Second)) + "s"
	case d < time.Hour:
		return strconv.Itoa(int(d/time.Minute)) + "m"
	case d < 48*time.Hour:
		return strconv.Itoa(int(d/time.Hour)) + "h"
	}
	return strconv.Itoa(int(d/(24*time.Hour))) + "d"
}

// statusData is the whole status page.
type statusData struct {
	GeneratedAt time.Time
	// Refresh: the page reloads itself every RefreshSeconds (?refresh=0
	// turns it off).
	Refresh        bool
	RefreshSeconds int
	Pending, Dead  int
	Bot            string
	GitHub         []githubTrouble // what is wrong with GitHub now
	Budgets        []budgetRow     // the rate-limit budget per installation
	Replica        string          // this process, as the shared passes name it
	Runs           []RunRecord     // the shared passes' last runs
	Recent         []webhooks.Record
	DeadLetters    []webhooks.Record
	Repos          []repoStatus
}

// Empty: nothing to show at all (no repository, delivery, pass or budget).
func (d statusData) Empty() bool {
	return len(d.Repos) == 0 && len(d.Recent) == 0 && len(d.DeadLetters) == 0 && len(d.Runs) == 0 &&
		len(d.GitHub) == 0 && len(d.Budgets) == 0
}

// budgetRow is one installation's budget for one resource.
type budgetRow struct {
	Who              string // the installation id, or the App's own calls
	Repos            string // its served repositories, for a person
	Resource         string
	Remaining, Limit int
	Reset            time.Time
	// Low: under a tenth of the window's budget is left.
	Low bool
}

// repoStatus is one repository's part of the status page: its report, or
// the error that kept it from being read, its dead letters and settings.
type repoStatus struct {
	Name      string
	HTMLBase  string
	Err       string
	Report    gating.Report
	Alarms    []string
	Unadopted int // labelled issues the census found and has not adopted yet
	Titles    map[gating.ItemID]string
	// InFlight and Lapsed are the report's lists without complete items;
	// CompleteHeld are the complete items whose claim is still held or
	// lapsed (splitClaims).
	InFlight     []gating.InFlightEntry
	Lapsed       []gating.LapsedEntry
	CompleteHeld []gating.InFlightEntry
	Attempts     map[gating.ItemID]int   // attempts in the current epoch
	PullRequests map[gating.ItemID][]int // the pr:<n> tags, in tag order
	DeadLetters  []webhooks.Record
	// Settings are the settings in effect, each with its origin
	// (SettingsLoaded false: the file was not read yet, all defaults).
	Settings       []mirror.SettingInEffect
	SettingsLoaded bool
	SettingsErr    string
}

// itemRef is an item or pull request as the page shows it: its number
// linked to GitHub, and its title when known.
type itemRef struct {
	Label, URL, Title string
}

// Ref links an item to its issue (<htmlBase>/OWNER/REPO/issues/N).
func (rs repoStatus) Ref(id gating.ItemID) itemRef {
	ref := itemRef{Label: string(id), Title: rs.Titles[id]}
	if n, err := gating.ParseID(string(id)); err == nil {
		ref.Label = "#" + strconv.Itoa(n)
		ref.URL = strings.TrimRight(rs.HTMLBase, "/") + "/" + rs.Name + "/issues/" + strconv.Itoa(n)
	}
	return ref
}

// PRs links an item's pull requests (<htmlBase>/OWNER/REPO/pull/N).
func (rs repoStatus) PRs(id gating.ItemID) []itemRef {
	var out []itemRef
	for _, n := range rs.PullRequests[id] {
		out = append(out, itemRef{Label: "#" + strconv.Itoa(n),
			URL: strings.TrimRight(rs.HTMLBase, "/") + "/" + rs.Name + "/pull/" + strconv.Itoa(n)})
	}
	return out
}

// AttemptsOf is an item's attempts in the current epoch.
func (rs repoStatus) AttemptsOf(id gating.ItemID) int { return rs.Attempts[id] }

// Pos is a 1-based position in the claim order.
func (repoStatus) Pos(i int) int { return i + 1 }

// InFlightCount is the number the summary shows: the work in flight, not
// the complete items whose claim is still open.
func (rs repoStatus) InFlightCount() int { return len(rs.InFlight) }

// Quiet: the repository has nothing to show but its settings (no items, no
// findings, no dead letters, no adoption under way).
func (rs repoStatus) Quiet() bool {
	r := rs.Report
	return r.Summary.Items == 0 && len(r.Defects) == 0 && len(rs.DeadLetters) == 0 && len(rs.Alarms) == 0 &&
		rs.Unadopted == 0 && len(r.CleanReclaims) == 0
}

// SettingsFromFile counts the settings the file sets.
func (rs repoStatus) SettingsFromFile() int { return rs.countOrigin(mirror.OriginFile) }

// SettingsLastGood counts the settings kept from the last good file.
func (rs repoStatus) SettingsLastGood() int { return rs.countOrigin(mirror.OriginLastGood) }

func (rs repoStatus) countOrigin(o string) int {
	n := 0
	for _, s := range rs.Settings {
		if s.Origin == o {
			n++
		}
	}
	return n
}

// splitClaims sorts the report's claims for the page. The report lists
// every live claim in flight, whatever its item's state, and the ready set
// counts it so (a complete member's live claim still keeps its grouping's
// integration item waiting). A worker completes its item under its claim and
// need not release it after, so a finished item would stay "in flight"
// until its lease lapsed, then "lapsed" for the quarantine: the page lists
// such claims apart, as complete items whose claim is not released.
func (rs *repoStatus) splitClaims(complete map[gating.ItemID]bool) {
	rs.InFlight, rs.Lapsed, rs.CompleteHeld = nil, nil, nil
	for _, e := range rs.Report.InFlight {
		if complete[e.Item] {
			rs.CompleteHeld = append(rs.CompleteHeld, e)
		} else {
			rs.InFlight = append(rs.InFlight, e)
		}
	}
	for _, e := range rs.Report.Lapsed {
		if !complete[e.Item] {
			rs.Lapsed = append(rs.Lapsed, e)
		}
	}
}

// prNumbers reads an item's pr:<n> tags.
func prNumbers(tags []string) []int {
	var out []int
	for _, t := range tags {
		if v, ok := strings.CutPrefix(t, "pr:"); ok {
			if n, err := strconv.Atoi(v); err == nil && n > 0 {
				out = append(out, n)
			}
		}
	}
	return out
}

// renderStatus writes the status page.
func renderStatus(w io.Writer, d statusData) error {
	if err := statusTmpl.Execute(w, d); err != nil {
		return fmt.Errorf("render the status page: %w", err)
	}
	return nil
}

// repoDeadLetters keeps the dead letters about repository name.
func repoDeadLetters(letters []webhooks.Record, name string) []webhooks.Record {
	var out []webhooks.Record
	for _, l := range letters {
		if strings.EqualFold(l.Repo, name) {
			out = append(out, l)
		}
	}
	return out
}
