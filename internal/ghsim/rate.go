package ghsim

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

type rateState struct {
	limit, remaining int
	reset            time.Time
}

// rateLocked returns the installation's budget, refilled when its hour is up.
func (s *Sim) rateLocked(installation int64) *rateState {
	rs := s.rates[installation]
	now := s.now()
	if rs == nil || !now.Before(rs.reset) {
		rs = &rateState{limit: s.opt.RateLimit, remaining: s.opt.RateLimit, reset: now.Add(time.Hour).Truncate(time.Second)}
		s.rates[installation] = rs
	}
	return rs
}

func (s *Sim) rateExhausted(installation int64) (rateState, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rs := s.rateLocked(installation)
	return *rs, rs.remaining <= 0
}

// charge counts a request against the budget; 304s and GET /rate_limit are
// free, as on GitHub.
func (s *Sim) charge(installation int64, method string, free bool) rateState {
	s.mu.Lock()
	defer s.mu.Unlock()
	rs := s.rateLocked(installation)
	c := s.calls[installation]
	if c == nil {
		c = &Calls{}
		s.calls[installation] = c
	}
	switch {
	case free && method == http.MethodGet:
		c.NotModified++
	case method == http.MethodGet || method == http.MethodHead:
		c.Reads++
	default:
		c.Writes++
	}
	if !free && rs.remaining > 0 {
		rs.remaining--
	}
	return *rs
}

func (s *Sim) setRateHeaders(h http.Header, rs rateState) {
	h.Set("X-RateLimit-Limit", strconv.Itoa(rs.limit))
	h.Set("X-RateLimit-Remaining", strconv.Itoa(rs.remaining))
	h.Set("X-RateLimit-Used", strconv.Itoa(rs.limit-rs.remaining))
	h.Set("X-RateLimit-Reset", strconv.FormatInt(rs.reset.Unix(), 10))
	h.Set("X-RateLimit-Resource", "core")
}

// SetRemaining sets an installation's remaining budget (0 exhausts it until
// its reset).
func (s *Sim) SetRemaining(installation int64, remaining int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rateLocked(installation).remaining = remaining
}

// Remaining is an installation's remaining budget.
func (s *Sim) Remaining(installation int64) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rateLocked(installation).remaining
}

type fault struct {
	remaining  int
	code       int
	retryAfter int
	secondary  bool
	hang       time.Duration // > 0: hold the request this long, then answer normally
	method     string        // "" = any
	pathPrefix string        // "" = any
}

type faults struct {
	list    []*fault
	latency time.Duration
}

// FailNext makes the next n requests whose method and path match (empty
// matches all) answer code (a 5xx, say).
func (s *Sim) FailNext(n, code int, method, pathPrefix string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults.list = append(s.faults.list, &fault{remaining: n, code: code, method: method, pathPrefix: pathPrefix})
}

// SecondaryLimitNext refuses the next n matching requests with GitHub's
// secondary-rate-limit answer (403 or 429, Retry-After in seconds).
func (s *Sim) SecondaryLimitNext(n, code, retryAfter int, method, pathPrefix string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults.list = append(s.faults.list, &fault{remaining: n, code: code, retryAfter: retryAfter, secondary: true,
		method: method, pathPrefix: pathPrefix})
}

// HangNext holds the next n requests whose method and path match for d
// before answering them normally (a hung GitHub call): the simulator sends
// nothing, headers included, until d has passed or the client gives up (its
// request context ends; the request is then not acted on).
func (s *Sim) HangNext(n int, d time.Duration, method, pathPrefix string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults.list = append(s.faults.list, &fault{remaining: n, hang: d, method: method, pathPrefix: pathPrefix})
}

// ClearFaults drops every pending fault (FailNext, SecondaryLimitNext,
// HangNext) and the latency.
func (s *Sim) ClearFaults() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = faults{}
}

// PendingFaults is how many faulted answers (FailNext, SecondaryLimitNext,
// HangNext) are still to be given.
func (s *Sim) PendingFaults() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, f := range s.faults.list {
		n += f.remaining
	}
	return n
}

// SetLatency delays every response by d.
func (s *Sim) SetLatency(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults.latency = d
}

func (s *Sim) latency() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.faults.latency
}

// takeFault consumes the first fault matching r: a hang (hang > 0, code 0)
// or an answer (code > 0).
func (s *Sim) takeFault(r *http.Request) (f fault, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, f := range s.faults.list {
		if (f.method == "" || f.method == r.Method) && strings.HasPrefix(r.URL.Path, f.pathPrefix) {
			f.remaining--
			if f.remaining <= 0 {
				s.faults.list = append(s.faults.list[:i], s.faults.list[i+1:]...)
			}
			return *f, true
		}
	}
	return fault{}, false
}
