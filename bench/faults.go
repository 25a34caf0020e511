package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/wardenhq/warden/app"
	"github.com/wardenhq/warden/internal/clock"
	"github.com/wardenhq/warden/internal/config"
	"github.com/wardenhq/warden/internal/ghsim"
	"github.com/wardenhq/warden/internal/harness"
)

// The fault section: warden against the simulator while GitHub misbehaves,
// with warden serve's own retries, backoff, waits and deadlines
// (harness.Options.Production). Each run is an agent opening N items (each
// needs warden's admission label: reads, then a write); the fault is put on
// before they arrive and ended as its row says. A fault-free run before
// and after the faults is the floor each is read against.
//
// Columns: deliveries (the agent's, not warden's own), processed once
// (items whose admission label warden added exactly once), dead letters,
// GitHub requests warden sent (every attempt, the App's own calls
// included), and the time from the fault's end until everything settled.

const (
	faultAdmission = "needs-specification"
	faultItemLabel = "backlog"
)

type faultCase struct {
	name string
	n    int // items opened
	// inject puts the fault on, before the items are opened.
	inject func(r *faultRun)
	// end waits out or ends the fault once the items are opened, and
	// returns when it ended.
	end func(r *faultRun) (time.Time, error)
}

type faultRun struct {
	ctx   context.Context
	e     *harness.Env
	clk   *clock.Offset
	quick bool
	nums  []int
	note  string
}

type faultRow struct {
	name                   string
	deliveries, once, dead int
	requests               int
	requestsPerDelivery    float64
	drain                  time.Duration
	note                   string
}

func benchFaults(ctx context.Context, quick bool) ([]Figure, error) {
	n, blip, outage, hang := 10, 5*time.Second, 40*time.Second, 70*time.Second
	if quick {
		n, blip, outage, hang = 4, time.Second, 2*time.Second, 2*time.Second
	}
	cases := []faultCase{
		{name: "none (floor)", n: n, end: func(r *faultRun) (time.Time, error) { return time.Now(), nil }},
		{name: fmt.Sprintf("%s of 500s", blip), n: n,
			inject: func(r *faultRun) { r.e.Sim.FailNext(1<<30, http.StatusInternalServerError, "", "/repos/") },
			end: func(r *faultRun) (time.Time, error) {
				time.Sleep(blip)
				r.e.Sim.ClearFaults()
				return time.Now(), nil
			}},
		{name: fmt.Sprintf("%s outage (every answer 500)", outage), n: n,
			inject: func(r *faultRun) { r.e.Sim.FailNext(1<<30, http.StatusInternalServerError, "", "/repos/") },
			end: func(r *faultRun) (time.Time, error) {
				time.Sleep(outage)
				r.e.Sim.ClearFaults()
				return time.Now(), nil
			}},
		{name: "1 h primary window (warden's clock)", n: n,
			inject: func(r *faultRun) { r.e.Sim.SetRemaining(r.e.Inst.ID, 0) },
			end:    endPrimaryWindow},
		{name: "secondary limits (20, Retry-After 3 s)", n: n,
			inject: func(r *faultRun) { r.e.Sim.SecondaryLimitNext(20, http.StatusForbidden, 3, "", "/repos/") },
			end:    waitFaultsSpent},
		{name: fmt.Sprintf("10 writes hung %s, 3x the items", hang), n: 3 * n,
			inject: func(r *faultRun) { r.e.Sim.HangNext(10, hang, http.MethodPost, "/repos/") },
			end:    endHung},
		{name: "none (floor, again)", n: n, end: func(r *faultRun) (time.Time, error) { return time.Now(), nil }},
	}
	if quick {
		cases = slices.DeleteFunc(cases, func(c faultCase) bool {
			return strings.Contains(c.name, "outage") || strings.Contains(c.name, "secondary")
		})
	}
	var rows []faultRow
	for _, c := range cases {
		start := time.Now()
		row, err := runFault(ctx, c, quick)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c.name, err)
		}
		fmt.Fprintf(os.Stderr, "bench: faults: %s: %d requests, drained %s after the fault (%s in all)\n",
			c.name, row.requests, row.drain.Round(100*time.Millisecond), time.Since(start).Round(time.Second))
		rows = append(rows, row)
	}
	floorReq, floorDrain := 0.0, []time.Duration{}
	for _, r := range rows {
		if strings.HasPrefix(r.name, "none") {
			floorReq = max(floorReq, r.requestsPerDelivery)
			floorDrain = append(floorDrain, r.drain)
		}
	}
	slices.Sort(floorDrain)
	fmt.Println("faults: warden serve's retries and deadlines against the simulator's faults")
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "FAULT\tDELIVERIES\tPROCESSED ONCE\tDEAD\tGITHUB REQUESTS\t÷ FLOOR PER DELIVERY\tDRAIN AFTER FAULT\tNOTE")
	var figs []Figure
	for _, r := range rows {
		ratio := r.requestsPerDelivery / floorReq
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%.1f\t%s\t%s\n", r.name, r.deliveries, r.once, r.dead, r.requests, ratio,
			r.drain.Round(100*time.Millisecond), r.note)
		w := fmt.Sprintf("%d items opened by an agent", r.deliveries)
		figs = append(figs,
			Figure{Section: "faults", Name: r.name + ": processed once", Value: float64(r.once) / float64(r.deliveries), Unit: "of deliveries", Workload: w, Ceiling: "1 (every item once), 0 dead"},
			Figure{Section: "faults", Name: r.name + ": GitHub requests", Value: ratio, Unit: "× floor per delivery", Workload: w,
				Ceiling: fmt.Sprintf("floor %.1f requests per delivery (fault-free runs)", floorReq)},
			Figure{Section: "faults", Name: r.name + ": drain after the fault", Value: r.drain.Seconds(), Unit: "s", Workload: w,
				Ceiling: fmt.Sprintf("fault-free drain %s–%s", floorDrain[0].Round(10*time.Millisecond), floorDrain[len(floorDrain)-1].Round(10*time.Millisecond))},
		)
		if r.dead > 0 || r.once != r.deliveries {
			return figs, fmt.Errorf("%s: %d of %d processed once, %d dead", r.name, r.once, r.deliveries, r.dead)
		}
	}
	tw.Flush()
	fmt.Println()
	return figs, nil
}

func runFault(ctx context.Context, c faultCase, quick bool) (faultRow, error) {
	clk := &clock.Offset{}
	e, err := harness.Start(ctx, harness.Options{Now: clk.Now, Production: true,
		Settings: func(s *config.Settings) { s.LogLevel = "error" }})
	if err != nil {
		return faultRow{}, err
	}
	defer e.Close()
	r := &faultRun{ctx: ctx, e: e, clk: clk, quick: quick}
	agent := e.Sim.As("builder[bot]")
	e.Sim.SetRole(e.Repo, "builder[bot]", "write")
	before := sentRequests(e)
	if c.inject != nil {
		c.inject(r)
	}
	for i := range c.n {
		iss, err := agent.OpenIssue(e.Repo, fmt.Sprintf("Proposed item %d", i+1), "spec", faultItemLabel)
		if err != nil {
			return faultRow{}, err
		}
		r.nums = append(r.nums, iss.Number)
	}
	if err := e.Sim.Flush(ctx); err != nil {
		return faultRow{}, err
	}
	ended, err := c.end(r)
	if err != nil {
		return faultRow{}, err
	}
	sctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	if err := e.SettleQuiet(sctx, 3, 50*time.Millisecond); err != nil {
		return faultRow{}, err
	}
	row := faultRow{name: c.name, deliveries: c.n, drain: time.Since(ended), note: r.note}
	row.requests = sentRequests(e) - before
	row.requestsPerDelivery = float64(row.requests) / float64(c.n)
	dead, err := e.Service.Inbox.List(ctx, true, 1000)
	if err != nil {
		return faultRow{}, err
	}
	row.dead = len(dead)
	row.once = countLabeledOnce(e, r.nums)
	return row, nil
}

// sentRequests is every request warden's access layer sent to GitHub, for
// the installation and as the App.
func sentRequests(e *harness.Env) int {
	total := 0
	for _, inst := range []int64{e.Inst.ID, app.AppInstallation} {
		c := e.Service.App.Calls(inst)
		total += c.Reads + c.Writes
	}
	return total
}

// countLabeledOnce is how many of the issues nums labeledOnce holds for.
func countLabeledOnce(e *harness.Env, nums []int) int {
	n := 0
	e.Sim.Locked(func() {
		for _, num := range nums {
			if labeledOnce(e.Repo.Issues[num]) {
				n++
			}
		}
	})
	return n
}

// labeledOnce: the issue carries the admission label, added once.
func labeledOnce(i *ghsim.Issue) bool {
	if i == nil {
		return false
	}
	adds := 0
	for _, ev := range i.Events {
		if ev.Event == "labeled" && ev.Label != nil && strings.EqualFold(ev.Label.Name, faultAdmission) {
			adds++
		}
	}
	has := slices.ContainsFunc(i.Labels, func(l *ghsim.Label) bool { return strings.EqualFold(l.Name, faultAdmission) })
	return adds == 1 && has
}

// waitFaultsSpent ends when the simulator has given every faulted answer.
func waitFaultsSpent(r *faultRun) (time.Time, error) {
	deadline := time.Now().Add(10 * time.Minute)
	for r.e.Sim.PendingFaults() > 0 {
		if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("%d faulted answers never asked for", r.e.Sim.PendingFaults())
		}
		time.Sleep(10 * time.Millisecond)
	}
	return time.Now(), nil
}

// endPrimaryWindow waits until warden holds the installation, watches for
// a while that nothing more is sent, then moves warden's and the
// simulator's clock past the hour.
func endPrimaryWindow(r *faultRun) (time.Time, error) {
	deadline := time.Now().Add(time.Minute)
	for len(r.e.Service.Dispatcher.Holds()) == 0 {
		if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("the installation was never held")
		}
		time.Sleep(10 * time.Millisecond)
	}
	held := sentRequests(r.e)
	watch := 5 * time.Second
	if r.quick {
		watch = 500 * time.Millisecond
	}
	time.Sleep(watch)
	r.note = fmt.Sprintf("%d requests sent in %s of the hold", sentRequests(r.e)-held, watch)
	r.clk.Advance(time.Hour + 5*time.Second)
	return time.Now(), nil
}

// endHung ends when the hung calls have all been asked for; its note is
// how long the items whose writes did not hang took meanwhile.
func endHung(r *faultRun) (time.Time, error) {
	start := time.Now()
	if _, err := waitFaultsSpent(r); err != nil {
		return time.Time{}, err
	}
	others := len(r.nums) - 10
	deadline := time.Now().Add(10 * time.Minute)
	for {
		labeled := countLabeledOnce(r.e, r.nums)
		if labeled >= others {
			r.note = fmt.Sprintf("the %d other items labelled %s after the first hang", others, time.Since(start).Round(100*time.Millisecond))
			return time.Now(), nil
		}
		if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("only %d of %d other items labelled", labeled, others)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
