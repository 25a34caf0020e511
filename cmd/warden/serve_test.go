package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wardenhq/warden/internal/config"
	"github.com/wardenhq/warden/internal/service"
	"github.com/wardenhq/warden/webhooks"
)

// fakeGitHub answers GET /app once allowed; it stands in for github.com in
// this test of the composition root only (the simulator tests everything
// else).
func fakeGitHub(t *testing.T, allowed *atomic.Bool, calls *atomic.Int64) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		if r.URL.Path != "/app" || !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer ") {
			http.NotFound(w, r)
			return
		}
		if !allowed.Load() {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			io.WriteString(w, `{"message":"A JSON web token could not be decoded"}`)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":42,"slug":"warden-test","name":"warden test","node_id":"A_1","owner":{"login":"acme"}}`)
	}))
	t.Cleanup(srv.Close)
	return srv
}

var testKey = sync.OnceValue(func() []byte {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)})
})

func mapEnv(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func testSettings(t *testing.T, apiURL string) (*config.Settings, map[string]string) {
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "key.pem")
	if err := os.WriteFile(keyFile, testKey(), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"WARDEN_APP_ID": "42", "WARDEN_PRIVATE_KEY_FILE": keyFile,
		"WARDEN_WEBHOOK_SECRET": "old-secret,new-secret", "WARDEN_DATABASE": "sqlite:" + filepath.Join(dir, "w.db"),
		"WARDEN_GITHUB_API_URL": apiURL}
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	s, err := config.Flags(fs, mapEnv(env))("app", "secret")
	if err != nil {
		t.Fatal(err)
	}
	return s, env
}

func deliver(t *testing.T, url, event, id, secret string, body []byte) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url+"/webhooks", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", event)
	req.Header.Set("X-GitHub-Delivery", id)
	req.Header.Set("X-Hub-Signature-256", webhooks.Sign([]byte(secret), body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestServeEndToEnd(t *testing.T) {
	var allowed atomic.Bool
	var calls atomic.Int64
	gh := fakeGitHub(t, &allowed, &calls)
	s, env := testSettings(t, gh.URL)
	log := slog.New(slog.NewJSONHandler(io.Discard, nil))
	svc, err := service.Build(context.Background(), s, log, service.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	addrs := make(chan [2]net.Addr, 1)
	done := make(chan error, 1)
	go func() {
		done <- svc.Serve(ctx, "127.0.0.1:0", "127.0.0.1:0", func(p, a net.Addr) { addrs <- [2]net.Addr{p, a} })
	}()
	a := <-addrs
	pub, admin := "http://"+a[0].String(), "http://"+a[1].String()

	if code, _ := get(t, pub+"/healthz"); code != 200 {
		t.Fatalf("healthz %d", code)
	}
	// Before warden knows its own bot it accepts deliveries but processes none.
	if code, body := get(t, pub+"/readyz"); code != 503 || !strings.Contains(body, "identity") {
		t.Fatalf("readyz before identity: %d %q", code, body)
	}
	issue := func(sender, typ string) []byte {
		return []byte(fmt.Sprintf(`{"action":"opened","issue":{"number":5,"title":"t"},"repository":{"id":9,"full_name":"acme/app"},"installation":{"id":3},"sender":{"login":%q,"type":%q}}`, sender, typ))
	}
	if c := deliver(t, pub, "issues", "d-1", "old-secret", issue("alice", "User")); c != 202 {
		t.Fatalf("first delivery %d", c)
	}
	if c := deliver(t, pub, "issues", "d-1", "new-secret", issue("alice", "User")); c != 200 {
		t.Fatalf("repeated delivery %d, want 200", c)
	}
	if c := deliver(t, pub, "issues", "d-2", "new-secret", issue("Warden-Test[bot]", "Bot")); c != 202 {
		t.Fatalf("self delivery %d", c)
	}
	if c := deliver(t, pub, "star", "d-3", "new-secret", []byte(`{"action":"created"}`)); c != 200 {
		t.Fatalf("unhandled event %d, want 200", c)
	}
	if c := deliver(t, pub, "issues", "d-4", "wrong-secret", issue("mallory", "User")); c != 401 {
		t.Fatalf("bad signature %d, want 401", c)
	}
	pending, _, _ := svc.Inbox.Counts(context.Background())
	if pending != 2 {
		t.Fatalf("%d pending before identity, want 2 (nothing processed)", pending)
	}
	allowed.Store(true)
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, _ := get(t, pub+"/readyz")
		pending, _, _ := svc.Inbox.Counts(context.Background())
		if code == 200 && pending == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not drained: readyz %d, %d pending", code, pending)
		}
		time.Sleep(20 * time.Millisecond)
	}
	recs, err := svc.Inbox.List(context.Background(), false, 10)
	if err != nil {
		t.Fatal(err)
	}
	outcomes := map[string]string{}
	for _, r := range recs {
		outcomes[r.ID] = r.Outcome
		if r.Repo != "acme/app" || r.Number != 5 {
			t.Errorf("%s recorded as %s#%d", r.ID, r.Repo, r.Number)
		}
	}
	if len(recs) != 2 || outcomes["d-1"] != "repository not served" || !strings.HasPrefix(outcomes["d-2"], webhooks.OutcomeSelf) {
		t.Fatalf("outcomes %v (want d-1 repository not served (no installation event taught it), d-2 self; star not stored)", outcomes)
	}
	wantMetrics := []string{
		`warden_deliveries_accepted_total{event="issues",result="stored"} 2`,
		`warden_deliveries_accepted_total{event="issues",result="duplicate"} 1`,
		`warden_deliveries_rejected_total{reason="signature"} 1`,
		`warden_delivery_outcomes_total{event="issues",outcome="self"} 1`,
		`warden_github_requests_total{`,
	}
	// Outcomes are counted just after the commit the loop above saw.
	var metrics string
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		_, metrics = get(t, admin+"/metrics")
		missing := false
		for _, want := range wantMetrics {
			missing = missing || !strings.Contains(metrics, want)
		}
		if !missing || time.Now().After(deadline) {
			break
		}
	}
	for _, want := range wantMetrics {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if code, page := get(t, admin+"/"); code != 200 || !strings.Contains(strings.ToLower(page), "dead letters") || !strings.Contains(page, "warden-test[bot]") {
		t.Fatalf("status page %d %q", code, page)
	}
	// The public listener never serves the operators' pages.
	if code, _ := get(t, pub+"/metrics"); code != 404 {
		t.Fatalf("public /metrics %d, want 404", code)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not shut down")
	}
	svc.Close()

	// The operators' commands read the same database.
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"deliveries", "list"}, mapEnv(env), &out, &errb); code != 0 {
		t.Fatalf("deliveries list: %d %s", code, errb.String())
	}
	if !strings.Contains(out.String(), "d-1") || !strings.Contains(out.String(), "issues.opened") {
		t.Fatalf("deliveries list: %q", out.String())
	}
	out.Reset()
	errb.Reset()
	if code := run(context.Background(), []string{"deliveries", "retry", "d-1", "nope"}, mapEnv(env), &out, &errb); code != exitFailed ||
		!strings.Contains(errb.String(), "d-1: is done") || !strings.Contains(errb.String(), "nope: no such delivery") {
		t.Fatalf("retry of a done and an unknown delivery: %d %q", code, errb.String())
	}
}

// TestServeRefusesBadSettingsWithExit2 runs the command as an operator would.
func TestServeRefusesBadSettingsWithExit2(t *testing.T) {
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "key.pem")
	os.WriteFile(keyFile, testKey(), 0o600)
	badKey := filepath.Join(dir, "bad.pem")
	os.WriteFile(badKey, []byte("-----BEGIN RSA PRIVATE KEY-----\nZZZKEYMATERIALZZZ\n-----END RSA PRIVATE KEY-----\n"), 0o600)
	good := map[string]string{"WARDEN_APP_ID": "42", "WARDEN_PRIVATE_KEY_FILE": keyFile, "WARDEN_WEBHOOK_SECRET": "topsecret",
		"WARDEN_DATABASE": "sqlite:" + filepath.Join(dir, "w.db"), "WARDEN_LISTEN": "127.0.0.1:0", "WARDEN_ADMIN_LISTEN": "127.0.0.1:0"}
	with := func(k, v string) map[string]string {
		m := map[string]string{}
		for a, b := range good {
			m[a] = b
		}
		if v == "" {
			delete(m, k)
		} else {
			m[k] = v
		}
		return m
	}
	cases := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"no app id", with("WARDEN_APP_ID", ""), "WARDEN_APP_ID"},
		{"no secret", with("WARDEN_WEBHOOK_SECRET", ""), "WARDEN_WEBHOOK_SECRET"},
		{"unreadable key", with("WARDEN_PRIVATE_KEY_FILE", filepath.Join(dir, "missing.pem")), "WARDEN_PRIVATE_KEY_FILE"},
		{"bad key", with("WARDEN_PRIVATE_KEY_FILE", badKey), "GitHub App"},
		{"unreachable database", with("WARDEN_DATABASE", "sqlite:"+filepath.Join(dir, "no", "such", "dir", "w.db")), "WARDEN_DATABASE"},
		{"port taken", with("WARDEN_LISTEN", "256.0.0.1:1"), "WARDEN_LISTEN"},
		// localhost names two addresses; pgx reports each on a line of its own.
		{"unreachable postgres", with("WARDEN_DATABASE", "postgres://warden:topsecret@localhost:1/warden?connect_timeout=2"), "WARDEN_DATABASE"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := run(context.Background(), []string{"serve"}, mapEnv(c.env), &out, &errb)
			if code != exitSetting {
				t.Fatalf("exit %d, want 2; stderr %q", code, errb.String())
			}
			msg := errb.String()
			if strings.Count(msg, "\n") != 1 || !strings.Contains(msg, c.want) {
				t.Fatalf("want one line naming %q, got %q", c.want, msg)
			}
			if strings.Contains(msg, "topsecret") || strings.Contains(msg, "ZZZKEYMATERIAL") {
				t.Fatalf("stderr leaks a secret: %q", msg)
			}
		})
	}
}
