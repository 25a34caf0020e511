package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wardenhq/warden/app"
	"github.com/wardenhq/warden/internal/clock"
	"github.com/wardenhq/warden/internal/config"
	"github.com/wardenhq/warden/internal/ghsim"
	"github.com/wardenhq/warden/internal/harness"
	"github.com/wardenhq/warden/webhooks"
)

// The GitHub API calls per delivery figure. GitHub's rate limit (5,000
// requests per hour per installation) is warden's scarce resource, so the
// bench replays a seeded, mixed workload through the GitHub simulator (every
// delivery real: signed, queued, stored in the inbox, dispatched) against the
// whole service, and counts the requests each delivery's handling made
// (service.Options.DeliveryCalls, through harness.Options.DeliveryCalls).
//
// Each act is settled before the next (every delivery it caused, and every
// delivery warden's own writes caused, is handled), so the REST exchanges
// the simulator saw during an act belong to that act's deliveries: they name
// the endpoints behind a figure that is over the floor.
//
// The floor, which each delivery is checked against (a delivery over it is
// printed, never fatal):
//   - reads: none where the payload holds the answer; one confirming read
//     (the label events) for a label delivery about the admission or
//     the parked label on an item;
//   - writes: one per change the contract requires of warden for the act
//     (a label re-added, a reaction, a label removed for /backlog admit), plus
//     at most one write of the item's report comment;
//   - deliveries caused by warden itself (group "self"): nothing.
//
// warden and the simulator run on the replay's own clock (three seconds per
// act), so a run repeats exactly; the delivery ids alone differ.

const (
	acItemLabel      = "backlog"
	acAdmissionLabel = "needs-specification"
	acParkedLabel    = "stale"
)

// acDelivery is one delivery: what the inbox stored, and the GitHub
// requests its handlings made (summed over tries).
type acDelivery struct {
	ID, Event, Action   string
	FromSelf            bool
	Handlings           int
	Reads, Writes, NotM int
	Step                int
	Number              int
	Sender              string
	Label               string // issues.labeled/unlabeled: the label's name
	Repos               int    // installation events: the repositories added
	Outcome             string // as the inbox recorded it
}

func (d *acDelivery) group() string {
	if d.FromSelf {
		return "self"
	}
	if d.Action == "" {
		return d.Event
	}
	return d.Event + "." + d.Action
}

// acExchange is one REST exchange the simulator served.
type acExchange struct {
	Step    int
	Method  string
	Pattern string
	Status  int
	Note    string // writes: which comment (report, park, ...)
}

func (x acExchange) read() bool { return x.Method == http.MethodGet || x.Method == http.MethodHead }

// appLevel: the App's own requests (JWT, installation tokens), not the
// installation's budget.
func (x acExchange) appLevel() bool { return strings.HasPrefix(x.Pattern, "/app") }

func (x acExchange) String() string {
	path := strings.TrimPrefix(x.Pattern, "/repos/{owner}/{repo}")
	if path == "" {
		path = "/repos/{owner}/{repo}"
	}
	s := x.Method + " " + path
	if x.Note != "" {
		s += " (" + x.Note + ")"
	}
	if x.Status >= 300 && x.Status != http.StatusNotModified {
		s += fmt.Sprintf(" → %d", x.Status)
	}
	return s
}

// acStep is one act of the workload.
type acStep struct {
	Name string
	// Want is the writes the contract requires of warden's handling of the
	// act's deliveries, besides the report comment.
	Want int
	// Outside: the act is an agent API call or the timer pass, whose
	// requests are no delivery's.
	Outside bool
	Number  int
}

type acComment struct {
	id      int64
	n       int
	by      *ghsim.Actor
	marker  bool
	deleted bool
}

type acRun struct {
	ctx context.Context
	e   *harness.Env
	clk *clock.Manual
	rng *rand.Rand

	step atomic.Int64
	mu   sync.Mutex
	dels map[string]*acDelivery
	ex   []acExchange
	// steps is indexed by step number (0: start-up, the installation).
	steps []acStep

	items    []int        // item issue numbers, in creation order
	isItem   map[int]bool // item-ness as the workload made it
	plain    []int        // issues that are no items
	comments []*acComment
	branches map[string]bool
	claimsOn map[int]int
	claimSeq int
	external int // non-self deliveries observed so far

	maria, tom, rita, olga           *ghsim.Actor
	builder, worker, pmBot, staleBot *ghsim.Actor
	humans, triagers                 []*ghsim.Actor
}

// benchAPICalls replays the workload (≥ 1,000 deliveries not caused by
// warden; 150 with quick) and returns the figures; it prints the per-group
// table, the request totals and every delivery over the floor.
func benchAPICalls(ctx context.Context, quick bool) ([]Figure, error) {
	target := 1000
	if quick {
		target = 150
	}
	r := &acRun{ctx: ctx, clk: clock.New(time.Now().UTC().Truncate(time.Second)), rng: rand.New(rand.NewPCG(20260906, 7)),
		dels: map[string]*acDelivery{}, steps: []acStep{{Name: "start-up (installation)", Outside: true}},
		isItem: map[int]bool{}, branches: map[string]bool{}, claimsOn: map[int]int{}}
	e, err := harness.Start(ctx, harness.Options{Now: r.clk.Now, DeliveryCalls: r.observe,
		Settings: func(s *config.Settings) { s.LogLevel = "warn" }})
	if err != nil {
		return nil, err
	}
	defer e.Close()
	r.e = e
	e.Sim.Observe(r.exchange, nil)
	start := time.Now()
	if err := r.cast(); err != nil {
		return nil, err
	}
	for r.externalSeen() < target {
		if err := r.act(); err != nil {
			return nil, fmt.Errorf("step %d (%s): %w", len(r.steps)-1, r.steps[len(r.steps)-1].Name, err)
		}
		if len(r.steps)%20 == 0 {
			// Every minute (twenty acts) the timer pass runs, as its
			// ticker would: coalesced report edits that came due.
			if err := r.do(acStep{Name: "timer pass", Outside: true}, func() error {
				_, err := e.Service.Mirror.Sweep(ctx)
				return err
			}); err != nil {
				return nil, fmt.Errorf("timer pass: %w", err)
			}
		}
	}
	// A last timer pass, a minute on, for the report edits still due.
	r.clk.Advance(time.Minute)
	if err := r.do(acStep{Name: "timer pass", Outside: true}, func() error {
		_, err := e.Service.Mirror.Sweep(ctx)
		return err
	}); err != nil {
		return nil, err
	}
	elapsed := time.Since(start)
	figs, err := r.results(elapsed)
	if err != nil {
		return nil, err
	}
	dfigs, err := benchDispatchCalls(ctx, quick)
	if err != nil {
		return nil, err
	}
	return append(figs, dfigs...), nil
}

// cast makes the people and agents of the workload.
func (r *acRun) cast() error {
	e := r.e
	r.maria = e.Person("maria", "maintain")
	r.tom = e.Person("tom", "triage")
	r.rita = e.Person("rita", "read")
	r.olga = e.Sim.As("olga")
	r.builder = r.agent("builder[bot]", "write")
	r.worker = r.agent("worker-7[bot]", "write")
	r.pmBot = r.agent("pm-agent[bot]", "write")
	r.staleBot = r.agent("stale[bot]", "write")
	r.humans = []*ghsim.Actor{r.maria, r.tom, r.rita, r.olga}
	r.triagers = []*ghsim.Actor{r.maria, r.tom}
	// A second repository joins the installation (the first did at
	// start-up, before the simulator's exchanges were watched): warden reads
	// its settings file and creates its three labels.
	return r.do(acStep{Name: "a repository is added to the installation", Want: 3}, func() error {
		e.Sim.AddRepo(e.Inst, e.Inst.Account.Login+"/tools", "main")
		return nil
	})
}

func (r *acRun) agent(login, role string) *ghsim.Actor {
	a := r.e.Sim.As(login)
	r.e.Sim.SetRole(r.e.Repo, login, role)
	return a
}

// observe is the service's DeliveryCalls: one handling of a delivery.
func (r *acRun) observe(d *webhooks.Delivery, c app.CallCounts) {
	r.mu.Lock()
	defer r.mu.Unlock()
	x := r.dels[d.ID]
	if x == nil {
		x = &acDelivery{ID: d.ID, Event: d.Event, Action: d.Meta.Action, FromSelf: d.FromSelf, Step: int(r.step.Load()),
			Number: d.Meta.Number, Sender: d.Meta.Sender, Label: labelOf(d), Repos: reposOf(d)}
		r.dels[d.ID] = x
		if !d.FromSelf {
			r.external++
		}
	}
	x.Handlings++
	x.Reads += c.Reads
	x.Writes += c.Writes
	x.NotM += c.NotModified
}

func (r *acRun) externalSeen() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.external
}

// exchange is the simulator's REST observer.
func (r *acRun) exchange(x ghsim.Exchange) {
	note := ""
	if (x.Method == http.MethodPost || x.Method == http.MethodPatch) && strings.Contains(x.Pattern, "/comments") && !strings.HasSuffix(x.Pattern, "/reactions") {
		var b struct {
			Body string `json:"body"`
		}
		if json.Unmarshal(x.Request, &b) == nil && b.Body != "" {
			switch {
			case strings.HasPrefix(b.Body, "<!-- backlog-warden: report "):
				note = "report comment"
			case strings.HasPrefix(b.Body, "<!-- backlog-warden: park "):
				note = "park comment"
			case strings.HasPrefix(b.Body, "<!-- backlog-worker: claim "):
				note = "claim marker"
			default:
				note = "comment"
			}
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ex = append(r.ex, acExchange{Step: int(r.step.Load()), Method: x.Method, Pattern: x.Pattern, Status: x.Status, Note: note})
}

func labelOf(d *webhooks.Delivery) string {
	if d.Event != "issues" || (d.Meta.Action != "labeled" && d.Meta.Action != "unlabeled") {
		return ""
	}
	var p struct {
		Label struct {
			Name string `json:"name"`
		} `json:"label"`
	}
	_ = json.Unmarshal(d.Payload, &p)
	return p.Label.Name
}

func reposOf(d *webhooks.Delivery) int {
	if !strings.HasPrefix(d.Event, "installation") {
		return 0
	}
	var p struct {
		Repositories      []json.RawMessage `json:"repositories"`
		RepositoriesAdded []json.RawMessage `json:"repositories_added"`
	}
	_ = json.Unmarshal(d.Payload, &p)
	return len(p.Repositories) + len(p.RepositoriesAdded)
}

// do runs one act as its own step, three seconds after the previous one,
// and waits until everything it caused was handled.
func (r *acRun) do(s acStep, f func() error) error {
	r.clk.Advance(3 * time.Second)
	r.mu.Lock()
	r.steps = append(r.steps, s)
	r.step.Store(int64(len(r.steps) - 1))
	r.mu.Unlock()
	if err := f(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(r.ctx, 60*time.Second)
	defer cancel()
	return r.settle(ctx)
}

// settle waits until everything the last act caused was handled: three
// looks 2 ms apart (Settle's 15 ms would make the replay several times
// slower).
func (r *acRun) settle(ctx context.Context) error { return r.e.SettleQuiet(ctx, 3, 2*time.Millisecond) }
