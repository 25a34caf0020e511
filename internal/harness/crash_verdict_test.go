package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/internal/ghsim"
	"github.com/wardenhq/warden/internal/service"
	"github.com/wardenhq/warden/mirror/store"
)

// What the crash suites (crash_findings_e2e_test.go) judge warden's report
// comments by: each write as GitHub answers it (reportWatch), and every
// comment at the end against GitHub's final state and warden's own final
// judgement of the item (judgeReports).

// reportWatch sees every report comment warden writes, as GitHub answers
// it, and notes each that states admission-unrecorded while the issue
// carries the admission label right after the write.
type reportWatch struct {
	sim  *ghsim.Sim
	repo *ghsim.Repo

	mu     sync.Mutex
	writes int
	falses []string
}

// watchReports registers the watch as the simulator's REST observer.
func watchReports(sim *ghsim.Sim, repo *ghsim.Repo) *reportWatch {
	rw := &reportWatch{sim: sim, repo: repo}
	sim.Observe(rw.exchange, nil)
	return rw
}

func (rw *reportWatch) exchange(x ghsim.Exchange) {
	write := x.Method == http.MethodPost && strings.HasSuffix(x.Pattern, "/issues/{issue_number}/comments") ||
		x.Method == http.MethodPatch && strings.HasSuffix(x.Pattern, "/issues/comments/{comment_id}")
	if !write || x.Status >= 300 {
		return
	}
	var req struct {
		Body string `json:"body"`
	}
	if json.Unmarshal(x.Request, &req) != nil {
		return
	}
	var n int
	if _, err := fmt.Sscanf(firstLine(req.Body), "<!-- backlog-warden: report item=issue-%d -->", &n); err != nil {
		return
	}
	listed := false
	for _, m := range reportCode.FindAllStringSubmatch(plain(req.Body), -1) {
		listed = listed || m[1] == "admission-unrecorded"
	}
	labelled := false
	if listed {
		rw.sim.Locked(func() {
			if iss := rw.repo.Issues[n]; iss != nil {
				for _, l := range iss.Labels {
					labelled = labelled || strings.EqualFold(l.Name, lblAdmission)
				}
			}
		})
	}
	rw.mu.Lock()
	defer rw.mu.Unlock()
	rw.writes++
	if labelled {
		rw.falses = append(rw.falses, fmt.Sprintf("#%d: admission-unrecorded written while it carried %s", n, lblAdmission))
	}
}

func (rw *reportWatch) count() int {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	return rw.writes
}

func (rw *reportWatch) falseWrites() []string {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	return slices.Clone(rw.falses)
}

// crashVerdict is what the final GitHub state says of the report comments.
type crashVerdict struct {
	reports        int
	falseAdmission []string // admission-unrecorded where GitHub shows it false
	stale          []string // a finding the ledger's final judgement does not hold
	missing        []string // a finding of the final judgement no comment lists (diagnostic)
	duplicates     []string
}

// reportCode is a finding's code as a report comment lists it.
var reportCode = regexp.MustCompile("(?m)^- \\*\\*`+([^`]+?)`+\\*\\*")

// crashIssue is what GitHub shows of one issue at the end.
type crashIssue struct {
	n         int
	admission bool   // carries the admission label
	lastAct   string // the last admission-label event: "labeled by x", "unlabeled by x"
	lastActor string
	reports   []string // warden's report comments' bodies (plain)
}

// judgeReports reads the simulator's final state and warden's database
// (warden stopped) and judges every report comment.
func judgeReports(w *crashWarden, repo *ghsim.Repo) (crashVerdict, error) {
	var v crashVerdict
	bot := w.sim.BotLogin()
	var issues []crashIssue
	w.sim.Locked(func() {
		for n, iss := range repo.Issues {
			if iss.IsPull || iss.Deleted {
				continue
			}
			ci := crashIssue{n: n}
			for _, l := range iss.Labels {
				if strings.EqualFold(l.Name, lblAdmission) {
					ci.admission = true
				}
			}
			for _, e := range iss.Events {
				if (e.Event == "labeled" || e.Event == "unlabeled") && e.Label != nil && strings.EqualFold(e.Label.Name, lblAdmission) {
					ci.lastAct, ci.lastActor = e.Event, e.Actor.Login
				}
			}
			for _, id := range iss.CommentIDs {
				if c := repo.Comments[id]; c != nil && c.User.Login == bot && firstLine(c.Body) == reportFirstLine(n) {
					ci.reports = append(ci.reports, plain(c.Body))
				}
			}
			issues = append(issues, ci)
		}
	})
	slices.SortFunc(issues, func(a, b crashIssue) int { return a.n - b.n })
	ctx := context.Background()
	rec, err := service.OpenRecords(ctx, w.db, crashSettings("sqlite:"+w.dbPath), nil, w.clk.Now, nil)
	if err != nil {
		return v, fmt.Errorf("open warden's records: %w", err)
	}
	for _, ci := range issues {
		id := gating.IDFor(ci.n)
		judged := map[string]bool{}
		rs, err := rec.Store.Ledger.ClaimSnapshot(ctx, repo.ID, id)
		switch {
		case errors.Is(err, store.ErrNotFound):
		case err != nil:
			return v, fmt.Errorf("judge %s: %w", id, err)
		default:
			for _, d := range gating.ComputeReady(rs.Snapshot).Defects {
				if d.Item == id {
					judged[d.Code] = true
				}
			}
		}
		if len(ci.reports) > 1 {
			v.duplicates = append(v.duplicates, fmt.Sprintf("#%d has %d", ci.n, len(ci.reports)))
		}
		listed := map[string]bool{}
		for _, body := range ci.reports {
			v.reports++
			for _, m := range reportCode.FindAllStringSubmatch(body, -1) {
				listed[m[1]] = true
			}
		}
		for code := range listed {
			if code == "admission-unrecorded" {
				switch {
				case ci.admission:
					v.falseAdmission = append(v.falseAdmission, fmt.Sprintf("#%d lists admission-unrecorded; it carries %s on GitHub", ci.n, lblAdmission))
					continue
				case ci.lastAct == "unlabeled" && ci.lastActor == crashHuman:
					v.falseAdmission = append(v.falseAdmission, fmt.Sprintf("#%d lists admission-unrecorded; %s (maintain) removed %s", ci.n, crashHuman, lblAdmission))
					continue
				}
			}
			if !judged[code] {
				v.stale = append(v.stale, fmt.Sprintf("#%d lists %s; warden's final judgement of %s does not (GitHub: %s %v, last %s by %s)",
					ci.n, code, id, lblAdmission, ci.admission, ci.lastAct, ci.lastActor))
			}
		}
		for code := range judged {
			if !listed[code] {
				v.missing = append(v.missing, fmt.Sprintf("#%d: %s", ci.n, code))
			}
		}
	}
	return v, nil
}

// TestReportCodeReadsTheRenderedComment: the crash suites read a report
// comment's codes as warden renders it (were the format to change, they
// would read none and pass blind).
func TestReportCodeReadsTheRenderedComment(t *testing.T) {
	cases := []struct {
		name     string
		findings []gating.ReportFinding
	}{
		{"none", nil},
		{"one", []gating.ReportFinding{{Code: "admission-unrecorded", Detail: "the label is off"}}},
		{"several, details with code spans and mentions", []gating.ReportFinding{
			{Code: "agent-removed-admission", Detail: "`builder[bot]` removed it, cc @maria #12"},
			{Code: "admission-unrecorded"}, {Code: "cycle", Detail: "a ``x`` b"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			body := plain(gating.RenderReportComment("issue-3", c.findings, []string{"a refusal"}, "status"))
			var got, want []string
			for _, m := range reportCode.FindAllStringSubmatch(body, -1) {
				got = append(got, m[1])
			}
			for _, f := range c.findings {
				want = append(want, f.Code)
			}
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("codes %v, want %v in:\n%s", got, want, body)
			}
		})
	}
}
