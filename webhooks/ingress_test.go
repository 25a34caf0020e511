package webhooks

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

var (
	secretA = []byte("first-webhook-secret")
	secretB = []byte("rotated-webhook-secret")
)

// handledEvents is the Handles function the ingress tests use. It says yes
// to ping on purpose: ping must be dropped whatever Handles says.
func handledEvents(event string) bool {
	switch event {
	case "issues", "issue_comment", "pull_request", "push", "ping":
		return true
	}
	return false
}

var deliverySeq atomic.Int64

// newDeliveryID returns a fresh GUID-shaped delivery id.
func newDeliveryID() string {
	n := deliverySeq.Add(1)
	return fmt.Sprintf("%08x-1a2b-11ef-8000-%012x", n, time.Now().UnixNano()&0xffffffffffff)
}

// signedRequest builds a good delivery: POST, JSON, signed with secretA.
func signedRequest(event, id string, body []byte) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/webhooks", bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("X-GitHub-Event", event)
	r.Header.Set("X-GitHub-Delivery", id)
	r.Header.Set("X-GitHub-Hook-ID", "4242")
	r.Header.Set("X-Hub-Signature-256", Sign(secretA, body))
	return r
}

type ingressFixture struct {
	ib *Inbox
	m  *Metrics
	g  *Ingress
}

func newIngressFixture(t *testing.T, opt IngressOptions) *ingressFixture {
	t.Helper()
	_, ib := newTestInbox(t)
	if opt.Secrets == nil {
		opt.Secrets = [][]byte{secretA, secretB}
	}
	if opt.Handles == nil {
		opt.Handles = handledEvents
	}
	m := NewMetrics(nil)
	return &ingressFixture{ib: ib, m: m, g: NewIngress(ib, m, discardLogger(), opt)}
}

func (f *ingressFixture) serve(r *http.Request) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	f.g.ServeHTTP(w, r)
	return w
}

func (f *ingressFixture) rejected(t *testing.T, reason string) float64 {
	t.Helper()
	return counterValue(t, f.m.Rejected.WithLabelValues(reason))
}

// zeros is an io.Reader of n bytes that never holds them all in memory
// (a chunked body: the request's ContentLength is -1).
type zeros struct{ n int64 }

func (z *zeros) Read(p []byte) (int, error) {
	if z.n <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > z.n {
		p = p[:z.n]
	}
	for i := range p {
		p[i] = ' '
	}
	z.n -= int64(len(p))
	return len(p), nil
}

func TestIngressRefusals(t *testing.T) {
	f := newIngressFixture(t, IngressOptions{})
	body := []byte(`{"action":"opened","issue":{"number":1},"repository":{"id":1,"full_name":"o/r"}}`)

	cases := []struct {
		name   string
		edit   func(r *http.Request) *http.Request
		code   int
		reason string
	}{
		{"GET", func(r *http.Request) *http.Request { r.Method = http.MethodGet; return r }, 405, ReasonMethod},
		{"PUT", func(r *http.Request) *http.Request { r.Method = http.MethodPut; return r }, 405, ReasonMethod},
		{"declared length over 25 MiB", func(r *http.Request) *http.Request {
			r.ContentLength = MaxBody + 1
			return r
		}, 413, ReasonTooLarge},
		{"chunked body over 25 MiB", func(r *http.Request) *http.Request {
			r.Body = io.NopCloser(&zeros{n: MaxBody + 1})
			r.ContentLength = -1
			return r
		}, 413, ReasonTooLarge},
		{"missing signature", func(r *http.Request) *http.Request {
			r.Header.Del("X-Hub-Signature-256")
			return r
		}, 401, ReasonSignature},
		{"signature by an unknown secret", func(r *http.Request) *http.Request {
			r.Header.Set("X-Hub-Signature-256", Sign([]byte("not-our-secret"), body))
			return r
		}, 401, ReasonSignature},
		{"signature of another body", func(r *http.Request) *http.Request {
			r.Header.Set("X-Hub-Signature-256", Sign(secretA, append([]byte{}, body[1:]...)))
			return r
		}, 401, ReasonSignature},
		{"sha1 form", func(r *http.Request) *http.Request {
			r.Header.Set("X-Hub-Signature-256", "sha1=0123456789abcdef0123456789abcdef01234567")
			return r
		}, 401, ReasonSignature},
		{"X-Hub-Signature (sha1 header) only", func(r *http.Request) *http.Request {
			r.Header.Set("X-Hub-Signature", "sha1=0123456789abcdef0123456789abcdef01234567")
			r.Header.Del("X-Hub-Signature-256")
			return r
		}, 401, ReasonSignature},
		{"sha256 prefix without hex", func(r *http.Request) *http.Request {
			r.Header.Set("X-Hub-Signature-256", "sha256=")
			return r
		}, 401, ReasonSignature},
		{"text/plain", func(r *http.Request) *http.Request {
			r.Header.Set("Content-Type", "text/plain")
			return r
		}, 415, ReasonContentType},
		{"form encoded (the App's other webhook content type)", func(r *http.Request) *http.Request {
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			return r
		}, 415, ReasonContentType},
		{"no content type", func(r *http.Request) *http.Request {
			r.Header.Del("Content-Type")
			return r
		}, 415, ReasonContentType},
		{"unparseable content type", func(r *http.Request) *http.Request {
			r.Header.Set("Content-Type", "application/json; charset")
			return r
		}, 415, ReasonContentType},
		{"missing X-GitHub-Event", func(r *http.Request) *http.Request {
			r.Header.Del("X-GitHub-Event")
			return r
		}, 400, ReasonHeaders},
		{"missing X-GitHub-Delivery", func(r *http.Request) *http.Request {
			r.Header.Del("X-GitHub-Delivery")
			return r
		}, 400, ReasonHeaders},
		{"delivery id with a slash", func(r *http.Request) *http.Request {
			r.Header.Set("X-GitHub-Delivery", "../../etc/passwd")
			return r
		}, 400, ReasonHeaders},
		{"delivery id with a space", func(r *http.Request) *http.Request {
			r.Header.Set("X-GitHub-Delivery", "abc def")
			return r
		}, 400, ReasonHeaders},
		{"delivery id too long", func(r *http.Request) *http.Request {
			r.Header.Set("X-GitHub-Delivery", strings.Repeat("a", 129))
			return r
		}, 400, ReasonHeaders},
		{"event with a dash", func(r *http.Request) *http.Request {
			r.Header.Set("X-GitHub-Event", "issue-comment")
			return r
		}, 400, ReasonHeaders},
	}
	counts := map[string]float64{}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := f.rejected(t, tc.reason)
			r := tc.edit(signedRequest("issues", newDeliveryID(), body))
			w := f.serve(r)
			if w.Code != tc.code {
				t.Fatalf("status %d (%q), want %d", w.Code, w.Body.String(), tc.code)
			}
			if tc.code == 405 && w.Header().Get("Allow") != http.MethodPost {
				t.Errorf("405 without Allow: POST (got %q)", w.Header().Get("Allow"))
			}
			if got := f.rejected(t, tc.reason) - before; got != 1 {
				t.Errorf("rejected{reason=%q} rose by %v, want 1", tc.reason, got)
			}
			counts[tc.reason]++
		})
	}
	if rs := records(t, f.ib); len(rs) != 0 {
		t.Fatalf("refused requests left %d rows in the inbox: %+v", len(rs), rs)
	}
	for reason, n := range counts {
		if got := f.rejected(t, reason); got != n {
			t.Errorf("rejected{reason=%q} = %v, want %v", reason, got, n)
		}
	}
	if got := counterValue(t, f.m.Received); got != float64(len(cases)) {
		t.Errorf("received = %v, want %d", got, len(cases))
	}
}

func TestIngressBodyOfExactlyMaxIsRead(t *testing.T) {
	f := newIngressFixture(t, IngressOptions{})
	r := signedRequest("issues", newDeliveryID(), []byte(`{}`))
	r.Body = io.NopCloser(&zeros{n: MaxBody})
	r.ContentLength = -1
	// The signature is for another body, so the answer is 401: the point is
	// that 25 MiB itself is not refused as too large.
	if w := f.serve(r); w.Code != http.StatusUnauthorized {
		t.Fatalf("a body of exactly 25 MiB: status %d, want 401 (read, then refused for its signature)", w.Code)
	}
	if got := f.rejected(t, ReasonTooLarge); got != 0 {
		t.Fatalf("too_large = %v, want 0", got)
	}
}

func TestIngressAccepts(t *testing.T) {
	f := newIngressFixture(t, IngressOptions{})
	body := []byte(`{"action":"opened","issue":{"number":7},"repository":{"id":9,"full_name":"o/r"}}`)

	cases := []struct {
		name   string
		event  string
		edit   func(r *http.Request)
		code   int
		answer string
		stored bool
	}{
		{"signed with the first secret", "issues", nil, 202, "stored", true},
		{"signed with the rotated secret", "issues", func(r *http.Request) {
			r.Header.Set("X-Hub-Signature-256", Sign(secretB, body))
		}, 202, "stored", true},
		{"upper-case hex signature", "issues", func(r *http.Request) {
			s := Sign(secretA, body)
			r.Header.Set("X-Hub-Signature-256", "sha256="+strings.ToUpper(s[len("sha256="):]))
		}, 202, "stored", true},
		{"json with charset", "issue_comment", func(r *http.Request) {
			r.Header.Set("Content-Type", "application/json; charset=utf-8")
		}, 202, "stored", true},
		{"json in capitals", "issue_comment", func(r *http.Request) {
			r.Header.Set("Content-Type", "Application/JSON")
		}, 202, "stored", true},
		{"no hook id", "push", func(r *http.Request) { r.Header.Del("X-GitHub-Hook-ID") }, 202, "stored", true},
		{"unhandled event", "star", nil, 200, "ignored", false},
		{"ping", "ping", nil, 200, "ignored", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			id := newDeliveryID()
			r := signedRequest(tc.event, id, body)
			if tc.edit != nil {
				tc.edit(r)
			}
			w := f.serve(r)
			if w.Code != tc.code || !strings.HasPrefix(w.Body.String(), tc.answer) {
				t.Fatalf("status %d %q, want %d %q", w.Code, w.Body.String(), tc.code, tc.answer)
			}
			rec, ok := records(t, f.ib)[id]
			if ok != tc.stored {
				t.Fatalf("stored = %v, want %v", ok, tc.stored)
			}
			if !ok {
				return
			}
			if rec.State != StatePending || rec.Event != tc.event || rec.Attempts != 0 {
				t.Fatalf("stored row %+v", rec)
			}
			p, err := f.ib.Payload(context.Background(), rec.Seq)
			if err != nil || !bytes.Equal(p, body) {
				t.Fatalf("stored payload %q, %v; want the exact body", p, err)
			}
		})
	}
	if got := counterValue(t, f.m.Accepted.WithLabelValues("other", "ignored")); got != 2 {
		t.Errorf("accepted{other,ignored} = %v, want 2", got)
	}
	if got := counterValue(t, f.m.Accepted.WithLabelValues("issues", "stored")); got != 3 {
		t.Errorf("accepted{issues,stored} = %v, want 3", got)
	}
}

func TestIngressDuplicateAndRedeliveredDeadLetter(t *testing.T) {
	f := newIngressFixture(t, IngressOptions{})
	ctx := context.Background()
	body := []byte(`{"action":"created","issue":{"number":2}}`)
	id := newDeliveryID()

	if w := f.serve(signedRequest("issue_comment", id, body)); w.Code != http.StatusAccepted {
		t.Fatalf("first delivery: %d %q", w.Code, w.Body.String())
	}
	// A redelivery of a delivery in the inbox: 200, duplicate, one row.
	w := f.serve(signedRequest("issue_comment", id, body))
	if w.Code != http.StatusOK || !strings.HasPrefix(w.Body.String(), "duplicate") {
		t.Fatalf("redelivery: %d %q, want 200 duplicate", w.Code, w.Body.String())
	}
	rs := records(t, f.ib)
	if len(rs) != 1 {
		t.Fatalf("%d rows after a duplicate, want 1", len(rs))
	}
	// Processed deliveries stay duplicates too.
	seq := rs[id].Seq
	if err := f.ib.Fail(ctx, &Claim{Seq: seq}, "first try failed", time.Now(), false); err != nil {
		t.Fatal(err)
	}
	if w := f.serve(signedRequest("issue_comment", id, body)); w.Code != http.StatusOK {
		t.Fatalf("redelivery of a pending retry: %d, want 200", w.Code)
	}
	if r := record(t, f.ib, id); r.Attempts != 1 {
		t.Fatalf("a duplicate reset the pending delivery's attempts: %+v", r)
	}
	// Dead letter: a redelivery re-queues it with a clean slate.
	if err := f.ib.Fail(ctx, &Claim{Seq: seq}, "last try failed", time.Now(), true); err != nil {
		t.Fatal(err)
	}
	if r := record(t, f.ib, id); r.State != StateDead || r.Attempts != 2 {
		t.Fatalf("not dead: %+v", r)
	}
	w = f.serve(signedRequest("issue_comment", id, body))
	if w.Code != http.StatusAccepted || !strings.HasPrefix(w.Body.String(), "requeued") {
		t.Fatalf("redelivered dead letter: %d %q, want 202 requeued", w.Code, w.Body.String())
	}
	r := record(t, f.ib, id)
	if r.State != StatePending || r.Attempts != 0 || r.LastError != "" {
		t.Fatalf("redelivered dead letter: %+v, want pending with 0 attempts and no error", r)
	}
	if n := len(records(t, f.ib)); n != 1 {
		t.Fatalf("%d rows, want 1", n)
	}
	if got := counterValue(t, f.m.Accepted.WithLabelValues("issue_comment", "requeued")); got != 1 {
		t.Errorf("accepted{issue_comment,requeued} = %v, want 1", got)
	}
	if got := counterValue(t, f.m.Accepted.WithLabelValues("issue_comment", "duplicate")); got != 2 {
		t.Errorf("accepted{issue_comment,duplicate} = %v, want 2", got)
	}
}

func TestIngressBoundedUnauthenticatedReads(t *testing.T) {
	f := newIngressFixture(t, IngressOptions{MaxConcurrentReads: 1, ReadWait: 30 * time.Millisecond})
	body := []byte(`{"action":"opened","issue":{"number":1}}`)

	// The first request's body does not arrive yet: it holds the only slot.
	pr, pw := io.Pipe()
	slow := signedRequest("issues", newDeliveryID(), body)
	slow.Body = pr
	slow.ContentLength = -1
	slowDone := make(chan *httptest.ResponseRecorder, 1)
	go func() { slowDone <- f.serve(slow) }()
	waitFor(t, 5*time.Second, "the slow request to hold the read slot", func() bool { return len(f.g.reads) == 1 })

	// The same address is refused at once: its one slot is taken.
	w := f.serve(signedRequest("issues", newDeliveryID(), body))
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") == "" {
		t.Fatalf("second request from the same address: %d (Retry-After %q), want 429 with Retry-After",
			w.Code, w.Header().Get("Retry-After"))
	}
	if got := f.rejected(t, ReasonAddressBusy); got != 1 {
		t.Fatalf("rejected{address_busy} = %v, want 1", got)
	}
	// Another address waits ReadWait for the only slot, then 503.
	other := signedRequest("issues", newDeliveryID(), body)
	other.RemoteAddr = "198.51.100.9:4321"
	w = f.serve(other)
	if w.Code != http.StatusServiceUnavailable {
		t.Fatalf("second request while the slot is held: %d, want 503", w.Code)
	}
	if ra := w.Header().Get("Retry-After"); ra == "" {
		t.Fatal("503 without Retry-After")
	}
	if got := f.rejected(t, ReasonBusy); got != 1 {
		t.Fatalf("rejected{busy} = %v, want 1", got)
	}
	// A request without a signature is refused before it takes a slot.
	unsigned := signedRequest("issues", newDeliveryID(), body)
	unsigned.Header.Del("X-Hub-Signature-256")
	if w := f.serve(unsigned); w.Code != http.StatusUnauthorized {
		t.Fatalf("unsigned request while the slot is held: %d, want 401", w.Code)
	}

	// The slow body arrives: the slot is released and both complete.
	go func() {
		pw.Write(body)
		pw.Close()
	}()
	select {
	case w := <-slowDone:
		if w.Code != http.StatusAccepted {
			t.Fatalf("slow request: %d %q, want 202", w.Code, w.Body.String())
		}
	case <-time.After(5 * time.Second):
		t.Fatal("slow request did not complete")
	}
	if n := len(f.g.reads); n != 0 {
		t.Fatalf("%d read slots still held", n)
	}
	if w := f.serve(signedRequest("issues", newDeliveryID(), body)); w.Code != http.StatusAccepted {
		t.Fatalf("after the slot was released: %d, want 202", w.Code)
	}
	if n := len(records(t, f.ib)); n != 2 {
		t.Fatalf("%d rows, want 2 (the slow one and the last one)", n)
	}
}

func TestIngressConcurrentReadsUpToTheBound(t *testing.T) {
	f := newIngressFixture(t, IngressOptions{MaxConcurrentReads: 3, ReadWait: 10 * time.Second})
	body := []byte(`{"action":"opened"}`)
	var wg sync.WaitGroup
	writers := make([]*io.PipeWriter, 3)
	codes := make([]int, 3)
	for i := range 3 {
		pr, pw := io.Pipe()
		writers[i] = pw
		r := signedRequest("issues", newDeliveryID(), body)
		r.Body, r.ContentLength = pr, -1
		r.RemoteAddr = fmt.Sprintf("198.51.100.%d:4321", i+1) // one read per address
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i] = f.serve(r).Code
		}()
	}
	waitFor(t, 5*time.Second, "three reads in flight at once", func() bool { return len(f.g.reads) == 3 })
	for _, pw := range writers {
		pw.Write(body)
		pw.Close()
	}
	wg.Wait()
	for i, c := range codes {
		if c != http.StatusAccepted {
			t.Errorf("request %d: %d, want 202", i, c)
		}
	}
}

// stallingAcceptor never stores: it waits for its context.
type stallingAcceptor struct{}

func (stallingAcceptor) Accept(ctx context.Context, _ Incoming) (AcceptResult, error) {
	<-ctx.Done()
	return 0, ctx.Err()
}

func TestIngressStoreFailure(t *testing.T) {
	body := []byte(`{"action":"opened"}`)
	t.Run("closed inbox", func(t *testing.T) {
		f := newIngressFixture(t, IngressOptions{})
		f.ib.Close()
		w := f.serve(signedRequest("issues", newDeliveryID(), body))
		if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") == "" {
			t.Fatalf("closed inbox: %d (Retry-After %q), want 503 with Retry-After", w.Code, w.Header().Get("Retry-After"))
		}
		if got := f.rejected(t, ReasonStore); got != 1 {
			t.Fatalf("rejected{store} = %v, want 1", got)
		}
	})
	t.Run("slow inbox", func(t *testing.T) {
		m := NewMetrics(nil)
		g := NewIngress(stallingAcceptor{}, m, discardLogger(), IngressOptions{Secrets: [][]byte{secretA},
			AckTimeout: 40 * time.Millisecond})
		start := time.Now()
		w := httptest.NewRecorder()
		g.ServeHTTP(w, signedRequest("issues", newDeliveryID(), body))
		if w.Code != http.StatusServiceUnavailable {
			t.Fatalf("slow inbox: %d, want 503", w.Code)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("answered after %s: AckTimeout not applied", d)
		}
	})
}

// TestIngressOverHTTP sends deliveries through a real server and client, so
// that header canonicalisation and chunked transfer are the real ones.
func TestIngressOverHTTP(t *testing.T) {
	f := newIngressFixture(t, IngressOptions{})
	srv := httptest.NewServer(f.g)
	defer srv.Close()
	body := []byte(`{"action":"opened","issue":{"number":5}}`)
	post := func(r io.Reader, length int64, sig string) *http.Response {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, srv.URL+"/webhooks", r)
		if err != nil {
			t.Fatal(err)
		}
		req.ContentLength = length
		req.Header.Set("content-type", "application/json")
		req.Header.Set("x-github-event", "issues")
		req.Header.Set("x-github-delivery", newDeliveryID())
		req.Header.Set("x-hub-signature-256", sig)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	if resp := post(bytes.NewReader(body), int64(len(body)), Sign(secretA, body)); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("good delivery over HTTP: %d", resp.StatusCode)
	}
	// Chunked (unknown length) and too large: refused as it streams in.
	if resp := post(io.MultiReader(&zeros{n: MaxBody + 1}), -1, Sign(secretA, body)); resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("chunked body over 25 MiB over HTTP: %d, want 413", resp.StatusCode)
	}
	if n := len(records(t, f.ib)); n != 1 {
		t.Fatalf("%d rows, want 1", n)
	}
}
