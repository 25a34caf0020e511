// Package mirror is warden's GitHub side. ls is the event map: one file
// per webhook event (installation.go, issues.go, issue_comment.go,
// pull_request.go, check_suite.go, push.go) over the base in this file;
// then what those handlers share: the gate on label acts (gate.go,
// labelevents.go), who is who (people.go), the parking ladder (park.go),
// the /backlog commands (commands.go), the check run (checkruns.go), the
// anchors (anchors.go, anchorpush.go), the settling of one item
// (settle.go), the reconcile (reconcile*.go, divergences.go, backfill.go,
// and adopt.go for what the census finds warden never saw), the discovery
// of installations (discover.go), the report comment (reports*.go), the
// dashboard (dashboard*.go), the settings loader (settings*.go) and the
// dry-run guard every GitHub write passes (dryrun.go). Every rule it
// applies is gating's and every table is the store's (mirror/store); this
// package reads GitHub, writes to it and sequences.
package mirror

import (
	"context"
	"log/slog"
	"time"

	"github.com/google/go-github/v66/github"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/mirror/store"
)

// Clients gives warden's GitHub client for an installation.
type Clients interface {
	Installation(id int64) (*github.Client, error)
}

// Mirror keeps the ledger and GitHub in step: it records the repositories
// warden serves and turns issues that gain the item label into items.
type Mirror struct {
	Ledger *store.Ledger
	Acts   *store.Acts
	GitHub Clients
	Perms  *Permissions
	// Region is WARDEN_REGION (the homeRegion of items made here).
	Region string
	// Agents are the WARDEN_AGENTS logins.
	Agents []string
	// Settings returns a repository's backlog settings.
	Settings func(ctx context.Context, r store.Repo) gating.Settings
	Log      *slog.Logger
	Now      func() time.Time
	// SettingsStore follows .github/backlog.yml (nil: Settings alone).
	SettingsStore *SettingsStore
	// Dashboards keeps the dashboard issues (nil: none are written).
	Dashboards DashboardSink
	// HTMLBase is GitHub's web address (https://github.com), for links in
	// the dashboard; StatusHint points people to warden's status page.
	HTMLBase, StatusHint string
	// Reports keeps the report comments (nil: none are written).
	Reports ReportSink
	// Bot returns warden's own bot login ("<slug>[bot]"), known before any
	// delivery is processed; nil or "" when unknown.
	Bot func() string
	// Dispatch counts dispatch by assignment (nil: not counted).
	Dispatch *DispatchMetrics

	// calls, when set, gives the GitHub calls on a repository in place of
	// go-github over GitHub's installation client (callsFor): the tests'
	// fake.
	calls func(store.Repo) (repoCalls, error)
}

// Event is a delivery as the mirror's handlers see it.
type Event struct {
	Name         string
	Action       string
	DeliveryID   string
	Installation int64
	Payload      []byte
	FromSelf     bool
}

func (m *Mirror) now() time.Time {
	if m.Now != nil {
		return m.Now()
	}
	return time.Now()
}

// settings are r's settings in effect. With a settings store, a
// repository whose settings file was never read has it read first
// (ensureLoaded), so no write goes out before warden knows whether the
// file says dry_run; if it cannot be read, the settings hold every write
// (dry_run, fail closed) and the read is tried again on the next call.
func (m *Mirror) settings(ctx context.Context, r store.Repo) gating.Settings {
	var unknown error
	if m.SettingsStore != nil {
		unknown = m.SettingsStore.ensureLoaded(ctx, r)
	}
	set := gating.DefaultSettings()
	if m.Settings != nil {
		set = m.Settings(ctx, r)
	}
	if unknown != nil {
		m.logger().Warn("settings unknown: writing nothing to GitHub until they are read", "repo", r.FullName, "err", unknown)
		set.DryRun = true
	}
	return set
}

// Outcomes recorded for deliveries.
const (
	OutcomeIgnored  = "ignored"
	OutcomeRecorded = "recorded"
	// OutcomeIssueState: an issues delivery that makes no item recorded the
	// issue's labels and state; OutcomeIssueStateOlder: its payload was older
	// than the state already recorded, and was not applied.
	OutcomeIssueState      = "issue state recorded"
	OutcomeIssueStateOlder = "issue state older than recorded; not applied"
)
