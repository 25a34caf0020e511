package main

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wardenhq/warden/internal/agentapi"
	"github.com/wardenhq/warden/internal/db"
	"github.com/wardenhq/warden/internal/db/dbtest"
	"github.com/wardenhq/warden/internal/ghsim"
	"github.com/wardenhq/warden/mirror/store"
)

const (
	replicaSecret = "three-replicas-webhook-secret"
	replicaWorker = "three-replicas-worker-token-01"
	replicaPM     = "three-replicas-pm-token-00001"
)

// TestThreeReplicasPostgres is issue 8's test of several replicas: three
// `warden serve` processes on one PostgreSQL schema, behind a fan-out that
// sends every delivery to every replica alive. Agents claim each item
// through all three replicas at once; a human opens pull requests and parks
// items with a command; mid-way the replica that last ran the reconcile pass
// is killed with SIGKILL while deliveries are being handled. When all is
// settled: every delivery GitHub sent is stored once and was handled to
// completion exactly once (counted from the replicas' logs), every item was
// granted to one claimant at a time with a fencing token of its own, every
// head has one `backlog` check run, every park one park comment, every item
// at most one report comment, and another replica took the reconcile over.
func TestThreeReplicasPostgres(t *testing.T) {
	dsn := dbtest.PostgresURL(t)
	ctx := context.Background()
	sim, err := ghsim.New(ghsim.Options{TokenTTL: 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	gh := sim.Start()
	t.Cleanup(func() { gh.Close(); sim.Close() })
	env := map[string]string{
		"WARDEN_DATABASE": dsn, "WARDEN_APP_ID": strconv.FormatInt(sim.AppID(), 10),
		"WARDEN_PRIVATE_KEY_FILE": writeKey(t, sim.PrivateKeyPEM()), "WARDEN_WEBHOOK_SECRET": replicaSecret,
		"WARDEN_GITHUB_API_URL": gh.URL + "/", "WARDEN_LOG_LEVEL": "debug", "WARDEN_RECONCILE_INTERVAL": "2s",
		"WARDEN_API_TOKENS": "worker-7:" + replicaWorker + ":worker,pm:" + replicaPM + ":pm",
	}
	var reps []*replicaProc
	for i := range 3 {
		reps = append(reps, startReplica(t, i, env))
	}
	sim.SetWebhook(fanOut(t, func() []*replicaProc { return reps }), replicaSecret)
	pg, err := db.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	settle := func(what string) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for quiet := 0; quiet < 3; {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not settled after 60s", what)
			}
			sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			err := sim.Flush(sctx)
			cancel()
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			var pending int
			if err := pg.Read.QueryRowContext(ctx, `SELECT COUNT(*) FROM inbox WHERE state = 'pending'`).Scan(&pending); err != nil {
				t.Fatal(err)
			}
			if pending == 0 && sim.Pending() == 0 {
				quiet++
			} else {
				quiet = 0
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	inst := sim.Install("acme", "installer")
	repo := sim.AddRepo(inst, "acme/app", "main")
	alice := sim.As("alice")
	sim.SetRole(repo, "alice", "maintain")
	settle("install")
	var items []int
	for n := range 30 {
		iss, err := alice.OpenIssue(repo, fmt.Sprintf("Item %d", n+1), "Make it so.", "backlog")
		if err != nil {
			t.Fatal(err)
		}
		items = append(items, iss.Number)
	}
	settle("items")

	live := func() []*replicaProc {
		var out []*replicaProc
		for _, r := range reps {
			if !r.killed.Load() {
				out = append(out, r)
			}
		}
		return out
	}
	var mu sync.Mutex
	tokens := map[int][]int64{} // every fencing token granted, per item
	contend := func(ns []int) {
		t.Helper()
		var wg sync.WaitGroup
		for _, n := range ns {
			granted := 0
			for _, r := range live() {
				wg.Add(1)
				go func() {
					defer wg.Done()
					var res store.ClaimResult
					_, err := apiCall(ctx, r.public, replicaWorker, http.MethodPost, fmt.Sprintf("/items/issue-%d/claim", n),
						map[string]any{"owner": fmt.Sprintf("worker-7/r%d", r.n), "leaseSeconds": 600}, &res)
					if err != nil {
						t.Errorf("claim issue-%d on replica %d: %v", n, r.n, err)
						return
					}
					mu.Lock()
					defer mu.Unlock()
					if res.Granted {
						granted++
						tokens[n] = append(tokens[n], *res.FencingToken)
					}
				}()
			}
			wg.Wait()
			if granted != 1 {
				t.Errorf("issue-%d: %d of %d simultaneous claims granted, want 1", n, granted, len(live()))
			}
		}
	}
	openPRs := func(ns []int) {
		t.Helper()
		for _, n := range ns {
			branch := fmt.Sprintf("work/issue-%d", n)
			if _, err := alice.Push(repo, branch, "main", map[string]string{fmt.Sprintf("f%d.txt", n): "done"}, "work"); err != nil {
				t.Fatal(err)
			}
			if _, err := alice.OpenPR(repo, branch, "main", fmt.Sprintf("Item %d", n), fmt.Sprintf("Closes #%d", n), false); err != nil {
				t.Fatal(err)
			}
		}
	}
	park := func(ns []int) {
		t.Helper()
		for _, n := range ns {
			if _, err := alice.Comment(repo, n, "/backlog park ruling-owner=alice ruling-topic=storage\nWhich storage engine?"); err != nil {
				t.Fatal(err)
			}
		}
	}

	// One create, sent to all three replicas at once with one
	// Idempotency-Key (an agent retrying through a load balancer): one issue.
	var wg sync.WaitGroup
	created := make([]int, len(reps))
	for i, r := range reps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var res struct {
				Issue struct{ Number int } `json:"issue"`
			}
			if _, err := apiCall(ctx, r.public, replicaPM, http.MethodPost, "/items",
				map[string]any{"title": "Created once", "specification": "Through three replicas."}, &res,
				agentapi.IdempotencyHeader, "replicas/created-once"); err != nil {
				t.Errorf("create on replica %d: %v", r.n, err)
			}
			created[i] = res.Issue.Number
		}()
	}
	wg.Wait()
	sim.Locked(func() {
		n := 0
		for _, iss := range repo.Issues {
			if iss.Title == "Created once" {
				n++
			}
		}
		if n != 1 || created[0] == 0 || created[0] != created[1] || created[1] != created[2] {
			t.Errorf("one create through three replicas opened %d issues; answers named %v", n, created)
		}
	})

	// Before the kill.
	contend(items[0:10])
	openPRs(items[0:4])
	park(items[20:23])
	// Slow GitHub down so handlers are in flight, find the replica that
	// holds (or last held) the reconcile, and kill it mid-way.
	sim.SetLatency(15 * time.Millisecond)
	contend(items[10:13])
	openPRs(items[4:6])
	victim, running := reconcileHolder(t, pg, reps)
	killedAt := time.Now()
	victim.kill(t)
	t.Logf("killed replica %d (pid %d; its reconcile pass was running: %v)", victim.n, victim.cmd.Process.Pid, running)

	// After the kill.
	contend(items[13:20])
	openPRs(items[6:8])
	park(items[23:26])
	for _, n := range items[0:5] { // release and claim again: a new token each
		mu.Lock()
		tok := tokens[n][len(tokens[n])-1]
		mu.Unlock()
		if _, err := apiCall(ctx, live()[0].public, replicaWorker, http.MethodPost, fmt.Sprintf("/items/issue-%d/release", n),
			map[string]any{"fencingToken": tok}, nil); err != nil {
			t.Fatal(err)
		}
	}
	contend(items[0:5])
	for _, n := range items[26:30] {
		if _, err := alice.Comment(repo, n, "Notes for later."); err != nil {
			t.Fatal(err)
		}
	}
	sim.SetLatency(0)
	settle("after the kill")

	checkDeliveries(t, pg, sim, reps, victim)
	for n, ts := range tokens {
		seen := map[int64]bool{}
		for i, tok := range ts {
			if seen[tok] {
				t.Errorf("issue-%d: fencing token %d granted twice (%v)", n, tok, ts)
			}
			if i > 0 && tok <= ts[i-1] {
				t.Errorf("issue-%d: token %d granted after %d", n, tok, ts[i-1])
			}
			seen[tok] = true
		}
	}
	if len(tokens) != 20 {
		t.Errorf("%d items granted, want 20", len(tokens))
	}
	checkGitHubEffects(t, sim, repo, items)
	// Another replica took the reconcile over.
	deadline := time.Now().Add(30 * time.Second)
	for {
		var holder string
		var finished int64
		err := pg.Read.QueryRowContext(ctx, `SELECT holder, finished_at FROM replica_runs WHERE name = 'reconcile'`).Scan(&holder, &finished)
		if err == nil && finished > killedAt.UnixMilli() && pidOf(holder) != victim.cmd.Process.Pid {
			t.Logf("reconcile taken over by %s", holder)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no reconcile pass finished after the kill by another replica (last: %s, finished %d, err %v)", holder, finished, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// pidOf reads the process id out of a run's holder ("host/pid/suffix").
func pidOf(holder string) int {
	parts := strings.Split(holder, "/")
	if len(parts) != 3 {
		return 0
	}
	pid, _ := strconv.Atoi(parts[1])
	return pid
}

// reconcileHolder waits (a while) for a reconcile pass in progress and
// returns its replica; failing that, the replica that ran the last one.
func reconcileHolder(t *testing.T, pg *db.DB, reps []*replicaProc) (*replicaProc, bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var holder string
		var finished int64
		err := pg.Read.QueryRowContext(context.Background(), `SELECT holder, finished_at FROM replica_runs WHERE name = 'reconcile'`).
			Scan(&holder, &finished)
		if err == nil {
			for _, r := range reps {
				if r.cmd.Process.Pid == pidOf(holder) && (finished == 0 || time.Now().After(deadline)) {
					return r, finished == 0
				}
			}
		}
		if time.Now().After(deadline.Add(10 * time.Second)) {
			t.Fatalf("no replica ran a reconcile pass (err %v)", err)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
