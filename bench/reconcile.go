package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/wardenhq/warden/app"
	"github.com/wardenhq/warden/internal/clock"
	"github.com/wardenhq/warden/internal/config"
	"github.com/wardenhq/warden/internal/ghsim"
	"github.com/wardenhq/warden/internal/harness"
	"github.com/wardenhq/warden/mirror"
)

// The reconcile pass figure (issue 7): one repository with many items and
// open pull requests, what a reconcile pass costs in GitHub requests that
// count against the installation's rate limit, and its wall time against
// the simulator:
//
//   - the first pass (warden's conditional cache cold, every page a 200);
//   - a second pass ten minutes on with nothing changed on GitHub (aim:
//     under 15 charged requests: unchanged pages are 304s, which GitHub
//     does not charge);
//   - a third pass after one PR's body was edited and one issue relabelled.
//
// The repository is seeded through the simulator's actors, so every item,
// claim, pull request and check run reaches warden the way it would in
// production (signed webhooks, the agent API for claims), and warden has
// handled all of it before the first pass: a pass finds what its loop
// exists to catch, not a backlog of unprocessed deliveries. Only the passes
// are measured.
//
// The main run gives the passes a budget big enough to finish in one pass;
// a second environment, seeded the same, runs with the default budget
// (mirror.DefaultPassBudget): how many passes, ten minutes apart as the
// service's loop runs them, the first full reconcile takes, and whether the
// quiet pass then fits.
//
// warden and the simulator run on the bench's clock; leases are long
// (LeaseMax raised to a day) so that no claim lapses between passes: what
// changes between the passes is what the bench changes.

// rcConfig is the repository the bench builds.
type rcConfig struct {
	Items  int // backlog items, opened by a maintainer with the item label
	Plain  int // issues that are no items
	PRs    int // open pull requests, each closing one item
	Merged int // pull requests opened and merged (closing their items)
	Idle   int // items claimed with a branch pushed but no PR yet
}

func (c rcConfig) String() string {
	return fmt.Sprintf("%s items, %d open PRs, %d merged PRs, %d other issues", thousands(c.Items), c.PRs, c.Merged, c.Plain)
}

// short is the workload column's text.
func (c rcConfig) short() string {
	return fmt.Sprintf("%s items, %d open PRs", thousands(c.Items), c.PRs)
}

func thousands(n int) string {
	if n >= 1000 {
		return fmt.Sprintf("%d,%03d", n/1000, n%1000)
	}
	return fmt.Sprint(n)
}

// rcTally is one endpoint's exchanges within a pass.
type rcTally struct {
	Method, Pattern    string
	OK, NotMod, Errors int
	Samples            []string // a few paths of the writes
}

// rcPass is one measured pass.
type rcPass struct {
	Name    string
	Result  mirror.PassResult
	Wall    time.Duration
	Settle  time.Duration
	Cache   app.ConditionalStats // the delta over the pass
	Sim     ghsim.Calls          // the installation's requests over the pass and what it caused (settled)
	Tallies []*rcTally
}

func (p rcPass) charged() int {
	c := p.Result.Calls
	return c.Reads - c.NotModified + c.Writes
}

// rcEnv is one seeded environment.
type rcEnv struct {
	ctx context.Context
	cfg rcConfig
	e   *harness.Env
	clk *clock.Manual

	tag  atomic.Int64 // >0: the pass whose exchanges are being tallied
	mu   sync.Mutex
	tall map[int64]map[string]*rcTally
	// notMod is the installation's 304 count at the last exchange: the
	// simulator's observer sees the handler's status (200) of a request it
	// answered 304, so a 304 is told by the count having moved (exact while
	// requests are sequential, as a pass's are).
	notMod int

	maria, worker, rita *ghsim.Actor
	items               []int // item issue numbers
	prs                 []int // open PR numbers
	prItem              map[int]int
	seedWall            time.Duration
}

func benchReconcile(ctx context.Context, quick bool) ([]Figure, error) {
	cfg := rcConfig{Items: 1000, Plain: 100, PRs: 300, Merged: 50, Idle: 30}
	if quick {
		cfg = rcConfig{Items: 60, Plain: 6, PRs: 20, Merged: 4, Idle: 3}
	}
	r, runs, err := rcMainRun(ctx, cfg)
	if err != nil {
		return nil, err
	}

	// The default budget, in an environment seeded the same way.
	d, err := newRCEnv(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer d.e.Close()
	var dflt []rcPass
	for i := 1; ; i++ {
		p, err := d.pass(fmt.Sprintf("default budget: pass %d", i), 0)
		if err != nil {
			return nil, err
		}
		dflt = append(dflt, p)
		d.clk.Advance(10 * time.Minute)
		if p.Result.Complete {
			break
		}
		if i == 20 {
			return nil, fmt.Errorf("reconcile: 20 passes with the default budget did not complete a reconcile: %s", p.Result.Stopped)
		}
	}
	firstPasses := len(dflt)
	// Then passes with nothing changed, as the loop runs them.
	for i := 1; i <= rcQuietPasses; i++ {
		p, err := d.pass(fmt.Sprintf("default budget: pass %d with nothing changed", i), 0)
		if err != nil {
			return nil, err
		}
		dflt = append(dflt, p)
		d.clk.Advance(10 * time.Minute)
	}

	r.print(runs, dflt)
	figs := r.figures(runs, dflt, firstPasses)

	return figs, nil
}

// rcMainRun seeds an environment and runs the three passes with a budget
// big enough for the first to finish; the environment is closed after.
func rcMainRun(ctx context.Context, cfg rcConfig) (*rcEnv, []rcPass, error) {
	const big = 1 << 20
	r, err := newRCEnv(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	defer r.e.Close()
	first, err := r.pass("first pass", big)
	if err != nil {
		return nil, nil, err
	}
	if !first.Result.Complete {
		return nil, nil, fmt.Errorf("reconcile: the first pass with a budget of %d did not complete: %s", big, first.Result.Stopped)
	}
	r.clk.Advance(10 * time.Minute)
	quiet, err := r.pass("second pass, nothing changed", big)
	if err != nil {
		return nil, nil, err
	}
	// One PR's body edited, one issue relabelled (webhooks handled before
	// the pass, as they would be), then the pass ten minutes on.
	r.clk.Advance(time.Minute)
	pr := r.prs[len(r.prs)/2]
	body := fmt.Sprintf("Closes #%d\n\nAlso tidies the tests.", r.prItem[pr])
	if err := r.worker.EditPR(r.e.Repo, pr, nil, &body); err != nil {
		return nil, nil, err
	}
	relabel := r.items[len(r.items)/3]
	if _, err := r.maria.AddLabels(r.e.Repo, relabel, "area:ui"); err != nil {
		return nil, nil, err
	}
	if err := r.settle(); err != nil {
		return nil, nil, err
	}
	r.clk.Advance(9 * time.Minute)
	changed, err := r.pass(fmt.Sprintf("third pass, PR #%d's body edited, issue #%d relabelled", pr, relabel), big)
	if err != nil {
		return nil, nil, err
	}
	return r, []rcPass{first, quiet, changed}, nil

}

// newRCEnv starts warden against the simulator and seeds the repository.
func newRCEnv(ctx context.Context, cfg rcConfig) (*rcEnv, error) {
	r := &rcEnv{ctx: ctx, cfg: cfg, clk: clock.New(time.Now().UTC().Truncate(time.Second)),
		tall: map[int64]map[string]*rcTally{}, prItem: map[int]int{}}
	e, err := harness.Start(ctx, harness.Options{Now: r.clk.Now, Settings: func(s *config.Settings) {
		s.LogLevel = "warn"
		s.LeaseMax = 24 * time.Hour
	}})
	if err != nil {
		return nil, err
	}
	r.e = e
	e.Sim.Observe(r.exchange, nil)
	start := time.Now()
	if err := r.seed(); err != nil {
		e.Close()
		return nil, fmt.Errorf("reconcile: seed: %w", err)
	}
	r.seedWall = time.Since(start)
	return r, nil
}

func (r *rcEnv) exchange(x ghsim.Exchange) {
	r.mu.Lock()
	defer r.mu.Unlock()
	nm := r.e.Sim.Calls(r.e.Inst.ID).NotModified
	was304 := nm > r.notMod
	r.notMod = nm
	t := r.tag.Load()
	if t == 0 || strings.HasPrefix(x.Pattern, "/app") {
		return
	}
	m := r.tall[t]
	if m == nil {
		m = map[string]*rcTally{}
		r.tall[t] = m
	}
	k := x.Method + " " + x.Pattern
	y := m[k]
	if y == nil {
		y = &rcTally{Method: x.Method, Pattern: x.Pattern}
		m[k] = y
	}
	switch {
	case was304 || x.Status == http.StatusNotModified:
		y.NotMod++
	case x.Status >= 400:
		y.Errors++
	default:
		y.OK++
	}
	if x.Method != http.MethodGet && len(y.Samples) < 3 {
		y.Samples = append(y.Samples, x.Path)
	}
}

// settle waits until the simulator sent everything and warden handled it
// (acRun.settle's quiet period).
func (r *rcEnv) settle() error {
	ctx, cancel := context.WithTimeout(r.ctx, 120*time.Second)
	defer cancel()
	return r.e.SettleQuiet(ctx, 3, 2*time.Millisecond)
}

// pass runs one reconcile pass over the repository with budget (0: the
// default), timing ReconcileAll alone, then settles (the deliveries its
// writes caused are handled: their requests show in Sim and the tallies).
func (r *rcEnv) pass(name string, budget int) (rcPass, error) {
	p := rcPass{Name: name}
	tag := rcPassSeq.Add(1)
	cache0 := r.e.Service.App.ConditionalStats()
	sim0 := r.e.Sim.Calls(r.e.Inst.ID)
	r.tag.Store(tag)
	start := time.Now()
	res, err := r.e.Service.Mirror.ReconcileAll(r.ctx, mirror.ReconcileOptions{Budget: budget})
	p.Wall = time.Since(start)
	cache1 := r.e.Service.App.ConditionalStats()
	if err != nil {
		return p, fmt.Errorf("reconcile: %s: %w", name, err)
	}
	if len(res) != 1 {
		return p, fmt.Errorf("reconcile: %s: %d repositories passed, want 1", name, len(res))
	}
	p.Result = res[0]
	start = time.Now()
	if err := r.settle(); err != nil {
		return p, err
	}
	p.Settle = time.Since(start)
	r.tag.Store(0)
	sim1 := r.e.Sim.Calls(r.e.Inst.ID)
	p.Sim = ghsim.Calls{Reads: sim1.Reads - sim0.Reads, Writes: sim1.Writes - sim0.Writes, NotModified: sim1.NotModified - sim0.NotModified}
	p.Cache = app.ConditionalStats{Hits: cache1.Hits - cache0.Hits, Misses: cache1.Misses - cache0.Misses}
	r.mu.Lock()
	for _, t := range r.tall[tag] {
		p.Tallies = append(p.Tallies, t)
	}
	r.mu.Unlock()
	sort.Slice(p.Tallies, func(i, j int) bool {
		a, b := p.Tallies[i], p.Tallies[j]
		if a.OK+a.Errors != b.OK+b.Errors {
			return a.OK+a.Errors > b.OK+b.Errors
		}
		return a.Method+a.Pattern < b.Method+b.Pattern
	})
	return p, nil
}

// print writes each pass's requests by endpoint, and its findings and
// actions in brief, to stdout.
func (r *rcEnv) print(runs, dflt []rcPass) {
	fmt.Printf("reconcile — %s; seeded in %s\n", r.cfg, r.seedWall.Round(time.Millisecond))
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	for _, p := range append(append([]rcPass(nil), runs...), dflt...) {
		c := p.Result.Calls
		state := "complete"
		if !p.Result.Complete {
			state = "stopped: " + p.Result.Stopped
		}
		fmt.Fprintf(tw, "\n%s: %d charged (%d reads, %d of them 304, %d writes), %s, %s (+%s settling); cache %d hits / %d misses; the installation, with what the pass's writes caused: %d reads (%d 304), %d writes\n",
			p.Name, p.charged(), c.Reads, c.NotModified, c.Writes, state, p.Wall.Round(time.Millisecond), p.Settle.Round(time.Millisecond),
			p.Cache.Hits, p.Cache.Misses, p.Sim.Reads, p.Sim.NotModified, p.Sim.Writes)
		fmt.Fprintln(tw, "  ENDPOINT\t200/201\t304\tERRORS")
		for _, t := range p.Tallies {
			path := strings.TrimPrefix(t.Pattern, "/repos/{owner}/{repo}")
			fmt.Fprintf(tw, "  %s %s\t%d\t%d\t%d\n", t.Method, path, t.OK, t.NotMod, t.Errors)
			if len(t.Samples) > 0 {
				fmt.Fprintf(tw, "    e.g. %s\n", strings.Join(t.Samples, ", "))
			}
		}
		fmt.Fprintf(tw, "  findings: %d; actions: %d\n", len(p.Result.Findings), len(p.Result.Actions))
		kinds := map[string]int{}
		for _, a := range p.Result.Actions {
			kinds[actionKind(a)]++
		}
		ks := make([]string, 0, len(kinds))
		for k := range kinds {
			ks = append(ks, k)
		}
		sort.Strings(ks)
		for _, k := range ks {
			fmt.Fprintf(tw, "    %d × %s\n", kinds[k], k)
		}
		fk := map[string]int{}
		for _, f := range p.Result.Findings {
			fk[f.Code]++
		}
		ks = ks[:0]
		for k := range fk {
			ks = append(ks, k)
		}
		sort.Strings(ks)
		for _, k := range ks {
			fmt.Fprintf(tw, "    finding %s × %d\n", k, fk[k])
		}
	}
	tw.Flush()
	fmt.Println()
}

// actionKind strips the numbers from an action's description so like ones
// group.
func actionKind(s string) string {
	var b strings.Builder
	skip := false
	for _, f := range strings.Fields(s) {
		if strings.HasPrefix(f, "#") || strings.HasPrefix(f, "issue-") || isHexish(f) {
			if !skip {
				b.WriteString("… ")
			}
			skip = true
			continue
		}
		skip = false
		b.WriteString(f + " ")
	}
	return strings.TrimSpace(b.String())
}

func isHexish(f string) bool {
	f = strings.TrimRight(f, ":,;")
	if len(f) < 7 {
		return false
	}
	for _, c := range f {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

func (r *rcEnv) figures(runs, dflt []rcPass, firstPasses int) []Figure {
	const sec = "reconcile"
	work := r.cfg.short()
	var figs []Figure
	add := func(p rcPass, label, aim string) {
		c := p.Result.Calls
		w := work + ", unbounded budget"
		figs = append(figs,
			Figure{sec, label + ": charged requests", float64(p.charged()), "requests", w, aim},
			Figure{sec, label + ": reads", float64(c.Reads), "requests", w, "304s included"},
			Figure{sec, label + ": writes", float64(c.Writes), "requests", w, ""},
			Figure{sec, label + ": 304s", float64(c.NotModified), "requests", w, "free"},
			Figure{sec, label + ": wall time", p.Wall.Seconds() * 1000, "ms", w, ""},
		)
	}
	add(runs[0], "first pass", "")
	add(runs[1], "quiet pass", "aim < 15")
	q := runs[1].Cache
	rate := 0.0
	if q.Hits+q.Misses > 0 {
		rate = 100 * float64(q.Hits) / float64(q.Hits+q.Misses)
	}
	figs = append(figs, Figure{sec, "quiet pass: conditional cache hit rate", rate, "%",
		fmt.Sprintf("%d hits, %d misses", q.Hits, q.Misses), ""})
	add(runs[2], "1 PR body + 1 relabel", "")
	w := work + fmt.Sprintf(", default budget %d", mirror.DefaultPassBudget)
	var requests, charged int
	for _, p := range dflt[:firstPasses] {
		requests += p.Result.Calls.Reads + p.Result.Calls.Writes
		charged += p.charged()
	}
	figs = append(figs,
		Figure{sec, "default budget: passes to a full reconcile", float64(firstPasses), "passes", w, "10 min apart"},
		Figure{sec, "default budget: their charged requests", float64(charged), "requests", w, fmt.Sprintf("%d requests with 304s", requests)})
	quiet := dflt[firstPasses:]
	completed, maxCharged, maxRequests := 0, 0, 0
	for _, p := range quiet {
		if p.Result.Complete {
			completed++
		}
		maxCharged = max(maxCharged, p.charged())
		maxRequests = max(maxRequests, p.Result.Calls.Reads+p.Result.Calls.Writes)
	}
	wq := w + fmt.Sprintf(", %d passes, nothing changed", len(quiet))
	figs = append(figs,
		Figure{sec, "default budget: quiet passes that complete", float64(completed), "passes", wq, fmt.Sprintf("of %d", len(quiet))},
		Figure{sec, "default budget: quiet pass charged, max", float64(maxCharged), "requests", wq, "aim < 15"},
		Figure{sec, "default budget: quiet pass requests, max", float64(maxRequests), "requests", wq, fmt.Sprintf("budget %d, 304s included", mirror.DefaultPassBudget)})
	return figs
}
