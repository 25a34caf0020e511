package app

import (
	"cmp"
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

func (l *layer) stateLocked(inst int64) *installationState {
	st := l.state[inst]
	if st == nil {
		st = &installationState{budgets: make(map[string]Budget)}
		l.state[inst] = st
	}
	return st
}

// count records one request sent to GitHub.
func (l *layer) count(inst int64, method string, resp *http.Response, err error) {
	status := "error"
	if err == nil {
		status = strconv.Itoa(resp.StatusCode)
	}
	if l.requests != nil {
		l.requests.WithLabelValues(installationLabel(inst), method, status).Inc()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	st := l.stateLocked(inst)
	if isRead(method) {
		st.calls.Reads++
	} else {
		st.calls.Writes++
	}
	if err == nil && resp.StatusCode == http.StatusNotModified {
		st.calls.NotModified++
	}
}

// observe records the rate-limit headers of resp.
func (l *layer) observe(inst int64, predicted string, resp *http.Response, now time.Time) {
	b, ok := parseBudget(resp.Header)
	if !ok {
		return
	}
	resource := resp.Header.Get("X-Ratelimit-Resource")
	if resource == "" {
		resource = predicted
	}
	if resource == "" {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	st := l.stateLocked(inst)
	old, had := st.budgets[resource]
	// Concurrent responses can arrive out of order: within one window the
	// remaining count only falls, and an older window never comes back.
	if had && old.Known && !old.Reset.IsZero() && !b.Reset.IsZero() {
		if b.Reset.Before(old.Reset) || (b.Reset.Equal(old.Reset) && b.Remaining > old.Remaining) {
			return
		}
	}
	st.budgets[resource] = b
	if b.Remaining == 0 && st.health.limitedSince.IsZero() {
		st.health.limitedSince = now
	}
	if l.remaining != nil {
		l.remaining.WithLabelValues(installationLabel(inst), resource).Set(float64(b.Remaining))
		l.limit.WithLabelValues(installationLabel(inst), resource).Set(float64(b.Limit))
		if !b.Reset.IsZero() {
			l.reset.WithLabelValues(installationLabel(inst), resource).Set(float64(b.Reset.Unix()))
		}
	}
}

// holdSecondary keeps the installation from sending before until.
func (l *layer) holdSecondary(inst int64, until time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	st := l.stateLocked(inst)
	if until.After(st.secondaryUntil) {
		st.secondaryUntil = until
	}
}

func (l *layer) calls(inst int64) CallCounts {
	l.mu.Lock()
	defer l.mu.Unlock()
	if st := l.state[inst]; st != nil {
		return st.calls
	}
	return CallCounts{}
}

func (l *layer) budget(inst int64) Budget {
	l.mu.Lock()
	defer l.mu.Unlock()
	if st := l.state[inst]; st != nil {
		return st.budgets[coreResource]
	}
	return Budget{}
}

// InstallationBudget is one installation's budget for one resource.
type InstallationBudget struct {
	// Installation is the installation ([AppInstallation] for JWT calls).
	Installation int64
	// Resource is GitHub's x-ratelimit-resource (core, search, graphql…).
	Resource string
	Budget
}

func (l *layer) budgets() []InstallationBudget {
	l.mu.Lock()
	var out []InstallationBudget
	for inst, st := range l.state {
		for res, b := range st.budgets {
			if b.Known {
				out = append(out, InstallationBudget{Installation: inst, Resource: res, Budget: b})
			}
		}
	}
	l.mu.Unlock()
	slices.SortFunc(out, func(a, b InstallationBudget) int {
		if c := cmp.Compare(a.Installation, b.Installation); c != 0 {
			return c
		}
		return strings.Compare(a.Resource, b.Resource)
	})
	return out
}

// parseBudget reads the x-ratelimit-* headers.
func parseBudget(h http.Header) (Budget, bool) {
	limit, lerr := strconv.Atoi(h.Get("X-Ratelimit-Limit"))
	remaining, rerr := strconv.Atoi(h.Get("X-Ratelimit-Remaining"))
	if lerr != nil || rerr != nil {
		return Budget{}, false
	}
	b := Budget{Limit: limit, Remaining: remaining, Known: true}
	if reset, err := strconv.ParseInt(h.Get("X-Ratelimit-Reset"), 10, 64); err == nil && reset > 0 {
		b.Reset = time.Unix(reset, 0)
	}
	return b, true
}

// CallCounter counts the GitHub requests made under one context (one
// delivery's handling, say), whatever installation they were for. Safe for
// concurrent use.
type CallCounter struct {
	mu sync.Mutex
	c  CallCounts
}

type callCounterKey struct{}

// WithCallCounter returns a context whose GitHub requests are counted in c.
func WithCallCounter(ctx context.Context, c *CallCounter) context.Context {
	return context.WithValue(ctx, callCounterKey{}, c)
}

func (c *CallCounter) add(method string, resp *http.Response, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if isRead(method) {
		c.c.Reads++
	} else {
		c.c.Writes++
	}
	if err == nil && resp != nil && resp.StatusCode == http.StatusNotModified {
		c.c.NotModified++
	}
}

// Counts returns the requests counted so far.
func (c *CallCounter) Counts() CallCounts {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.c
}
