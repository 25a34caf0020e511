package webhooks

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
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

// The crash test runs the real ingress, inbox and dispatcher in a child
// process (this test binary, re-executed), sends it signed deliveries from
// several goroutines, kills it with SIGKILL at random points, restarts it on
// the same database, and at the end checks that every acknowledged delivery
// was applied exactly once.

const crashChildEnv = "WARDEN_CRASH_CHILD_DB"

var crashSecret = []byte("crash-test-secret")

func TestMain(m *testing.M) {
	if path := os.Getenv(crashChildEnv); path != "" {
		crashChild(path)
		return
	}
	os.Exit(m.Run())
}

// crashChild serves deliveries until killed. Each delivery's effect is one
// row in applied, written in the transaction that marks it done.
func crashChild(path string) {
	ctx := context.Background()
	d, err := db.Open(ctx, "sqlite:"+path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(3)
	}
	if _, err := d.Write.Exec(`CREATE TABLE IF NOT EXISTS applied (n INTEGER PRIMARY KEY AUTOINCREMENT, delivery_id TEXT NOT NULL)`); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(3)
	}
	ib, err := OpenInbox(ctx, d)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(3)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	h := HandlerFunc(func(ctx context.Context, dv *Delivery) (Result, error) {
		time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond) // widen the windows a kill can hit
		id := dv.ID
		return Result{Outcome: "applied", Commit: func(ctx context.Context, tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO applied (delivery_id) VALUES ($1)`, id)
			return err
		}}, nil
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

func TestCrashRecoveryExactlyOnce(t *testing.T) {
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
		child, addr := startCrashChild(t, path)
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
	problems, applied := exactlyOnceProblems(t, path, acked)
	for _, p := range problems {
		t.Error(p)
	}
	if len(acked) < 200 {
		t.Fatalf("only %d deliveries acknowledged; the test did not exercise enough", len(acked))
	}
	t.Logf("%d deliveries sent, %d acknowledged, %d applied, over %d kills", len(sent), len(acked), applied, kills)
}

// exactlyOnceProblems lists every acknowledged delivery not applied exactly
// once, every delivery applied more than once, and every dead letter.
func exactlyOnceProblems(t *testing.T, path string, acked map[string]bool) ([]string, int) {
	t.Helper()
	d, err := db.Open(context.Background(), "sqlite:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	counts := map[string]int{}
	rows, err := d.Read.Query(`SELECT delivery_id, COUNT(*) FROM applied GROUP BY delivery_id`)
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for rows.Next() {
		var id string
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			t.Fatal(err)
		}
		counts[id] = n
		total += n
	}
	rows.Close()
	var problems []string
	for id, n := range counts {
		if n != 1 {
			problems = append(problems, fmt.Sprintf("delivery %s applied %d times", id, n))
		}
	}
	for id := range acked {
		if counts[id] == 0 {
			problems = append(problems, fmt.Sprintf("acknowledged delivery %s never applied", id))
		}
	}
	var dead int
	if err := d.Read.QueryRow(`SELECT COUNT(*) FROM inbox WHERE state <> 'done'`).Scan(&dead); err != nil {
		t.Fatal(err)
	}
	if dead > 0 {
		problems = append(problems, fmt.Sprintf("%d deliveries not done", dead))
	}
	return problems, total
}

// TestExactlyOnceCheckerFindsProblems validates the instrument: a planted
// double application and a planted loss are both reported.
func TestExactlyOnceCheckerFindsProblems(t *testing.T) {
	path := filepath.Join(t.TempDir(), "planted.db")
	d, err := db.Open(context.Background(), "sqlite:"+path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := OpenInbox(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Write.Exec(`CREATE TABLE applied (n INTEGER PRIMARY KEY AUTOINCREMENT, delivery_id TEXT NOT NULL);
		INSERT INTO applied (delivery_id) VALUES ('a'), ('a'), ('b')`); err != nil {
		t.Fatal(err)
	}
	d.Close()
	problems, _ := exactlyOnceProblems(t, path, map[string]bool{"a": true, "b": true, "c": true})
	if len(problems) != 2 {
		t.Fatalf("want 2 problems (a applied twice, c lost), got %q", problems)
	}
}

func startCrashChild(t *testing.T, path string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+path)
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
