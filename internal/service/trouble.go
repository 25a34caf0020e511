package service

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/wardenhq/warden/app"
)

// githubTrouble is what is wrong with GitHub now, as the status page and
// /readyz say it: the access layer's troubles (failing, rate-limited, slow)
// per installation, and the dispatcher's holds.
type githubTrouble struct {
	Installation int64
	Repos        string // the installation's served repositories, for a person
	Kind         string
	Since, Until time.Time
	Detail       string
}

// String is the trouble in one line.
func (t githubTrouble) String() string {
	who := fmt.Sprintf("installation %d", t.Installation)
	if t.Installation == app.AppInstallation {
		who = "the App's own calls (JWT)"
	}
	if t.Repos != "" {
		who += " (" + t.Repos + ")"
	}
	s := fmt.Sprintf("GitHub %s for %s since %s: %s", t.Kind, who, t.Since.UTC().Format(time.RFC3339), t.Detail)
	if !t.Until.IsZero() {
		s += "; until " + t.Until.UTC().Format(time.RFC3339)
	}
	return s
}

// troubles gathers the access layer's troubles and the dispatcher's holds.
func (svc *Service) troubles(ctx context.Context) []githubTrouble {
	repos, _ := svc.Ledger.Repos(ctx) // unreadable: the troubles go without names
	reposOf := reposByInstallation(repos)
	var out []githubTrouble
	for _, t := range svc.App.Troubles() {
		out = append(out, githubTrouble{Installation: t.Installation, Repos: reposOf(t.Installation),
			Kind: t.Kind, Since: t.Since, Until: t.Until, Detail: t.Detail})
	}
	for _, h := range svc.Dispatcher.Holds() {
		g := githubTrouble{Installation: h.Installation, Repos: reposOf(h.Installation), Kind: "rate-limited",
			Since: h.Since, Until: h.Until, Detail: "deliveries wait for the reset (no tries spent): " + h.Cause}
		if h.Installation == 0 {
			g.Installation, g.Repos = app.AppInstallation, "every installation waits"
		}
		out = append(out, g)
	}
	return out
}

// readyz answers whether this replica can take webhooks (the database
// answers, the dispatcher drains). GitHub's trouble does not make it
// unready — deliveries are still stored and wait, and an unready replica
// would only make GitHub's deliveries fail — but it is said, one line each.
func (svc *Service) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if err := svc.DB.Ping(ctx); err != nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintln(w, "database: not answering")
		return
	}
	if err := svc.Dispatcher.Healthy(); err != nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintln(w, err.Error())
		return
	}
	ts := svc.troubles(ctx)
	if len(ts) == 0 {
		fmt.Fprintln(w, "ready")
		return
	}
	w.Header().Set("Warden-GitHub", "degraded")
	fmt.Fprintln(w, "ready; GitHub degraded (deliveries are stored and wait):")
	for _, t := range ts {
		fmt.Fprintln(w, "- "+t.String())
	}
}
