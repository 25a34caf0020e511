package webhooks

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The slow-client tests use real TCP connections to a real server running
// the ingress, so that read deadlines, keep-alive and net/http's handling of
// unread bodies are the real ones. Clients come from two loopback
// addresses, 127.0.0.1 and 127.0.0.2, to stand for two client addresses.

const (
	slowAddr  = "127.0.0.1" // the slow clients' address
	otherAddr = "127.0.0.2" // another client's
)

// answerWait bounds every wait for an answer. It is no performance claim:
// only long enough that a loaded machine is never the reason for a failure,
// and far shorter than the minute-long body timeouts the tests that need
// the slow clients still stalled set.
const answerWait = 15 * time.Second

// requireOtherLoopback skips the test where 127.0.0.2 cannot be used as a
// client address (Linux routes all of 127/8 to loopback; macOS does not).
func requireOtherLoopback(t *testing.T) {
	t.Helper()
	l, err := net.Listen("tcp", otherAddr+":0")
	if err != nil {
		t.Skipf("127.0.0.2 is not a usable loopback address here: %v", err)
	}
	l.Close()
}

// rawAnswer is what the server answered a raw request.
type rawAnswer struct {
	code   int
	header http.Header
	close  bool // Connection: close (net/http takes it out of the header)
	body   string
	err    error
}

// rawRequest is one delivery sent by hand over its own TCP connection.
type rawRequest struct {
	conn net.Conn
	body []byte
	sent int
	done chan struct{}
	ans  rawAnswer
}

// sendPartial opens a connection from the local address from, sends a
// signed delivery's headers (with its Content-Length) and the first sent
// bytes of its body, and stalls there; the answer is read in the
// background.
func sendPartial(t *testing.T, srv *httptest.Server, from string, body []byte, sent int) *rawRequest {
	t.Helper()
	d := net.Dialer{Timeout: answerWait, LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	c, err := d.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatalf("dial from %s: %v", from, err)
	}
	t.Cleanup(func() { c.Close() })
	var b bytes.Buffer
	fmt.Fprintf(&b, "POST /webhooks HTTP/1.1\r\nHost: warden.test\r\nContent-Type: application/json\r\n"+
		"X-GitHub-Event: issues\r\nX-GitHub-Delivery: %s\r\nX-Hub-Signature-256: %s\r\nContent-Length: %d\r\n\r\n",
		newDeliveryID(), Sign(secretA, body), len(body))
	b.Write(body[:sent])
	if _, err := c.Write(b.Bytes()); err != nil {
		t.Fatalf("send the headers: %v", err)
	}
	rr := &rawRequest{conn: c, body: body, sent: sent, done: make(chan struct{})}
	go func() {
		defer close(rr.done)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			rr.ans.err = err
			return
		}
		text, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		rr.ans = rawAnswer{code: resp.StatusCode, header: resp.Header, close: resp.Close, body: string(text), err: err}
	}()
	return rr
}

// finish sends the rest of the body.
func (rr *rawRequest) finish(t *testing.T) {
	t.Helper()
	if _, err := rr.conn.Write(rr.body[rr.sent:]); err != nil {
		t.Fatalf("send the rest of the body: %v", err)
	}
}

// answered says whether the server has answered.
func (rr *rawRequest) answered() bool {
	select {
	case <-rr.done:
		return true
	default:
		return false
	}
}

// answer waits (at most answerWait) for the server's answer.
func (rr *rawRequest) answer(t *testing.T, what string) rawAnswer {
	t.Helper()
	select {
	case <-rr.done:
	case <-time.After(answerWait):
		t.Fatalf("%s: no answer within %s", what, answerWait)
	}
	if rr.ans.err != nil {
		t.Fatalf("%s: reading the answer: %v", what, rr.ans.err)
	}
	return rr.ans
}

// postFrom sends a good signed delivery from the local address from with
// Go's client and returns its status.
func postFrom(t *testing.T, srv *httptest.Server, from string, body []byte) int {
	t.Helper()
	code, err := post(srv, from, body)
	if err != nil {
		t.Fatal(err)
	}
	return code
}

// post is postFrom for other goroutines than the test's.
func post(srv *httptest.Server, from string, body []byte) (int, error) {
	d := &net.Dialer{Timeout: answerWait, LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	c := &http.Client{Timeout: answerWait, Transport: &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true}}
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/webhooks", bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", "issues")
	req.Header.Set("X-GitHub-Delivery", newDeliveryID())
	req.Header.Set("X-Hub-Signature-256", Sign(secretA, body))
	resp, err := c.Do(req)
	if err != nil {
		return 0, fmt.Errorf("good delivery from %s: %w", from, err)
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return 0, fmt.Errorf("good delivery from %s: read the answer: %w", from, err)
	}
	return resp.StatusCode, nil
}

// startServer runs the handler on a real listener. It is closed after the
// test's connections (cleanups run last first): a connection left open
// would keep Close waiting.
func startServer(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// TestIngressSlowClientsDoNotStarveOthers is the starvation the probe found:
// more slow clients than there are read slots, all from one address, each
// stalling its body, must not keep a good delivery from another address
// out. One address holds only its own few slots; the rest of its requests
// are refused at once.
func TestIngressSlowClientsDoNotStarveOthers(t *testing.T) {
	requireOtherLoopback(t)
	// A body timeout of a minute keeps the slow clients stalled for the
	// whole test: what lets the good delivery in is the per-address cap.
	f := newIngressFixture(t, IngressOptions{BodyTimeout: time.Minute})
	srv := startServer(t, f.g)
	body := []byte(`{"action":"opened","issue":{"number":3},"repository":{"id":1,"full_name":"o/r"}}`)

	const slow = 80 // more than the 64 read slots
	reqs := make([]*rawRequest, slow)
	for i := range reqs {
		reqs[i] = sendPartial(t, srv, slowAddr, body, len(body)/2)
	}
	// Every slow request has reached the ingress, and each has been
	// answered or holds a read slot, or they hold every read slot.
	waitFor(t, answerWait, "the slow requests answered or holding the read slots", func() bool {
		if counterValue(t, f.m.Received) != slow {
			return false
		}
		n := len(f.g.reads)
		if n == cap(f.g.reads) {
			return true
		}
		for _, rr := range reqs {
			if rr.answered() {
				n++
			}
		}
		return n == slow
	})

	if code := postFrom(t, srv, otherAddr, body); code != http.StatusAccepted {
		t.Fatalf("good delivery from another address while %d slow bodies from %s stall: %d, want 202",
			slow, slowAddr, code)
	}

	// It got in while the slow ones holding slots were still stalled.
	perAddr := f.g.opt.MaxReadsPerAddress
	var held []*rawRequest
	for i, rr := range reqs {
		if !rr.answered() {
			held = append(held, rr)
			continue
		}
		a := rr.answer(t, fmt.Sprintf("slow request %d", i))
		if a.code != http.StatusTooManyRequests || a.header.Get("Retry-After") == "" ||
			!strings.Contains(a.body, "this address") {
			t.Errorf("slow request %d past the address's cap: %d (Retry-After %q) %q, want 429 with Retry-After naming the address",
				i, a.code, a.header.Get("Retry-After"), a.body)
		}
	}
	if len(held) != perAddr || f.g.addrs.inFlight(slowAddr) != perAddr {
		t.Fatalf("%d slow requests stalled (%d counted against %s), want the address's cap, %d",
			len(held), f.g.addrs.inFlight(slowAddr), slowAddr, perAddr)
	}
	if got := f.rejected(t, ReasonAddressBusy); got != float64(slow-perAddr) {
		t.Errorf("rejected{address_busy} = %v, want %d", got, slow-perAddr)
	}

	// The slow ones that were let in are not harmed: their bodies arrive
	// and they are stored.
	for _, rr := range held {
		rr.finish(t)
	}
	for i, rr := range held {
		if a := rr.answer(t, fmt.Sprintf("stalled request %d", i)); a.code != http.StatusAccepted {
			t.Errorf("stalled request %d once its body arrived: %d %q, want 202", i, a.code, a.body)
		}
	}
	waitFor(t, answerWait, "every read slot released", func() bool {
		return len(f.g.reads) == 0 && f.g.addrs.inFlight(slowAddr) == 0
	})
	if n := len(records(t, f.ib)); n != 1+perAddr {
		t.Fatalf("%d rows, want %d (the good delivery and the stalled ones that finished)", n, 1+perAddr)
	}
}

// TestIngressSlowBodyCutOff: a body that does not arrive within BodyTimeout
// of its headers is cut off with 408, the connection is closed and its read
// slots are given back.
func TestIngressSlowBodyCutOff(t *testing.T) {
	f := newIngressFixture(t, IngressOptions{BodyTimeout: 200 * time.Millisecond})
	srv := startServer(t, f.g)
	body := []byte(`{"action":"opened","issue":{"number":4}}`)

	for _, sent := range []int{0, len(body) / 2} {
		rr := sendPartial(t, srv, slowAddr, body, sent)
		a := rr.answer(t, fmt.Sprintf("a body stalled after %d bytes", sent))
		if a.code != http.StatusRequestTimeout || !strings.Contains(a.body, "did not arrive within 200ms") {
			t.Fatalf("a body stalled after %d bytes: %d %q, want 408 naming the timeout", sent, a.code, a.body)
		}
		if !a.close {
			t.Error("408 without Connection: close")
		}
		// The server closed the connection.
		rr.conn.SetReadDeadline(time.Now().Add(answerWait))
		if n, err := rr.conn.Read(make([]byte, 1)); err == nil {
			t.Errorf("the connection still open after the 408 (read %d bytes)", n)
		}
	}
	if got := f.rejected(t, ReasonReadTimeout); got != 2 {
		t.Errorf("rejected{read_timeout} = %v, want 2", got)
	}
	waitFor(t, answerWait, "the read slots released", func() bool {
		return len(f.g.reads) == 0 && f.g.addrs.inFlight(slowAddr) == 0
	})
	// The same address is served again, and a whole body is not cut off.
	if code := postFrom(t, srv, slowAddr, body); code != http.StatusAccepted {
		t.Fatalf("good delivery after the cut-offs: %d, want 202", code)
	}
	if n := len(records(t, f.ib)); n != 1 {
		t.Fatalf("%d rows, want 1", n)
	}
}

// TestIngressPerAddressCapRefusesAtOnce: an address with its cap of bodies
// being read is refused at once (not after its body, nor after ReadWait),
// while the reads it holds go on and other addresses are served.
func TestIngressPerAddressCapRefusesAtOnce(t *testing.T) {
	requireOtherLoopback(t)
	f := newIngressFixture(t, IngressOptions{MaxReadsPerAddress: 2, BodyTimeout: time.Minute, ReadWait: time.Minute})
	srv := startServer(t, f.g)
	body := []byte(`{"action":"opened","issue":{"number":5}}`)

	held := []*rawRequest{sendPartial(t, srv, slowAddr, body, 1), sendPartial(t, srv, slowAddr, body, 1)}
	waitFor(t, answerWait, "two reads in progress", func() bool { return len(f.g.reads) == 2 })

	// The third stalls its body too: the refusal must not wait for it.
	third := sendPartial(t, srv, slowAddr, body, 1)
	a := third.answer(t, "the third request from the address")
	if a.code != http.StatusTooManyRequests {
		t.Fatalf("third request from the address: %d %q, want 429", a.code, a.body)
	}
	if ra := a.header.Get("Retry-After"); ra != "60" {
		t.Errorf("Retry-After %q, want 60 (the body timeout, when every read held now is over)", ra)
	}
	if !strings.Contains(a.body, "too many deliveries from this address") || !strings.Contains(a.body, "at most 2") {
		t.Errorf("refusal body %q does not say why", a.body)
	}
	if !a.close {
		t.Error("refusal of an unread body without Connection: close")
	}
	if got := f.rejected(t, ReasonAddressBusy); got != 1 {
		t.Errorf("rejected{address_busy} = %v, want 1", got)
	}
	for i, rr := range held {
		if rr.answered() {
			t.Fatalf("held request %d answered (%+v) while its body is stalled", i, rr.ans)
		}
	}
	// Another address is served meanwhile.
	if code := postFrom(t, srv, otherAddr, body); code != http.StatusAccepted {
		t.Fatalf("another address while one is at its cap: %d, want 202", code)
	}

	// One held body arrives: stored, and the address has a slot again.
	held[0].finish(t)
	if a := held[0].answer(t, "the first held request"); a.code != http.StatusAccepted {
		t.Fatalf("held request once its body arrived: %d %q, want 202", a.code, a.body)
	}
	waitFor(t, answerWait, "the slot given back", func() bool { return f.g.addrs.inFlight(slowAddr) == 1 })
	if code := postFrom(t, srv, slowAddr, body); code != http.StatusAccepted {
		t.Fatalf("the address once under its cap: %d, want 202", code)
	}
	held[1].finish(t)
	if a := held[1].answer(t, "the second held request"); a.code != http.StatusAccepted {
		t.Fatalf("second held request: %d %q, want 202", a.code, a.body)
	}
}

// slowAcceptor stores after a delay, unless its context ends first.
type slowAcceptor struct {
	Acceptor
	delay time.Duration
	calls atomic.Int32
}

func (s *slowAcceptor) Accept(ctx context.Context, in Incoming) (AcceptResult, error) {
	s.calls.Add(1)
	select {
	case <-time.After(s.delay):
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	return s.Acceptor.Accept(ctx, in)
}

// TestIngressStoreMayOutlastTheBodyDeadline: the read deadline is for the
// body only. A delivery whose body arrived in time is stored even when the
// durable write ends after the deadline (it must not cancel the request).
func TestIngressStoreMayOutlastTheBodyDeadline(t *testing.T) {
	_, ib := newTestInbox(t)
	acc := &slowAcceptor{Acceptor: ib, delay: 600 * time.Millisecond}
	g := NewIngress(acc, NewMetrics(nil), discardLogger(), IngressOptions{Secrets: [][]byte{secretA},
		BodyTimeout: 100 * time.Millisecond})
	srv := startServer(t, g)
	body := []byte(`{"action":"opened","issue":{"number":6}}`)
	var wg sync.WaitGroup
	codes := make([]int, 3)
	for i := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, err := post(srv, slowAddr, body)
			if err != nil {
				t.Error(err)
			}
			codes[i] = code
		}()
	}
	wg.Wait()
	for i, c := range codes {
		if c != http.StatusAccepted {
			t.Errorf("delivery %d stored past the body deadline: %d, want 202", i, c)
		}
	}
	if n := len(records(t, ib)); n != len(codes) {
		t.Fatalf("%d rows, want %d", n, len(codes))
	}
}

func TestClientKey(t *testing.T) {
	for _, tc := range []struct{ remote, want string }{
		{"192.0.2.7:443", "192.0.2.7"},
		{"192.0.2.7:1", "192.0.2.7"},
		{"[::ffff:192.0.2.7]:443", "192.0.2.7"},
		{"[2001:db8:1:2:aaaa::1]:443", "2001:db8:1:2::/64"},
		{"[2001:db8:1:2:bbbb::9]:80", "2001:db8:1:2::/64"},
		{"[2001:db8:1:3::1]:80", "2001:db8:1:3::/64"},
		{"[fe80::1%eth0]:80", "fe80::/64"},
		{"[::1]:80", "::/64"},
		{"mcp", "mcp"},
		{"", ""},
	} {
		if got := clientKey(tc.remote); got != tc.want {
			t.Errorf("clientKey(%q) = %q, want %q", tc.remote, got, tc.want)
		}
	}
}
