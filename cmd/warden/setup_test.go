package main

import (
	"bytes"
	"context"
	"encoding/json"
	"html"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wardenhq/warden/internal/ghsim"
	"go.yaml.in/yaml/v4"
)

// setupBuf is a bytes.Buffer safe for the command and the test at once.
type setupBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *setupBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *setupBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// testWebhookURL is the webhook URL the tests give setup (it requires one).
const testWebhookURL = "https://smee.io/warden-setup-test"

type setupRun struct {
	base           string // the local page
	stdout, stderr *setupBuf
	code           chan int
	cancel         context.CancelFunc
}

// startSetup runs `warden setup` in-process and waits for its page.
func startSetup(t *testing.T, args ...string) *setupRun {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &setupRun{stdout: &setupBuf{}, stderr: &setupBuf{}, code: make(chan int, 1), cancel: cancel}
	getenv := func(string) string { return "" }
	go func() {
		if !slices.Contains(args, "--webhook-url") {
			args = append(args, "--webhook-url", testWebhookURL)
		}
		r.code <- run(ctx, append([]string{"setup", "--manifest", "../../app.yml"}, args...), getenv, r.stdout, r.stderr)
	}()
	t.Cleanup(cancel)
	re := regexp.MustCompile(`Open (http://127\.0\.0\.1:\d+)/ `)
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if m := re.FindStringSubmatch(r.stdout.String()); m != nil {
			r.base = m[1]
			return r
		}
		select {
		case c := <-r.code:
			t.Fatalf("setup exited %d before serving its page:\n%s%s", c, r.stdout, r.stderr)
		case <-time.After(10 * time.Millisecond):
		}
	}
	t.Fatalf("setup served no page:\n%s%s", r.stdout, r.stderr)
	return nil
}

func (r *setupRun) wait(t *testing.T) int {
	t.Helper()
	select {
	case c := <-r.code:
		return c
	case <-time.After(15 * time.Second):
		t.Fatalf("setup did not exit:\n%s%s", r.stdout, r.stderr)
		return -1
	}
}

func httpGet(t *testing.T, u string) (int, string) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

var (
	formActionRe   = regexp.MustCompile(`<form action="([^"]*)" method="post">`)
	formManifestRe = regexp.MustCompile(`<input type="hidden" name="manifest" value="([^"]*)">`)
)

// fetchSetupPage fetches the local page and returns the form's action and manifest.
func fetchSetupPage(t *testing.T, r *setupRun) (action *url.URL, manifest string) {
	t.Helper()
	status, page := httpGet(t, r.base+"/")
	if status != http.StatusOK {
		t.Fatalf("GET /: %d\n%s", status, page)
	}
	a, m := formActionRe.FindStringSubmatch(page), formManifestRe.FindStringSubmatch(page)
	if a == nil || m == nil {
		t.Fatalf("the page has no manifest form:\n%s", page)
	}
	u, err := url.Parse(html.UnescapeString(a[1]))
	if err != nil {
		t.Fatal(err)
	}
	return u, html.UnescapeString(m[1])
}

func newSetupSim(t *testing.T) (*ghsim.Sim, *ghsim.Server) {
	t.Helper()
	sim, err := ghsim.New(ghsim.Options{WebhookSecret: "whsec-3f9a1c77d2e8b6a4"})
	if err != nil {
		t.Fatal(err)
	}
	srv := sim.Start()
	t.Cleanup(srv.Close)
	return sim, srv
}

func TestSetupManifestFlow(t *testing.T) {
	sim, srv := newSetupSim(t)
	dir := t.TempDir()
	r := startSetup(t, "--github-api-url", srv.URL, "--out", dir, "--org", "acme", "--webhook-url", "https://warden.acme.test/webhooks")

	action, manifest := fetchSetupPage(t, r)
	if got := action.Scheme + "://" + action.Host + action.Path; got != "https://github.com/organizations/acme/settings/apps/new" {
		t.Errorf("form posts to %s, want the organization's new-App page", got)
	}
	state := action.Query().Get("state")
	if len(state) < 32 {
		t.Errorf("state %q is missing or short", state)
	}

	// The manifest is app.yml's, with the callback as redirect_url.
	var want map[string]any
	b, err := os.ReadFile("../../app.yml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(manifest), &got); err != nil {
		t.Fatalf("the form's manifest is not JSON: %v\n%s", err, manifest)
	}
	if got["redirect_url"] != r.base+"/callback" {
		t.Errorf("redirect_url %v, want %s/callback", got["redirect_url"], r.base)
	}
	for _, k := range []string{"name", "url", "public", "default_permissions", "default_events"} {
		gj, _ := json.Marshal(got[k])
		wj, _ := json.Marshal(want[k])
		if got[k] == nil || string(gj) != string(wj) {
			t.Errorf("manifest %s = %s, app.yml has %s", k, gj, wj)
		}
	}
	if hook, _ := got["hook_attributes"].(map[string]any); hook["url"] != "https://warden.acme.test/webhooks" || hook["active"] != true {
		t.Errorf("hook_attributes %v, want --webhook-url, active", got["hook_attributes"])
	}

	// GitHub redirects back with a code and the state.
	code := sim.ManifestCode(manifest)
	status, body := httpGet(t, r.base+"/callback?code="+code+"&state="+state)
	if status != http.StatusOK {
		t.Fatalf("callback: %d %s\n%s", status, body, r.stderr)
	}
	if c := r.wait(t); c != exitOK {
		t.Fatalf("setup exited %d:\n%s%s", c, r.stdout, r.stderr)
	}
	if ms := sim.Manifests(); len(ms) != 1 || string(ms[0]) != manifest {
		t.Errorf("the simulator received %s", ms)
	}

	pemPath, envPath := filepath.Join(dir, "warden-app.pem"), filepath.Join(dir, "warden-app.env")
	for _, p := range []string{pemPath, envPath} {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v, want 0600", p, st.Mode().Perm())
		}
	}
	pemBytes, _ := os.ReadFile(pemPath)
	if !bytes.Equal(pemBytes, sim.PrivateKeyPEM()) {
		t.Errorf("%s is not the App's private key", pemPath)
	}
	envBytes, _ := os.ReadFile(envPath)
	for _, line := range []string{"WARDEN_APP_ID=4242", "WARDEN_WEBHOOK_SECRET=whsec-3f9a1c77d2e8b6a4",
		"WARDEN_PRIVATE_KEY_FILE=" + pemPath, "WARDEN_GITHUB_API_URL=" + srv.URL + "/"} {
		if !slices.Contains(strings.Split(string(envBytes), "\n"), line) {
			t.Errorf("%s lacks the line %q:\n%s", envPath, line, envBytes)
		}
	}

	// No secret on the terminal or the page; the next steps are printed.
	out := r.stdout.String() + r.stderr.String() + body
	for _, secret := range []string{"whsec-3f9a1c77d2e8b6a4", "PRIVATE KEY", strings.Split(string(pemBytes), "\n")[1]} {
		if strings.Contains(out, secret) {
			t.Errorf("a secret (%.12s…) was printed:\n%s", secret, out)
		}
	}
	for _, step := range []string{"https://github.com/apps/warden-sim/installations/new", "warden serve", envPath} {
		if !strings.Contains(r.stdout.String(), step) {
			t.Errorf("stdout lacks %q:\n%s", step, r.stdout)
		}
	}
}

func TestSetupRefusesAWrongState(t *testing.T) {
	sim, srv := newSetupSim(t)
	dir := t.TempDir()
	r := startSetup(t, "--github-api-url", srv.URL, "--out", dir)
	action, manifest := fetchSetupPage(t, r)
	if got := action.Host + action.Path; got != "github.com/settings/apps/new" {
		t.Errorf("form posts to %s, want the account's new-App page", got)
	}
	code := sim.ManifestCode(manifest)
	for _, state := range []string{"", "0123456789abcdef0123456789abcdef0123456789abcdef", action.Query().Get("state") + "x"} {
		status, body := httpGet(t, r.base+"/callback?code="+code+"&state="+url.QueryEscape(state))
		if status != http.StatusBadRequest {
			t.Errorf("state %q: %d %s, want 400", state, status, body)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("a refused callback wrote %v", ents)
	}
	select {
	case c := <-r.code:
		t.Fatalf("setup exited %d on a forged callback; it should keep waiting", c)
	default:
	}
	// The code was not spent: the real redirect still completes.
	status, body := httpGet(t, r.base+"/callback?code="+code+"&state="+action.Query().Get("state"))
	if status != http.StatusOK {
		t.Fatalf("callback: %d %s", status, body)
	}
	if c := r.wait(t); c != exitOK {
		t.Fatalf("setup exited %d:\n%s%s", c, r.stdout, r.stderr)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 2 {
		t.Errorf("wrote %v, want the env and PEM files", ents)
	}
}

func TestSetupRefusesToOverwrite(t *testing.T) {
	_, srv := newSetupSim(t)
	for _, name := range []string{"warden-app.env", "warden-app.pem"} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			p := filepath.Join(dir, name)
			if err := os.WriteFile(p, []byte("keep me\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			var stdout, stderr bytes.Buffer
			c := run(context.Background(), []string{"setup", "--manifest", "../../app.yml", "--github-api-url", srv.URL, "--out", dir, "--timeout", "2s", "--webhook-url", testWebhookURL},
				func(string) string { return "" }, &stdout, &stderr)
			if c == exitOK {
				t.Fatalf("setup succeeded over an existing %s", name)
			}
			if !strings.Contains(stderr.String(), p) || !strings.Contains(stderr.String(), "refusing to overwrite") {
				t.Errorf("stderr does not name %s:\n%s", p, stderr.String())
			}
			if strings.Contains(stdout.String(), "Open http") {
				t.Errorf("setup served its page anyway:\n%s", stdout.String())
			}
			if b, _ := os.ReadFile(p); string(b) != "keep me\n" {
				t.Errorf("%s was changed: %q", p, b)
			}
			if ents, _ := os.ReadDir(dir); len(ents) != 1 {
				t.Errorf("setup wrote %v", ents)
			}
		})
	}
}

// A file that appears while the browser is at GitHub is not overwritten,
// and the single-use code is not spent on a flow that cannot finish.
func TestSetupRefusesAFileThatAppearedMeanwhile(t *testing.T) {
	sim, srv := newSetupSim(t)
	dir := t.TempDir()
	r := startSetup(t, "--github-api-url", srv.URL, "--out", dir)
	action, manifest := fetchSetupPage(t, r)
	pemPath := filepath.Join(dir, "warden-app.pem")
	if err := os.WriteFile(pemPath, []byte("keep me\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code := sim.ManifestCode(manifest)
	status, _ := httpGet(t, r.base+"/callback?code="+code+"&state="+action.Query().Get("state"))
	if status == http.StatusOK {
		t.Errorf("callback succeeded over an existing file")
	}
	if c := r.wait(t); c == exitOK {
		t.Errorf("setup exited 0")
	}
	if b, _ := os.ReadFile(pemPath); string(b) != "keep me\n" {
		t.Errorf("%s was changed", pemPath)
	}
	if _, err := os.Stat(filepath.Join(dir, "warden-app.env")); err == nil {
		t.Errorf("the env file was written")
	}
	if !strings.Contains(r.stderr.String(), pemPath) {
		t.Errorf("stderr does not name %s:\n%s", pemPath, r.stderr)
	}
	// The code is still good (it was not exchanged).
	resp, err := http.Post(srv.URL+"/app-manifests/"+code+"/conversions", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Errorf("the code was spent: %d", resp.StatusCode)
	}
}

func TestSetupTimesOut(t *testing.T) {
	_, srv := newSetupSim(t)
	dir := t.TempDir()
	r := startSetup(t, "--github-api-url", srv.URL, "--out", dir, "--timeout", "300ms")
	if c := r.wait(t); c != exitFailed {
		t.Errorf("exit %d, want %d", c, exitFailed)
	}
	if !strings.Contains(r.stderr.String(), "no App was created within 300ms") {
		t.Errorf("stderr: %s", r.stderr)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("wrote %v", ents)
	}
}

func TestSetupRefusesANonLoopbackListener(t *testing.T) {
	var stdout, stderr bytes.Buffer
	c := run(context.Background(), []string{"setup", "--manifest", "../../app.yml", "--listen", "0.0.0.0:0", "--out", t.TempDir(), "--webhook-url", testWebhookURL},
		func(string) string { return "" }, &stdout, &stderr)
	if c != exitSetting || !strings.Contains(stderr.String(), "not a loopback address") {
		t.Errorf("exit %d, stderr %s", c, stderr.String())
	}
}

// TestSetupRefusesWithoutAWebhookURL: with no --webhook-url, or app.yml's
// placeholder, setup refuses before serving its page, and says how to get
// a URL that reaches a laptop.
func TestSetupRefusesWithoutAWebhookURL(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"none", nil, "--webhook-url is required"},
		{"app.yml's placeholder", []string{"--webhook-url", "https://warden.example.invalid/webhooks"}, "is a placeholder"},
		{"example.com", []string{"--webhook-url", "https://example.com/webhooks"}, "is a placeholder"},
		{"not a URL", []string{"--webhook-url", "smee.io/abc"}, "is not an http(s) URL"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), append([]string{"setup", "--manifest", "../../app.yml", "--out", dir}, c.args...),
				func(string) string { return "" }, &stdout, &stderr)
			msg := stderr.String()
			if code != exitSetting || !strings.Contains(msg, c.want) || strings.Count(msg, "\n") != 1 {
				t.Fatalf("exit %d, stderr %q; want exit 2 and one line with %q", code, msg, c.want)
			}
			if c.name != "not a URL" && !strings.Contains(msg, "smee.io") {
				t.Errorf("the refusal does not say how to get a URL: %q", msg)
			}
			if strings.Contains(stdout.String(), "Open http") {
				t.Errorf("setup served its page anyway: %s", stdout.String())
			}
			if ents, _ := os.ReadDir(dir); len(ents) != 0 {
				t.Errorf("setup wrote %v", ents)
			}
		})
	}
}
