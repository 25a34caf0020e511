package app

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-github/v66/github"
	"github.com/prometheus/client_golang/prometheus"
)

const issuePath = "/repos/o/r/issues/1"

func TestCallsCountedPerInstallation(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request, n int) {
		switch {
		case r.Header.Get("If-None-Match") == `"v1"`:
			w.Header().Set("ETag", `"v1"`)
			w.WriteHeader(http.StatusNotModified)
		case r.Method == http.MethodPost:
			w.WriteHeader(http.StatusCreated)
			fmt.Fprint(w, `{"id":1}`)
		default:
			w.Header().Set("ETag", `"v1"`)
			fmt.Fprint(w, `{"number":1}`)
		}
	})
	reg := prometheus.NewPedanticRegistry()
	a := newTestApp(t, f, func(c *Config) { c.Registerer = reg })
	ctx := context.Background()
	c, _ := a.Installation(7)
	other, _ := a.Installation(8)

	if _, _, err := c.Issues.Get(ctx, "o", "r", 1); err != nil {
		t.Fatal(err)
	}
	req, err := c.NewRequest(http.MethodGet, "repos/o/r/issues/1", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("If-None-Match", `"v1"`)
	if resp, err := c.Do(ctx, req, nil); err == nil || resp.StatusCode != http.StatusNotModified {
		t.Fatalf("conditional GET: status %v, err %v; want 304", resp, err)
	}
	if _, _, err := c.Issues.CreateComment(ctx, "o", "r", 1, &github.IssueComment{Body: github.String("hi")}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Issues.Edit(ctx, "o", "r", 1, &github.IssueRequest{Title: github.String("t")}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := other.Issues.Get(ctx, "o", "r", 1); err != nil {
		t.Fatal(err)
	}

	if got, want := a.Calls(7), (CallCounts{Reads: 2, Writes: 2, NotModified: 1}); got != want {
		t.Errorf("Calls(7) = %+v, want %+v", got, want)
	}
	if got, want := a.Calls(8), (CallCounts{Reads: 1}); got != want {
		t.Errorf("Calls(8) = %+v, want %+v", got, want)
	}
	if got := a.Calls(99); got != (CallCounts{}) {
		t.Errorf("Calls(99) = %+v, want zero", got)
	}
	wantMetric(t, reg, map[string]string{"installation": "7", "method": "GET", "status": "304"}, 1)
	wantMetric(t, reg, map[string]string{"installation": "7", "method": "GET", "status": "200"}, 1)
	wantMetric(t, reg, map[string]string{"installation": "7", "method": "POST", "status": "201"}, 1)
	wantMetric(t, reg, map[string]string{"installation": "7", "method": "PATCH", "status": "200"}, 1)
}

// flakyTransport fails the first failures requests for a method under
// /repos/ with a transport error, then passes requests on.
type flakyTransport struct {
	base     http.RoundTripper
	method   string
	failures int32
	seen     atomic.Int32
}

func (f *flakyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == f.method && strings.HasPrefix(r.URL.Path, "/repos/") && f.seen.Add(1) <= f.failures {
		if r.Body != nil {
			r.Body.Close()
		}
		return nil, errors.New("connection reset by peer (simulated)")
	}
	return f.base.RoundTrip(r)
}

// circuitOpen is a wantFinal of TestRetriesOnlyIdempotentMethods: the
// retries ended with the installation's circuit open.
const circuitOpen = -1

func TestRetriesOnlyIdempotentMethods(t *testing.T) {
	tests := []struct {
		name      string
		method    string
		statuses  []int // the answers, in order; the last one repeats
		flaky     int32 // transport errors before the first answer
		retries   int
		wantHits  int // requests the server saw
		wantCalls int // requests the layer counted (transport errors too)
		wantFinal int // final status; 0 = transport error; circuitOpen
	}{
		{"GET 503 twice then 200", http.MethodGet, []int{503, 503, 200}, 0, 0, 3, 3, 200},
		{"GET 500 502 504: the third failure in a row opens the circuit", http.MethodGet, []int{500, 502, 504, 500, 200}, 0, 0, 3, 3, circuitOpen},
		{"GET retries configurable", http.MethodGet, []int{500}, 0, 1, 2, 2, 500},
		{"GET retries disabled", http.MethodGet, []int{500, 200}, 0, -1, 1, 1, 500},
		{"GET 501 not retried", http.MethodGet, []int{501, 200}, 0, 0, 1, 1, 501},
		{"PUT body replayed", http.MethodPut, []int{502, 200}, 0, 0, 2, 2, 200},
		{"DELETE retried", http.MethodDelete, []int{503, 204}, 0, 0, 2, 2, 204},
		{"POST 502 not retried", http.MethodPost, []int{502, 201}, 0, 0, 1, 1, 502},
		{"PATCH 500 not retried", http.MethodPatch, []int{500, 200}, 0, 0, 1, 1, 500},
		{"GET transport error retried", http.MethodGet, []int{200}, 2, 0, 1, 3, 200},
		{"POST transport error not retried", http.MethodPost, []int{201}, 1, 0, 0, 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var bodies []string
			var mu sync.Mutex
			f := newFake(t, func(w http.ResponseWriter, r *http.Request, n int) {
				b, _ := io.ReadAll(r.Body)
				mu.Lock()
				bodies = append(bodies, string(b))
				mu.Unlock()
				status := tt.statuses[min(n, len(tt.statuses))-1]
				w.WriteHeader(status)
				if status != http.StatusNoContent {
					fmt.Fprint(w, `{"message":"x"}`)
				}
			})
			flaky := &flakyTransport{base: http.DefaultTransport, method: tt.method, failures: tt.flaky}
			a := newTestApp(t, f, func(c *Config) {
				c.Retries = tt.retries
				c.Transport = flaky
			})
			c, _ := a.Installation(7)
			var body any
			if tt.method != http.MethodGet && tt.method != http.MethodDelete {
				body = map[string]string{"body": "payload"}
			}
			req, err := c.NewRequest(tt.method, "repos/o/r/issues/1", body)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := c.Do(context.Background(), req, nil)
			switch {
			case tt.wantFinal == circuitOpen:
				if _, ok := IsUnavailable(err); !ok {
					t.Fatalf("want the circuit open (UnavailableError), got resp %v err %v", resp, err)
				}
			case tt.wantFinal == 0:
				if err == nil || resp != nil {
					t.Fatalf("want transport error, got resp %v err %v", resp, err)
				}
			case resp == nil:
				t.Fatalf("no response: %v", err)
			case resp.StatusCode != tt.wantFinal:
				t.Fatalf("final status %d, want %d (err %v)", resp.StatusCode, tt.wantFinal, err)
			}
			if got := f.hit(tt.method + " " + issuePath); got != tt.wantHits {
				t.Errorf("server saw %d requests, want %d", got, tt.wantHits)
			}
			calls := a.Calls(7)
			if got := calls.Reads + calls.Writes; got != tt.wantCalls {
				t.Errorf("calls counted = %d (%+v), want %d", got, calls, tt.wantCalls)
			}
			for i, b := range bodies {
				if body != nil && !strings.Contains(b, `"payload"`) {
					t.Errorf("attempt %d body = %q, want the payload replayed", i+1, b)
				}
			}
		})
	}
}

func TestSecondaryRateLimit(t *testing.T) {
	type answer struct {
		status     int
		retryAfter string
		body       string
	}
	secondary := func(ra string) answer { return answer{http.StatusForbidden, ra, secondaryBody} }
	ok := answer{status: http.StatusOK, body: `{}`}
	tests := []struct {
		name      string
		method    string
		answers   []answer // the last one repeats
		maxWait   time.Duration
		wantHits  int
		wantOK    bool
		minWait   time.Duration
		wantReset time.Duration // approximate, when !wantOK
	}{
		{"403 secondary Retry-After 1 waited and retried", http.MethodGet, []answer{secondary("1"), ok}, 5 * time.Second, 2, true, 900 * time.Millisecond, 0},
		{"429 Retry-After 1 waited and retried", http.MethodGet, []answer{{429, "1", `{"message":"too many"}`}, ok}, 5 * time.Second, 2, true, 900 * time.Millisecond, 0},
		{"abuse anchor Retry-After 0", http.MethodGet, []answer{{403, "0", `{"message":"abuse","documentation_url":"https://developer.github.com/v3/#abuse-rate-limits"}`}, ok}, 5 * time.Second, 2, true, 0, 0},
		{"message only", http.MethodGet, []answer{{403, "0", `{"message":"You have exceeded a secondary rate limit."}`}, ok}, 5 * time.Second, 2, true, 0, 0},
		{"POST retried after a rate limit (it was not processed)", http.MethodPost, []answer{secondary("0"), {status: 201, body: `{}`}}, 5 * time.Second, 2, true, 0, 0},
		{"retried once only", http.MethodGet, []answer{secondary("0")}, 5 * time.Second, 2, false, 0, 0},
		{"Retry-After beyond MaxWait gives up", http.MethodGet, []answer{secondary("1"), ok}, 100 * time.Millisecond, 1, false, 0, time.Second},
		{"no Retry-After defaults to 60s", http.MethodGet, []answer{secondary(""), ok}, 5 * time.Second, 1, false, 0, time.Minute},
		{"never wait", http.MethodGet, []answer{secondary("1"), ok}, -1, 1, false, 0, time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, func(w http.ResponseWriter, r *http.Request, n int) {
				if b, _ := io.ReadAll(r.Body); r.Method == http.MethodPost && !bytes.Contains(b, []byte("payload")) {
					t.Errorf("attempt %d: body %q not replayed", n, b)
				}
				ans := tt.answers[min(n, len(tt.answers))-1]
				if ans.retryAfter != "" {
					w.Header().Set("Retry-After", ans.retryAfter)
				}
				setRate(w, 5000, 4000, time.Now().Add(time.Hour))
				w.WriteHeader(ans.status)
				fmt.Fprint(w, ans.body)
			})
			a := newTestApp(t, f, func(c *Config) { c.MaxWait = tt.maxWait })
			c, _ := a.Installation(7)
			req, err := c.NewRequest(tt.method, "repos/o/r/issues/1", map[string]string{"body": "payload"})
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			_, err = c.Do(context.Background(), req, nil)
			elapsed := time.Since(start)

			if got := f.hit(tt.method + " " + issuePath); got != tt.wantHits {
				t.Errorf("server saw %d requests, want %d", got, tt.wantHits)
			}
			if tt.wantOK {
				if err != nil {
					t.Fatalf("Do: %v", err)
				}
				if elapsed < tt.minWait {
					t.Errorf("took %v, want at least %v (Retry-After honoured)", elapsed, tt.minWait)
				}
				return
			}
			rl, isRL := IsRateLimited(err)
			if !isRL {
				t.Fatalf("error %v (%T) is not a rate limit", err, err)
			}
			if !rl.Secondary || rl.Installation != 7 {
				t.Errorf("RateLimitedError = %+v, want Secondary for installation 7", rl)
			}
			if tt.wantReset > 0 {
				if d := time.Until(rl.Reset); d < tt.wantReset-2*time.Second || d > tt.wantReset+time.Second {
					t.Errorf("Reset in %v, want about %v", d, tt.wantReset)
				}
				// Until the reset, the installation sends nothing more.
				before := f.total()
				_, err := c.Do(context.Background(), mustRequest(t, c, http.MethodGet), nil)
				if _, isRL := IsRateLimited(err); !isRL {
					t.Errorf("second call: %v, want rate limited", err)
				}
				if f.total() != before {
					t.Error("second call reached the server during the secondary limit")
				}
			}
			if elapsed > time.Second && tt.wantHits == 1 {
				t.Errorf("give-up took %v, want fast", elapsed)
			}
		})
	}
}

func mustRequest(t *testing.T, c *github.Client, method string) *http.Request {
	t.Helper()
	req, err := c.NewRequest(method, "repos/o/r/issues/1", nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

func TestPrimaryRateLimitFailsFastWithoutSending(t *testing.T) {
	reset := time.Now().Add(time.Hour)
	f := newFake(t, func(w http.ResponseWriter, r *http.Request, n int) {
		setRate(w, 5000, 0, reset)
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprint(w, `{"message":"API rate limit exceeded for installation ID 7.","documentation_url":"https://docs.github.com/rest/overview/rate-limits-for-the-rest-api"}`)
	})
	a := newTestApp(t, f, nil)
	c, _ := a.Installation(7)
	ctx := context.Background()

	for i := range 3 {
		start := time.Now()
		_, _, err := c.Issues.Get(ctx, "o", "r", 1)
		rl, ok := IsRateLimited(err)
		if !ok {
			t.Fatalf("call %d: %v (%T), want *RateLimitedError", i, err, err)
		}
		if rl.Secondary || rl.Installation != 7 || rl.Reset.Before(reset.Add(-time.Second)) {
			t.Errorf("call %d: %+v, want primary for 7 resetting at %v", i, rl, reset)
		}
		if !strings.Contains(rl.Error(), "primary rate limit") || !strings.Contains(rl.Error(), "installation 7") {
			t.Errorf("Error() = %q", rl.Error())
		}
		if time.Since(start) > time.Second {
			t.Errorf("call %d took %v, want fast", i, time.Since(start))
		}
	}
	if n := f.hit("GET " + issuePath); n != 1 {
		t.Errorf("server saw %d requests, want 1 (later calls refused client-side)", n)
	}
	b := a.Budget(7)
	if !b.Known || b.Limit != 5000 || b.Remaining != 0 || b.Reset.Unix() != reset.Unix() {
		t.Errorf("Budget(7) = %+v", b)
	}
	if other := a.Budget(8); other.Known {
		t.Errorf("Budget(8) = %+v, want unknown", other)
	}
	// Another installation is not held back.
	c8, _ := a.Installation(8)
	_, _, _ = c8.Issues.Get(ctx, "o", "r", 1)
	if n := f.hit("GET " + issuePath); n != 2 {
		t.Errorf("installation 8 was held back by 7's budget")
	}
}

func TestPrimaryRateLimitAfterSuccessfulResponse(t *testing.T) {
	reset := time.Now().Add(time.Hour)
	f := newFake(t, func(w http.ResponseWriter, r *http.Request, n int) {
		setRate(w, 5000, 0, reset) // this answer used the last request
		fmt.Fprint(w, `{"number":1}`)
	})
	a := newTestApp(t, f, nil)
	c, _ := a.Installation(7)
	ctx := context.Background()
	if _, _, err := c.Issues.Get(ctx, "o", "r", 1); err != nil {
		t.Fatal(err)
	}
	// go-github itself refuses the next call; IsRateLimited recognises it.
	_, _, err := c.Issues.Get(ctx, "o", "r", 1)
	if rl, ok := IsRateLimited(err); !ok || rl.Secondary {
		t.Fatalf("second call: %v, want a primary rate limit", err)
	}
	// The layer refuses on its own too (a caller not using go-github).
	hc := &http.Client{Transport: scopedTransport{l: a.layer, installation: 7}}
	_, err = hc.Get(f.srv.URL + issuePath)
	rl, ok := IsRateLimited(err)
	if !ok || rl.Installation != 7 || rl.Secondary {
		t.Fatalf("raw call: %v, want *RateLimitedError for 7", err)
	}
	// GET /rate_limit is never charged, so never held back.
	req, _ := http.NewRequest(http.MethodGet, f.srv.URL+"/rate_limit", nil)
	req.Header.Set("Authorization", "token ghs_test_7")
	if resp, err := hc.Do(req); err != nil {
		t.Errorf("GET /rate_limit held back: %v", err)
	} else {
		resp.Body.Close()
	}
	if n := f.hit("GET " + issuePath); n != 1 {
		t.Errorf("server saw %d requests, want 1", n)
	}
}

func TestPrimaryRateLimitWaitsForNearReset(t *testing.T) {
	t.Parallel()
	var resetUnix atomic.Int64
	f := newFake(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if n == 1 {
			reset := time.Now().Add(time.Second).Truncate(time.Second)
			resetUnix.Store(reset.Unix())
			setRate(w, 5000, 0, reset)
			w.WriteHeader(http.StatusTooManyRequests)
			fmt.Fprint(w, `{"message":"API rate limit exceeded"}`)
			return
		}
		setRate(w, 5000, 4999, time.Now().Add(time.Hour))
		fmt.Fprint(w, `{"number":1}`)
	})
	a := newTestApp(t, f, nil)
	a.layer.resetSlack = 0
	c, _ := a.Installation(7)
	if _, _, err := c.Issues.Get(context.Background(), "o", "r", 1); err != nil {
		t.Fatalf("Get: %v", err)
	}
	if time.Now().Before(time.Unix(resetUnix.Load(), 0)) {
		t.Errorf("retried before the reset")
	}
	if n := f.hit("GET " + issuePath); n != 2 {
		t.Errorf("server saw %d requests, want 2", n)
	}
	if b := a.Budget(7); b.Remaining != 4999 {
		t.Errorf("Budget after reset = %+v", b)
	}
}

func TestContextEndsRateLimitWait(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request, n int) {
		w.Header().Set("Retry-After", "20")
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprint(w, secondaryBody)
	})

	t.Run("cancel during wait", func(t *testing.T) {
		a := newTestApp(t, f, func(c *Config) { c.MaxWait = 30 * time.Second })
		c, _ := a.Installation(7)
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(100*time.Millisecond, cancel)
		start := time.Now()
		_, _, err := c.Issues.Get(ctx, "o", "r", 1)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("returned after %v, want promptly", d)
		}
		// A raw caller sees the cancellation as well.
		hc := &http.Client{Transport: scopedTransport{l: a.layer, installation: 7}}
		ctx2, cancel2 := context.WithCancel(context.Background())
		time.AfterFunc(50*time.Millisecond, cancel2)
		req, _ := http.NewRequestWithContext(ctx2, http.MethodGet, f.srv.URL+issuePath, nil)
		if _, err := hc.Do(req); !errors.Is(err, context.Canceled) {
			t.Errorf("raw: err = %v, want context.Canceled", err)
		}
	})

	t.Run("deadline shorter than the wait fails fast", func(t *testing.T) {
		a := newTestApp(t, f, func(c *Config) { c.MaxWait = 30 * time.Second })
		c, _ := a.Installation(7)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		start := time.Now()
		_, _, err := c.Issues.Get(ctx, "o", "r", 1)
		if _, ok := IsRateLimited(err); !ok {
			t.Fatalf("err = %v, want *RateLimitedError", err)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("returned after %v, want at once", d)
		}
	})
}

func TestForbiddenBodyStaysReadable(t *testing.T) {
	long := strings.Repeat("x", 3*maxErrorBody)
	f := newFake(t, func(w http.ResponseWriter, r *http.Request, n int) {
		setRate(w, 5000, 4000, time.Now().Add(time.Hour))
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprintf(w, `{"message":"Resource not accessible by integration","documentation_url":"https://docs.github.com/rest","pad":%q}`, long)
	})
	a := newTestApp(t, f, nil)
	c, _ := a.Installation(7)
	_, _, err := c.Issues.Get(context.Background(), "o", "r", 1)
	var er *github.ErrorResponse
	if !errors.As(err, &er) || er.Message != "Resource not accessible by integration" {
		t.Fatalf("err = %v (%T), want the ErrorResponse with its message", err, err)
	}
	if _, ok := IsRateLimited(err); ok {
		t.Error("a permission 403 was taken for a rate limit")
	}
	if n := f.hit("GET " + issuePath); n != 1 {
		t.Errorf("server saw %d requests, want 1 (403 not retried)", n)
	}
}

func TestPeekBodyKeepsWholeBody(t *testing.T) {
	for _, size := range []int{0, 10, maxErrorBody, maxErrorBody + 1, 3 * maxErrorBody} {
		body := bytes.Repeat([]byte("ab"), size/2+1)[:size]
		closed := false
		resp := &http.Response{Body: &closeRecorder{Reader: bytes.NewReader(body), closed: &closed}}
		peeked := peekBody(resp)
		if want := body[:min(size, maxErrorBody)]; !bytes.Equal(peeked, want) {
			t.Errorf("size %d: peeked %d bytes, want %d", size, len(peeked), len(want))
		}
		all, err := io.ReadAll(resp.Body)
		if err != nil || !bytes.Equal(all, body) {
			t.Errorf("size %d: body after peek = %d bytes (err %v), want %d", size, len(all), err, size)
		}
		resp.Body.Close()
		if !closed {
			t.Errorf("size %d: Close did not reach the original body", size)
		}
	}
}

type closeRecorder struct {
	io.Reader
	closed *bool
}

func (c *closeRecorder) Close() error { *c.closed = true; return nil }

// layerChooses is a want of TestClassifyRateLimit: no reset named, the
// layer's own growing wait applies.
const layerChooses time.Duration = -1

func TestClassifyRateLimit(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	resetAt := now.Add(10 * time.Minute)
	hdr := func(kv ...string) http.Header {
		h := http.Header{}
		for i := 0; i < len(kv); i += 2 {
			h.Set(kv[i], kv[i+1])
		}
		return h
	}
	reset := strconv.FormatInt(resetAt.Unix(), 10)
	tests := []struct {
		name          string
		status        int
		header        http.Header
		body          string
		limited, sec  bool
		wantResetFrom time.Duration // reset - now
	}{
		{"permission 403", 403, hdr("X-Ratelimit-Remaining", "12"), `{"message":"Resource not accessible by integration"}`, false, false, 0},
		{"primary 403", 403, hdr("X-Ratelimit-Remaining", "0", "X-Ratelimit-Reset", reset), `{"message":"API rate limit exceeded"}`, true, false, 10 * time.Minute},
		{"primary 429", 429, hdr("X-Ratelimit-Remaining", "0", "X-Ratelimit-Reset", reset), ``, true, false, 10 * time.Minute},
		{"primary without reset", 403, hdr("X-Ratelimit-Remaining", "0"), ``, true, false, time.Minute},
		{"secondary Retry-After", 403, hdr("Retry-After", "7"), secondaryBody, true, true, 7 * time.Second},
		{"secondary HTTP-date Retry-After", 403, hdr("Retry-After", now.Add(30*time.Second).UTC().Format(http.TimeFormat)), secondaryBody, true, true, 30 * time.Second},
		{"secondary remaining 0 uses reset", 403, hdr("X-Ratelimit-Remaining", "0", "X-Ratelimit-Reset", reset), secondaryBody, true, true, 10 * time.Minute},
		{"secondary names no wait", 403, hdr("X-Ratelimit-Remaining", "50"), secondaryBody, true, true, layerChooses},
		{"about-secondary anchor", 403, hdr(), `{"documentation_url":"https://docs.github.com/x#about-secondary-rate-limits"}`, true, true, layerChooses},
		{"abuse anchor", 403, hdr("Retry-After", "3"), `{"documentation_url":"https://developer.github.com/v3/#abuse-rate-limits"}`, true, true, 3 * time.Second},
		{"non-JSON body", 403, hdr(), `secondary rate limit hit`, true, true, layerChooses},
		{"bare 429", 429, hdr("Retry-After", "2"), ``, true, true, 2 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := &http.Response{StatusCode: tt.status, Header: tt.header}
			limited, sec, r := classifyRateLimit(resp, []byte(tt.body), now)
			if limited != tt.limited || sec != tt.sec {
				t.Fatalf("limited, secondary = %v, %v; want %v, %v", limited, sec, tt.limited, tt.sec)
			}
			if limited && tt.wantResetFrom == layerChooses {
				if !r.IsZero() {
					t.Errorf("reset %v, want none (the layer's growing wait)", r)
				}
			} else if limited && r.Sub(now) != tt.wantResetFrom {
				t.Errorf("reset in %v, want %v", r.Sub(now), tt.wantResetFrom)
			}
		})
	}
}

func TestResourceFor(t *testing.T) {
	tests := []struct{ base, path, want string }{
		{"/", "/repos/o/r/issues", "core"},
		{"/", "/rate_limit", ""},
		{"/", "/search/issues", "search"},
		{"/", "/search/code", "code_search"},
		{"/", "/graphql", "graphql"},
		{"/api/v3/", "/api/v3/search/issues", "search"},
		{"/api/v3/", "/api/v3/rate_limit", ""},
		{"/api/v3/", "/api/v3/app", "core"},
	}
	for _, tt := range tests {
		if got := resourceFor(tt.base, tt.path); got != tt.want {
			t.Errorf("resourceFor(%q, %q) = %q, want %q", tt.base, tt.path, got, tt.want)
		}
	}
}

func TestBudgetIgnoresStaleResponses(t *testing.T) {
	l := &layer{state: map[int64]*installationState{}}
	reset := time.Unix(2_000_000_000, 0)
	rh := func(remaining int, reset time.Time) *http.Response {
		h := http.Header{}
		h.Set("X-Ratelimit-Limit", "5000")
		h.Set("X-Ratelimit-Remaining", strconv.Itoa(remaining))
		h.Set("X-Ratelimit-Reset", strconv.FormatInt(reset.Unix(), 10))
		return &http.Response{Header: h}
	}
	now := time.Now()
	l.observe(7, "core", rh(10, reset), now)
	l.observe(7, "core", rh(12, reset), now)                   // older answer, same window
	l.observe(7, "core", rh(4000, reset.Add(-time.Hour)), now) // previous window
	if b := l.budget(7); b.Remaining != 10 {
		t.Errorf("Remaining = %d, want 10", b.Remaining)
	}
	l.observe(7, "core", rh(4999, reset.Add(time.Hour)), now) // new window
	if b := l.budget(7); b.Remaining != 4999 {
		t.Errorf("Remaining = %d, want 4999", b.Remaining)
	}
	l.observe(7, "search", rh(0, reset), now)
	if b := l.budget(7); b.Remaining != 4999 {
		t.Errorf("a search budget changed the core budget: %+v", b)
	}
}

func TestLogsCarryNoSecrets(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request, n int) {
		switch n {
		case 1:
			w.WriteHeader(http.StatusBadGateway)
		case 2:
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusForbidden)
			fmt.Fprint(w, secondaryBody)
		case 3:
			w.Header().Set("Retry-After", "9")
			w.WriteHeader(http.StatusForbidden)
			fmt.Fprint(w, secondaryBody)
		default:
			fmt.Fprint(w, `{}`)
		}
	})
	var buf syncBuffer
	a := newTestApp(t, f, func(c *Config) {
		c.Logger = slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
		c.MaxWait = time.Second
	})
	c, _ := a.Installation(7)
	_, _, _ = c.Issues.Get(context.Background(), "o", "r", 1)
	out := buf.String()
	if !strings.Contains(out, "retrying") || !strings.Contains(out, "giving up") {
		t.Errorf("expected retry and give-up messages, got:\n%s", out)
	}
	for _, secret := range []string{"ghs_", "Bearer", "eyJ", "token ", "PRIVATE KEY"} {
		if strings.Contains(out, secret) {
			t.Errorf("log contains %q:\n%s", secret, out)
		}
	}
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func TestRateLimitedErrorText(t *testing.T) {
	reset := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		err  *RateLimitedError
		want string
	}{
		{&RateLimitedError{Installation: 7, Reset: reset}, "github primary rate limit exceeded for installation 7; not retrying before 2026-05-01T12:00:00Z"},
		{&RateLimitedError{Installation: AppInstallation, Reset: reset, Secondary: true}, "github secondary rate limit exceeded for the app (JWT); not retrying before 2026-05-01T12:00:00Z"},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
	}
	if _, ok := IsRateLimited(nil); ok {
		t.Error("IsRateLimited(nil) = true")
	}
	if _, ok := IsRateLimited(errors.New("x")); ok {
		t.Error("IsRateLimited(plain error) = true")
	}
	wrapped := fmt.Errorf("outer: %w", &RateLimitedError{Installation: 3})
	if rl, ok := IsRateLimited(wrapped); !ok || rl.Installation != 3 {
		t.Error("IsRateLimited does not unwrap")
	}
}
