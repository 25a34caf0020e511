package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestDemoBehaves runs `warden demo --serve` as the README's quick start
// does: every scripted step behaves; then warden and the simulator keep
// running, each printed curl line works against them, and cancelling the
// context (Ctrl-C) stops the demo with exit status 0.
func TestDemoBehaves(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out, errb := &setupBuf{}, &setupBuf{}
	done := make(chan int, 1)
	go func() { done <- run(ctx, []string{"demo", "--serve"}, func(string) string { return "" }, out, errb) }()
	deadline := time.After(5 * time.Minute)
	for !strings.Contains(out.String(), "MCP endpoint") || !strings.Contains(out.String(), "GitHub simulator http") {
		select {
		case code := <-done:
			t.Fatalf("demo --serve exited %d before serving\nstdout:\n%s\nstderr:\n%s", code, out, errb)
		case <-deadline:
			t.Fatalf("demo --serve printed no endpoints\nstdout:\n%s", out)
		case <-time.After(50 * time.Millisecond):
		}
	}
	printed := out.String()
	if !strings.Contains(printed, "steps behaved") || strings.Contains(printed, "✗") {
		t.Fatalf("demo output:\n%s", printed)
	}
	// GitHub's agent dispatch (issue 20): each step's outcome as printed.
	for _, c := range []struct{ step, want string }{
		{"refused: the assignee removed", "refused (awaiting-admission): assignee removed"},
		{"refused: the report comment says why", "its report comment says: \"Copilot\" was assigned to issue"},
		{"refused: what makes it claimable", "To make it claimable: a human with triage or more"},
		{"refused: the agent's PR fails the check", "check run `backlog` failure, \"issue-8 awaits human admission\""},
		{"granted: the claim marker", "warden posted the marker on the agent's behalf: <!-- backlog-worker: claim item=issue-10 owner=copilot/issue-10 "},
		{"granted: the agent's PR", "Copilot opened draft=true PR #11"},
		{"work: the claim renewed", "pull_request.synchronize"},
		{"work: the check passes", "PR #11 \"Retry the webhook sender\" draft=false, check run `backlog` success"},
		{"merged: completed", "issue #10 closed; the item has state:complete and pr:11"},
		{"merged: the outcome marker", "result=complete -->; the claim released"},
	} {
		if !strings.Contains(printed, c.want) {
			t.Errorf("%s: the demo's output lacks %q", c.step, c.want)
		}
	}
	for _, tok := range []string{"harness-worker-token", "harness-pm-token", "harness-human-token"} {
		if !strings.Contains(printed, tok) {
			t.Errorf("the ready-made token %s… is not printed", tok)
		}
	}
	curls := regexp.MustCompile(`(?m)^\s+(curl .+)$`).FindAllStringSubmatch(printed, -1)
	if len(curls) != 3 {
		t.Fatalf("want 3 curl lines (status page, agent API, MCP), got %d:\n%s", len(curls), printed)
	}
	// What each endpoint's answer must hold.
	wants := []string{"<title>warden", `"ready"`, `"serverInfo"`}
	for i, m := range curls {
		body, err := curlLine(m[1])
		if err != nil {
			t.Errorf("%s: %v", m[1], err)
			continue
		}
		if !strings.Contains(body, wants[i]) {
			t.Errorf("%s answered without %s: %.300s", m[1], wants[i], body)
		}
	}
	cancel()
	select {
	case code := <-done:
		if code != exitOK {
			t.Fatalf("demo --serve exited %d after Ctrl-C, want 0\n%s", code, errb)
		}
	case <-time.After(40 * time.Second):
		t.Fatal("demo --serve did not stop after Ctrl-C")
	}
	if !strings.Contains(out.String(), "stopping warden and the simulator") {
		t.Errorf("the demo did not say it stopped:\n%s", out)
	}
}

// curlLine runs a printed curl line with curl when it is installed, else
// makes the same request itself (the lines use -H, -d and one URL).
func curlLine(line string) (string, error) {
	if _, err := exec.LookPath("curl"); err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		// -N: the MCP endpoint may answer as an event stream; --max-time ends it.
		b, err := exec.CommandContext(ctx, "sh", "-c", line+" -N --max-time 5").Output()
		if err != nil && len(b) == 0 {
			return "", fmt.Errorf("curl: %v", err)
		}
		return string(b), nil
	}
	words := shellWords(line)
	var req struct {
		headers [][2]string
		data    string
		url     string
	}
	for i := 1; i < len(words); i++ {
		switch w := words[i]; {
		case w == "-H" && i+1 < len(words):
			k, v, _ := strings.Cut(words[i+1], ":")
			req.headers = append(req.headers, [2]string{k, strings.TrimSpace(v)})
			i++
		case w == "-d" && i+1 < len(words):
			req.data = words[i+1]
			i++
		case strings.HasPrefix(w, "http"):
			req.url = w
		}
	}
	method := http.MethodGet
	if req.data != "" {
		method = http.MethodPost
	}
	r, err := http.NewRequest(method, req.url, strings.NewReader(req.data))
	if err != nil {
		return "", err
	}
	for _, h := range req.headers {
		r.Header.Set(h[0], h[1])
	}
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Do(r)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode >= 400 {
		return "", fmt.Errorf("%s %s: %d %s", method, req.url, resp.StatusCode, b)
	}
	return string(b), nil
}

// shellWords splits a line as sh would for words and single quotes.
func shellWords(s string) []string {
	var words []string
	var cur strings.Builder
	in, any := false, false
	for _, r := range s {
		switch {
		case r == '\'':
			in, any = !in, true
		case r == ' ' && !in:
			if any {
				words = append(words, cur.String())
				cur.Reset()
				any = false
			}
		default:
			cur.WriteRune(r)
			any = true
		}
	}
	if any {
		words = append(words, cur.String())
	}
	return words
}
