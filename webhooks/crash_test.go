package webhooks

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wardenhq/warden/internal/db"
)

// The crash tests run the real ingress, inbox and dispatcher in a child
// process (this test binary, re-executed) and kill it with SIGKILL, then
// restart it on the same database. What they show is what warden promises:
// a delivery is marked done only after its handler returned success, in a
// transaction of its own, so a crash between the handler's writes and the
// completion leaves the delivery pending and it is handled again (at least
// once). A handler's writes are therefore keyed, as the child's are: the
// effect of handling a delivery twice is the effect of handling it once.

const crashChildEnv = "WARDEN_CRASH_CHILD_DB"

// crashDieEnv names a delivery id: the child's handler kills its own process
// after its first run for that delivery has committed its effect, before the
// handler returns and so before the inbox can mark the delivery done.
const crashDieEnv = "WARDEN_CRASH_CHILD_DIE_AFTER"

var crashSecret = []byte("crash-test-secret")

func TestMain(m *testing.M) {
	if path := os.Getenv(crashChildEnv); path != "" {
		crashChild(path)
		return
	}
	os.Exit(m.Run())
}

// crashChild serves deliveries until killed. Each delivery's effect is its
// row in applied, upserted by the handler in a transaction of its own (as
// warden's handlers write their local records); runs counts how many times a
// handler wrote it.
func crashChild(path string) {
	ctx := context.Background()
	d, err := db.Open(ctx, "sqlite:"+path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(3)
	}
	if _, err := d.Write.Exec(`CREATE TABLE IF NOT EXISTS applied (delivery_id TEXT PRIMARY KEY, runs INTEGER NOT NULL)`); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(3)
	}
	ib, err := OpenInbox(ctx, d)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(3)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	die := os.Getenv(crashDieEnv)
	h := HandlerFunc(func(ctx context.Context, dv *Delivery) (Result, error) {
		time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond) // widen the windows a kill can hit
		var runs int
		err := d.Write.QueryRowContext(ctx, `INSERT INTO applied (delivery_id, runs) VALUES ($1, 1)
			ON CONFLICT (delivery_id) DO UPDATE SET runs = runs + 1 RETURNING runs`, dv.ID).Scan(&runs)
		if err != nil {
			return Result{}, err
		}
		time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond) // and the one after the handler's write
		if dv.ID == die && runs == 1 {
			self, _ := os.FindProcess(os.Getpid())
			self.Kill() // SIGKILL: the handler never returns
			select {}
		}
		return Result{Outcome: "applied"}, nil
	})
	disp := NewDispatcher(ib, h, nil, log, DispatchOptions{Workers: 4, Poll: 20 * time.Millisecond,
		Identity: func(context.Context) (string, error) { return "warden[bot]", nil }})
	ib.OnCommit(disp.Wake)
	in := NewIngress(ib, nil, log, IngressOptions{Secrets: [][]byte{crashSecret}})
	srv := &http.Server{Handler: in}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(3)
	}
	go disp.Run(ctx)
	fmt.Printf("ADDR %s\n", ln.Addr().String())
	srv.Serve(ln)
}

func crashPayload(id string, n int) []byte {
	return []byte(fmt.Sprintf(`{"action":"created","issue":{"number":%d},"repository":{"id":1,"full_name":"o/r"},"sender":{"login":"alice","type":"User"},"installation":{"id":7},"comment":{"id":%q,"body":%q}}`,
		n%17+1, id, strings.Repeat("x", 2000)))
}

// TestCrashRecoveryAtLeastOnce sends signed deliveries from several
// goroutines, kills the child at random points, and at the end checks that
// every acknowledged delivery was handled and marked done.
func TestCrashRecoveryAtLeastOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test starts processes; skipped in -short")
	}
	path := filepath.Join(t.TempDir(), "crash.db")
	var mu sync.Mutex
	acked := map[string]bool{}
	sent := map[string]int{} // id -> issue number seed
	next := 0
	rounds := 12
	// Kill rounds go on past rounds until at least 200 deliveries were
	// acknowledged (a loaded machine acknowledges fewer per round), up to
	// four times as many rounds.
	enough := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(acked) >= 200
	}
	kills := 0
	for round := 0; ; round++ {
		final := round >= rounds && (enough() || round >= 4*rounds)
		if !final {
			kills++
		}
		child, addr := startCrashChild(t, path, "")
		client := &http.Client{Timeout: 5 * time.Second}
		stop := make(chan struct{})
		var wg sync.WaitGroup
		send := func(id string, n int) {
			body := crashPayload(id, n)
			req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/", bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("X-GitHub-Event", "issue_comment")
			req.Header.Set("X-GitHub-Delivery", id)
			req.Header.Set("X-Hub-Signature-256", Sign(crashSecret, body))
			resp, err := client.Do(req)
			if err != nil {
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusAccepted || resp.StatusCode == http.StatusOK {
				mu.Lock()
				acked[id] = true
				mu.Unlock()
			} else if resp.StatusCode != http.StatusServiceUnavailable {
				t.Errorf("delivery %s: status %d", id, resp.StatusCode)
			}
		}
		if final {
			// Final round: redeliver everything never acknowledged (as GitHub's
			// redelivery would), then let the inbox drain.
			mu.Lock()
			var redo []string
			for id := range sent {
				if !acked[id] {
					redo = append(redo, id)
				}
			}
			mu.Unlock()
			for _, id := range redo {
				send(id, sent[id])
			}
			waitDrained(t, path)
			child.Process.Kill()
			child.Wait()
			break
		}
		for w := 0; w < 6; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					mu.Lock()
					var id string
					var n int
					if next > 0 && rand.IntN(5) == 0 {
						// Resend an earlier delivery (GitHub redelivers; load balancers retry).
						k := rand.IntN(next)
						id, n = fmt.Sprintf("crash-%06d", k), k
					} else {
						id, n = fmt.Sprintf("crash-%06d", next), next
						next++
					}
					sent[id] = n
					mu.Unlock()
					send(id, n)
				}
			}()
		}
		time.Sleep(time.Duration(30+rand.IntN(250)) * time.Millisecond)
		child.Process.Kill() // SIGKILL: no shutdown code runs
		child.Wait()
		close(stop)
		wg.Wait()
	}
	problems, again := atLeastOnceProblems(t, path, acked)
	for _, p := range problems {
		t.Error(p)
	}
	if len(acked) < 200 {
		t.Fatalf("only %d deliveries acknowledged; the test did not exercise enough", len(acked))
	}
	t.Logf("%d deliveries sent, %d acknowledged, %d handled again after a kill, over %d kills", len(sent), len(acked), again, kills)
}

// atLeastOnceProblems lists every acknowledged delivery never handled and
// every delivery not done (pending or dead). It also returns how many
// deliveries were handled more than once.
func atLeastOnceProblems(t *testing.T, path string, acked map[string]bool) ([]string, int) {
	t.Helper()
	d, err := db.Open(context.Background(), "sqlite:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	runs := map[string]int{}
	rows, err := d.Read.Query(`SELECT delivery_id, runs FROM applied`)
	if err != nil {
		t.Fatal(err)
	}
	again := 0
	for rows.Next() {
		var id string
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			t.Fatal(err)
		}
		runs[id] = n
		if n > 1 {
			again++
		}
	}
	rows.Close()
	var problems []string
	for id := range acked {
		if runs[id] == 0 {
			problems = append(problems, fmt.Sprintf("acknowledged delivery %s never handled", id))
		}
	}
	var notDone int
	if err := d.Read.QueryRow(`SELECT COUNT(*) FROM inbox WHERE state <> 'done'`).Scan(&notDone); err != nil {
		t.Fatal(err)
	}
	if notDone > 0 {
		problems = append(problems, fmt.Sprintf("%d deliveries not done", notDone))
	}
	return problems, again
}

// TestAtLeastOnceCheckerFindsProblems validates the instrument: a planted
// loss and a planted pending delivery are both reported, and a planted
// second run is counted.
func TestAtLeastOnceCheckerFindsProblems(t *testing.T) {
	path := filepath.Join(t.TempDir(), "planted.db")
	d, err := db.Open(context.Background(), "sqlite:"+path)
	if err != nil {
		t.Fatal(err)
	}
	ib, err := OpenInbox(context.Background(), d)
	if err != nil {
		t.Fatal(err)
	}
	mustAccept(t, ib, incoming("p"), Stored)
	ib.Close()
	if _, err := d.Write.Exec(`CREATE TABLE applied (delivery_id TEXT PRIMARY KEY, runs INTEGER NOT NULL);
		INSERT INTO applied (delivery_id, runs) VALUES ('a', 2), ('b', 1)`); err != nil {
		t.Fatal(err)
	}
	d.Close()
	problems, again := atLeastOnceProblems(t, path, map[string]bool{"a": true, "b": true, "c": true})
	if len(problems) != 2 || again != 1 {
		t.Fatalf("want 2 problems (c never handled, p pending) and 1 delivery handled again, got %q and %d", problems, again)
	}
}

// TestCrashBetweenHandlerAndCompletion kills the process after a handler's
// write committed and before the handler returned, so before the inbox
// could mark the delivery done. The delivery must still be pending; after a
// restart it is handled a second time and marked done once.
func TestCrashBetweenHandlerAndCompletion(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test starts processes; skipped in -short")
	}
	path := filepath.Join(t.TempDir(), "redo.db")
	const id = "crash-redo"
	send := func(addr string) {
		body := crashPayload(id, 1)
		req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-GitHub-Event", "issue_comment")
		req.Header.Set("X-GitHub-Delivery", id)
		req.Header.Set("X-Hub-Signature-256", Sign(crashSecret, body))
		resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
		if err != nil {
			return // the child may die before it answers; the database says whether it stored the delivery
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("delivery: status %d, want 202", resp.StatusCode)
		}
	}
	state := func() (runs int, st string, attempts int, outcome string) {
		t.Helper()
		d, err := db.Open(context.Background(), "sqlite:"+path)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		if err := d.Read.QueryRow(`SELECT state, attempts, outcome FROM inbox WHERE delivery_id = $1`, id).Scan(&st, &attempts, &outcome); err != nil {
			t.Fatalf("delivery not in the inbox: %v", err)
		}
		if err := d.Read.QueryRow(`SELECT runs FROM applied WHERE delivery_id = $1`, id).Scan(&runs); err != nil {
			t.Fatalf("handler's effect not found: %v", err)
		}
		return runs, st, attempts, outcome
	}

	// First life: the handler writes its effect and the process dies.
	child, addr := startCrashChild(t, path, id)
	send(addr)
	exited := make(chan error, 1)
	go func() { exited <- child.Wait() }()
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		child.Process.Kill()
		<-exited
		t.Fatal("the child did not kill itself within 30s: its handler never ran")
	}
	if code := child.ProcessState.ExitCode(); code != -1 {
		t.Fatalf("the child exited with status %d, want killed by a signal", code)
	}
	runs, st, attempts, _ := state()
	if runs != 1 || st != StatePending || attempts != 0 {
		t.Fatalf("after the crash: handler ran %d times, delivery %s after %d attempts; want 1 run and the delivery pending after 0",
			runs, st, attempts)
	}

	// Second life, on the same database: the delivery is handled again and
	// marked done, once.
	child, _ = startCrashChild(t, path, id)
	waitDrained(t, path)
	child.Process.Kill()
	child.Wait()
	runs, st, attempts, outcome := state()
	if runs != 2 || st != StateDone || attempts != 1 || outcome != "applied" {
		t.Fatalf("after the restart: handler ran %d times, delivery %s after %d attempts with outcome %q; want 2 runs and done after 1 with \"applied\"",
			runs, st, attempts, outcome)
	}
}

// startCrashChild starts a child on the database at path; die, when not
// empty, is the delivery id whose first handler run kills the child.
func startCrashChild(t *testing.T, path, die string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+path, crashDieEnv+"="+die)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "ADDR ") {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("child did not start: %v %q stderr=%s", err, line, stderr.String())
	}
	return cmd, strings.TrimSpace(strings.TrimPrefix(line, "ADDR "))
}

func waitDrained(t *testing.T, path string) {
	t.Helper()
	d, err := db.Open(context.Background(), "sqlite:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		var n int
		if err := d.Read.QueryRow(`SELECT COUNT(*) FROM inbox WHERE state = 'pending'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("inbox did not drain within 60s")
}
