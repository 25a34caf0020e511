package main

import (
	"bufio"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestMain lets a test run this binary's main as a child process.
func TestMain(m *testing.M) {
	if os.Getenv("WARDEN_TEST_RUN_MAIN") == "1" {
		os.Args = append([]string{"warden"}, strings.Fields(os.Getenv("WARDEN_TEST_ARGS"))...)
		main()
		return
	}
	os.Exit(m.Run())
}

// TestServeExitsZeroOnSIGTERM runs `warden serve` as a process and stops it
// the way an orchestrator does (SIGTERM), and as a closed terminal does
// (SIGHUP): both stop it gracefully, exit status 0.
func TestServeExitsZeroOnSIGTERM(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGHUP} {
		t.Run(sig.String(), func(t *testing.T) { serveStopsOn(t, sig) })
	}
}

func serveStopsOn(t *testing.T, sig syscall.Signal) {
	var allowed atomic.Bool
	allowed.Store(true)
	var calls atomic.Int64
	gh := fakeGitHub(t, &allowed, &calls)
	_, env := testSettings(t, gh.URL)
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "WARDEN_TEST_RUN_MAIN=1", "WARDEN_TEST_ARGS=serve --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0")
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stderr)
	started := false
	for sc.Scan() {
		line := sc.Text()
		if strings.Contains(line, "old-secret") || strings.Contains(line, "PRIVATE KEY") {
			t.Fatalf("secret in logs: %s", line)
		}
		if strings.Contains(line, `"msg":"dispatcher ready"`) {
			started = true
			break
		}
	}
	if !started {
		cmd.Process.Kill()
		t.Fatal("serve did not become ready")
	}
	rest := make(chan string, 1)
	go func() {
		var b strings.Builder
		for sc.Scan() {
			b.WriteString(sc.Text() + "\n")
		}
		rest <- b.String()
	}()
	// A second serve on the same SQLite database is refused while this one
	// runs, naming the process that holds it.
	second := map[string]string{"WARDEN_LISTEN": "127.0.0.1:0", "WARDEN_ADMIN_LISTEN": "127.0.0.1:0"}
	for k, v := range env {
		second[k] = v
	}
	if code, _, errs := runCLI(second, "serve"); code != exitSetting || strings.Count(errs, "\n") != 1 ||
		!strings.Contains(errs, "in use by another warden serve (process "+strconv.Itoa(cmd.Process.Pid)) {
		t.Errorf("a second serve beside process %d: exit %d, %q; want 2 and one line naming it", cmd.Process.Pid, code, errs)
	}
	cmd.Process.Signal(sig)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve exited with %v after %s, want status 0", err, sig)
		}
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("serve did not exit after %s", sig)
	}
	if log := <-rest; !strings.Contains(log, `"msg":"shutting down"`) || !strings.Contains(log, `"msg":"stopped"`) {
		t.Errorf("after %s the log does not show a graceful stop:\n%s", sig, log)
	}
}
