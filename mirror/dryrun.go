package mirror

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/google/go-github/v66/github"

	"github.com/wardenhq/warden/mirror/store"
)

// dry_run (CONTRACT.md §2: "observe and report only; write nothing to
// GitHub, labels included") is held in two places.
//
// The callers decide what dry run means for what they record: each write
// path checks the repository's settings first, writes nothing, records
// nothing that says the write happened (a label not added is not noted as
// present, a park not begun leaves no tag, a check run not created leaves
// no record), and logs at info what it would have written (heldWrite).
//
// The chokepoint makes a write impossible whatever a caller does: every
// GitHub client this package makes on a repository's behalf comes from
// guardedClient (callsFor, the installation's label bootstrap, the
// reconcile pass, the report comments, the dashboard), and its transport
// refuses every request but a read (GET, HEAD) while the repository's
// settings say dry_run, or while they cannot be read. The request is not
// sent; the caller gets an error errors.Is finds errDryRun in, so nothing
// is recorded as written, the delivery is retried (by then its handler
// reads dry_run and holds the write itself) and a path that forgot dry run
// fails loudly instead of writing. TestGitHubClientsAreGuarded keeps every
// client in this package behind it.
//
// A repository's settings are read before anything is written on it: the
// settings file is read before the repository is served (serve), and a
// repository served with nothing stored has it read before a handler
// decides anything (Mirror.settings, SettingsStore.ensureLoaded); while it
// cannot be read, the settings say dry_run (fail closed).

// errDryRun marks a write the dry-run guard refused to send.
var errDryRun = errors.New("dry_run: warden writes nothing to GitHub on this repository")

// dryRunTransport refuses writes on one repository while it is in dry run.
type dryRunTransport struct {
	base http.RoundTripper
	repo store.Repo
	// dry reports whether repo is in dry run now; an error (its settings
	// unknown) refuses too.
	dry func(ctx context.Context) (bool, error)
	log *slog.Logger
}

// RoundTrip sends reads as they are, and a write only when the repository
// is not in dry run.
func (t *dryRunTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodGet || req.Method == http.MethodHead {
		return t.base.RoundTrip(req)
	}
	dry, err := t.dry(req.Context())
	if err == nil && !dry {
		return t.base.RoundTrip(req)
	}
	body := requestSummary(req)
	if err != nil {
		t.log.Warn("dry run: GitHub write not sent: the repository's settings are unknown", "repo", t.repo.FullName,
			"method", req.Method, "path", req.URL.Path, "err", err)
		return nil, fmt.Errorf("%s %s on %s not sent: its settings (dry_run) could not be read: %w: %w", req.Method, req.URL.Path, t.repo.FullName, errDryRun, err)
	}
	t.log.Info("dry run: GitHub write refused", "repo", t.repo.FullName, "method", req.Method, "path", req.URL.Path, "body", body)
	return nil, fmt.Errorf("%s %s on %s not sent: %w", req.Method, req.URL.Path, t.repo.FullName, errDryRun)
}

// requestSummary is the start of a refused request's body, for the log
// (what warden would have written); the body is closed, as RoundTrip must.
func requestSummary(req *http.Request) string {
	if req.Body == nil {
		return ""
	}
	defer req.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(req.Body, 301))
	b = bytes.TrimSpace(b)
	if len(b) > 300 {
		return string(b[:300]) + "…"
	}
	return string(b)
}

// guardedClient is gh (an installation's client) for writes on repo: the
// same transport (budget, conditional requests, retries) and base URLs,
// behind the dry-run guard.
func guardedClient(gh *github.Client, repo store.Repo, dry func(ctx context.Context) (bool, error), log *slog.Logger) *github.Client {
	hc := gh.Client()
	base := hc.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	if log == nil {
		log = slog.Default()
	}
	hc.Transport = &dryRunTransport{base: base, repo: repo, dry: dry, log: log}
	g := github.NewClient(hc)
	baseURL, uploadURL := *gh.BaseURL, *gh.UploadURL
	g.BaseURL, g.UploadURL, g.UserAgent = &baseURL, &uploadURL, gh.UserAgent
	return g
}

// repoClient is the installation's client for repo, behind the dry-run
// guard (the only way this package's handlers get one).
func (m *Mirror) repoClient(repo store.Repo) (*github.Client, error) {
	gh, err := m.GitHub.Installation(repo.Installation)
	if err != nil {
		return nil, fmt.Errorf("installation %d client for %s: %w", repo.Installation, repo.FullName, err)
	}
	return guardedClient(gh, repo, func(ctx context.Context) (bool, error) { return m.dryRun(ctx, repo) }, m.logger()), nil
}

// dryRun is the guard's answer for repo: the settings store's, read afresh
// (another replica may have applied a push of dry_run a moment ago), or,
// without a store, the settings in effect.
func (m *Mirror) dryRun(ctx context.Context, repo store.Repo) (bool, error) {
	if m.SettingsStore != nil {
		return m.SettingsStore.DryRun(ctx, repo)
	}
	return m.settings(ctx, repo).DryRun, nil
}

// heldEvery is how often the same held write is logged again (the sweep
// and the reconcile meet an item's held park every pass).
const heldEvery = 10 * time.Minute

// heldLog remembers when each held write was last logged, by Mirror.
var heldLog struct {
	mu sync.Mutex
	at map[string]time.Time
}

// heldWrite logs, at info, a GitHub write dry_run held back on repo: what
// warden would have written (the status page and the API show the
// findings that caused it). The same write is logged once per heldEvery.
func (m *Mirror) heldWrite(repo store.Repo, what string, args ...any) {
	key := fmt.Sprintf("%p %d %s %v", m, repo.ID, what, args)
	now := m.now()
	heldLog.mu.Lock()
	if heldLog.at == nil || len(heldLog.at) > 10_000 {
		heldLog.at = map[string]time.Time{}
	}
	last, seen := heldLog.at[key]
	fresh := !seen || now.Sub(last) >= heldEvery || now.Before(last)
	if fresh {
		heldLog.at[key] = now
	}
	heldLog.mu.Unlock()
	if fresh {
		m.logger().Info("dry run: "+what+" (not written)", append([]any{"repo", repo.FullName}, args...)...)
	}
}

func (m *Mirror) logger() *slog.Logger {
	if m.Log != nil {
		return m.Log
	}
	return slog.Default()
}
