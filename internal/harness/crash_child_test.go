package harness

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wardenhq/warden/internal/clock"
	"github.com/wardenhq/warden/internal/config"
	"github.com/wardenhq/warden/internal/db"
	"github.com/wardenhq/warden/internal/ghsim"
	"github.com/wardenhq/warden/internal/service"
	"github.com/wardenhq/warden/webhooks"
)

// The crash suites (crash_findings_e2e_test.go) run warden as a separate
// process, so that it can be killed with SIGKILL: this test binary,
// re-executed with crashChildEnv naming a JSON file of crashChildConfig,
// builds the real service (service.Build, then Serve) against the simulator
// that runs in the parent test, on a database file the parent keeps across
// kills.

// crashChildEnv names the child's configuration file.
const crashChildEnv = "WARDEN_HARNESS_CRASH_CHILD"

// TestMain runs the crash child when crashChildEnv is set, else the tests.
func TestMain(m *testing.M) {
	if path := os.Getenv(crashChildEnv); path != "" {
		if err := runCrashChild(path); err != nil {
			fmt.Fprintln(os.Stderr, "crash child:", err)
			os.Exit(3)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// crashChildConfig is what the parent tells one run of the child.
type crashChildConfig struct {
	Database string `json:"database"` // sqlite:PATH
	API      string `json:"api"`      // the simulator's base URL, with the slash
	AppID    int64  `json:"appId"`
	Key      []byte `json:"key"` // the App's private key (PEM)
	Listen   string `json:"listen"`
	// OffsetMs is how far warden's clock runs ahead of real time: the
	// simulator's clock.Offset in the parent, so both read the same time.
	OffsetMs int64  `json:"offsetMs"`
	Log      string `json:"log"` // warden's JSON log, appended to
	LogLevel string `json:"logLevel"`
}

// runCrashChild serves until SIGTERM (a graceful stop) or SIGKILL.
func runCrashChild(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read the configuration: %w", err)
	}
	var c crashChildConfig
	if err := json.Unmarshal(b, &c); err != nil {
		return fmt.Errorf("decode the configuration %s: %w", path, err)
	}
	off := time.Duration(c.OffsetMs) * time.Millisecond
	now := func() time.Time { return time.Now().Add(off) }
	logf, err := os.OpenFile(c.Log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("open the log: %w", err)
	}
	defer logf.Close()
	s := crashSettings(c.Database)
	s.Listen, s.AppID, s.PrivateKey, s.GitHubAPIURL, s.LogLevel = c.Listen, c.AppID, c.Key, c.API, c.LogLevel
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	svc, err := service.Build(ctx, s, service.NewLogger(logf, s.LogLevel), service.Options{
		// Many tries: a delivery a kill interrupts is tried again after the
		// restart, and must not become a dead letter on the way.
		Dispatch: webhooks.DispatchOptions{Workers: 4, BackoffBase: 20 * time.Millisecond, BackoffMax: 200 * time.Millisecond,
			MaxAttempts: 100, Poll: 10 * time.Millisecond, Grace: 5 * time.Second},
		GitHubRetryBase: 5 * time.Millisecond, GitHubMaxWait: 2 * time.Second, Now: now,
		// The timer pass often: it writes the report edits that came due.
		SweepInterval: 100 * time.Millisecond, NoReconcileLoop: true,
	})
	if err != nil {
		return fmt.Errorf("build: %w", err)
	}
	defer svc.Close()
	return svc.Serve(ctx, s.Listen, s.AdminListen, func(public, _ net.Addr) {
		fmt.Printf("READY %s\n", public)
	})
}

// crashSettings are the child's settings (as Start's), and what the parent
// opens the same database with to judge it at the end.
func crashSettings(database string) *config.Settings {
	return &config.Settings{
		Listen: "127.0.0.1:0", AdminListen: "127.0.0.1:0", Database: database,
		WebhookSecrets: [][]byte{[]byte(Secret)}, Region: "local", LogLevel: "info",
		LeaseDefault: 30 * time.Second, LeaseMax: 30 * time.Minute, Quarantine: time.Hour, ReconcileInterval: 10 * time.Minute,
		MCPRepos: map[string]string{},
	}
}

// crashWarden is the simulator (in this process) and warden (a child
// process, started, killed and started again on one database).
type crashWarden struct {
	t      *testing.T
	dir    string
	dbPath string
	listen string
	sim    *ghsim.Sim
	gh     *ghsim.Server
	clk    *clock.Offset
	offset time.Duration // what clk was moved by (clock.Offset keeps it private)
	cmd    *exec.Cmd
	exited chan error
	starts int
	db     *db.DB // the parent's connection to warden's database: counts, and the final judgement
}

// newCrashWarden starts the simulator and the first warden, on a port kept
// for every later run.
func newCrashWarden(t *testing.T) *crashWarden {
	t.Helper()
	w := &crashWarden{t: t, dir: t.TempDir(), clk: &clock.Offset{}}
	w.dbPath = filepath.Join(w.dir, "warden.db")
	// One port for every run: deliveries GitHub makes while warden is down
	// fail, and the catch-up at the next start has them redelivered.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	w.listen = ln.Addr().String()
	ln.Close()
	sim, err := ghsim.New(ghsim.Options{Now: w.clk.Now, TokenTTL: 24 * 365 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	w.sim, w.gh = sim, sim.Start()
	t.Cleanup(func() {
		w.kill()
		if w.db != nil {
			w.db.Close()
		}
		w.gh.Close()
		w.sim.Close()
	})
	sim.SetWebhook("http://"+w.listen+"/webhooks", Secret)
	w.start()
	d, err := db.Open(context.Background(), "sqlite:"+w.dbPath)
	if err != nil {
		t.Fatal(err)
	}
	w.db = d
	return w
}

// start runs a warden process and waits until it listens.
func (w *crashWarden) start() {
	w.t.Helper()
	w.starts++
	cfg := crashChildConfig{Database: "sqlite:" + w.dbPath, API: w.gh.URL + "/", AppID: w.sim.AppID(), Key: w.sim.PrivateKeyPEM(),
		Listen: w.listen, OffsetMs: w.offset.Milliseconds(), Log: filepath.Join(w.dir, "warden.log"), LogLevel: "info"}
	if os.Getenv("WARDEN_CRASH_LOGDIR") != "" {
		cfg.LogLevel = "debug" // every delivery's outcome
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		w.t.Fatal(err)
	}
	path := filepath.Join(w.dir, fmt.Sprintf("child-%d.json", w.starts))
	if err := os.WriteFile(path, b, 0o600); err != nil {
		w.t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), crashChildEnv+"="+path)
	cmd.Stderr = &prefixWriter{t: w.t}
	out, err := cmd.StdoutPipe()
	if err != nil {
		w.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		w.t.Fatal(err)
	}
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(out)
		ok := false
		for sc.Scan() {
			if !ok && strings.HasPrefix(sc.Text(), "READY ") {
				ok = true
				ready <- true
			}
		}
		if !ok {
			ready <- false
		}
	}()
	w.cmd, w.exited = cmd, make(chan error, 1)
	select {
	case ok := <-ready:
		if !ok {
			w.t.Fatalf("warden run %d exited before it listened: %v", w.starts, cmd.Wait())
		}
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		w.t.Fatalf("warden run %d did not listen within 60s", w.starts)
	}
	go func() { w.exited <- cmd.Wait() }()
}

// kill ends the running warden with SIGKILL (no-op when none runs).
func (w *crashWarden) kill() {
	if w.cmd == nil {
		return
	}
	w.cmd.Process.Kill()
	<-w.exited
	w.cmd = nil
}

// stop ends the running warden the way an orchestrator does (SIGTERM), and
// checks that it exits cleanly.
func (w *crashWarden) stop() {
	w.t.Helper()
	if w.cmd == nil {
		return
	}
	w.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-w.exited:
		if err != nil {
			w.t.Errorf("warden run %d exited with %v after SIGTERM", w.starts, err)
		}
	case <-time.After(30 * time.Second):
		w.cmd.Process.Kill()
		<-w.exited
		w.t.Errorf("warden run %d did not stop within 30s of SIGTERM", w.starts)
	}
	w.cmd = nil
}

// advance moves the simulator's clock and the next warden's by d.
func (w *crashWarden) advance(d time.Duration) {
	w.offset += d
	w.clk.Set(w.offset)
}

// count runs a COUNT query on warden's database.
func (w *crashWarden) count(query string) (int, error) {
	var n int
	if err := w.db.Read.QueryRowContext(context.Background(), query).Scan(&n); err != nil {
		return 0, fmt.Errorf("%s: %w", query, err)
	}
	return n, nil
}

// settle waits until the simulator has sent everything queued and warden
// holds no pending delivery and, with reports set, no pending report edit,
// on several looks in a row.
func (w *crashWarden) settle(timeout time.Duration, reports bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	quiet := 0
	for quiet < 4 {
		if err := w.sim.Flush(ctx); err != nil {
			return err
		}
		pending, err := w.count(`SELECT COUNT(*) FROM inbox WHERE state = 'pending'`)
		if err != nil {
			return err
		}
		edits := 0
		if reports {
			if edits, err = w.count(`SELECT COUNT(*) FROM report_comments WHERE pending = 1`); err != nil {
				return err
			}
		}
		if pending == 0 && edits == 0 && w.sim.Pending() == 0 {
			quiet++
		} else {
			quiet = 0
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("warden did not settle: %d deliveries and %d report edits pending: %w", pending, edits, ctx.Err())
		case <-time.After(60 * time.Millisecond):
		}
	}
	return nil
}

// prefixWriter passes the child's stderr (a panic, a start-up failure) to
// the test log.
type prefixWriter struct{ t *testing.T }

func (p *prefixWriter) Write(b []byte) (int, error) {
	if s := strings.TrimSpace(string(b)); s != "" {
		p.t.Logf("warden stderr: %s", s)
	}
	return len(b), nil
}
