package harness

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// The crash suites of the report comment (CONTRACT.md §5, §6). warden runs
// as a child process (crash_child_test.go) on one database and is killed
// with SIGKILL at random points, most of them while GitHub holds or fails
// some of its calls, while agents and a maintainer work on the backlog
// (crash_workload_test.go): agents drop the admission label and go on at
// once, the maintainer puts it back or admits. GitHub goes on while warden
// is down; the deliveries it could not make come back through warden's
// catch-up at the next start, behind newer ones. The shuffled suite also
// has GitHub deliver in random order, some deliveries several bursts late.
// A closing round leaves the last items alone after such a race, and warden
// then runs normally until everything settled, the coalesced report edits
// written too.
//
// No report comment may state a false finding (crash_verdict_test.go): no
// write of one may say admission-unrecorded while the issue carries the
// admission label; and at the end none may say it where GitHub shows it
// false, nor list any finding warden's own final judgement of the item does
// not hold. WARDEN_CRASH_SEED replays a run's choices (not its timing);
// WARDEN_CRASH_LOGDIR keeps warden's log.

// crashRun shapes one suite.
type crashRun struct {
	kills   int
	shuffle bool // deliveries held in bursts and released in random order
}

// TestCrashFindingsKilled kills warden at random points, GitHub answers held.
func TestCrashFindingsKilled(t *testing.T) {
	runCrashFindings(t, crashRun{kills: 10})
}

// TestCrashFindingsShuffled is the same with deliveries in random order.
func TestCrashFindingsShuffled(t *testing.T) {
	runCrashFindings(t, crashRun{kills: 8, shuffle: true})
}

// The workload's accounts: an agent that builds (write), an agent that
// triages (triage: it may label), and a maintainer.
const (
	crashAgent   = "builder[bot]"
	crashTriager = "planner[bot]"
	crashHuman   = "maria"
)

// runCrashFindings runs one suite and judges what warden left on GitHub.
func runCrashFindings(t *testing.T, run crashRun) {
	if testing.Short() {
		t.Skip("crash suite starts processes; skipped in -short")
	}
	t.Parallel()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("WARDEN_CRASH_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("WARDEN_CRASH_SEED=%q: %v", s, err)
		}
		seed = v
	}
	t.Logf("seed %d (WARDEN_CRASH_SEED replays it)", seed)
	begin := time.Now()
	w := newCrashWarden(t)
	inst := w.sim.Install("acme", "installer")
	repo := w.sim.AddRepo(inst, "acme/app", "main")
	w.sim.SetRole(repo, crashAgent, "write")
	w.sim.SetRole(repo, crashTriager, "triage")
	w.sim.SetRole(repo, crashHuman, "maintain")
	if err := w.settle(30*time.Second, false); err != nil {
		t.Fatal(err)
	}

	watch := watchReports(w.sim, repo)
	wl := &crashWorkload{sim: w.sim, repo: repo, rnd: rand.New(rand.NewPCG(seed, 1)), shuffle: run.shuffle,
		agent: w.sim.As(crashAgent), triager: w.sim.As(crashTriager), human: w.sim.As(crashHuman)}
	crashKills(w, wl, rand.New(rand.NewPCG(seed, 2)), run)
	chaos := time.Since(begin)
	w.sim.ReleaseDeliveries(nil)
	if err := w.settle(90*time.Second, false); err != nil {
		t.Fatal(err)
	}
	wl.closingRound(crashClosing)
	if err := w.settle(90*time.Second, false); err != nil {
		t.Fatal(err)
	}
	settled := time.Since(begin)
	if !crashFlushReports(t, w) {
		t.Errorf("report edits still pending after five restarts past the report interval")
	}
	t.Logf("phases: kills and workload %s, closing round and settling %s, report edits written %s", chaos.Round(time.Millisecond),
		(settled - chaos).Round(time.Millisecond), (time.Since(begin) - settled).Round(time.Millisecond))
	w.stop()

	if dir := os.Getenv("WARDEN_CRASH_LOGDIR"); dir != "" {
		// Keep warden's log for a look at what it did.
		if b, err := os.ReadFile(filepath.Join(w.dir, "warden.log")); err == nil {
			if err := os.WriteFile(filepath.Join(dir, t.Name()+".log"), b, 0o644); err != nil {
				t.Logf("keep warden's log: %v", err)
			}
		}
	}
	v, err := judgeReports(w, repo)
	if err != nil {
		t.Fatal(err)
	}
	ds := w.sim.Deliveries()
	guids := map[string]bool{}
	failed := 0
	for _, d := range ds {
		guids[d.GUID] = true
		if d.Status != "OK" {
			failed++
		}
	}
	dead, err := w.count(`SELECT COUNT(*) FROM inbox WHERE state = 'dead'`)
	if err != nil {
		t.Fatal(err)
	}
	falseWrites := watch.falseWrites()
	t.Logf("%d kills, %d acts on %d items, %d deliveries (%d attempts, %d failed while warden was down or killed), %d dead letters; "+
		"%d report writes, %d of them false when written; at the end %d report comments, false: %d admission-unrecorded, "+
		"%d other stale findings; %d findings unreported; %s",
		run.kills, wl.acts, len(wl.items), len(guids), len(ds), failed, dead, watch.count(), len(falseWrites),
		v.reports, len(v.falseAdmission), len(v.stale), len(v.missing), time.Since(begin).Round(time.Millisecond))
	for _, s := range falseWrites {
		t.Errorf("false report write: %s", s)
	}
	for _, s := range v.missing {
		t.Logf("unreported: %s", s)
	}
	for _, s := range v.falseAdmission {
		t.Errorf("false report comment: %s", s)
	}
	for _, s := range v.stale {
		t.Errorf("stale report comment: %s", s)
	}
	for _, s := range v.duplicates {
		t.Errorf("duplicate report comments: %s", s)
	}
	if dead > 0 {
		t.Errorf("%d deliveries became dead letters", dead)
	}
}

// crashKills runs the workload while it kills warden run.kills times at
// random points, each kill after GitHub was told to hold or fail some of
// warden's next calls, and starts it again.
func crashKills(w *crashWarden, wl *crashWorkload, rnd *rand.Rand, run crashRun) {
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		wl.run(stop)
	}()
	for range run.kills {
		crashFault(w.sim, rnd)
		time.Sleep(250*time.Millisecond + time.Duration(rnd.IntN(600))*time.Millisecond)
		w.kill()
		w.sim.ClearFaults()
		// GitHub goes on meanwhile: what it cannot deliver now comes back
		// through the catch-up at the next start, behind newer deliveries.
		time.Sleep(time.Duration(rnd.IntN(150)) * time.Millisecond)
		wl.paused.Lock()
		w.sim.HoldDeliveries()
		w.start()
		var perm func(int) []int
		if run.shuffle {
			perm = rnd.Perm
		}
		w.sim.ReleaseDeliveries(perm)
		wl.paused.Unlock()
	}
	close(stop)
	<-done
}

// crashFlushReports restarts warden (SIGTERM, then a new process) with both
// clocks moved past the report interval, so that its timer pass writes the
// coalesced report edits, until none is pending: a restart's catch-up may
// fetch a delivery missed until now, whose edit is coalesced again. It
// reports whether none is left, and leaves warden running.
func crashFlushReports(t *testing.T, w *crashWarden) bool {
	t.Helper()
	for range 5 {
		w.stop()
		w.advance(2 * time.Minute)
		w.start()
		if err := w.settle(60*time.Second, false); err != nil {
			t.Fatal(err)
		}
		if err := w.settle(5*time.Second, true); err == nil {
			return true
		}
	}
	return false
}

// crashClosing is how many items the closing round works on.
const crashClosing = 16
