package mirror

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-github/v66/github"

	"github.com/wardenhq/warden/app"
	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/internal/clock"
	"github.com/wardenhq/warden/internal/db"
	"github.com/wardenhq/warden/internal/ghsim"
	"github.com/wardenhq/warden/mirror/store"
)

// ---- harness: the simulator over real HTTP, a counting transport, a store ----

// countingTransport counts the requests that reach the wire, by kind.
type countingTransport struct {
	base                     http.RoundTripper
	total, contents, compare atomic.Int64
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.total.Add(1)
	switch {
	case strings.Contains(r.URL.Path, "/contents/"):
		c.contents.Add(1)
	case strings.Contains(r.URL.Path, "/compare/"):
		c.compare.Add(1)
	}
	return c.base.RoundTrip(r)
}

type settingsEnv struct {
	t      *testing.T
	ctx    context.Context
	clock  *clock.Manual
	sim    *ghsim.Sim
	ghRepo *ghsim.Repo
	calls  *countingTransport
	app    *app.App
	dbPath string
	d      *db.DB
	store  *SettingsStore
	repo   store.Repo

	mu     sync.Mutex
	pushes []SettingsPush // every push delivery the simulator sent, parsed
}

// WARDEN_AGENTS of the tests.
var settingsTestAgents = []string{"agent-7"}

func newSettingsEnv(t *testing.T) *settingsEnv {
	t.Helper()
	e := &settingsEnv{t: t, ctx: context.Background(), clock: clock.New(time.Now().UTC().Truncate(time.Second))}
	sim, err := ghsim.New(ghsim.Options{Now: e.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	sim.Observe(nil, func(d ghsim.Delivered) {
		if d.Event != "push" {
			return
		}
		p, err := SettingsPushFromPayload(d.Payload)
		if err != nil {
			t.Errorf("simulator push payload: %v", err)
			return
		}
		e.mu.Lock()
		e.pushes = append(e.pushes, p)
		e.mu.Unlock()
	})
	srv := sim.Start()
	t.Cleanup(func() { srv.Close(); sim.Close() })
	e.sim = sim
	e.calls = &countingTransport{base: http.DefaultTransport}
	e.app, err = app.New(app.Config{AppID: sim.AppID(), PrivateKey: sim.PrivateKeyPEM(), BaseURL: srv.URL + "/",
		Transport: e.calls, Retries: -1, MaxWait: -1, Logger: discardLog()})
	if err != nil {
		t.Fatal(err)
	}
	in := sim.Install("acme", "installer")
	e.ghRepo = sim.AddRepo(in, "acme/app", "main")
	e.repo = store.Repo{ID: e.ghRepo.ID, FullName: "acme/app", Installation: in.ID, DefaultBranch: "main"}
	e.dbPath = filepath.Join(t.TempDir(), "settings.db")
	e.reopen()
	t.Cleanup(func() { e.d.Close() })
	return e
}

func discardLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// reopen closes the database and opens a new store on it: a restart.
func (e *settingsEnv) reopen() {
	e.t.Helper()
	if e.d != nil {
		e.d.Close()
	}
	d, err := db.Open(e.ctx, "sqlite:"+e.dbPath)
	if err != nil {
		e.t.Fatal(err)
	}
	e.d = d
	e.store, err = OpenSettingsStore(testStore(e.t, d), e.app, settingsTestAgents, discardLog())
	if err != nil {
		e.t.Fatal(err)
	}
}

// push has login push files to branch (one commit) and returns the push
// delivery the simulator sent for it.
func (e *settingsEnv) push(login, branch string, files map[string]string) SettingsPush {
	e.t.Helper()
	if _, err := e.sim.As(login).Push(e.ghRepo, branch, "", files, "change by "+login); err != nil {
		e.t.Fatal(err)
	}
	return e.lastPush()
}

func (e *settingsEnv) lastPush() SettingsPush {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.ctx, 10*time.Second)
	defer cancel()
	if err := e.sim.Flush(ctx); err != nil {
		e.t.Fatal(err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.pushes) == 0 {
		e.t.Fatal("the simulator sent no push")
	}
	return e.pushes[len(e.pushes)-1]
}

func (e *settingsEnv) onPush(p SettingsPush) string {
	e.t.Helper()
	out, err := e.store.OnPush(e.ctx, e.repo, p)
	if err != nil {
		e.t.Fatalf("OnPush: %v", err)
	}
	return out
}

func (e *settingsEnv) load() string {
	e.t.Helper()
	out, err := e.store.Load(e.ctx, e.repo)
	if err != nil {
		e.t.Fatalf("Load: %v", err)
	}
	return out
}

func (e *settingsEnv) problems() []SettingsProblem {
	e.t.Helper()
	p, err := e.store.Problems(e.ctx, e.repo.ID)
	if err != nil {
		e.t.Fatal(err)
	}
	return p
}

// codes lists the problems as "code field", sorted.
func codes(ps []SettingsProblem) []string {
	out := []string{}
	for _, p := range ps {
		out = append(out, strings.TrimSpace(p.Code+" "+p.Key))
	}
	slices.Sort(out)
	return out
}

func threshold(n int) string { return fmt.Sprintf("poison_threshold: %d\n", n) }

func withThreshold(n int) gating.Settings {
	s := gating.DefaultSettings()
	s.PoisonThreshold = n
	return s
}

// ---- Load and Get ----

func TestSettingsLoad(t *testing.T) {
	valid := gating.DefaultSettings()
	valid.ItemLabel, valid.PoisonThreshold, valid.Agents, valid.Dashboard = "task", 5, []string{"helper"}, true
	cases := []struct {
		name     string
		file     string // "" = no file
		want     gating.Settings
		problems []string
		outcome  string
	}{
		{name: "absent file is the defaults", want: gating.DefaultSettings(), problems: []string{}, outcome: "no .github/backlog.yml"},
		{name: "valid file takes effect", file: "labels:\n  item: task\npoison_threshold: 5\nagents: [helper]\ndashboard: true\n",
			want: valid, problems: []string{}, outcome: "poison_threshold 3 → 5"},
		{name: "malformed file keeps the defaults", file: "labels: [\n", want: gating.DefaultSettings(),
			problems: []string{SettingsInvalid}, outcome: "1 problem"},
		{name: "invalid field keeps its default, others count", file: "poison_threshold: lots\ndry_run: true\n",
			want:     func() gating.Settings { s := gating.DefaultSettings(); s.DryRun = true; return s }(),
			problems: []string{SettingsInvalid + " poison_threshold"}, outcome: "dry_run false → true"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newSettingsEnv(t)
			if c.file != "" {
				e.push("alice", "main", map[string]string{SettingsPath: c.file})
			}
			before := e.calls.total.Load()
			if got := e.store.Get(e.ctx, e.repo); !reflect.DeepEqual(got, gating.DefaultSettings()) {
				t.Errorf("Get before Load = %+v, want the defaults", got)
			}
			if n := e.calls.total.Load() - before; n != 0 {
				t.Errorf("Get before Load made %d GitHub requests, want none", n)
			}
			out := e.load()
			if !strings.Contains(out, c.outcome) {
				t.Errorf("outcome %q does not say %q", out, c.outcome)
			}
			if n := e.calls.contents.Load(); n != 1 {
				t.Errorf("Load made %d contents requests, want 1", n)
			}
			if got := e.store.Get(e.ctx, e.repo); !reflect.DeepEqual(got, c.want) {
				t.Errorf("Get = %+v\nwant  %+v", got, c.want)
			}
			if got := codes(e.problems()); !reflect.DeepEqual(got, c.problems) {
				t.Errorf("problems = %v, want %v", got, c.problems)
			}
			calls := e.calls.total.Load()
			e.store.Get(e.ctx, e.repo)
			if n := e.calls.total.Load() - calls; n != 0 {
				t.Errorf("Get after Load made %d GitHub requests, want none", n)
			}
		})
	}
}

// A Load on a repository that already has settings does not let the file
// override them: nothing says a human made it differ.
func TestSettingsLoadAgainDoesNotOverride(t *testing.T) {
	e := newSettingsEnv(t)
	e.push("alice", "main", map[string]string{SettingsPath: threshold(5)})
	e.load()
	// A change the store never heard of (the delivery was lost).
	e.push("worker[bot]", "main", map[string]string{SettingsPath: threshold(9)})
	out := e.load()
	if got := e.store.Get(e.ctx, e.repo); got.PoisonThreshold != 5 {
		t.Errorf("threshold = %d after a second Load (%s), want 5 to stay", got.PoisonThreshold, out)
	}
	if got := codes(e.problems()); !reflect.DeepEqual(got, []string{SettingsChangedByAgent + " poison_threshold"}) {
		t.Errorf("problems = %v, want the unattributed change reported", got)
	}
	// The file put back: nothing is pending any more.
	e.push("alice", "main", map[string]string{SettingsPath: threshold(5) + "# same\n"})
	e.load()
	if got := codes(e.problems()); len(got) != 0 {
		t.Errorf("problems = %v after the file agrees again, want none", got)
	}
}

// ---- OnPush: the human-push rule ----

func TestSettingsOnPushWhoPushed(t *testing.T) {
	type act func(e *settingsEnv) SettingsPush
	pushAs := func(login, file string) act {
		return func(e *settingsEnv) SettingsPush {
			return e.push(login, "main", map[string]string{SettingsPath: file})
		}
	}
	mergeAs := func(author, merger, file string) act {
		return func(e *settingsEnv) SettingsPush {
			e.push(author, "change", map[string]string{SettingsPath: file})
			pr, err := e.sim.As(author).OpenPR(e.ghRepo, "change", "main", "settings", "", false)
			if err != nil {
				e.t.Fatal(err)
			}
			if _, err := e.sim.As(merger).MergePR(e.ghRepo, pr.Issue.Number, "merge"); err != nil {
				e.t.Fatal(err)
			}
			return e.lastPush()
		}
	}
	refused := []string{SettingsChangedByAgent + " poison_threshold"}
	cases := []struct {
		name      string
		initial   string // the file loaded first
		act       act
		recorded  string // a login IsRecordedAgent names
		want      gating.Settings
		problems  []string
		outcome   string
		wantHuman bool
	}{
		{name: "human push takes effect", act: pushAs("alice", threshold(7)), want: withThreshold(7), problems: []string{},
			outcome: "settings changed by alice"},
		{name: "Bot account push is refused", act: pushAs("worker[bot]", threshold(7)), want: withThreshold(5), problems: refused,
			outcome: "an account of type Bot"},
		{name: "Bot account without [bot] in its login is refused", act: func(e *settingsEnv) SettingsPush {
			e.sim.AddUser("robo", ghsim.TypeBot)
			return pushAs("robo", threshold(7))(e)
		}, want: withThreshold(5), problems: refused, outcome: "an account of type Bot"},
		{name: "a push that makes its pusher an agent is an agent's", act: pushAs("dave", threshold(7)+"agents: [dave]\n"),
			want: withThreshold(5), problems: []string{SettingsChangedByAgent + " agents", SettingsChangedByAgent + " poison_threshold"},
			outcome: "dave is a configured agent"},
		{name: "WARDEN_AGENTS login push is refused", act: pushAs("agent-7", threshold(7)), want: withThreshold(5), problems: refused,
			outcome: "agent-7 is a configured agent"},
		{name: "repository agents: login push is refused", initial: threshold(5) + "agents: [helper]\n",
			act: pushAs("helper", threshold(7)+"agents: [helper]\n"), want: func() gating.Settings {
				s := withThreshold(5)
				s.Agents = []string{"helper"}
				return s
			}(), problems: refused, outcome: "helper is a configured agent"},
		{name: "an agent cannot leave agents: in its own push", initial: threshold(5) + "agents: [helper]\n",
			act: pushAs("helper", threshold(7)), want: func() gating.Settings {
				s := withThreshold(5)
				s.Agents = []string{"helper"}
				return s
			}(), problems: []string{SettingsChangedByAgent + " agents", SettingsChangedByAgent + " poison_threshold"}, outcome: "refused"},
		{name: "recorded agent push is refused", recorded: "carol", act: pushAs("carol", threshold(7)), want: withThreshold(5),
			problems: refused, outcome: "carol is a recorded agent"},
		{name: "ghost push is refused", act: pushAs("ghost", threshold(7)), want: withThreshold(5), problems: refused,
			outcome: "the ghost account"},
		{name: "human merge of a bot's pull request takes effect", act: mergeAs("worker[bot]", "alice", threshold(7)),
			want: withThreshold(7), problems: []string{}, outcome: "settings changed by alice"},
		{name: "bot merge of a human's pull request is refused", act: mergeAs("alice", "merger[bot]", threshold(7)),
			want: withThreshold(5), problems: refused, outcome: "refused"},
		{name: "human push of malformed YAML keeps the last good", act: pushAs("alice", "poison_threshold: [\n"),
			want: withThreshold(5), problems: []string{SettingsInvalid}, outcome: "1 problem"},
		{name: "human push of one bad field keeps its last good value", act: pushAs("alice", "poison_threshold: -1\ndashboard: false\n"),
			want:     func() gating.Settings { s := withThreshold(5); s.Dashboard = false; return s }(),
			problems: []string{SettingsInvalid + " poison_threshold"}, outcome: "dashboard true → false"},
		{name: "human deleting the file restores the defaults", act: pushAs("alice", ""), want: gating.DefaultSettings(), problems: []string{},
			outcome: "poison_threshold 5 → 3"},
		{name: "bot deleting the file is refused", act: pushAs("worker[bot]", ""), want: withThreshold(5), problems: refused,
			outcome: "refused"},
		{name: "human push over 64 KiB keeps the last good", act: pushAs("alice", threshold(9)+"#"+strings.Repeat("x", MaxSettingsFileSize)+"\n"),
			want: withThreshold(5), problems: []string{SettingsInvalid}, outcome: "1 problem"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newSettingsEnv(t)
			if c.recorded != "" {
				e.store.IsRecordedAgent = func(_ int64, l string) bool { return strings.EqualFold(l, c.recorded) }
			}
			initial := c.initial
			if initial == "" {
				initial = threshold(5)
			}
			e.push("alice", "main", map[string]string{SettingsPath: initial})
			e.load()
			before := e.store.Get(e.ctx, e.repo)
			e.clock.Advance(time.Second)
			p := c.act(e)
			if !p.Touched {
				t.Fatalf("push %+v does not touch %s", p, SettingsPath)
			}
			contents := e.calls.contents.Load()
			out := e.onPush(p)
			if !strings.Contains(out, c.outcome) {
				t.Errorf("outcome %q does not say %q", out, c.outcome)
			}
			if n := e.calls.contents.Load() - contents; n != 1 {
				t.Errorf("OnPush made %d contents requests, want 1", n)
			}
			got := e.store.Get(e.ctx, e.repo)
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("Get = %+v\nwant  %+v\n(before %+v)", got, c.want, before)
			}
			if gotP := codes(e.problems()); !reflect.DeepEqual(gotP, c.problems) {
				t.Errorf("problems = %v, want %v", gotP, c.problems)
			}
		})
	}
}

// The finding names the field, its value and the value it would take.
func TestSettingsRefusalDetail(t *testing.T) {
	e := newSettingsEnv(t)
	e.push("alice", "main", map[string]string{SettingsPath: threshold(5)})
	e.load()
	e.onPush(e.push("worker[bot]", "main", map[string]string{SettingsPath: threshold(8)}))
	ps := e.problems()
	if len(ps) != 1 || !strings.Contains(ps[0].String(), "from 5 to 8") {
		t.Fatalf("problems = %+v, want one naming 5 and 8", ps)
	}
	// A human's later push of the same file takes effect and clears it.
	e.clock.Advance(time.Second)
	e.onPush(e.push("alice", "main", map[string]string{SettingsPath: threshold(8) + "# ok\n"}))
	if got := e.store.Get(e.ctx, e.repo).PoisonThreshold; got != 8 {
		t.Errorf("threshold = %d after the human push, want 8", got)
	}
	if ps := e.problems(); len(ps) != 0 {
		t.Errorf("problems = %+v after the human push, want none", ps)
	}
}

// ---- OnPush: what it leaves alone ----

func TestSettingsOnPushIgnores(t *testing.T) {
	cases := []struct {
		name    string
		branch  string
		files   map[string]string
		outcome string
		calls   int64 // a push to another branch that lists the file has it read, for its check run
	}{
		{"push to another branch", "feature", map[string]string{SettingsPath: threshold(9)}, "not a push to the default branch; .github/backlog.yml checked", 1},
		{"push to another branch not touching the file", "feature", map[string]string{"README.md": "hello\n"}, "not a push to the default branch", 0},
		{"push not touching the file", "main", map[string]string{"README.md": "hello\n"}, "not touched", 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newSettingsEnv(t)
			e.push("alice", "main", map[string]string{SettingsPath: threshold(5)})
			e.load()
			e.clock.Advance(time.Second)
			p := e.push("alice", c.branch, c.files)
			calls := e.calls.total.Load()
			out := e.onPush(p)
			if !strings.Contains(out, c.outcome) {
				t.Errorf("outcome %q does not say %q", out, c.outcome)
			}
			if n := e.calls.total.Load() - calls; n != c.calls {
				t.Errorf("OnPush made %d GitHub requests, want %d", n, c.calls)
			}
			if got := e.store.Get(e.ctx, e.repo); got.PoisonThreshold != 5 {
				t.Errorf("threshold = %d, want 5", got.PoisonThreshold)
			}
		})
	}
}

func TestSettingsSamePushTwice(t *testing.T) {
	for _, who := range []string{"alice", "worker[bot]"} {
		t.Run(who, func(t *testing.T) {
			e := newSettingsEnv(t)
			e.push("alice", "main", map[string]string{SettingsPath: threshold(5)})
			e.load()
			e.clock.Advance(time.Second)
			p := e.push(who, "main", map[string]string{SettingsPath: threshold(7)})
			e.onPush(p)
			settings, problems := e.store.Get(e.ctx, e.repo), e.problems()
			version := e.rowVersion()
			calls := e.calls.total.Load()
			out := e.onPush(p)
			if !strings.Contains(out, "already judged") {
				t.Errorf("second outcome %q, want already judged", out)
			}
			if n := e.calls.total.Load() - calls; n != 0 {
				t.Errorf("the second handling made %d GitHub requests, want none", n)
			}
			if v := e.rowVersion(); v != version {
				t.Errorf("the second handling wrote the row (version %d → %d)", version, v)
			}
			if got := e.store.Get(e.ctx, e.repo); !reflect.DeepEqual(got, settings) {
				t.Errorf("settings changed: %+v → %+v", settings, got)
			}
			if got := e.problems(); !reflect.DeepEqual(got, problems) {
				t.Errorf("problems changed: %+v → %+v", problems, got)
			}
		})
	}
}

func (e *settingsEnv) rowVersion() int64 {
	e.t.Helper()
	row, found, err := e.store.rows.Get(e.ctx, e.repo.ID)
	if err != nil {
		e.t.Fatal(err)
	}
	if !found {
		e.t.Fatal("no settings row")
	}
	return row.Version
}

// ---- out-of-order deliveries ----

func TestSettingsOlderPushIgnored(t *testing.T) {
	for _, c := range []struct {
		name     string
		gap      time.Duration // between the two pushes; 0: the same second (the commit graph orders them)
		compares int64
	}{{"a later second", 2 * time.Second, 0}, {"the same second", 0, 1}} {
		t.Run(c.name, func(t *testing.T) {
			e := newSettingsEnv(t)
			e.load()
			e.clock.Advance(time.Second)
			older := e.push("alice", "main", map[string]string{SettingsPath: threshold(6)})
			e.clock.Advance(c.gap)
			newer := e.push("alice", "main", map[string]string{SettingsPath: threshold(7)})
			e.onPush(newer)
			compares := e.calls.compare.Load()
			out := e.onPush(older)
			if !strings.Contains(out, "older") {
				t.Errorf("outcome %q, want the older push ignored", out)
			}
			if got := e.store.Get(e.ctx, e.repo).PoisonThreshold; got != 7 {
				t.Errorf("threshold = %d, want 7 (the newer push)", got)
			}
			if n := e.calls.compare.Load() - compares; n != c.compares {
				t.Errorf("%d compare requests, want %d", n, c.compares)
			}
		})
	}
}

// An agent's push judged first, then an older human push delivered late:
// the human's change takes effect, and the agent's newer file is still
// reported against it.
func TestSettingsLateHumanPushBeforeAgentPush(t *testing.T) {
	e := newSettingsEnv(t)
	e.load()
	e.clock.Advance(time.Second)
	human := e.push("alice", "main", map[string]string{SettingsPath: threshold(6)})
	e.clock.Advance(time.Second)
	agent := e.push("worker[bot]", "main", map[string]string{SettingsPath: threshold(9)})
	e.onPush(agent)
	if got := e.store.Get(e.ctx, e.repo).PoisonThreshold; got != 3 {
		t.Fatalf("threshold = %d after the agent's push, want 3", got)
	}
	e.onPush(human)
	if got := e.store.Get(e.ctx, e.repo).PoisonThreshold; got != 6 {
		t.Errorf("threshold = %d after the human's push, want 6", got)
	}
	ps := e.problems()
	if len(ps) != 1 || ps[0].Code != SettingsChangedByAgent || !strings.Contains(ps[0].String(), "from 6 to 9") {
		t.Errorf("problems = %+v, want the agent's change judged against 6", ps)
	}
	// The human's push delivered again changes nothing.
	if out := e.onPush(human); !strings.Contains(out, "already judged") {
		t.Errorf("redelivery: %q", out)
	}
}

// ---- durability ----

func TestSettingsSurviveRestart(t *testing.T) {
	e := newSettingsEnv(t)
	e.push("alice", "main", map[string]string{SettingsPath: "labels:\n  item: task\npoison_threshold: 4\nagents: [helper]\n"})
	e.load()
	e.clock.Advance(time.Second)
	agentPush := e.push("worker[bot]", "main", map[string]string{SettingsPath: "labels:\n  item: task\npoison_threshold: 9\nagents: [helper]\n"})
	e.onPush(agentPush)
	settings, problems := e.store.Get(e.ctx, e.repo), e.problems()
	if len(problems) == 0 {
		t.Fatal("no finding before the restart")
	}
	e.reopen()
	calls := e.calls.total.Load()
	if got := e.store.Get(e.ctx, e.repo); !reflect.DeepEqual(got, settings) {
		t.Errorf("after restart Get = %+v, want %+v", got, settings)
	}
	if got := e.problems(); !reflect.DeepEqual(got, problems) {
		t.Errorf("after restart problems = %+v, want %+v", got, problems)
	}
	if n := e.calls.total.Load() - calls; n != 0 {
		t.Errorf("a restarted Get made %d GitHub requests, want none", n)
	}
	if out := e.onPush(agentPush); !strings.Contains(out, "already judged") {
		t.Errorf("a redelivery after restart: %q, want already judged", out)
	}
}

// Every gating.Settings field survives the table.
func TestSettingsRoundTripEveryField(t *testing.T) {
	e := newSettingsEnv(t)
	s := gating.Settings{ItemLabel: "i", AdmissionLabel: "a", ParkedLabel: "p", PoisonThreshold: 9, Agents: []string{"x", "y"},
		RulingOwner: "boss", DefaultPriority: "P0", DefaultPhase: "research", CheckRun: false, RequireItem: true,
		Dashboard: false, PostMarkers: true, DryRun: true, MaxClaimsPerOwner: 3,
		AgentAssignees: []string{"z"}, AgentLease: 5 * time.Minute}
	def := reflect.ValueOf(gating.DefaultSettings())
	v := reflect.ValueOf(s)
	for i := 0; i < v.NumField(); i++ {
		if reflect.DeepEqual(v.Field(i).Interface(), def.Field(i).Interface()) {
			t.Fatalf("test value leaves %s at its default: set it", v.Type().Field(i).Name)
		}
	}
	rec := settingsRecord{settings: s, problems: []SettingsProblem{{Code: SettingsInvalid, Line: 2, Key: "f", Message: "d", Suggestion: "g"}}, sourceSHA: "abc", pushedAt: 7, changedBy: "alice",
		pending: &settingsFile{SHA: "def", PushedAt: 8, By: "bot", Content: []byte("\xff\x00 not utf-8")}}
	if ok, err := e.store.save(e.ctx, e.repo.ID, settingsRecord{}, false, rec); err != nil || !ok {
		t.Fatalf("save: %v %v", ok, err)
	}
	e.reopen()
	got, found, err := e.store.read(e.ctx, e.repo.ID)
	if err != nil || !found {
		t.Fatalf("read: %v %v", found, err)
	}
	rec.version = 1
	if !reflect.DeepEqual(got, rec) {
		t.Errorf("read back\n%+v\nwant\n%+v", got, rec)
	}
	if got := e.store.Get(e.ctx, e.repo); !reflect.DeepEqual(got, s) {
		t.Errorf("Get = %+v, want %+v", got, s)
	}
}

// A writer that read an old version does not overwrite a newer write
// (another replica's).
func TestSettingsSaveIsFenced(t *testing.T) {
	e := newSettingsEnv(t)
	e.load()
	prev, found, err := e.store.read(e.ctx, e.repo.ID)
	if err != nil || !found {
		t.Fatal(found, err)
	}
	other, err := OpenSettingsStore(testStore(t, e.d), e.app, nil, discardLog())
	if err != nil {
		t.Fatal(err)
	}
	first := prev
	first.settings = withThreshold(4)
	if ok, err := other.save(e.ctx, e.repo.ID, prev, true, first); err != nil || !ok {
		t.Fatalf("first save: %v %v", ok, err)
	}
	second := prev
	second.settings = withThreshold(8)
	if ok, err := e.store.save(e.ctx, e.repo.ID, prev, true, second); err != nil || ok {
		t.Fatalf("stale save: ok=%v err=%v, want refused", ok, err)
	}
	if ok, err := e.store.save(e.ctx, e.repo.ID, settingsRecord{}, false, second); err != nil || ok {
		t.Fatalf("stale insert: ok=%v err=%v, want refused", ok, err)
	}
	e.store.ttl = 0
	if got := e.store.Get(e.ctx, e.repo).PoisonThreshold; got != 4 {
		t.Errorf("threshold = %d, want 4 (the first writer's)", got)
	}
}

func TestSettingsForget(t *testing.T) {
	e := newSettingsEnv(t)
	e.push("alice", "main", map[string]string{SettingsPath: "poison_threshold: [\n"})
	e.load()
	if len(e.problems()) == 0 {
		t.Fatal("no problem to forget")
	}
	if err := e.store.Forget(e.ctx, e.repo.ID); err != nil {
		t.Fatal(err)
	}
	if got := e.problems(); len(got) != 0 {
		t.Errorf("problems after Forget = %+v", got)
	}
	e.reopen()
	if got := e.store.Get(e.ctx, e.repo); !reflect.DeepEqual(got, gating.DefaultSettings()) {
		t.Errorf("Get after Forget and restart = %+v, want the defaults", got)
	}
}

// ---- failures: nothing changes, the error is returned ----

func TestSettingsGitHubErrors(t *testing.T) {
	e := newSettingsEnv(t)
	e.push("alice", "main", map[string]string{SettingsPath: threshold(5)})
	e.load()
	version := e.rowVersion()
	e.clock.Advance(time.Second)
	p := e.push("alice", "main", map[string]string{SettingsPath: threshold(7)})

	e.sim.FailNext(1, http.StatusInternalServerError, http.MethodGet, "/repos/acme/app/contents/")
	if out, err := e.store.OnPush(e.ctx, e.repo, p); err == nil {
		t.Fatalf("OnPush with GitHub answering 500: %q, want an error", out)
	}
	unknown := p
	unknown.After = strings.Repeat("e", 40)
	if out, err := e.store.OnPush(e.ctx, e.repo, unknown); err == nil || !strings.Contains(err.Error(), "does not know the commit") {
		t.Fatalf("OnPush at a commit GitHub does not know: %q, %v; want an error (not an absent file)", out, err)
	}
	if v := e.rowVersion(); v != version {
		t.Errorf("a failed read wrote the row (version %d → %d)", version, v)
	}
	e.store.ttl = 0
	if got := e.store.Get(e.ctx, e.repo).PoisonThreshold; got != 5 {
		t.Errorf("threshold = %d after failures, want 5", got)
	}
	if ps := e.problems(); len(ps) != 0 {
		t.Errorf("problems = %+v after failures, want none", ps)
	}
	// The dispatcher's retry succeeds.
	if out := e.onPush(p); !strings.Contains(out, "settings changed by alice") {
		t.Errorf("retry: %q", out)
	}
	if got := e.store.Get(e.ctx, e.repo).PoisonThreshold; got != 7 {
		t.Errorf("threshold = %d after the retry, want 7", got)
	}

	// Load: a 500 stores nothing.
	f := newSettingsEnv(t)
	f.push("alice", "main", map[string]string{SettingsPath: threshold(5)})
	f.sim.FailNext(1, http.StatusInternalServerError, http.MethodGet, "/repos/acme/app/contents/")
	if out, err := f.store.Load(f.ctx, f.repo); err == nil {
		t.Fatalf("Load with GitHub answering 500: %q, want an error", out)
	}
	var n int
	_, found, err := f.store.rows.Get(f.ctx, f.repo.ID)
	if found {
		n = 1
	}
	if err != nil || n != 0 {
		t.Errorf("rows after a failed Load: %d (%v), want 0", n, err)
	}
	if got := f.store.Get(f.ctx, f.repo); !reflect.DeepEqual(got, gating.DefaultSettings()) {
		t.Errorf("Get after a failed Load = %+v, want the defaults", got)
	}
}

// fixedClients serves one go-github client (for a fake GitHub).
type fixedClients struct{ c *github.Client }

func (f fixedClients) Installation(int64) (*github.Client, error) { return f.c, nil }

// Content GitHub sends that cannot be decoded is settings-invalid, the last
// good settings stay.
func TestSettingsUndecodableContent(t *testing.T) {
	var body atomic.Value
	body.Store(`{"type":"file","encoding":"base64","size":18,"name":"backlog.yml","path":".github/backlog.yml","content":"cG9pc29uX3RocmVzaG9sZDogNQo="}`)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, body.Load().(string))
	}))
	defer srv.Close()
	gh := github.NewClient(srv.Client())
	gh.BaseURL, _ = gh.BaseURL.Parse(srv.URL + "/")
	ctx := context.Background()
	d, err := db.Open(ctx, "sqlite:"+filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	s, err := OpenSettingsStore(testStore(t, d), fixedClients{gh}, nil, discardLog())
	if err != nil {
		t.Fatal(err)
	}
	r := store.Repo{ID: 1, FullName: "acme/app", Installation: 1, DefaultBranch: "main"}
	if _, err := s.Load(ctx, r); err != nil {
		t.Fatal(err)
	}
	if got := s.Get(ctx, r).PoisonThreshold; got != 5 {
		t.Fatalf("threshold = %d after Load, want 5", got)
	}
	for i, c := range []struct{ name, body, detail string }{
		{"bad base64", `{"type":"file","encoding":"base64","size":18,"content":"%%%not base64%%%"}`, "cannot be decoded"},
		{"encoding none", `{"type":"file","encoding":"none","size":20,"content":""}`, "cannot be decoded"},
		{"over the size limit", `{"type":"file","encoding":"none","size":2000000,"content":""}`, "2000000 bytes, over the 65536"},
		{"a directory", `[{"type":"file","name":"x","path":".github/backlog.yml/x"}]`, "is a directory"},
	} {
		t.Run(c.name, func(t *testing.T) {
			body.Store(c.body)
			p := SettingsPush{Ref: "refs/heads/main", After: fmt.Sprintf("%040d", i+1), PusherLogin: "alice",
				SenderLogin: "alice", SenderType: "User", Touched: true, PushedAt: time.Now().Add(time.Duration(i+1) * time.Hour)}
			if _, err := s.OnPush(ctx, r, p); err != nil {
				t.Fatal(err)
			}
			if got := s.Get(ctx, r).PoisonThreshold; got != 5 {
				t.Errorf("threshold = %d, want 5 to stay", got)
			}
			ps, err := s.Problems(ctx, r.ID)
			if err != nil || len(ps) != 1 || ps[0].Code != SettingsInvalid || !strings.Contains(ps[0].String(), c.detail) {
				t.Errorf("problems = %+v (%v), want one settings-invalid saying %q", ps, err, c.detail)
			}
		})
	}
}

// Concurrent handling of the same pushes settles on one answer.
func TestSettingsConcurrentPushes(t *testing.T) {
	e := newSettingsEnv(t)
	e.load()
	e.clock.Advance(time.Second)
	a := e.push("alice", "main", map[string]string{SettingsPath: threshold(6)})
	e.clock.Advance(time.Second)
	b := e.push("alice", "main", map[string]string{SettingsPath: threshold(7)})
	other, err := OpenSettingsStore(testStore(t, e.d), e.app, settingsTestAgents, discardLog()) // a second replica
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, p := e.store, a
			if i%2 == 1 {
				s = other
			}
			if i%3 == 0 {
				p = b
			}
			if _, err := s.OnPush(e.ctx, e.repo, p); err != nil {
				t.Error(err)
			}
			s.Get(e.ctx, e.repo)
		}()
	}
	wg.Wait()
	e.store.ttl = 0
	if got := e.store.Get(e.ctx, e.repo).PoisonThreshold; got != 7 {
		t.Errorf("threshold = %d, want 7 (the newer push)", got)
	}
}

// ---- the payload parser ----

func TestSettingsPushFromPayload(t *testing.T) {
	commit := func(added, modified, removed []string) map[string]any {
		return map[string]any{"id": "c", "distinct": true, "timestamp": "2030-01-02T03:04:05Z", "added": added, "modified": modified, "removed": removed}
	}
	payload := func(mod func(m map[string]any)) []byte {
		m := map[string]any{
			"ref": "refs/heads/main", "before": strings.Repeat("a", 40), "after": strings.Repeat("b", 40),
			"created": false, "deleted": false, "forced": false,
			"commits":     []any{commit([]string{"x.go"}, nil, nil)},
			"head_commit": commit([]string{"x.go"}, nil, nil),
			"pusher":      map[string]any{"name": "alice", "email": "a@example.com"},
			"sender":      map[string]any{"login": "alice", "type": "User"},
			"repository":  map[string]any{"pushed_at": 1893553445},
		}
		if mod != nil {
			mod(m)
		}
		b, _ := json.Marshal(m)
		return b
	}
	many := make([]any, 20)
	for i := range many {
		many[i] = commit([]string{"x.go"}, nil, nil)
	}
	cases := []struct {
		name    string
		payload []byte
		touched bool
		at      time.Time
	}{
		{"untouched", payload(nil), false, time.Unix(1893553445, 0).UTC()},
		{"added", payload(func(m map[string]any) {
			m["commits"] = []any{commit(nil, nil, nil), commit([]string{SettingsPath}, nil, nil)}
		}), true, time.Unix(1893553445, 0).UTC()},
		{"modified", payload(func(m map[string]any) { m["commits"] = []any{commit(nil, []string{SettingsPath}, nil)} }), true, time.Unix(1893553445, 0).UTC()},
		{"removed", payload(func(m map[string]any) { m["commits"] = []any{commit(nil, nil, []string{SettingsPath})} }), true, time.Unix(1893553445, 0).UTC()},
		{"another path that merely contains it", payload(func(m map[string]any) { m["commits"] = []any{commit([]string{"x/" + SettingsPath}, nil, nil)} }), false, time.Unix(1893553445, 0).UTC()},
		{"20 commits may be truncated", payload(func(m map[string]any) { m["commits"] = many }), true, time.Unix(1893553445, 0).UTC()},
		{"distinct_size above the list", payload(func(m map[string]any) { m["distinct_size"] = 2 }), true, time.Unix(1893553445, 0).UTC()},
		{"size above the list", payload(func(m map[string]any) { m["size"] = 3 }), true, time.Unix(1893553445, 0).UTC()},
		{"sizes that match", payload(func(m map[string]any) { m["size"], m["distinct_size"] = 1, 1 }), false, time.Unix(1893553445, 0).UTC()},
		{"forced", payload(func(m map[string]any) { m["forced"] = true; m["commits"] = []any{} }), true, time.Unix(1893553445, 0).UTC()},
		{"deleted", payload(func(m map[string]any) {
			m["deleted"], m["after"], m["commits"], m["head_commit"] = true, strings.Repeat("0", 40), []any{}, nil
		}), false, time.Unix(1893553445, 0).UTC()},
		{"pushed_at as a timestamp", payload(func(m map[string]any) { m["repository"] = map[string]any{"pushed_at": "2030-05-06T07:08:09Z"} }), false,
			time.Date(2030, 5, 6, 7, 8, 9, 0, time.UTC)},
		{"no pushed_at: the head commit's time", payload(func(m map[string]any) { m["repository"] = map[string]any{} }), false,
			time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := SettingsPushFromPayload(c.payload)
			if err != nil {
				t.Fatal(err)
			}
			if p.Touched != c.touched {
				t.Errorf("Touched = %v, want %v", p.Touched, c.touched)
			}
			if !p.PushedAt.Equal(c.at) {
				t.Errorf("PushedAt = %v, want %v", p.PushedAt, c.at)
			}
			if p.Ref != "refs/heads/main" || p.PusherLogin != "alice" || p.SenderLogin != "alice" || p.SenderType != "User" {
				t.Errorf("parsed %+v", p)
			}
		})
	}
	if _, err := SettingsPushFromPayload([]byte(`{"ref": 7`)); err == nil {
		t.Error("a broken payload parsed")
	}
}
