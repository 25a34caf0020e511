package webhooks

import (
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"
)

// The ingress's limits on unauthenticated input. A webhook body is a
// stranger's until its signature has been checked, and the signature can
// only be checked once the whole body has arrived, so the time and the
// read slots a body may take before then are bounded: GitHub sends a
// delivery at once and gives up on it after 10 s, so a request whose headers
// or body take longer than a few seconds to arrive is not GitHub's.
const (
	// HeaderTimeout is how long the public listener waits for a request's
	// headers (its http.Server's ReadHeaderTimeout).
	HeaderTimeout = 5 * time.Second
	// DefaultBodyTimeout is how long after its headers a delivery's body
	// may take to arrive (IngressOptions.BodyTimeout): with HeaderTimeout,
	// 10 s, when GitHub has given up on the delivery in any case.
	DefaultBodyTimeout = 5 * time.Second
	// DefaultMaxConcurrentReads is the default bound on bodies being read
	// before their signature is checked, from all clients together.
	DefaultMaxConcurrentReads = 64
	// readsPerAddressShare is the default share of that bound one client
	// address may hold: an eighth, so that it takes eight addresses
	// stalling bodies at once to fill the pool.
	readsPerAddressShare = 8
)

// addressLimiter counts the unverified body reads in progress per client
// address (clientKey) and refuses one past its cap.
type addressLimiter struct {
	max int
	mu  sync.Mutex
	n   map[string]int
}

func newAddressLimiter(max int) *addressLimiter {
	return &addressLimiter{max: max, n: map[string]int{}}
}

// acquire takes one of key's read slots; false when key holds them all.
func (l *addressLimiter) acquire(key string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n[key] >= l.max {
		return false
	}
	l.n[key]++
	return true
}

// release gives back a slot acquire took. An address with no read in
// progress is forgotten, so the map holds only addresses reading now.
func (l *addressLimiter) release(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n[key] <= 1 {
		delete(l.n, key)
		return
	}
	l.n[key]--
}

// inFlight is the number of reads key has in progress.
func (l *addressLimiter) inFlight(key string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n[key]
}

// clientKey is the address a request's unverified reads are counted
// against: the IP of its RemoteAddr (the TCP peer; behind a reverse proxy,
// the proxy). An IPv6 address counts as its /64, the block one host or one
// customer is given, so that one client cannot spread its requests over
// addresses it has by the billion; an IPv4-mapped IPv6 address counts as
// the IPv4 address. An address that does not parse (a Unix socket, a
// handler called in-process) counts as itself.
func clientKey(remoteAddr string) string {
	ap, err := netip.ParseAddrPort(remoteAddr)
	if err != nil {
		return remoteAddr
	}
	a := ap.Addr().Unmap().WithZone("")
	if a.Is4() {
		return a.String()
	}
	return netip.PrefixFrom(a, 64).Masked().String()
}

// retryAfter is the Retry-After value, in whole seconds (at least 1), for
// d: by then every read that held a slot has finished or been cut off.
func retryAfter(d time.Duration) string {
	return strconv.Itoa(max(1, int((d+time.Second-1)/time.Second)))
}

// refuseUnread answers a request whose body has not been read. It asks for
// the connection to be closed after the answer: otherwise net/http reads
// what is left of the body before it sends the answer, and a stalled body
// would delay the refusal until the read deadline.
func (g *Ingress) refuseUnread(w http.ResponseWriter, r *http.Request, code int, reason, msg string) {
	if r.ContentLength != 0 {
		w.Header().Set("Connection", "close")
	}
	g.reject(w, code, reason, msg)
}
