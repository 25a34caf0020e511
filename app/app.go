package app

import (
	"bytes"
	"container/list"
	"context"
	"crypto/rsa"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/bradleyfalzon/ghinstallation/v2"
	"github.com/golang-jwt/jwt/v4"
	"github.com/google/go-github/v66/github"
	"github.com/prometheus/client_golang/prometheus"
)

// DefaultBaseURL is GitHub.com's REST API base, used when Config.BaseURL is
// empty.
const DefaultBaseURL = "https://api.github.com/"

// maxCachedInstallations bounds the installation client cache.
const maxCachedInstallations = 1000

// Config configures an [App].
type Config struct {
	// AppID is the GitHub App's numeric id (required, > 0). It is the JWT's
	// issuer.
	AppID int64
	// PrivateKey is the App's RSA private key, PEM-encoded (PKCS#1 or
	// PKCS#8), as GitHub hands it out. A key whose line breaks were
	// flattened to literal `\n` (common in environment variables) is accepted.
	PrivateKey []byte
	// BaseURL is the REST API base: https://api.github.com/ (the default
	// when empty), https://HOST/api/v3/ for GitHub Enterprise Server, or a
	// simulator such as http://127.0.0.1:PORT/. A missing trailing slash is
	// added.
	BaseURL string
	// Transport sends the requests; nil means http.DefaultTransport with
	// deadlines on connecting (10s), the TLS handshake (10s) and the
	// response headers (20s).
	Transport http.RoundTripper
	// RequestTimeout bounds one attempt of a request, its body included;
	// an attempt past it fails with a *TimeoutError and is retried like a
	// 5xx (idempotent methods only). 0 means 30s, negative means none.
	RequestTimeout time.Duration
	// Now is the clock rate-limit resets and trouble are judged by; nil
	// means time.Now.
	Now func() time.Time
	// Logger receives the access layer's retry and rate-limit messages;
	// nil means slog.Default(). Tokens and Authorization headers are never
	// logged.
	Logger *slog.Logger
	// Registerer receives the warden_github_requests_total counter; nil
	// registers no metrics. Several Apps may share one Registerer.
	Registerer prometheus.Registerer
	// MaxWait is the longest the access layer sleeps for a rate-limit reset
	// or a Retry-After before giving up with a *RateLimitedError; 0 means
	// 30s, negative means never wait.
	MaxWait time.Duration
	// Retries is how many times a GET, HEAD, PUT, DELETE or OPTIONS request
	// is retried after a 500/502/503/504 answer or a transport error; 0
	// means 3, negative means no retries. POST and PATCH are never retried.
	Retries int
	// RetryBase is the first retry's backoff, doubled for each further
	// retry, plus up to half again of jitter; 0 means 200ms.
	RetryBase time.Duration
	// ConditionalCacheBytes bounds the memory of the conditional-request
	// cache, which makes repeated GETs (made as an installation) conditional
	// on their ETag or Last-Modified so that GitHub answers 304, free of the
	// rate limit; 0 means 64 MiB, negative turns the cache off. Bodies over
	// 8 MiB are never cached. See [App.ConditionalStats].
	ConditionalCacheBytes int64
}

// Identity is who the App is, from GET /app.
type Identity struct {
	// ID is the App's numeric id.
	ID int64
	// Slug is the App's URL-friendly name.
	Slug string
	// BotLogin is the login of the App's bot account: Slug + "[bot]".
	BotLogin string
	// Name is the App's display name.
	Name string
}

// App is a GitHub App: it hands out go-github clients authenticated as the
// App or as one of its installations, all of them going through one access
// layer. It is safe for concurrent use.
type App struct {
	appID     int64
	key       *rsa.PrivateKey
	baseURL   *url.URL
	uploadURL *url.URL
	layer     *layer
	appClient *github.Client
	installs  *clientCache

	identitySem chan struct{} // one GET /app at a time
	identityMu  sync.Mutex
	identity    *Identity
}

// New validates cfg and builds the App. Errors name the problem but never
// contain key material.
func New(cfg Config) (*App, error) {
	if cfg.AppID <= 0 {
		return nil, fmt.Errorf("app: AppID must be a positive GitHub App id, got %d", cfg.AppID)
	}
	key, err := parsePrivateKey(cfg.PrivateKey)
	if err != nil {
		return nil, fmt.Errorf("app: private key: %w", err)
	}
	base, upload, err := parseBaseURL(cfg.BaseURL)
	if err != nil {
		return nil, fmt.Errorf("app: base URL: %w", err)
	}

	transport := cfg.Transport
	if transport == nil {
		transport = defaultTransport()
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}
	requests, err := newRequestsCounter(cfg.Registerer)
	if err != nil {
		return nil, fmt.Errorf("app: metrics: %w", err)
	}
	l := &layer{
		base:       transport,
		logger:     logger.With("component", "github"),
		requests:   requests,
		maxWait:    defaultIfZero(cfg.MaxWait, defaultMaxWait),
		retries:    defaultIfZero(cfg.Retries, defaultRetries),
		retryBase:  defaultIfZero(cfg.RetryBase, defaultRetryBase),
		resetSlack: defaultResetSlack,
		basePath:   base.Path,
		timeout:    defaultIfZero(cfg.RequestTimeout, defaultRequestTimeout),
		now:        now,
		state:      make(map[int64]*installationState),
	}
	if l.retries < 0 {
		l.retries = 0
	}
	hm, err := newHealthMetrics(cfg.Registerer, l)
	if err != nil {
		return nil, fmt.Errorf("app: metrics: %w", err)
	}
	l.errors, l.remaining, l.limit, l.reset = hm.errors, hm.remaining, hm.limit, hm.reset
	conditional, err := newConditionalCache(cfg.ConditionalCacheBytes, cfg.Registerer)
	if err != nil {
		return nil, fmt.Errorf("app: metrics: %w", err)
	}
	if conditional != nil {
		l.conditional = conditional
	}

	a := &App{
		appID:       cfg.AppID,
		key:         key,
		baseURL:     base,
		uploadURL:   upload,
		layer:       l,
		installs:    newClientCache(maxCachedInstallations),
		identitySem: make(chan struct{}, 1),
	}
	apps := a.appsTransport(AppInstallation)
	a.appClient = a.newClient(apps)
	return a, nil
}

func defaultIfZero[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// parsePrivateKey parses a PEM RSA private key. Its errors describe the
// problem without quoting the input.
func parsePrivateKey(pemBytes []byte) (*rsa.PrivateKey, error) {
	if len(bytes.TrimSpace(pemBytes)) == 0 {
		return nil, errors.New("missing (empty)")
	}
	if !bytes.Contains(pemBytes, []byte("\n")) && bytes.Contains(pemBytes, []byte(`\n`)) {
		pemBytes = bytes.ReplaceAll(pemBytes, []byte(`\n`), []byte("\n"))
	}
	block, _ := pem.Decode(pemBytes)
	if block == nil {
		return nil, errors.New("not PEM-encoded (expected the .pem file GitHub generated for the App, a BEGIN RSA PRIVATE KEY block)")
	}
	switch {
	case strings.Contains(block.Type, "ENCRYPTED") || block.Headers["Proc-Type"] != "":
		return nil, errors.New("encrypted private keys are not supported; use the unencrypted key GitHub generated")
	case strings.Contains(block.Type, "PUBLIC KEY") || block.Type == "CERTIFICATE":
		return nil, fmt.Errorf("PEM block is a %s, not a private key", strings.ToLower(block.Type))
	}
	// ghinstallation's own parser: PKCS#1 or PKCS#8, RSA only.
	key, err := jwt.ParseRSAPrivateKeyFromPEM(pemBytes)
	switch {
	case errors.Is(err, jwt.ErrNotRSAPrivateKey):
		return nil, errors.New("not an RSA key (GitHub App keys are RSA)")
	case err != nil:
		// The parser's message is not quoted: keep key bytes out of errors.
		return nil, fmt.Errorf("PEM block %q does not hold a valid PKCS#1 or PKCS#8 RSA private key", block.Type)
	}
	return key, nil
}

// parseBaseURL normalises the REST base URL and derives the upload URL.
func parseBaseURL(raw string) (base, upload *url.URL, err error) {
	if strings.TrimSpace(raw) == "" {
		raw = DefaultBaseURL
	}
	base, err = url.Parse(strings.TrimSpace(raw))
	if err != nil {
		return nil, nil, fmt.Errorf("parse %q: %w", raw, err)
	}
	if base.Scheme != "http" && base.Scheme != "https" {
		return nil, nil, fmt.Errorf("%q: scheme must be http or https", raw)
	}
	if base.Host == "" {
		return nil, nil, fmt.Errorf("%q: no host", raw)
	}
	if base.User != nil {
		return nil, nil, errors.New("credentials in the URL are not supported")
	}
	base.RawQuery, base.Fragment = "", ""
	if !strings.HasSuffix(base.Path, "/") {
		base.Path += "/"
	}
	base.RawPath = ""

	upload = new(url.URL)
	*upload = *base
	switch {
	case base.Host == "api.github.com":
		upload, _ = url.Parse("https://uploads.github.com/")
	case strings.HasSuffix(base.Path, "/api/v3/"):
		upload.Path = strings.TrimSuffix(base.Path, "v3/") + "uploads/"
	}
	return base, upload, nil
}

// appsTransport returns a JWT transport over the access layer. Each
// installation gets its own: ghinstallation writes the shared AppsTransport's
// BaseURL and Client fields on every token refresh, which races when several
// installations refresh at once.
func (a *App) appsTransport(installation int64) *ghinstallation.AppsTransport {
	atr := ghinstallation.NewAppsTransportFromPrivateKey(
		scopedTransport{l: a.layer, installation: installation}, a.appID, a.key)
	// ghinstallation joins BaseURL and "/app/..." itself.
	atr.BaseURL = strings.TrimSuffix(a.baseURL.String(), "/")
	return atr
}

// newClient builds a go-github client over rt with the App's URLs.
func (a *App) newClient(rt http.RoundTripper) *github.Client {
	c := github.NewClient(&http.Client{Transport: rt})
	// Not WithEnterpriseURLs: it appends api/v3/, wrong for a simulator.
	base, upload := *a.baseURL, *a.uploadURL
	c.BaseURL, c.UploadURL = &base, &upload
	return c
}

// AppID returns the App's id.
func (a *App) AppID() int64 { return a.appID }

// BaseURL returns the normalised REST API base URL (ending in "/").
func (a *App) BaseURL() string { return a.baseURL.String() }

// AppClient returns the go-github client authenticated as the App (a JWT
// signed per request), for the /app endpoints. Its calls are accounted to
// [AppInstallation].
func (a *App) AppClient() *github.Client { return a.appClient }

// Installation returns the go-github client authenticated as installation id.
// Clients are cached (the most recently used 1,000), so the installation
// token ghinstallation creates is reused until it nears expiry.
func (a *App) Installation(id int64) (*github.Client, error) {
	if id <= 0 {
		return nil, fmt.Errorf("app: installation id must be positive, got %d", id)
	}
	return a.installs.get(id, func() *github.Client {
		itr := ghinstallation.NewFromAppsTransport(a.appsTransport(id), id)
		itr.BaseURL = strings.TrimSuffix(a.baseURL.String(), "/")
		return a.newClient(itr)
	}), nil
}

// Identity returns the App's identity from GET /app, fetched once and cached
// after the first success.
func (a *App) Identity(ctx context.Context) (Identity, error) {
	if id, ok := a.cachedIdentity(); ok {
		return id, nil
	}
	select {
	case a.identitySem <- struct{}{}:
		defer func() { <-a.identitySem }()
	case <-ctx.Done():
		return Identity{}, fmt.Errorf("app: GET /app: %w", ctx.Err())
	}
	if id, ok := a.cachedIdentity(); ok {
		return id, nil
	}
	ghApp, _, err := a.appClient.Apps.Get(ctx, "")
	if err != nil {
		return Identity{}, fmt.Errorf("app: GET /app: %w", err)
	}
	slug := ghApp.GetSlug()
	if slug == "" {
		return Identity{}, errors.New("app: GET /app: response has no slug")
	}
	id := Identity{ID: ghApp.GetID(), Slug: slug, BotLogin: slug + "[bot]", Name: ghApp.GetName()}
	if id.ID != a.appID {
		a.layer.logger.Warn("GET /app returned a different app id than configured",
			"configured", a.appID, "returned", id.ID)
	}
	a.identityMu.Lock()
	a.identity = &id
	a.identityMu.Unlock()
	return id, nil
}

func (a *App) cachedIdentity() (Identity, bool) {
	a.identityMu.Lock()
	defer a.identityMu.Unlock()
	if a.identity == nil {
		return Identity{}, false
	}
	return *a.identity, true
}

// Calls returns the requests sent so far for an installation, or for
// [AppInstallation] (JWT calls, including installation token creation).
func (a *App) Calls(installation int64) CallCounts { return a.layer.calls(installation) }

// Budget returns an installation's primary ("core") rate-limit budget from
// the latest response's x-ratelimit-* headers; Known is false before any.
func (a *App) Budget(installation int64) Budget { return a.layer.budget(installation) }

// Budgets returns every rate-limit budget the latest responses reported,
// per installation ([AppInstallation] for the App's JWT calls) and
// resource, ordered by installation then resource: the status page's
// budget table.
func (a *App) Budgets() []InstallationBudget { return a.layer.budgets() }

// clientCache is a concurrency-safe LRU cache of installation clients.
type clientCache struct {
	mu    sync.Mutex
	max   int
	order *list.List // front = most recently used; values are *cacheEntry
	items map[int64]*list.Element
}

type cacheEntry struct {
	id     int64
	client *github.Client
}

func newClientCache(capacity int) *clientCache {
	return &clientCache{max: capacity, order: list.New(), items: make(map[int64]*list.Element)}
}

// get returns the cached client for id, building it on a miss and evicting
// the least recently used entry when full.
func (c *clientCache) get(id int64, build func() *github.Client) *github.Client {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[id]; ok {
		c.order.MoveToFront(el)
		return el.Value.(*cacheEntry).client
	}
	client := build()
	c.items[id] = c.order.PushFront(&cacheEntry{id: id, client: client})
	for c.order.Len() > c.max {
		last := c.order.Back()
		c.order.Remove(last)
		delete(c.items, last.Value.(*cacheEntry).id)
	}
	return client
}

func (c *clientCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}
