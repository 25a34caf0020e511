package service

import (
	"html/template"
	"net/http"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/webhooks"
)

var statusTmpl = template.Must(template.New("status").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>warden status</title>
<style>body{font-family:system-ui,sans-serif;margin:2rem;max-width:70rem}table{border-collapse:collapse}
td,th{border:1px solid #ccc;padding:.3rem .6rem;text-align:left;font-size:.9rem}th{background:#f4f4f4}
.err{color:#a00}</style></head><body>
<h1>warden</h1>
<p>Inbox: <strong>{{.Pending}}</strong> waiting, <strong>{{.Dead}}</strong> dead letters. Bot: {{if .Bot}}<code>{{.Bot}}</code>{{else}}<span class="err">identity not yet learned from GET /app</span>{{end}}</p>
<h2>Dead letters</h2>
{{if .DeadLetters}}<table><tr><th>delivery</th><th>event</th><th>repository</th><th>tries</th><th>last error</th><th>received</th></tr>
{{range .DeadLetters}}<tr><td><code>{{.ID}}</code></td><td>{{.Event}}{{if .Action}}.{{.Action}}{{end}}</td><td>{{.Repo}}{{if .Number}}#{{.Number}}{{end}}</td><td>{{.Attempts}}</td><td class="err">{{.LastError}}</td><td>{{.ReceivedAt.Format "2006-01-02 15:04:05Z"}}</td></tr>
{{end}}</table><p>Retry with <code>warden deliveries retry ID…</code>.</p>{{else}}<p>None.</p>{{end}}
{{range .Repos}}<h2>{{.Name}}</h2>
{{if .Err}}<p class="err">{{.Err}}</p>{{else}}<p>{{.Ready}} ready, {{.Excluded}} excluded.</p>
<h3>Findings</h3>
{{if .Defects}}<table><tr><th>code</th><th>item</th><th>detail</th></tr>
{{range .Defects}}<tr><td><code>{{.Code}}</code></td><td>{{if .Item}}<code>{{.Item}}</code>{{else}}repository{{end}}</td><td>{{.Detail}}</td></tr>
{{end}}</table>{{else}}<p>None.</p>{{end}}{{end}}
{{end}}
</body></html>`))

// repoStatus is one repository's part of the status page.
type repoStatus struct {
	Name            string
	Err             string
	Ready, Excluded int
	Defects         []gating.Defect
}

func (svc *Service) statusPage(w http.ResponseWriter, r *http.Request) {
	pending, dead, err := svc.Inbox.Counts(r.Context())
	if err != nil {
		http.Error(w, "database not answering", http.StatusServiceUnavailable)
		return
	}
	letters, err := svc.Inbox.List(r.Context(), true, 100)
	if err != nil {
		http.Error(w, "database not answering", http.StatusServiceUnavailable)
		return
	}
	var repos []repoStatus
	served, err := svc.Ledger.Repos(r.Context())
	if err != nil {
		http.Error(w, "database not answering", http.StatusServiceUnavailable)
		return
	}
	for _, repo := range served {
		st := repoStatus{Name: repo.FullName}
		rs, err := svc.Ledger.Snapshot(r.Context(), repo.ID)
		if err != nil {
			st.Err = "the backlog could not be read: " + err.Error()
		} else {
			res := rs.Ready()
			st.Ready, st.Excluded, st.Defects = len(res.Ready), len(res.Excluded), res.Defects
		}
		repos = append(repos, st)
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	statusTmpl.Execute(w, struct {
		Pending, Dead int
		Bot           string
		DeadLetters   []webhooks.Record
		Repos         []repoStatus
	}{pending, dead, svc.Dispatcher.Bot(), letters, repos})
}
