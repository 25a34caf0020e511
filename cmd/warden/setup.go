package main

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/google/go-github/v66/github"
	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v4"
)

// The files setup writes.
const (
	setupEnvFile = "warden-app.env"
	setupPEMFile = "warden-app.pem"
)

const defaultAPIURL = "https://api.github.com/"

// manifestCodeRe is what a manifest code may look like; it goes into a path.
var manifestCodeRe = regexp.MustCompile(`^[A-Za-z0-9_-]{1,200}$`)

type setupFlow struct {
	e          env
	org        string
	github     string // web base, no trailing slash
	api        string // REST base, with a trailing slash
	out        string // absolute
	manifest   []byte // JSON, as posted to GitHub
	state      string
	callback   string
	mu         sync.Mutex
	done       chan struct{}
	doneErr    error
	finished   bool
	createdApp *github.AppConfig
}

// smeeHint says how to get a webhook URL that reaches a laptop.
const smeeHint = "for a laptop, open https://smee.io/new for a channel URL and forward it with " +
	"`npx smee-client --url URL --target http://127.0.0.1:8080/webhooks` (or use `gh webhook forward`)"

func (c *cli) setupCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use: "setup --webhook-url URL",
		Example: `  warden setup --webhook-url https://warden.acme.org/webhooks
  warden setup --org acme --webhook-url https://smee.io/AbC123 --out ~/.config/warden`,
		Short: "Create the GitHub App from app.yml (the manifest flow) and store its credentials",
		Long: `Creates warden's GitHub App from its manifest (app.yml) with GitHub's manifest
flow: serves a page on a loopback address that posts the manifest to GitHub;
GitHub sends the browser back with a code, which is exchanged for the App's id,
private key and webhook secret. They are written, readable only by you, to
DIR/warden-app.env and DIR/warden-app.pem (existing files are never
overwritten). No secret is printed.

--webhook-url is required: where GitHub will send deliveries (the public
address of warden serve's /webhooks). On a laptop, a smee.io channel works:
open https://smee.io/new, pass its URL here, and forward it to warden serve with
  npx smee-client --url https://smee.io/CHANNEL --target http://127.0.0.1:8080/webhooks`,
		Args: noArgs,
	}
	o := setupOpts{}
	fs := cmd.Flags()
	fs.StringVar(&o.org, "org", "", "create the App under this organization (default: your account)")
	fs.StringVar(&o.ghURL, "github", "https://github.com", "GitHub's web address (GitHub Enterprise Server: its address)")
	fs.StringVar(&o.api, "github-api-url", "", "GitHub's REST base URL (WARDEN_GITHUB_API_URL, default "+defaultAPIURL+")")
	fs.StringVar(&o.out, "out", ".", "the directory the credentials are written to")
	fs.StringVar(&o.listen, "listen", "127.0.0.1:0", "the local address of the setup page (loopback only)")
	fs.StringVar(&o.webhookURL, "webhook-url", "", "where GitHub sends deliveries: warden's public /webhooks URL, or a smee.io channel (required)")
	fs.StringVar(&o.manifestFile, "manifest", "app.yml", "the App manifest")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Minute, "give up when no App was created within this long")
	documentSettings(cmd, "WARDEN_GITHUB_API_URL")
	cmd.RunE = c.action(func(cmd *cobra.Command, _ []string) int { return c.setup(cmd, o) })
	return cmd
}

// setupOpts are the flags of `warden setup`.
type setupOpts struct {
	org, ghURL, api, out, listen, webhookURL, manifestFile string
	timeout                                                time.Duration
}

func (c *cli) setup(cobraCmd *cobra.Command, o setupOpts) int {
	const cmd = "setup"
	ctx, e := c.ctx, c.e
	usage := func(format string, a ...any) int { return c.usageError(cobraCmd, format, a...) }
	if o.api == "" {
		o.api = strings.TrimSpace(e.getenv("WARDEN_GITHUB_API_URL"))
	}
	if o.api == "" {
		o.api = defaultAPIURL
	}
	org, ghURL, api, out, listen, webhookURL, manifestFile, timeout := &o.org, &o.ghURL, &o.api, &o.out, &o.listen, &o.webhookURL, &o.manifestFile, &o.timeout
	if *webhookURL == "" {
		return usage("--webhook-url is required: where GitHub sends deliveries; %s", smeeHint)
	}
	if *timeout <= 0 {
		return usage("--timeout must be positive")
	}
	web, err := absoluteHTTPURL(*ghURL)
	if err != nil {
		return usage("--github: %v", err)
	}
	apiURL, err := absoluteHTTPURL(*api)
	if err != nil {
		return usage("--github-api-url: %v", err)
	}
	if *org != "" && !regexp.MustCompile(`^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})$`).MatchString(*org) {
		return usage("--org %q is not an organization login", *org)
	}
	if u, err := absoluteHTTPURL(*webhookURL); err != nil {
		return usage("--webhook-url: %v", err)
	} else if placeholderHost(u) {
		return usage("--webhook-url %q is a placeholder no delivery can reach; %s", *webhookURL, smeeHint)
	}
	if host, _, err := net.SplitHostPort(*listen); err != nil {
		return usage("--listen %q: %v", *listen, err)
	} else if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return usage("--listen %q is not a loopback address (the page carries the flow's state)", *listen)
	}
	dir, err := filepath.Abs(*out)
	if err != nil {
		return usage("--out: %v", err)
	}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return usage("--out %q is not a directory", *out)
	}
	f := &setupFlow{e: e, org: *org, github: strings.TrimSuffix(web, "/"), api: strings.TrimSuffix(apiURL, "/") + "/",
		out: dir, done: make(chan struct{})}
	if err := f.checkNoFiles(); err != nil {
		return fail(e, cmd, err)
	}
	raw, err := os.ReadFile(*manifestFile)
	if err != nil {
		return usage("--manifest: %v", err)
	}
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return fail(e, cmd, err)
	}
	f.state = hex.EncodeToString(b)

	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return usage("--listen %q: %v", *listen, err)
	}
	base := "http://" + ln.Addr().String()
	f.callback = base + "/callback"
	if f.manifest, err = manifestJSON(raw, f.callback, *webhookURL); err != nil {
		ln.Close()
		return usage("--manifest %s: %v", *manifestFile, err)
	}

	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", f.page)
	mux.HandleFunc("GET /callback", func(w http.ResponseWriter, r *http.Request) { f.callbackHandler(ctx, w, r) })
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	defer func() {
		sctx, scancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer scancel()
		srv.Shutdown(sctx)
	}()

	fmt.Fprintf(e.stdout, "Open %s/ in a browser signed in to %s and press \"Create the App\".\n", base, f.github)
	fmt.Fprintf(e.stdout, "Waiting up to %s (Ctrl-C to stop)...\n", *timeout)
	select {
	case <-f.done:
	case <-ctx.Done():
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return fail(e, cmd, fmt.Errorf("no App was created within %s; nothing was written", *timeout))
		}
		return fail(e, cmd, errors.New("stopped; nothing was written"))
	}
	f.mu.Lock()
	doneErr, app := f.doneErr, f.createdApp
	f.mu.Unlock()
	if doneErr != nil {
		return fail(e, cmd, doneErr)
	}
	f.nextSteps(app)
	return exitOK
}

// placeholderHost reports whether u's host is a reserved name (RFC 2606:
// .invalid, .example, example.com…) that stands for an address to fill in:
// app.yml's own hook URL is one.
func placeholderHost(u string) bool {
	p, err := url.Parse(u)
	if err != nil {
		return true
	}
	h := strings.ToLower(p.Hostname())
	for _, suffix := range []string{".invalid", ".example"} {
		if strings.HasSuffix(h, suffix) {
			return true
		}
	}
	switch strings.TrimPrefix(h, "www.") {
	case "example.com", "example.net", "example.org", "invalid", "example":
		return true
	}
	return false
}

func absoluteHTTPURL(s string) (string, error) {
	u, err := url.Parse(s)
	if err != nil {
		return "", err
	}
	if (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("%q is not an http(s) URL", s)
	}
	return u.String(), nil
}

// manifestJSON converts app.yml into the JSON GitHub's new-App page takes,
// with redirect_url pointing at the local callback.
func manifestJSON(yml []byte, redirect, webhookURL string) ([]byte, error) {
	var m map[string]any
	if err := yaml.Unmarshal(yml, &m); err != nil {
		return nil, err
	}
	if name, _ := m["name"].(string); name == "" {
		return nil, errors.New("no name")
	}
	if _, ok := m["default_permissions"].(map[string]any); !ok {
		return nil, errors.New("no default_permissions")
	}
	if webhookURL != "" {
		hook, _ := m["hook_attributes"].(map[string]any)
		if hook == nil {
			hook = map[string]any{"active": true}
		}
		hook["url"] = webhookURL
		m["hook_attributes"] = hook
	}
	m["redirect_url"] = redirect
	return json.Marshal(m)
}

func (f *setupFlow) paths() (envPath, pemPath string) {
	return filepath.Join(f.out, setupEnvFile), filepath.Join(f.out, setupPEMFile)
}

// checkNoFiles fails closed when a file setup would write already exists.
func (f *setupFlow) checkNoFiles() error {
	var exist []string
	envPath, pemPath := f.paths()
	for _, p := range []string{envPath, pemPath} {
		if _, err := os.Lstat(p); err == nil || !errors.Is(err, os.ErrNotExist) {
			exist = append(exist, p)
		}
	}
	if len(exist) > 0 {
		return fmt.Errorf("%s already exists; refusing to overwrite (move it away first)", strings.Join(exist, " and "))
	}
	return nil
}

func (f *setupFlow) newAppURL() string {
	p := "/settings/apps/new"
	if f.org != "" {
		p = "/organizations/" + url.PathEscape(f.org) + "/settings/apps/new"
	}
	return f.github + p + "?state=" + url.QueryEscape(f.state)
}

var setupPage = template.Must(template.New("page").Parse(`<!doctype html>
<html><head><meta charset="utf-8"><title>warden setup</title></head>
<body>
<h1>Create warden's GitHub App</h1>
<p>This posts warden's manifest to {{.Where}}. GitHub then asks you to name and confirm the App,
and sends you back here to finish.</p>
<form action="{{.Action}}" method="post">
<input type="hidden" name="manifest" value="{{.Manifest}}">
<button type="submit">Create the App</button>
</form>
</body></html>
`))

func (f *setupFlow) page(w http.ResponseWriter, r *http.Request) {
	where := f.github
	if f.org != "" {
		where += " for the organization " + f.org
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Referrer-Policy", "no-referrer")
	setupPage.Execute(w, map[string]any{"Where": where, "Action": template.URL(f.newAppURL()), "Manifest": string(f.manifest)})
}

func (f *setupFlow) callbackHandler(ctx context.Context, w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	q := r.URL.Query()
	state, code := q.Get("state"), q.Get("code")
	if subtle.ConstantTimeCompare([]byte(state), []byte(f.state)) != 1 {
		fmt.Fprintln(f.e.stderr, "warden setup: refused a callback whose state does not match this setup's")
		http.Error(w, "The state does not match this setup: refused, nothing was created here.", http.StatusBadRequest)
		return
	}
	if !manifestCodeRe.MatchString(code) {
		http.Error(w, "The callback carries no valid code.", http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.finished {
		http.Error(w, "This setup has already finished.", http.StatusGone)
		return
	}
	// Fail closed before the single-use code is spent.
	if err := f.checkNoFiles(); err != nil {
		f.finish(nil, err)
		http.Error(w, "Not finished: "+err.Error(), http.StatusConflict)
		return
	}
	app, err := f.convert(ctx, code)
	if err == nil {
		err = f.write(app)
	}
	if err != nil {
		f.finish(nil, err)
		http.Error(w, "Not finished: "+err.Error()+" (see the terminal).", http.StatusBadGateway)
		return
	}
	f.finish(app, nil)
	fmt.Fprintf(w, "The App %s was created and its credentials were saved in %s.\nBack to the terminal for the next steps; you can close this page.\n",
		app.GetSlug(), f.out)
}

// finish ends the flow; f.mu is held.
func (f *setupFlow) finish(app *github.AppConfig, err error) {
	f.finished, f.createdApp, f.doneErr = true, app, err
	close(f.done)
}

func (f *setupFlow) convert(ctx context.Context, code string) (*github.AppConfig, error) {
	c := github.NewClient(&http.Client{Timeout: 30 * time.Second})
	u, err := url.Parse(f.api)
	if err != nil {
		return nil, err
	}
	c.BaseURL = u
	app, _, err := c.Apps.CompleteAppManifest(ctx, code)
	if err != nil {
		var ge *github.ErrorResponse
		if errors.As(err, &ge) && ge.Response != nil {
			return nil, fmt.Errorf("GitHub refused the manifest code (%d %s); run setup again", ge.Response.StatusCode, ge.Message)
		}
		return nil, fmt.Errorf("exchanging the manifest code: %v", err)
	}
	switch {
	case app.GetID() == 0:
		return nil, errors.New("GitHub's answer has no App id")
	case app.GetPEM() == "":
		return nil, errors.New("GitHub's answer has no private key")
	case app.GetWebhookSecret() == "":
		return nil, errors.New("GitHub's answer has no webhook secret")
	case strings.ContainsAny(app.GetWebhookSecret(), "\n\r,"):
		return nil, errors.New("GitHub's webhook secret cannot be written to an env file")
	}
	return app, nil
}

// write stores the credentials, 0600, never replacing a file. The PEM goes
// first: without it the env file would point nowhere.
func (f *setupFlow) write(app *github.AppConfig) error {
	envPath, pemPath := f.paths()
	if err := writeNewFile(pemPath, []byte(app.GetPEM())); err != nil {
		return err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# warden's GitHub App %q (%s), created by `warden setup` on %s.\n", app.GetSlug(), app.GetHTMLURL(), time.Now().UTC().Format(time.RFC3339))
	fmt.Fprintf(&b, "WARDEN_APP_ID=%d\n", app.GetID())
	fmt.Fprintf(&b, "WARDEN_PRIVATE_KEY_FILE=%s\n", pemPath)
	fmt.Fprintf(&b, "WARDEN_WEBHOOK_SECRET=%s\n", app.GetWebhookSecret())
	if f.api != defaultAPIURL {
		fmt.Fprintf(&b, "WARDEN_GITHUB_API_URL=%s\n", f.api)
	}
	if err := writeNewFile(envPath, []byte(b.String())); err != nil {
		return fmt.Errorf("%v; the private key was saved in %s, the App id is %d; the webhook secret can be reset in the App's settings", err, pemPath, app.GetID())
	}
	return nil
}

func writeNewFile(path string, data []byte) error {
	fh, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return fmt.Errorf("%s already exists; refusing to overwrite it", path)
	}
	if err != nil {
		return err
	}
	if err := fh.Chmod(0o600); err != nil {
		fh.Close()
		return err
	}
	if _, err := io.WriteString(fh, string(data)); err != nil {
		fh.Close()
		return err
	}
	if err := fh.Sync(); err != nil {
		fh.Close()
		return err
	}
	return fh.Close()
}

func (f *setupFlow) nextSteps(app *github.AppConfig) {
	envPath, pemPath := f.paths()
	w := f.e.stdout
	fmt.Fprintf(w, "Created the GitHub App %s (id %d).\n", app.GetSlug(), app.GetID())
	fmt.Fprintf(w, "Saved (mode 0600, keep them secret): %s, %s\n", envPath, pemPath)
	fmt.Fprintln(w, "Next steps:")
	install := fmt.Sprintf("%s/apps/%s/installations/new", f.github, url.PathEscape(app.GetSlug()))
	if app.GetHTMLURL() != "" {
		install = strings.TrimSuffix(app.GetHTMLURL(), "/") + "/installations/new"
	}
	fmt.Fprintf(w, "  1. Install the App on the repositories it should keep: %s\n", install)
	fmt.Fprintln(w, "  2. Check its webhook URL points at where warden will listen (/webhooks), in the App's settings.")
	fmt.Fprintf(w, "  3. Run the service: set -a; . %s; set +a; warden serve\n", envPath)
}
