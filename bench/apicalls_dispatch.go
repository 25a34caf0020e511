package main

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/wardenhq/warden/app"
	"github.com/wardenhq/warden/internal/clock"
	"github.com/wardenhq/warden/internal/config"
	"github.com/wardenhq/warden/internal/ghsim"
	"github.com/wardenhq/warden/internal/harness"
	"github.com/wardenhq/warden/webhooks"
)

// GitHub requests per dispatch by assignment (issue 20). A person assigns an
// issue to GitHub's coding agent, which starts at once (a branch and a draft
// pull request) and never calls warden. Each round, on a service of its own
// with the simulator's coding agent enabled:
//
//   - refused: an item awaiting admission is assigned to the agent;
//   - granted: an admitted item is assigned to the agent;
//   - work: the agent pushes a commit, retitles its pull request and marks
//     it ready (CodingAgentWork);
//   - merged: the agent's pull request is merged, and warden completes the
//     item under the agent's claim.
//
// Each act is settled (every delivery it caused handled), then the timer
// pass runs a minute on, so coalesced report edits are counted in the act
// that caused them. An act's figure is every REST request the simulator
// served warden during it (App-level JWT requests excluded); the assignment
// rows also give the issues.assigned delivery's own requests, which exclude
// what the agent's draft pull request cost.

// dcPhase is the requests of one act of one round.
type dcPhase struct {
	reads, writes, notM int
	calls               map[string]int // "METHOD path (note)" -> count
	// assigned is the issues.assigned deliveries' own requests.
	assigned app.CallCounts
}

// dcRound is one round's acts, by name.
type dcRound map[string]*dcPhase

// The acts of a round, in order, and what each must cost at least.
var dcActs = []struct {
	name, what         string
	readFloor          int
	writeFloor         int
	floorWhy           string
	assignment         bool // an assignment: its issues.assigned row too
	lifecycle          bool // part of the agent's pull request's lifecycle
	wantAssignedWrites int  // the issues.assigned delivery's own write floor
}{
	{"refused", "refused assignment (awaiting admission)", 0, 3, "unassign, report comment, and the failing check run on the draft PR the agent opened at once", true, false, 2},
	{"granted", "granted assignment (claim)", 0, 2, "claim marker, and the check run on the agent's draft PR", true, true, 1},
	{"work", "agent's work pushed", 0, 1, "the check run on the new head (the renewal is the ledger's)", false, true, 0},
	{"merged", "agent's PR merged, item completed", 0, 1, "outcome marker (state:complete, pr:<n> are the ledger's; GitHub closes the issue: the PR says Fixes #n)", false, true, 0},
}

type dcRun struct {
	ctx   context.Context
	e     *harness.Env
	clk   *clock.Manual
	mu    sync.Mutex
	cur   *dcPhase
	maria *ghsim.Actor
}

// benchDispatchCalls measures the requests per assignment and per agent
// pull request lifecycle over rounds (3, 2 with quick), prints its table and
// the endpoints of the first round, and returns the figures.
func benchDispatchCalls(ctx context.Context, quick bool) ([]Figure, error) {
	rounds := 3
	if quick {
		rounds = 2
	}
	r := &dcRun{ctx: ctx, clk: clock.New(time.Now().UTC().Truncate(time.Second))}
	e, err := harness.Start(ctx, harness.Options{Now: r.clk.Now, DeliveryCalls: r.observe,
		Settings: func(s *config.Settings) { s.LogLevel = "warn" }})
	if err != nil {
		return nil, fmt.Errorf("dispatch calls: start: %w", err)
	}
	defer e.Close()
	r.e = e
	e.Sim.EnableCodingAgent(e.Repo)
	r.maria = e.Person("maria", "maintain")
	e.Sim.Observe(r.exchange, nil)
	defer e.Sim.Observe(nil, nil)
	var all []dcRound
	for i := range rounds {
		round, err := r.round(i)
		if err != nil {
			return nil, fmt.Errorf("dispatch calls: round %d: %w", i+1, err)
		}
		all = append(all, round)
	}
	return dcResults(all), nil
}

// observe is the service's DeliveryCalls: the issues.assigned deliveries'
// own requests, added to the current act.
func (r *dcRun) observe(d *webhooks.Delivery, c app.CallCounts) {
	if d.FromSelf || d.Event != "issues" || d.Meta.Action != "assigned" {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cur != nil {
		r.cur.assigned.Reads += c.Reads
		r.cur.assigned.Writes += c.Writes
		r.cur.assigned.NotModified += c.NotModified
	}
}

// exchange is the simulator's REST observer: warden's requests, added to
// the current act (none between acts: set-up is not counted).
func (r *dcRun) exchange(x ghsim.Exchange) {
	if strings.HasPrefix(x.Pattern, "/app") {
		return
	}
	ex := acExchange{Method: x.Method, Pattern: x.Pattern, Status: x.Status}
	if x.Method == http.MethodPost || x.Method == http.MethodPatch {
		body := string(x.Request)
		switch {
		case strings.Contains(body, "<!-- backlog-warden: report "):
			ex.Note = "report comment"
		case strings.Contains(body, "<!-- backlog-worker: claim "):
			ex.Note = "claim marker"
		case strings.Contains(body, "<!-- backlog-worker: outcome "):
			ex.Note = "outcome marker"
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.cur
	if p == nil {
		return
	}
	switch {
	case x.Status == http.StatusNotModified:
		p.notM++
	case ex.read():
		p.reads++
	default:
		p.writes++
	}
	p.calls[ex.String()]++
}

// act runs f as the named act: settled, then a timer pass a minute on.
func (r *dcRun) act(round dcRound, name string, f func() error) error {
	r.clk.Advance(3 * time.Second)
	p := &dcPhase{calls: map[string]int{}}
	r.mu.Lock()
	r.cur = p
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.cur = nil
		r.mu.Unlock()
	}()
	if err := f(); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if err := r.settle(); err != nil {
		return fmt.Errorf("%s: settle: %w", name, err)
	}
	r.clk.Advance(time.Minute + time.Second)
	if _, err := r.e.Service.Mirror.Sweep(r.ctx); err != nil {
		return fmt.Errorf("%s: timer pass: %w", name, err)
	}
	if err := r.settle(); err != nil {
		return fmt.Errorf("%s: settle after the timer pass: %w", name, err)
	}
	round[name] = p
	return nil
}

func (r *dcRun) settle() error {
	ctx, cancel := context.WithTimeout(r.ctx, 60*time.Second)
	defer cancel()
	return r.e.Settle(ctx)
}

// create makes an item through the agent API with token (not counted).
func (r *dcRun) create(token, title string) (int, error) {
	var created struct {
		ID string `json:"id"`
	}
	code, err := r.e.API(r.ctx, token, http.MethodPost, "/items", map[string]any{
		"title": title, "specification": "What must be true: ...", "tags": []string{"priority:P2"},
	}, &created)
	if err != nil || code != http.StatusCreated {
		return 0, fmt.Errorf("POST /items answered %d (%v)", code, err)
	}
	if err := r.settle(); err != nil {
		return 0, err
	}
	var n int
	if _, err := fmt.Sscanf(created.ID, "issue-%d", &n); err != nil {
		return 0, fmt.Errorf("item id %q: %w", created.ID, err)
	}
	return n, nil
}

// claimed reports whether the item on issue n is held, and by whom.
func (r *dcRun) claimed(n int) (bool, string, error) {
	var st struct {
		IsHeld bool    `json:"isHeld"`
		Owner  *string `json:"owner"`
	}
	code, err := r.e.API(r.ctx, harness.WorkerToken, http.MethodGet, fmt.Sprintf("/items/issue-%d/claim", n), nil, &st)
	if err != nil || code != http.StatusOK {
		return false, "", fmt.Errorf("GET /items/issue-%d/claim answered %d (%v)", n, code, err)
	}
	if st.Owner == nil {
		return st.IsHeld, "", nil
	}
	return st.IsHeld, *st.Owner, nil
}

// round runs the four acts on two fresh items, checking each did what the
// figure claims to measure.
func (r *dcRun) round(i int) (dcRound, error) {
	round := dcRound{}
	gated, err := r.create(harness.PMToken, fmt.Sprintf("Compress old snapshots %d", i+1))
	if err != nil {
		return nil, err
	}
	if err := r.act(round, "refused", func() error {
		_, err := r.maria.Assign(r.e.Repo, gated, ghsim.CodingAgentLogin)
		return err
	}); err != nil {
		return nil, err
	}
	var left int
	r.e.Sim.Locked(func() { left = len(r.e.Repo.Issues[gated].Assignees) })
	if held, _, err := r.claimed(gated); err != nil || held || left != 0 {
		return nil, fmt.Errorf("refused: #%d held=%t with %d assignees left (%v); want the assignment undone", gated, held, left, err)
	}

	admitted, err := r.create(harness.HumanToken, fmt.Sprintf("Retry the webhook sender %d", i+1))
	if err != nil {
		return nil, err
	}
	if err := r.act(round, "granted", func() error {
		_, err := r.maria.Assign(r.e.Repo, admitted, ghsim.CodingAgentLogin)
		return err
	}); err != nil {
		return nil, err
	}
	if held, owner, err := r.claimed(admitted); err != nil || !held || owner != fmt.Sprintf("copilot/issue-%d", admitted) {
		return nil, fmt.Errorf("granted: #%d held=%t by %q (%v); want held by the agent", admitted, held, owner, err)
	}
	pr := r.e.Sim.CodingAgentPR(r.e.Repo, admitted)
	if pr == nil {
		return nil, fmt.Errorf("granted: the coding agent opened no pull request for #%d", admitted)
	}
	var prNum int
	r.e.Sim.Locked(func() { prNum = pr.Issue.Number })

	if err := r.act(round, "work", func() error {
		return r.e.Sim.CodingAgentWork(r.e.Repo, admitted, map[string]string{fmt.Sprintf("sender/retry%d.go", i): "package sender\n"})
	}); err != nil {
		return nil, err
	}
	if err := r.act(round, "merged", func() error {
		_, err := r.maria.MergePR(r.e.Repo, prNum, "squash")
		return err
	}); err != nil {
		return nil, err
	}
	var it struct {
		Tags []string `json:"tags"`
	}
	if code, err := r.e.API(r.ctx, harness.WorkerToken, http.MethodGet, fmt.Sprintf("/items/issue-%d", admitted), nil, &it); err != nil || code != http.StatusOK {
		return nil, fmt.Errorf("merged: GET /items/issue-%d answered %d (%v)", admitted, code, err)
	}
	if !slices.Contains(it.Tags, "state:complete") || !slices.Contains(it.Tags, fmt.Sprintf("pr:%d", prNum)) {
		return nil, fmt.Errorf("merged: issue-%d has tags %v, want state:complete and pr:%d (the item completed)", admitted, it.Tags, prNum)
	}
	return round, nil
}

// dcResults prints the table and the first round's endpoints, and returns
// the figures (medians over the rounds).
func dcResults(all []dcRound) []Figure {
	n := len(all)
	fmt.Printf("\nGitHub requests per dispatch by assignment — %d rounds, GitHub's coding agent assigned by a maintainer (the simulator's count of warden's requests; each act settled, then a timer pass)\n\n", n)
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ACT\tREADS med\tmax\tWRITES med\tmax\t304s\tFLOOR (writes)")
	type row struct {
		name       string
		reads      []int
		writes     []int
		notM       int
		floor      string
		writeFloor int
	}
	var rows []row
	life := row{name: "agent PR lifecycle (granted, work, merged)"}
	life.reads, life.writes = make([]int, n), make([]int, n)
	for _, a := range dcActs {
		if a.assignment {
			x := row{name: a.what + ", its issues.assigned delivery", writeFloor: a.wantAssignedWrites,
				floor: fmt.Sprintf("%d", a.wantAssignedWrites)}
			for _, rd := range all {
				p := rd[a.name]
				x.reads = append(x.reads, p.assigned.Reads-p.assigned.NotModified)
				x.writes = append(x.writes, p.assigned.Writes)
				x.notM += p.assigned.NotModified
			}
			rows = append(rows, x)
		}
		x := row{name: a.what + ", whole act", writeFloor: a.writeFloor, floor: fmt.Sprintf("%d: %s", a.writeFloor, a.floorWhy)}
		for k, rd := range all {
			p := rd[a.name]
			x.reads = append(x.reads, p.reads)
			x.writes = append(x.writes, p.writes)
			x.notM += p.notM
			if a.lifecycle {
				life.reads[k] += p.reads
				life.writes[k] += p.writes
				life.notM += p.notM
			}
		}
		rows = append(rows, x)
	}
	for _, a := range dcActs {
		if a.lifecycle {
			life.writeFloor += a.writeFloor
		}
	}
	life.floor = fmt.Sprintf("%d: the three rows' floors", life.writeFloor)
	rows = append(rows, life)
	var figs []Figure
	for _, x := range rows {
		over := ""
		if m := median(x.writes); m > float64(x.writeFloor) {
			over = fmt.Sprintf(" — over by %s", fmtMedian(m-float64(x.writeFloor)))
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%d\t%d\t%s%s\n", x.name, fmtMedian(median(x.reads)), slices.Max(x.reads),
			fmtMedian(median(x.writes)), slices.Max(x.writes), x.notM, x.floor, over)
		work := fmt.Sprintf("%d rounds, coding agent assigned by a maintainer", n)
		figs = append(figs,
			Figure{"GitHub calls", "dispatch: " + x.name + ", reads median", median(x.reads), "reads", work, "floor 0: the payload holds the answer"},
			Figure{"GitHub calls", "dispatch: " + x.name + ", writes median", median(x.writes), "writes", work, "floor " + x.floor},
		)
	}
	tw.Flush()
	fmt.Println("\n  the first round's requests, by act:")
	for _, a := range dcActs {
		fmt.Printf("    %-8s %s\n", a.name, listCalls(all[0][a.name].calls))
	}
	return figs
}

// listCalls lists every request kind with its count, most first.
func listCalls(m map[string]int) string {
	ks := slices.Sorted(maps.Keys(m))
	sort.SliceStable(ks, func(i, j int) bool { return m[ks[i]] > m[ks[j]] })
	parts := make([]string, 0, len(ks))
	for _, k := range ks {
		parts = append(parts, fmt.Sprintf("%s ×%d", k, m[k]))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, "; ")
}
