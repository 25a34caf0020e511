package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// replicaProc is one `warden serve` process of the three-replica test.
type replicaProc struct {
	n      int
	cmd    *exec.Cmd
	public string // http://host:port
	admin  string
	killed atomic.Bool

	mu    sync.Mutex
	lines []map[string]any // its JSON log
	done  chan struct{}    // closed when its log ends
}

// startReplica runs `warden serve` (this test binary as main, TestMain) with
// env, and waits for its listeners.
func startReplica(t *testing.T, n int, env map[string]string) *replicaProc {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "WARDEN_TEST_RUN_MAIN=1",
		"WARDEN_TEST_ARGS=serve --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0")
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := &replicaProc{n: n, cmd: cmd, done: make(chan struct{})}
	t.Cleanup(func() {
		if !r.killed.Load() {
			cmd.Process.Signal(syscall.SIGTERM)
		}
		cmd.Wait()
		<-r.done
	})
	ready := make(chan struct{})
	go func() {
		defer close(r.done)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<24)
		for sc.Scan() {
			var line map[string]any
			if json.Unmarshal(sc.Bytes(), &line) != nil {
				continue
			}
			r.mu.Lock()
			r.lines = append(r.lines, line)
			if line["msg"] == "warden serving" {
				r.public, r.admin = "http://"+str(line["public"]), "http://"+str(line["admin"])
				close(ready)
			}
			r.mu.Unlock()
		}
	}()
	select {
	case <-ready:
	case <-r.done:
		t.Fatalf("replica %d exited before serving: %s", n, r.tail())
	case <-time.After(30 * time.Second):
		t.Fatalf("replica %d did not start: %s", n, r.tail())
	}
	return r
}

func str(v any) string { s, _ := v.(string); return s }

// tail is the end of a replica's log, for failure messages.
func (r *replicaProc) tail() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	for _, l := range r.lines[max(0, len(r.lines)-8):] {
		fmt.Fprintf(&b, "\n  %v %v %v", l["level"], l["msg"], l["err"])
	}
	return b.String()
}

// kill ends the replica with SIGKILL: no shutdown, no grace, its
// connections dropped mid-way.
func (r *replicaProc) kill(t *testing.T) {
	t.Helper()
	r.killed.Store(true)
	if err := r.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	r.cmd.Wait()
	<-r.done
}

// logOf returns the replica's log lines with message msg.
func (r *replicaProc) logOf(msg string) []map[string]any {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []map[string]any
	for _, l := range r.lines {
		if l["msg"] == msg {
			out = append(out, l)
		}
	}
	return out
}

// fanOut is the webhook URL GitHub is given: it sends every delivery to
// every replica still alive, as a load balancer and GitHub's redeliveries
// would, and answers 200 when one of them stored it.
func fanOut(t *testing.T, replicas func() []*replicaProc) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Timeout: 10 * time.Second}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(req.Body)
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		ok := false
		for _, r := range replicas() {
			if r.killed.Load() {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				out, _ := http.NewRequest(http.MethodPost, r.public+"/webhooks", bytes.NewReader(body))
				for _, h := range []string{"Content-Type", "User-Agent", "X-GitHub-Event", "X-GitHub-Delivery",
					"X-GitHub-Hook-ID", "X-Hub-Signature-256"} {
					out.Header.Set(h, req.Header.Get(h))
				}
				resp, err := client.Do(out)
				if err != nil {
					return
				}
				resp.Body.Close()
				mu.Lock()
				ok = ok || resp.StatusCode/100 == 2
				mu.Unlock()
			}()
		}
		wg.Wait()
		if !ok {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		w.WriteHeader(http.StatusAccepted)
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return "http://" + l.Addr().String() + "/webhooks"
}

// apiCall calls a replica's agent API on acme/app; a 2xx answer is decoded
// into out. header holds extra headers, name then value.
func apiCall(ctx context.Context, base, token, method, path string, body, out any, header ...string) (int, error) {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, base+"/api/v1/repos/acme/app"+path, rd)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, err
	}
	if out != nil && resp.StatusCode/100 == 2 {
		if err := json.Unmarshal(b, out); err != nil {
			return resp.StatusCode, fmt.Errorf("%s %s: %w: %s", method, path, err, b)
		}
	}
	if resp.StatusCode/100 != 2 {
		return resp.StatusCode, fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, b)
	}
	return resp.StatusCode, nil
}

// writeKey writes the App's key where WARDEN_PRIVATE_KEY_FILE points.
func writeKey(t *testing.T, pem []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "app.pem")
	if err := os.WriteFile(p, pem, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
