package app

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// AppInstallation is the pseudo installation id under which the access layer
// accounts calls made as the App itself (JWT-authenticated: GET /app,
// installation token creation, the delivery log...). Its metrics label is
// "app". Pass it to [App.Calls] and [App.Budget].
const AppInstallation int64 = 0

const (
	defaultMaxWait       = 30 * time.Second
	defaultRetries       = 3
	defaultRetryBase     = 200 * time.Millisecond
	defaultSecondaryWait = 60 * time.Second
	// defaultResetSlack is added to a primary x-ratelimit-reset before
	// sending again, for clock skew between GitHub and this host (go-github
	// uses the same second).
	defaultResetSlack = time.Second
	// maxErrorBody bounds how much of a 403/429 body is read to classify it.
	maxErrorBody = 64 << 10
	// maxDrain bounds how much of a discarded response body is read so that
	// the connection can be reused.
	maxDrain = 64 << 10
	// coreResource is GitHub's x-ratelimit-resource for most REST calls.
	coreResource = "core"
)

// CallCounts are the requests the access layer sent to GitHub for one
// installation (or [AppInstallation]) since the App was built. Every attempt
// counts, retries included; requests refused client-side because the budget
// was exhausted do not.
type CallCounts struct {
	// Reads are GET and HEAD requests, including those answered 304.
	Reads int
	// Writes are all other requests (POST, PATCH, PUT, DELETE...).
	Writes int
	// NotModified are the requests answered 304 Not Modified (a subset of
	// Reads), which GitHub does not charge to the primary rate limit.
	NotModified int
}

// Budget is an installation's primary rate-limit budget as reported by the
// x-ratelimit-* headers of the latest response (for the "core" resource).
type Budget struct {
	// Limit is x-ratelimit-limit: requests allowed per window.
	Limit int
	// Remaining is x-ratelimit-remaining: requests left in this window.
	Remaining int
	// Reset is x-ratelimit-reset: when the window resets.
	Reset time.Time
	// Known is false until a response carried the headers.
	Known bool
}

// conditionalCache is the hook for conditional requests (ETag and
// Last-Modified), implemented by etagCache (conditional.go); the access
// layer calls it when it is non-nil. prepare runs on a private copy of each
// request before it is first sent and may add If-None-Match /
// If-Modified-Since; complete runs on the final response and may store it,
// or turn a 304 into the stored response. ETags are specific to the token that fetched them, so entries
// must be keyed by installation as well as URL. A 304 is counted as
// NotModified before complete sees it.
type conditionalCache interface {
	prepare(installation int64, req *http.Request)
	complete(installation int64, req *http.Request, resp *http.Response) *http.Response
}

// layer is the access layer: an http.RoundTripper (through scopedTransport)
// placed under ghinstallation. It is shared by every client of one App.
type layer struct {
	base       http.RoundTripper
	logger     *slog.Logger
	requests   *prometheus.CounterVec // nil: no metrics
	maxWait    time.Duration          // <= 0: never wait for a rate limit
	retries    int
	retryBase  time.Duration
	resetSlack time.Duration
	basePath   string                 // path of the REST base URL, ending in "/"
	timeout    time.Duration          // one attempt's deadline; <= 0: none
	now        func() time.Time       // warden's clock, for rate-limit resets
	errors     *prometheus.CounterVec // nil: no metrics
	remaining  *prometheus.GaugeVec   // nil: no metrics
	limit      *prometheus.GaugeVec   // set with remaining
	reset      *prometheus.GaugeVec   // set with remaining

	// conditional is the conditional-request (ETag cache) hook; nil when
	// Config.ConditionalCacheBytes < 0.
	conditional conditionalCache

	mu    sync.Mutex
	seq   uint64 // numbers requests in flight
	state map[int64]*installationState
}

// installationState is what the layer knows about one installation.
type installationState struct {
	calls          CallCounts
	budgets        map[string]Budget // by x-ratelimit-resource
	secondaryUntil time.Time
	health         health
}

// scopedTransport routes a request through the layer on behalf of one
// installation. Requests that carry a JWT (ghinstallation's AppsTransport,
// which also creates installation tokens) are accounted to AppInstallation.
type scopedTransport struct {
	l            *layer
	installation int64
}

// RoundTrip implements http.RoundTripper.
func (s scopedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	inst := s.installation
	if strings.HasPrefix(req.Header.Get("Authorization"), "Bearer ") {
		inst = AppInstallation
	}
	return s.l.roundTrip(inst, req)
}

func newRequestsCounter(reg prometheus.Registerer) (*prometheus.CounterVec, error) {
	if reg == nil {
		return nil, nil
	}
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "warden_github_requests_total",
		Help: "Requests sent to the GitHub API, by installation (\"app\" for JWT calls), method and status (HTTP code or \"error\").",
	}, []string{"installation", "method", "status"})
	return registerCollector(reg, c)
}

func installationLabel(inst int64) string {
	if inst == AppInstallation {
		return "app"
	}
	return strconv.FormatInt(inst, 10)
}

func isRead(method string) bool {
	return method == http.MethodGet || method == http.MethodHead
}

// isIdempotent lists the methods the layer retries after a 5xx or a
// transport error. PATCH is left out on purpose, as is POST: a duplicate
// comment is worse than a retried delivery.
func isIdempotent(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPut, http.MethodDelete, http.MethodOptions:
		return true
	}
	return false
}

func isRetryableStatus(code int) bool {
	switch code {
	case http.StatusInternalServerError, http.StatusBadGateway,
		http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// resourceFor predicts the x-ratelimit-resource a request is charged to, from
// its path relative to the REST base. It returns "" for GET /rate_limit,
// which is never charged and so never held back.
func resourceFor(basePath, path string) string {
	rel := strings.TrimPrefix(path, strings.TrimSuffix(basePath, "/"))
	rel = strings.TrimPrefix(rel, "/")
	switch {
	case rel == "rate_limit":
		return ""
	case strings.HasPrefix(rel, "search/code"):
		return "code_search"
	case strings.HasPrefix(rel, "search/"):
		return "search"
	case rel == "graphql":
		return "graphql"
	}
	return coreResource
}

// roundTrip sends req on behalf of installation inst, applying the layer's
// budget checks, rate-limit waits and retries.
func (l *layer) roundTrip(inst int64, req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	resource := resourceFor(l.basePath, req.URL.Path)
	hasBody := req.Body != nil && req.Body != http.NoBody
	replayable := !hasBody || req.GetBody != nil
	idempotent := isIdempotent(req.Method)
	log := l.logger.With("installation", installationLabel(inst), "method", req.Method, "path", req.URL.Path)

	first := req
	if l.conditional != nil && isRead(req.Method) {
		first = req.Clone(ctx)
		l.conditional.prepare(inst, first)
	}

	var (
		sent        bool // first has been handed to the base transport
		serverTries int  // retries spent on 5xx and transport errors
		rateTries   int  // retries spent on rate-limit answers
	)
	for {
		if err := l.awaitBudget(ctx, inst, resource, log); err != nil {
			if !sent && hasBody {
				req.Body.Close()
			}
			return nil, err
		}
		out := first
		if sent {
			var err error
			if out, err = rewind(first); err != nil {
				return nil, fmt.Errorf("github %s %s: replay request body: %w", req.Method, req.URL.Path, err)
			}
		}
		// The circuit gates every attempt: once the installation's
		// requests fail in a row, a retry is only another probe. (Admitted
		// last: a probe admitted is always sent, and its answer ends it.)
		if err := l.admit(inst); err != nil {
			if !sent && hasBody {
				req.Body.Close()
			}
			return nil, err
		}
		resp, err := l.attempt(inst, out)
		sent = true
		l.count(inst, req.Method, resp, err)
		if c, ok := req.Context().Value(callCounterKey{}).(*CallCounter); ok {
			c.add(req.Method, resp, err)
		}

		if err != nil {
			if ctx.Err() != nil || !idempotent || !replayable || serverTries >= l.retries {
				return nil, err
			}
			serverTries++
			wait := l.backoff(serverTries)
			log.Warn("github request failed; retrying", "attempt", serverTries, "wait", wait, "err", err)
			if err := sleep(ctx, wait); err != nil {
				return nil, err
			}
			continue
		}

		now := l.now()
		l.observe(inst, resource, resp, now)

		if resp.StatusCode == http.StatusForbidden || resp.StatusCode == http.StatusTooManyRequests {
			body := peekBody(resp)
			if limited, secondary, reset := classifyRateLimit(resp, body, now); limited {
				class := classPrimary
				if secondary {
					class = classSecondary
					if reset.IsZero() {
						reset = now.Add(l.secondaryWait(inst))
					}
					l.holdSecondary(inst, reset)
				} else {
					reset = reset.Add(l.resetSlack)
				}
				l.failed(inst, class, "HTTP "+strconv.Itoa(resp.StatusCode))
				discard(resp)
				rlErr := &RateLimitedError{Installation: inst, Reset: reset, Secondary: secondary}
				wait := reset.Sub(now)
				if rateTries >= 1 || !replayable || !l.mayWait(ctx, wait) {
					log.Warn("github rate limit exceeded; giving up", "secondary", secondary, "reset", reset, "status", resp.StatusCode)
					return nil, rlErr
				}
				rateTries++
				log.Info("github rate limit exceeded; waiting", "secondary", secondary, "wait", wait, "status", resp.StatusCode)
				if err := sleep(ctx, wait); err != nil {
					return nil, fmt.Errorf("waiting out github rate limit (%v): %w", rlErr, err)
				}
				continue
			}
		}

		if isRetryableStatus(resp.StatusCode) && idempotent && replayable && serverTries < l.retries {
			serverTries++
			wait := l.backoff(serverTries)
			if ra, ok := retryAfter(resp.Header, now); ok && ra > wait && l.mayWait(ctx, ra) {
				wait = ra
			}
			log.Warn("github server error; retrying", "status", resp.StatusCode, "attempt", serverTries, "wait", wait)
			discard(resp)
			if err := sleep(ctx, wait); err != nil {
				return nil, err
			}
			continue
		}

		if l.conditional != nil {
			resp = l.conditional.complete(inst, first, resp)
		}
		return resp, nil
	}
}

// awaitBudget blocks while the installation's budget for resource, or its
// secondary limit, is exhausted, if the wait is allowed; otherwise it returns
// a *RateLimitedError without anything being sent.
func (l *layer) awaitBudget(ctx context.Context, inst int64, resource string, log *slog.Logger) error {
	for {
		now := l.now()
		reset, secondary, blocked := l.blockedUntil(inst, resource, now)
		if !blocked {
			return nil
		}
		rlErr := &RateLimitedError{Installation: inst, Reset: reset, Secondary: secondary}
		wait := reset.Sub(now)
		if !l.mayWait(ctx, wait) {
			return rlErr
		}
		log.Info("github rate limit exhausted; waiting before sending", "secondary", secondary, "wait", wait)
		if err := sleep(ctx, wait); err != nil {
			return fmt.Errorf("waiting out github rate limit (%v): %w", rlErr, err)
		}
	}
}

// blockedUntil reports whether a request may not be sent now, and until when.
func (l *layer) blockedUntil(inst int64, resource string, now time.Time) (until time.Time, secondary, blocked bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	st := l.state[inst]
	if st == nil {
		return time.Time{}, false, false
	}
	if now.Before(st.secondaryUntil) {
		return st.secondaryUntil, true, true
	}
	if resource == "" {
		return time.Time{}, false, false
	}
	if b, ok := st.budgets[resource]; ok && b.Known && b.Remaining == 0 && now.Before(b.Reset) {
		return b.Reset.Add(l.resetSlack), false, true
	}
	return time.Time{}, false, false
}

// mayWait reports whether the layer may sleep for d: within MaxWait and
// before the context's deadline.
func (l *layer) mayWait(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	if d > l.maxWait {
		return false
	}
	if deadline, ok := ctx.Deadline(); ok && time.Now().Add(d).After(deadline) {
		return false
	}
	return true
}

// backoff is the wait before 5xx/transport retry n (1-based): base·2^(n-1)
// plus up to half of that again as jitter.
func (l *layer) backoff(n int) time.Duration {
	d := l.retryBase << (n - 1)
	if d <= 0 {
		return 0
	}
	return d + rand.N(d/2+1)
}

// sleep waits for d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// rewind returns a copy of req with a fresh body, for a retry.
func rewind(req *http.Request) (*http.Request, error) {
	out := req.Clone(req.Context())
	if req.Body == nil || req.Body == http.NoBody {
		return out, nil
	}
	body, err := req.GetBody()
	if err != nil {
		return nil, err
	}
	out.Body = body
	return out, nil
}

// retryAfter parses a Retry-After header: delay seconds or an HTTP date.
func retryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs < 0 {
			secs = 0
		}
		return time.Duration(secs) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

// classifyRateLimit decides whether a 403 or 429 response is a rate limit,
// which kind, and when requests may resume.
func classifyRateLimit(resp *http.Response, body []byte, now time.Time) (limited, secondary bool, reset time.Time) {
	h := resp.Header
	primaryExhausted := h.Get("X-Ratelimit-Remaining") == "0"
	headerReset := func() (time.Time, bool) {
		secs, err := strconv.ParseInt(h.Get("X-Ratelimit-Reset"), 10, 64)
		if err != nil || secs <= 0 {
			return time.Time{}, false
		}
		return time.Unix(secs, 0), true
	}
	secondaryReset := func() time.Time {
		if d, ok := retryAfter(h, now); ok {
			return now.Add(d)
		}
		if t, ok := headerReset(); primaryExhausted && ok {
			return t
		}
		return time.Time{} // none named: the layer waits a minute, growing
	}

	switch {
	case mentionsSecondaryLimit(body):
		return true, true, secondaryReset()
	case primaryExhausted:
		if t, ok := headerReset(); ok {
			return true, false, t
		}
		return true, false, now.Add(defaultSecondaryWait)
	case resp.StatusCode == http.StatusTooManyRequests:
		// Any other 429 is a secondary limit; GitHub documents 429 for
		// rate limits only.
		return true, true, secondaryReset()
	}
	return false, false, time.Time{}
}

// mentionsSecondaryLimit reports whether a GitHub error body describes a
// secondary (formerly "abuse") rate limit.
func mentionsSecondaryLimit(body []byte) bool {
	var e struct {
		Message          string `json:"message"`
		DocumentationURL string `json:"documentation_url"`
	}
	text := string(body)
	if json.Unmarshal(body, &e) == nil {
		text = e.Message + " " + e.DocumentationURL
	}
	text = strings.ToLower(text)
	return strings.Contains(text, "secondary-rate-limits") ||
		strings.Contains(text, "abuse-rate-limits") ||
		strings.Contains(text, "secondary rate limit")
}

// peekBody reads up to maxErrorBody bytes of resp's body and puts them back,
// so the caller can still read the whole body.
func peekBody(resp *http.Response) []byte {
	if resp.Body == nil || resp.Body == http.NoBody {
		return nil
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	resp.Body = &replayBody{
		Reader: io.MultiReader(bytes.NewReader(b), &errReader{err: err, rest: resp.Body}),
		closer: resp.Body,
	}
	return b
}

// replayBody is a response body whose first bytes were already read.
type replayBody struct {
	io.Reader
	closer io.Closer
}

// Close closes the original body.
func (r *replayBody) Close() error { return r.closer.Close() }

// errReader yields err (a read error met while peeking) before reading rest.
type errReader struct {
	err  error
	rest io.Reader
}

func (e *errReader) Read(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	return e.rest.Read(p)
}

// discard drains a little of resp's body, so the connection can be reused,
// and closes it.
func discard(resp *http.Response) {
	if resp.Body == nil {
		return
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxDrain))
	_ = resp.Body.Close()
}
