package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Deadlines of one request to GitHub. GitHub answers almost every REST call
// within a second or two and gives up on its own side after ten; a request
// still unanswered after these is hung, and holding a worker for it longer
// only stalls the deliveries behind it.
const (
	defaultConnectTimeout = 10 * time.Second // TCP connect
	defaultTLSTimeout     = 10 * time.Second // TLS handshake
	defaultHeaderTimeout  = 20 * time.Second // request sent → response headers
	defaultRequestTimeout = 30 * time.Second // one attempt, body included
)

// What makes an installation's GitHub "in trouble" (see [App.Troubles]).
const (
	// failingAfter is how many requests in a row must fail (5xx, timeout,
	// network) before the installation reads failing: one 502 is weather.
	failingAfter = 3
	// slowAfter is the age at which an unanswered request makes its
	// installation read slow.
	slowAfter = 10 * time.Second
	// slowLatency is the typical latency (a moving average) above which the
	// installation reads slow.
	slowLatency = 5 * time.Second
)

// Kinds of [Trouble].
const (
	TroubleFailing     = "failing"
	TroubleRateLimited = "rate-limited"
	TroubleSlow        = "slow"
)

// Trouble is something wrong with GitHub as one installation's requests see
// it, for the status page, /readyz and the metrics.
type Trouble struct {
	// Installation is the installation concerned ([AppInstallation] for the
	// App's own JWT calls).
	Installation int64 `json:"installation"`
	// Kind is TroubleFailing, TroubleRateLimited or TroubleSlow.
	Kind string `json:"kind"`
	// Since is when it began (warden's clock).
	Since time.Time `json:"since"`
	// Until is, for a rate limit, when GitHub accepts requests again.
	Until time.Time `json:"until,omitzero"`
	// Detail says what was seen, for a person.
	Detail string `json:"detail"`
}

// String is the trouble in one line.
func (t Trouble) String() string {
	who := "installation " + strconv.FormatInt(t.Installation, 10)
	if t.Installation == AppInstallation {
		who = "the app (JWT)"
	}
	s := fmt.Sprintf("github %s for %s since %s: %s", t.Kind, who, t.Since.UTC().Format(time.RFC3339), t.Detail)
	if !t.Until.IsZero() {
		s += "; requests resume at " + t.Until.UTC().Format(time.RFC3339)
	}
	return s
}

// health is what the layer knows of one installation's recent requests.
type health struct {
	failStreak   int
	failingSince time.Time
	lastFailure  string
	limitedSince time.Time // the first refusal or exhaustion of the current limit
	limitedWhy   string
	ewma         time.Duration // moving average of answered requests' latency
	slowSince    time.Time     // when ewma last rose above slowLatency
	inflight     map[uint64]time.Time
	// openUntil is when the circuit lets a probe through again: from
	// failingAfter failures in a row on, the installation's requests are
	// refused without being sent (an *UnavailableError) until then, and
	// then one request at a time probes until one is answered.
	openUntil time.Time
	probing   bool
	opens     int // times the circuit opened since the last answer
	// secondaryStreak counts secondary limits in a row without a
	// Retry-After: each doubles the default wait (GitHub: "wait for an
	// exponentially increasing amount of time between retries").
	secondaryStreak int
}

// Error classes of warden_github_errors_total.
const (
	classServer    = "server_error"
	classTimeout   = "timeout"
	classNetwork   = "network"
	classPrimary   = "rate_limited"
	classSecondary = "secondary_rate_limited"
)

// defaultTransport is http.DefaultTransport with deadlines on connecting,
// the TLS handshake and the response headers.
func defaultTransport() http.RoundTripper {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DialContext = (&net.Dialer{Timeout: defaultConnectTimeout, KeepAlive: 30 * time.Second}).DialContext
	t.TLSHandshakeTimeout = defaultTLSTimeout
	t.ResponseHeaderTimeout = defaultHeaderTimeout
	return t
}

// TimeoutError reports that one attempt of a request got no complete answer
// within the access layer's deadline ([Config.RequestTimeout]). Idempotent
// requests are retried like a 5xx; callers see it wrapped in a *url.Error.
type TimeoutError struct {
	Method, Path string
	After        time.Duration
}

// Error names the request and the deadline.
func (e *TimeoutError) Error() string {
	return fmt.Sprintf("github %s %s: no answer within %s", e.Method, e.Path, e.After)
}

// Timeout reports true (net.Error's convention).
func (e *TimeoutError) Timeout() bool { return true }

// IsTimeout reports whether err is, or wraps, a [TimeoutError].
func IsTimeout(err error) bool {
	var t *TimeoutError
	return errors.As(err, &t)
}

// attempt sends one attempt of a request under the per-attempt deadline,
// tracking it as in flight for the health picture. The deadline covers the
// body too: it is released when the body is closed.
func (l *layer) attempt(inst int64, out *http.Request) (*http.Response, error) {
	id := l.begin(inst)
	start := time.Now()
	parent := out.Context()
	ctx, cancel := parent, context.CancelFunc(func() {})
	if l.timeout > 0 {
		ctx, cancel = context.WithTimeout(parent, l.timeout)
		out = out.WithContext(ctx)
	}
	resp, err := l.base.RoundTrip(out)
	l.end(inst, id)
	if err != nil {
		cancel()
		if parent.Err() != nil {
			// The caller gave up (its deadline, a shutdown): nothing is
			// known of GitHub.
			l.abandoned(inst)
			return nil, err
		}
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			err = fmt.Errorf("%w (%v)", &TimeoutError{Method: out.Method, Path: out.URL.Path, After: l.timeout}, err)
		}
		l.failed(inst, classOf(err), err.Error())
		return nil, err
	}
	l.answered(inst, time.Since(start), resp.StatusCode)
	if resp.Body == nil {
		resp.Body = http.NoBody
	}
	resp.Body = &cancelBody{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

func classOf(err error) string {
	if IsTimeout(err) {
		return classTimeout
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return classTimeout
	}
	return classNetwork
}

// cancelBody releases a request's deadline when its body is closed.
type cancelBody struct {
	io.ReadCloser
	cancel context.CancelFunc
}

// Close closes the body and releases the deadline.
func (b *cancelBody) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}

func (l *layer) healthLocked(inst int64) *health {
	st := l.stateLocked(inst)
	if st.health.inflight == nil {
		st.health.inflight = map[uint64]time.Time{}
	}
	return &st.health
}

func (l *layer) begin(inst int64) uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seq++
	l.healthLocked(inst).inflight[l.seq] = time.Now()
	return l.seq
}

func (l *layer) end(inst int64, id uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.healthLocked(inst).inflight, id)
}

// answered records a response: a 5xx extends a failure streak, anything
// else ends it.
func (l *layer) answered(inst int64, took time.Duration, status int) {
	if isRetryableStatus(status) {
		l.failed(inst, classServer, "HTTP "+strconv.Itoa(status)+" "+http.StatusText(status))
		return
	}
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	h := l.healthLocked(inst)
	h.failStreak, h.failingSince = 0, time.Time{}
	h.openUntil, h.probing, h.opens = time.Time{}, false, 0
	if h.ewma == 0 {
		h.ewma = took
	} else {
		h.ewma = (h.ewma*7 + took) / 8
	}
	switch {
	case h.ewma > slowLatency && h.slowSince.IsZero():
		h.slowSince = now
	case h.ewma <= slowLatency:
		h.slowSince = time.Time{}
	}
	if status < 400 {
		h.secondaryStreak = 0
	}
}

func (l *layer) failed(inst int64, class, what string) {
	if l.errors != nil {
		l.errors.WithLabelValues(installationLabel(inst), class).Inc()
	}
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	h := l.healthLocked(inst)
	if class == classPrimary || class == classSecondary {
		if h.limitedSince.IsZero() {
			h.limitedSince = now
		}
		h.limitedWhy = what
		return
	}
	if h.failStreak == 0 {
		h.failingSince = now
	}
	h.failStreak++
	h.lastFailure = what
	switch {
	case h.probing:
		// The probe failed: wait longer before the next.
		h.probing = false
		h.opens++
		h.openUntil = now.Add(circuitWait(h.opens))
	case h.failStreak >= failingAfter && h.opens == 0:
		h.opens = 1
		h.openUntil = now.Add(circuitWait(1))
	}
}

// circuitWait is how long an installation's requests are refused after the
// circuit opened for the n-th time in a row: a second, doubling with each
// failed probe, up to circuitMax.
func circuitWait(n int) time.Duration {
	return min(time.Second<<min(n-1, 10), circuitMax)
}

// circuitMax bounds the wait between probes of a failing installation, so
// that work resumes within it once GitHub answers again.
const circuitMax = 15 * time.Second

// UnavailableError reports that a request was not sent because the
// installation's recent requests all failed (5xx, timeouts, network): the
// access layer probes with one request at a time until GitHub answers,
// rather than sending every caller's request into the outage. Callers
// should wait until Until; the request was not sent, so nothing happened.
type UnavailableError struct {
	Installation int64
	Until        time.Time
	Failures     int
	Last         string
}

// Error names the installation, the streak and when requests resume.
func (e *UnavailableError) Error() string {
	return fmt.Sprintf("github failing for installation %d (%d requests in a row failed; last: %s); not sending before %s",
		e.Installation, e.Failures, e.Last, e.Until.UTC().Format(time.RFC3339))
}

// IsUnavailable reports whether err is, or wraps, an [UnavailableError],
// and returns it.
func IsUnavailable(err error) (*UnavailableError, bool) {
	var u *UnavailableError
	if errors.As(err, &u) {
		return u, true
	}
	return nil, false
}

// admit decides whether a request of inst may be sent now: always while the
// installation's requests are answered; once failingAfter have failed in a
// row, only one probe at a time after the circuit's wait.
func (l *layer) admit(inst int64) error {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	h := l.healthLocked(inst)
	if h.failStreak < failingAfter {
		return nil
	}
	if now.Before(h.openUntil) || h.probing {
		until := h.openUntil
		if h.probing && !now.Before(until) {
			until = now.Add(time.Second) // a probe is out: wait for its answer
		}
		return &UnavailableError{Installation: inst, Until: until, Failures: h.failStreak, Last: h.lastFailure}
	}
	h.probing = true
	return nil
}

// abandoned records a request its caller gave up on: a probe out is over.
func (l *layer) abandoned(inst int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.healthLocked(inst).probing = false
}

// secondaryWait is the wait after a secondary limit that named none: a
// minute, doubling with each such limit in a row, up to 32 minutes.
func (l *layer) secondaryWait(inst int64) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	h := l.healthLocked(inst)
	d := defaultSecondaryWait << min(h.secondaryStreak, 5)
	h.secondaryStreak++
	return d
}

// troubles is every installation's current trouble, by installation.
func (l *layer) troubles() []Trouble {
	now := l.now()
	real := time.Now()
	l.mu.Lock()
	insts := make([]int64, 0, len(l.state))
	for inst := range l.state {
		insts = append(insts, inst)
	}
	l.mu.Unlock()
	sort.Slice(insts, func(i, j int) bool { return insts[i] < insts[j] })
	var out []Trouble
	for _, inst := range insts {
		reset, secondary, blocked := l.blockedUntil(inst, coreResource, now)
		l.mu.Lock()
		h := l.healthLocked(inst)
		if blocked {
			kind := "primary"
			if secondary {
				kind = "secondary"
			}
			since := h.limitedSince
			if since.IsZero() {
				since = now
			}
			out = append(out, Trouble{Installation: inst, Kind: TroubleRateLimited, Since: since, Until: reset,
				Detail: kind + " rate limit exhausted; warden sends nothing for this installation until the reset"})
		} else {
			h.limitedSince, h.limitedWhy = time.Time{}, ""
		}
		if h.failStreak >= failingAfter {
			out = append(out, Trouble{Installation: inst, Kind: TroubleFailing, Since: h.failingSince,
				Detail: fmt.Sprintf("%d requests in a row failed; last: %s", h.failStreak, h.lastFailure)})
		}
		oldest := time.Time{}
		for _, t := range h.inflight {
			if oldest.IsZero() || t.Before(oldest) {
				oldest = t
			}
		}
		switch {
		case !oldest.IsZero() && real.Sub(oldest) > slowAfter:
			age := real.Sub(oldest).Round(time.Second)
			out = append(out, Trouble{Installation: inst, Kind: TroubleSlow, Since: now.Add(-age),
				Detail: fmt.Sprintf("%d requests waiting; the oldest for %s", len(h.inflight), age)})
		case !h.slowSince.IsZero():
			out = append(out, Trouble{Installation: inst, Kind: TroubleSlow, Since: h.slowSince,
				Detail: fmt.Sprintf("answers take %s on average", h.ewma.Round(10*time.Millisecond))})
		}
		l.mu.Unlock()
	}
	return out
}

// Troubles is what is wrong with GitHub right now, per installation: a run
// of failed requests, a rate limit in force, or requests slow to be
// answered. Empty when all is well.
func (a *App) Troubles() []Trouble { return a.layer.troubles() }

// healthMetrics are the layer's metrics beyond the request counter.
type healthMetrics struct {
	errors    *prometheus.CounterVec
	remaining *prometheus.GaugeVec
	limit     *prometheus.GaugeVec // remaining's companions, set with it
	reset     *prometheus.GaugeVec
}

func newHealthMetrics(reg prometheus.Registerer, l *layer) (healthMetrics, error) {
	if reg == nil {
		return healthMetrics{}, nil
	}
	m := healthMetrics{
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "warden_github_errors_total",
			Help: "GitHub requests that failed, by installation and class (server_error, timeout, network, rate_limited, secondary_rate_limited).",
		}, []string{"installation", "class"}),
		remaining: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "warden_github_ratelimit_remaining",
			Help: "x-ratelimit-remaining of the latest GitHub answer, by installation and resource.",
		}, []string{"installation", "resource"}),
		limit: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "warden_github_ratelimit_limit",
			Help: "x-ratelimit-limit of the latest GitHub answer (the window's whole budget), by installation and resource.",
		}, []string{"installation", "resource"}),
		reset: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "warden_github_ratelimit_reset_timestamp_seconds",
			Help: "x-ratelimit-reset of the latest GitHub answer (when the window's budget is renewed, Unix seconds), by installation and resource.",
		}, []string{"installation", "resource"}),
	}
	var err error
	if m.errors, err = registerCollector(reg, m.errors); err != nil {
		return m, err
	}
	if m.remaining, err = registerCollector(reg, m.remaining); err != nil {
		return m, err
	}
	if m.limit, err = registerCollector(reg, m.limit); err != nil {
		return m, err
	}
	if m.reset, err = registerCollector(reg, m.reset); err != nil {
		return m, err
	}
	// Several Apps on one registry: the first one's troubles are exported.
	if _, err := registerCollector[prometheus.Collector](reg, troubleCollector{l}); err != nil {
		return m, err
	}
	return m, nil
}

var troubleDesc = prometheus.NewDesc("warden_github_trouble",
	"1 while an installation's GitHub is failing, rate-limited or slow (by kind), as the status page shows it.",
	[]string{"installation", "kind"}, nil)

// troubleCollector exports the layer's troubles at each scrape.
type troubleCollector struct{ l *layer }

// Describe implements prometheus.Collector.
func (c troubleCollector) Describe(ch chan<- *prometheus.Desc) { ch <- troubleDesc }

// Collect implements prometheus.Collector.
func (c troubleCollector) Collect(ch chan<- prometheus.Metric) {
	for _, t := range c.l.troubles() {
		ch <- prometheus.MustNewConstMetric(troubleDesc, prometheus.GaugeValue, 1, installationLabel(t.Installation), t.Kind)
	}
}
