package app

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// A hung GitHub answer ends at the attempt's deadline with a TimeoutError;
// a GET is retried like a 5xx, a POST is not; after three in a row the
// installation reads failing, with the timeout named, and sends nothing
// until its circuit lets a probe through.
func TestHungRequestTimesOut(t *testing.T) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	f := newFake(t, func(w http.ResponseWriter, r *http.Request, n int) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	reg := prometheus.NewPedanticRegistry()
	a := newTestApp(t, f, func(c *Config) {
		c.RequestTimeout = 100 * time.Millisecond
		c.Registerer = reg
		c.Retries = 1
	})
	c, _ := a.Installation(7)
	for _, tt := range []struct {
		method   string
		wantHits int
	}{{http.MethodGet, 2}, {http.MethodPost, 1}} {
		req, err := c.NewRequest(tt.method, "repos/o/r/issues/1", nil)
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Do(context.Background(), req, nil)
		if !IsTimeout(err) {
			t.Fatalf("%s: err = %v, want a TimeoutError", tt.method, err)
		}
		if !strings.Contains(err.Error(), "no answer within 100ms") {
			t.Errorf("%s: error %q does not name the deadline", tt.method, err)
		}
		if got := f.hit(tt.method + " " + issuePath); got != tt.wantHits {
			t.Errorf("%s: server saw %d requests, want %d", tt.method, got, tt.wantHits)
		}
	}
	tr := troubleOf(a.Troubles(), 7, TroubleFailing)
	if tr == nil {
		t.Fatalf("troubles = %+v, want installation 7 failing", a.Troubles())
	}
	// Three failures in a row: the next request is not sent at all.
	before := f.total()
	_, err := c.Do(context.Background(), mustRequest(t, c, http.MethodGet), nil)
	if u, ok := IsUnavailable(err); !ok || u.Failures != 3 || !strings.Contains(err.Error(), "not sending before") {
		t.Errorf("after five failures: err = %v, want an UnavailableError naming the streak", err)
	}
	if f.total() != before {
		t.Error("a request reached GitHub while its installation's circuit was open")
	}
	if !strings.Contains(tr.Detail, "3 requests in a row failed") || !strings.Contains(tr.Detail, "no answer within") {
		t.Errorf("detail %q, want the streak and the timeout", tr.Detail)
	}
	if got := testutil.ToFloat64(a.layer.errors.WithLabelValues("7", classTimeout)); got != 3 {
		t.Errorf("warden_github_errors_total{class=timeout} = %v, want 3", got)
	}
}

// A caller's own cancellation is not GitHub's timeout.
func TestCallerCancelIsNotTimeout(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request, n int) { <-r.Context().Done() })
	a := newTestApp(t, f, func(c *Config) { c.RequestTimeout = 10 * time.Second })
	c, _ := a.Installation(7)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := c.Do(ctx, mustRequest(t, c, http.MethodGet), nil)
	if err == nil || IsTimeout(err) {
		t.Fatalf("err = %v, want the caller's deadline, not a TimeoutError", err)
	}
}

// A request waiting longer than slowAfter makes its installation read slow
// while it waits; answers end a failure streak.
func TestTroublesSlowAndRecovered(t *testing.T) {
	var mu sync.Mutex
	failing := true
	f := newFake(t, func(w http.ResponseWriter, r *http.Request, n int) {
		mu.Lock()
		fail := failing
		mu.Unlock()
		if fail {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		fmt.Fprint(w, `{}`)
	})
	var clk struct {
		sync.Mutex
		t time.Time
	}
	clk.t = time.Now()
	now := func() time.Time { clk.Lock(); defer clk.Unlock(); return clk.t }
	a := newTestApp(t, f, func(c *Config) { c.Now = now })
	c, _ := a.Installation(7)
	if _, err := c.Do(context.Background(), mustRequest(t, c, http.MethodGet), nil); err == nil {
		t.Fatal("want the 502 to fail")
	}
	if _, err := c.Do(context.Background(), mustRequest(t, c, http.MethodGet), nil); !isUnavailable(err) {
		t.Fatalf("err = %v, want the circuit open", err)
	}
	if troubleOf(a.Troubles(), 7, TroubleFailing) == nil {
		t.Fatalf("troubles = %+v, want failing after four 502s", a.Troubles())
	}
	mu.Lock()
	failing = false
	mu.Unlock()
	clk.Lock()
	clk.t = clk.t.Add(circuitWait(4)) // the circuit's wait is over: a probe goes
	clk.Unlock()
	if _, err := c.Do(context.Background(), mustRequest(t, c, http.MethodGet), nil); err != nil {
		t.Fatal(err)
	}
	if ts := a.Troubles(); len(ts) != 0 {
		t.Fatalf("troubles after an answer = %+v, want none", ts)
	}

	// An old request in flight: slow.
	a.layer.mu.Lock()
	a.layer.healthLocked(7).inflight[999] = time.Now().Add(-slowAfter - time.Second)
	a.layer.mu.Unlock()
	tr := troubleOf(a.Troubles(), 7, TroubleSlow)
	if tr == nil || !strings.Contains(tr.Detail, "1 requests waiting; the oldest for 11s") {
		t.Fatalf("troubles = %+v, want slow naming the oldest wait", a.Troubles())
	}
}

// A secondary limit that names no wait holds a minute, then two, then four:
// GitHub asks for exponentially growing waits; an answer resets it.
func TestSecondaryWaitGrows(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request, n int) {
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprint(w, secondaryBody)
	})
	clock := time.Unix(1_800_000_000, 0)
	var mu sync.Mutex
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	a := newTestApp(t, f, func(c *Config) { c.Now = now; c.MaxWait = -1 })
	c, _ := a.Installation(7)
	for i, want := range []time.Duration{time.Minute, 2 * time.Minute, 4 * time.Minute} {
		_, err := c.Do(context.Background(), mustRequest(t, c, http.MethodGet), nil)
		rl, ok := IsRateLimited(err)
		if !ok || !rl.Secondary {
			t.Fatalf("limit %d: err = %v, want a secondary limit", i+1, err)
		}
		if got := rl.Reset.Sub(now()); got != want {
			t.Errorf("limit %d: wait %v, want %v", i+1, got, want)
		}
		tr := troubleOf(a.Troubles(), 7, TroubleRateLimited)
		if tr == nil || !tr.Until.Equal(rl.Reset) {
			t.Errorf("limit %d: troubles = %+v, want rate-limited until %v", i+1, a.Troubles(), rl.Reset)
		}
		mu.Lock()
		clock = rl.Reset // the hold is over
		mu.Unlock()
	}
	if ts := a.Troubles(); troubleOf(ts, 7, TroubleRateLimited) != nil {
		t.Errorf("troubles after the reset = %+v, want no rate limit", ts)
	}
}

// The remaining budget is a metric.
func TestRateLimitRemainingMetric(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request, n int) {
		setRate(w, 5000, 4321, time.Now().Add(time.Hour))
		fmt.Fprint(w, `{}`)
	})
	a := newTestApp(t, f, nil)
	c, _ := a.Installation(7)
	if _, err := c.Do(context.Background(), mustRequest(t, c, http.MethodGet), nil); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(a.layer.remaining.WithLabelValues("7", "core")); got != 4321 {
		t.Errorf("warden_github_ratelimit_remaining = %v, want 4321", got)
	}
	if got := testutil.ToFloat64(a.layer.limit.WithLabelValues("7", "core")); got != 5000 {
		t.Errorf("warden_github_ratelimit_limit = %v, want 5000", got)
	}
	if got := testutil.ToFloat64(a.layer.reset.WithLabelValues("7", "core")); got < float64(time.Now().Unix()) {
		t.Errorf("warden_github_ratelimit_reset_timestamp_seconds = %v, want the reset an hour ahead", got)
	}
	bs := a.Budgets()
	if len(bs) != 1 || bs[0].Installation != 7 || bs[0].Resource != "core" || bs[0].Remaining != 4321 || bs[0].Limit != 5000 {
		t.Errorf("Budgets() = %+v, want installation 7's core budget 4321 of 5000", bs)
	}
}

func isUnavailable(err error) bool { _, ok := IsUnavailable(err); return ok }

// While a probe is out, other requests wait; a failed probe doubles the
// wait; an answered one closes the circuit.
func TestCircuitProbesOneAtATime(t *testing.T) {
	var mu sync.Mutex
	status := http.StatusInternalServerError
	f := newFake(t, func(w http.ResponseWriter, r *http.Request, n int) {
		mu.Lock()
		code := status
		mu.Unlock()
		w.WriteHeader(code)
		fmt.Fprint(w, `{}`)
	})
	clock := time.Unix(1_800_000_000, 0)
	var cm sync.Mutex
	now := func() time.Time { cm.Lock(); defer cm.Unlock(); return clock }
	advance := func(d time.Duration) { cm.Lock(); clock = clock.Add(d); cm.Unlock() }
	a := newTestApp(t, f, func(c *Config) { c.Now = now; c.Retries = -1 })
	c, _ := a.Installation(7)
	get := func() error { _, err := c.Do(context.Background(), mustRequest(t, c, http.MethodGet), nil); return err }
	for range failingAfter {
		if err := get(); err == nil || isUnavailable(err) {
			t.Fatalf("err = %v, want GitHub's 500", err)
		}
	}
	u, ok := IsUnavailable(get())
	if !ok || u.Until.Sub(now()) != time.Second {
		t.Fatalf("after %d failures: %+v, want refused for a second", failingAfter, u)
	}
	advance(time.Second)
	if err := get(); err == nil || isUnavailable(err) { // the probe: sent, fails
		t.Fatalf("probe: err = %v, want GitHub's 500", err)
	}
	if u, ok := IsUnavailable(get()); !ok || u.Until.Sub(now()) != 2*time.Second {
		t.Fatalf("after a failed probe: %+v, want two seconds", u)
	}
	hits := f.total()
	advance(2 * time.Second)
	mu.Lock()
	status = http.StatusOK
	mu.Unlock()
	if err := get(); err != nil {
		t.Fatalf("probe: %v", err)
	}
	if err := get(); err != nil {
		t.Fatalf("after an answered probe: %v, want the circuit closed", err)
	}
	if f.total()-hits != 2 {
		t.Errorf("GitHub saw %d requests after the wait, want 2", f.total()-hits)
	}
}

func troubleOf(ts []Trouble, inst int64, kind string) *Trouble {
	for i := range ts {
		if ts[i].Installation == inst && ts[i].Kind == kind {
			return &ts[i]
		}
	}
	return nil
}
