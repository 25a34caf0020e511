package service

import (
	"context"
	"html/template"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/webhooks"
)

// The status page (CONTRACT.md §3, admin listener GET /): the inbox and its
// dead letters, then per served repository the "where are we" report of §9
// (in flight, ready now, blocked, stalled, parked, awaiting admission,
// lapsed, defects) and the repository's dead letters, each item linked to
// its issue. Server-rendered, no JavaScript; html/template escapes every
// value (titles, owners, branches, details and errors come from GitHub or
// agents and are never trusted).

const statusTime = "2006-01-02 15:04:05Z"

var statusTmpl = template.Must(template.New("status").Funcs(template.FuncMap{
	"utc": func(t time.Time) string {
		if t.IsZero() {
			return "—"
		}
		return t.UTC().Format(statusTime)
	},
}).Parse(`{{define "item"}}<a href="{{.URL}}">{{.Label}}</a>{{if .Title}} <span class="title">{{.Title}}</span>{{end}}{{end -}}
{{define "letters"}}<table><tr><th>delivery</th><th>event</th><th>repository</th><th>tries</th><th>last error</th><th>received</th></tr>
{{range .}}<tr><td><code>{{.ID}}</code></td><td>{{.Event}}{{if .Action}}.{{.Action}}{{end}}</td><td>{{.Repo}}{{if .Number}}#{{.Number}}{{end}}</td><td>{{.Attempts}}</td><td class="err">{{.LastError}}</td><td>{{utc .ReceivedAt}}</td></tr>
{{end}}</table>{{end -}}
<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>warden status</title>
<style>
body{font-family:system-ui,sans-serif;margin:2rem;max-width:75rem;color:#222;line-height:1.4}
h2{border-bottom:2px solid #ddd;padding-bottom:.2rem;margin-top:2.5rem}
h3{margin:1.4rem 0 .4rem;font-size:1.05rem}
table{border-collapse:collapse;margin:.3rem 0}
td,th{border:1px solid #ccc;padding:.3rem .6rem;text-align:left;font-size:.9rem;vertical-align:top}
th{background:#f4f4f4}
a{color:#0550ae}
.title{color:#555}
.none{color:#777;font-style:italic;margin:.2rem 0}
.err{color:#a00}
.summary span{display:inline-block;margin-right:1rem}
.alarm{background:#fff4e5;border-left:4px solid #e69500;padding:.3rem .6rem}
</style></head><body>
<h1>warden</h1>
<p>Inbox: <strong>{{.Pending}}</strong> waiting, <strong>{{.Dead}}</strong> dead letters. Bot: {{if .Bot}}<code>{{.Bot}}</code>{{else}}<span class="err">identity not yet learned from GET /app</span>{{end}}</p>
<h2 id="github">GitHub</h2>
{{if .GitHub}}<table><tr><th>trouble</th><th>installation</th><th>since</th><th>until</th><th>what warden sees</th></tr>
{{range .GitHub}}<tr><td class="err">{{.Kind}}</td><td>{{if eq .Installation 0}}the App (JWT){{else}}{{.Installation}}{{end}}{{if .Repos}} <span class="title">{{.Repos}}</span>{{end}}</td><td>{{utc .Since}}</td><td>{{utc .Until}}</td><td>{{.Detail}}</td></tr>
{{end}}</table><p>Deliveries stay stored and wait; nothing is dead-lettered for a rate limit.</p>{{else}}<p class="none">All well: no failing, rate-limited or slow requests.</p>{{end}}
<h2 id="passes">Shared passes</h2>
<p>This replica: <code>{{.Replica}}</code>. Replicas on one PostgreSQL database take turns; a pass whose holder died shows no finish and is taken over.</p>
{{if .Runs}}<table><tr><th>pass</th><th>last run by</th><th>started</th><th>finished</th><th>error</th></tr>
{{range .Runs}}<tr><td>{{.Name}}</td><td><code>{{.Holder}}</code></td><td>{{utc .StartedAt}}</td><td>{{if .FinishedAt.IsZero}}running, or its replica stopped{{else}}{{utc .FinishedAt}}{{end}}</td><td class="err">{{.LastError}}</td></tr>
{{end}}</table>{{else}}<p class="none">No pass has run yet.</p>{{end}}
<h2 id="dead-letters">Dead letters</h2>
{{if .DeadLetters}}{{template "letters" .DeadLetters}}<p>Retry with <code>warden deliveries retry ID…</code>.</p>{{else}}<p class="none">None.</p>{{end}}
{{if not .Repos}}<p class="none">No repository served yet.</p>{{end}}
{{range .Repos}}{{$r := .}}<section class="repo">
<h2>{{.Name}}</h2>
{{if .Err}}<p class="err">{{.Err}}</p>{{else}}{{with .Report.Summary}}<p class="summary"><span>{{.Items}} items</span><span>{{.Ready}} ready</span><span>{{.InFlight}} in flight</span><span>{{.Blocked}} blocked</span><span>{{.Stalled}} stalled</span><span>{{.Parked}} parked</span><span>{{.AwaitingAdmission}} awaiting admission</span><span>{{.Complete}} complete</span></p>{{end}}
{{range .Alarms}}<p class="alarm">{{.}}</p>
{{end}}{{if .Unadopted}}<p class="alarm">Adopting: {{.Unadopted}} issues that carry the item label are not items yet; the reconcile's census adopts them, pass by pass within its budget.</p>
{{end}}
<h3>In flight ({{len .Report.InFlight}})</h3>
{{if .Report.InFlight}}<table><tr><th>item</th><th>holder</th><th>lease expires</th><th>branch</th><th>claim</th></tr>
{{range .Report.InFlight}}<tr><td>{{template "item" ($r.Ref .Item)}}</td><td>{{.Owner}}</td><td>{{utc .LeaseExpiresAtUtc}}</td><td>{{if .Branch}}<code>{{.Branch}}</code>{{else}}—{{end}}</td><td>{{.State}}{{if .Maintenance}} (maintenance){{end}}{{if .LeaseDefaulted}} (lease-defaulted){{end}}</td></tr>
{{end}}</table>{{else}}<p class="none">None.</p>{{end}}
<h3>Ready now ({{len .Report.Ready}})</h3>
{{if .Report.Ready}}<table><tr><th>#</th><th>item</th><th>priority</th><th>overlaps in-flight work</th></tr>
{{range $i, $e := .Report.Ready}}<tr><td>{{$r.Pos $i}}</td><td>{{template "item" ($r.Ref .Item)}}</td><td>{{.Priority}}</td><td>{{range $j, $o := .Overlaps}}{{if $j}}, {{end}}{{template "item" ($r.Ref $o)}}{{else}}—{{end}}</td></tr>
{{end}}</table>{{else}}<p class="none">None.</p>{{end}}
<h3>Blocked ({{len .Report.Blocked}})</h3>
{{if .Report.Blocked}}<table><tr><th>item</th><th>waiting on</th></tr>
{{range .Report.Blocked}}<tr><td>{{template "item" ($r.Ref .Item)}}</td><td>{{range $j, $w := .WaitingOn}}{{if $j}}, {{end}}{{template "item" ($r.Ref $w)}}{{else}}—{{end}}</td></tr>
{{end}}</table>{{else}}<p class="none">None.</p>{{end}}
<h3>Stalled ({{len .Report.Stalled}})</h3>
{{if .Report.Stalled}}<table><tr><th>item</th><th>parked blocker</th><th>ruling route</th></tr>
{{range .Report.Stalled}}<tr><td>{{template "item" ($r.Ref .Item)}}</td><td>{{template "item" ($r.Ref .Blocker)}}</td><td>{{if .RulingOwner}}{{.RulingOwner}}: {{.RulingTopic}}{{else}}<span class="err">no ruling route</span>{{end}}</td></tr>
{{end}}</table>{{else}}<p class="none">None.</p>{{end}}
<h3>Parked ({{len .Report.Parked}})</h3>
{{if .Report.Parked}}<table><tr><th>item</th><th>attempts</th><th>ruling route</th><th>to unpark</th></tr>
{{range .Report.Parked}}<tr><td>{{template "item" ($r.Ref .Item)}}</td><td>{{.Attempts}}</td><td>{{if .RulingOwner}}{{.RulingOwner}}: {{.RulingTopic}}{{else}}<span class="err">no ruling route</span>{{end}}</td><td>{{.Unpark}}</td></tr>
{{end}}</table>{{else}}<p class="none">None.</p>{{end}}
<h3>Awaiting admission ({{len .Report.AwaitingAdmission}})</h3>
{{if .Report.AwaitingAdmission}}<table><tr><th>item</th><th>detail</th></tr>
{{range .Report.AwaitingAdmission}}<tr><td>{{template "item" ($r.Ref .Item)}}</td><td>{{.Detail}}</td></tr>
{{end}}</table>{{else}}<p class="none">None.</p>{{end}}
<h3>Lapsed ({{len .Report.Lapsed}})</h3>
{{if .Report.Lapsed}}<table><tr><th>item</th><th>holder</th><th>lapsed since</th><th>quarantine ends</th></tr>
{{range .Report.Lapsed}}<tr><td>{{template "item" ($r.Ref .Item)}}</td><td>{{.Owner}}</td><td>{{utc .Since}}</td><td>{{utc .QuarantineEndsAtUtc}}</td></tr>
{{end}}</table>{{else}}<p class="none">None.</p>{{end}}
{{if .Report.CleanReclaims}}<h3>Clean re-claims ({{len .Report.CleanReclaims}})</h3>
<table><tr><th>item</th><th>holder</th><th>fence</th><th>at</th></tr>
{{range .Report.CleanReclaims}}<tr><td>{{template "item" ($r.Ref .Item)}}</td><td>{{.Owner}}</td><td>{{.PriorFence}} → {{.Fence}}</td><td>{{utc .AtUtc}}</td></tr>
{{end}}</table>{{end}}
<h3>Defects ({{len .Report.Defects}})</h3>
{{if .Report.Defects}}<table><tr><th>code</th><th>item</th><th>detail</th></tr>
{{range .Report.Defects}}<tr><td><code>{{.Code}}</code></td><td>{{if .Item}}{{template "item" ($r.Ref .Item)}}{{else}}repository{{end}}</td><td>{{.Detail}}</td></tr>
{{end}}</table>{{else}}<p class="none">None.</p>{{end}}{{end}}
<h3>Dead letters ({{len .DeadLetters}})</h3>
{{if .DeadLetters}}{{template "letters" .DeadLetters}}{{else}}<p class="none">None.</p>{{end}}
</section>
{{end}}
</body></html>`))

// statusData is the whole status page.
type statusData struct {
	Pending, Dead int
	Bot           string
	GitHub        []githubTrouble // what is wrong with GitHub now
	Replica       string          // this process, as the shared passes name it
	Runs          []RunRecord     // the shared passes' last runs
	DeadLetters   []webhooks.Record
	Repos         []repoStatus
}

// repoStatus is one repository's part of the status page: its report, or
// the error that kept it from being read, and its dead letters.
type repoStatus struct {
	Name        string
	HTMLBase    string
	Err         string
	Report      gating.Report
	Alarms      []string
	Unadopted   int // labelled issues the census found and has not adopted yet
	Titles      map[gating.ItemID]string
	DeadLetters []webhooks.Record
}

// itemRef is an item as the page shows it: its id linked to its issue, and
// its title when known.
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

// Pos is a 1-based position in the claim order.
func (repoStatus) Pos(i int) int { return i + 1 }

// renderStatus writes the status page.
func renderStatus(w io.Writer, d statusData) error { return statusTmpl.Execute(w, d) }

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

func (svc *Service) statusData(ctx context.Context) (statusData, error) {
	pending, dead, err := svc.Inbox.Counts(ctx)
	if err != nil {
		return statusData{}, err
	}
	letters, err := svc.Inbox.List(ctx, true, 100)
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
	d := statusData{Pending: pending, Dead: dead, Bot: svc.Dispatcher.Bot(), DeadLetters: letters, Replica: svc.replica, Runs: runs,
		GitHub: svc.troubles(ctx)}
	for _, repo := range served {
		st := repoStatus{Name: repo.FullName, HTMLBase: svc.Mirror.HTMLBase, DeadLetters: repoDeadLetters(letters, repo.FullName)}
		rs, err := svc.Ledger.Snapshot(ctx, repo.ID)
		if err != nil {
			st.Err = "the backlog could not be read: " + err.Error()
		} else {
			ready := rs.Ready()
			st.Alarms = ready.Alarms
			if st.Report, err = svc.Ledger.Report(ctx, rs, ready); err != nil {
				svc.Log.Warn("status page: the report goes without its lease-defaulted lines", "repo", repo.FullName, "err", err)
			}
			st.Titles = make(map[gating.ItemID]string, len(rs.Items))
			for id, it := range rs.Items {
				st.Titles[id] = it.Title
			}
			if st.Unadopted, err = svc.Ledger.Unadopted(ctx, repo.ID, svc.Mirror.Settings(ctx, repo).ItemLabel); err != nil {
				st.Err = "the adoption's progress could not be read: " + err.Error()
			}
		}
		d.Repos = append(d.Repos, st)
	}
	return d, nil
}

func (svc *Service) statusPage(w http.ResponseWriter, r *http.Request) {
	d, err := svc.statusData(r.Context())
	if err != nil {
		http.Error(w, "database not answering", http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	renderStatus(w, d)
}
