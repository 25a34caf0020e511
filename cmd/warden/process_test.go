package main

import (
	"bufio"
	"os"
	"os/exec"
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
// the way an orchestrator does.
func TestServeExitsZeroOnSIGTERM(t *testing.T) {
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
	go func() {
		for sc.Scan() {
		}
	}()
	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve exited with %v after SIGTERM, want status 0", err)
		}
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		t.Fatal("serve did not exit after SIGTERM")
	}
}
