package service

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/wardenhq/warden/app"
	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/mirror/store"
	"github.com/wardenhq/warden/webhooks"
)

// statusRecent is how many of the newest deliveries the page lists.
const statusRecent = 20

// statusLetters bounds the dead letters the page lists.
const statusLetters = 100

// reposByInstallation names each installation's served repositories for a
// person: up to three, then how many more.
func reposByInstallation(repos []store.Repo) func(inst int64) string {
	names := map[int64][]string{}
	for _, r := range repos {
		names[r.Installation] = append(names[r.Installation], r.FullName)
	}
	return func(inst int64) string {
		n := names[inst]
		sort.Strings(n)
		if len(n) > 3 {
			return strings.Join(n[:3], ", ") + fmt.Sprintf(" and %d more", len(n)-3)
		}
		return strings.Join(n, ", ")
	}
}

// budgetRows is the App's rate-limit budgets as the page shows them.
func budgetRows(bs []app.InstallationBudget, reposOf func(int64) string) []budgetRow {
	var out []budgetRow
	for _, b := range bs {
		row := budgetRow{Who: fmt.Sprint(b.Installation), Repos: reposOf(b.Installation), Resource: b.Resource,
			Remaining: b.Remaining, Limit: b.Limit, Reset: b.Reset, Low: b.Limit > 0 && b.Remaining*10 < b.Limit}
		if b.Installation == app.AppInstallation {
			row.Who, row.Repos = "the App (JWT)", ""
		}
		out = append(out, row)
	}
	return out
}

// statusData gathers the page. A failure to read the inbox, the served
// repositories or the passes fails the page; one repository's failure is
// shown in its section and the others still render.
func (svc *Service) statusData(ctx context.Context, now time.Time) (statusData, error) {
	pending, dead, err := svc.Inbox.Counts(ctx)
	if err != nil {
		return statusData{}, err
	}
	letters, err := svc.Inbox.List(ctx, true, statusLetters)
	if err != nil {
		return statusData{}, err
	}
	recent, err := svc.Inbox.List(ctx, false, statusRecent)
	if err != nil {
		return statusData{}, err
	}
	served, err := svc.Ledger.Repos(ctx)
	if err != nil {
		return statusData{}, err
	}
	runs, err := svc.Runs(ctx)
	if err != nil {
		return statusData{}, err
	}
	d := statusData{GeneratedAt: now, Refresh: true, RefreshSeconds: int(statusRefresh / time.Second),
		Pending: pending, Dead: dead, Bot: svc.Dispatcher.Bot(), Recent: recent, DeadLetters: letters,
		Replica: svc.replica, Runs: runs, GitHub: svc.troubles(ctx),
		Budgets: budgetRows(svc.App.Budgets(), reposByInstallation(served))}
	for _, repo := range served {
		d.Repos = append(d.Repos, svc.repoStatus(ctx, repo, letters))
	}
	return d, nil
}

// repoStatus gathers one repository's part of the page.
func (svc *Service) repoStatus(ctx context.Context, repo store.Repo, letters []webhooks.Record) repoStatus {
	st := repoStatus{Name: repo.FullName, HTMLBase: svc.Mirror.HTMLBase, DeadLetters: repoDeadLetters(letters, repo.FullName)}
	var err error
	if st.Settings, st.SettingsLoaded, err = svc.Mirror.SettingsStore.InEffect(ctx, repo); err != nil {
		st.SettingsErr = err.Error()
	}
	rs, err := svc.Ledger.Snapshot(ctx, repo.ID)
	if err != nil {
		st.Err = "the backlog could not be read: " + err.Error()
		return st
	}
	ready := rs.Ready()
	st.Alarms = ready.Alarms
	if st.Report, err = svc.Ledger.Report(ctx, rs, ready); err != nil {
		svc.Log.Warn("status page: the report goes without its lease-defaulted lines", "repo", repo.FullName, "err", err)
	}
	st.Titles = make(map[gating.ItemID]string, len(rs.Items))
	for id, it := range rs.Items {
		st.Titles[id] = it.Title
	}
	complete := map[gating.ItemID]bool{}
	st.Attempts = make(map[gating.ItemID]int, len(rs.Snapshot.Items))
	st.PullRequests = map[gating.ItemID][]int{}
	for _, c := range rs.Snapshot.Items {
		if c.Item == nil {
			continue
		}
		st.Attempts[c.Item.ID] = c.Attempts
		if prs := prNumbers(c.Item.Tags); len(prs) > 0 {
			st.PullRequests[c.Item.ID] = prs
		}
		complete[c.Item.ID] = onlyState(c.Item.Tags, "complete")
	}
	st.splitClaims(complete)
	if st.Unadopted, err = svc.Ledger.Unadopted(ctx, repo.ID, svc.Mirror.Settings(ctx, repo).ItemLabel); err != nil {
		st.Err = "the adoption's progress could not be read: " + err.Error()
	}
	return st
}

// onlyState: the tags hold exactly one state: tag, state:<v> (the report's
// reading of "complete").
func onlyState(tags []string, v string) bool {
	n, match := 0, false
	for _, t := range tags {
		if s, ok := strings.CutPrefix(t, "state:"); ok {
			n++
			match = s == v
		}
	}
	return n == 1 && match
}

// clockNow is warden's clock (Options.Now), the one the ledger and the
// reconcile state are written on.
func (svc *Service) clockNow() time.Time {
	if svc.now != nil {
		return svc.now()
	}
	return time.Now()
}

func (svc *Service) statusPage(w http.ResponseWriter, r *http.Request) {
	d, err := svc.statusData(r.Context(), svc.clockNow())
	if err != nil {
		svc.Log.Warn("status page: the database did not answer", "err", err)
		http.Error(w, "database not answering: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	d.Refresh = r.URL.Query().Get("refresh") != "0"
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if err := renderStatus(w, d); err != nil {
		svc.Log.Warn("status page", "err", err)
	}
}
