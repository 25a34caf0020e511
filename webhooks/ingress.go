package webhooks

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"os"
	"time"
)

// MaxBody is the largest delivery warden reads: GitHub does not deliver
// payloads over 25 MB.
const MaxBody = 25 << 20

// Acceptor is the part of the inbox ingress needs.
type Acceptor interface {
	Accept(ctx context.Context, in Incoming) (AcceptResult, error)
}

// IngressOptions configure the delivery endpoint.
type IngressOptions struct {
	// Secrets are the webhook secrets; a delivery signed with any of them is
	// accepted (rotation).
	Secrets [][]byte
	// Handles says which events warden processes; others are acknowledged
	// and dropped.
	Handles func(event string) bool
	// MaxConcurrentReads bounds bodies being read before their signature is
	// checked, from all clients together; default 64. Past it, requests
	// wait up to ReadWait, then 503.
	MaxConcurrentReads int
	ReadWait           time.Duration // default 2s
	// MaxReadsPerAddress bounds the bodies one client address (clientKey)
	// may have being read before their signature is checked, including
	// those waiting for one of the MaxConcurrentReads; default an eighth of
	// MaxConcurrentReads (8), at least 1. Past it, 429 at once.
	MaxReadsPerAddress int
	// BodyTimeout is how long after its headers a body may take to arrive
	// (a read deadline on the connection, set per request); default 5s.
	// Past it, 408 and the connection is closed.
	BodyTimeout time.Duration
	// AckTimeout bounds the durable write; GitHub gives up after 10s.
	AckTimeout time.Duration // default 8s
}

// Ingress is the POST /webhooks handler: it verifies, stores and
// acknowledges deliveries, and never parses a body it has not authenticated.
type Ingress struct {
	opt   IngressOptions
	inbox Acceptor
	m     *Metrics
	log   *slog.Logger
	reads chan struct{}   // global read slots
	addrs *addressLimiter // read slots per client address
}

// NewIngress builds the handler.
func NewIngress(inbox Acceptor, m *Metrics, log *slog.Logger, opt IngressOptions) *Ingress {
	if opt.MaxConcurrentReads <= 0 {
		opt.MaxConcurrentReads = DefaultMaxConcurrentReads
	}
	if opt.ReadWait <= 0 {
		opt.ReadWait = 2 * time.Second
	}
	if opt.MaxReadsPerAddress <= 0 {
		opt.MaxReadsPerAddress = max(1, opt.MaxConcurrentReads/readsPerAddressShare)
	}
	if opt.BodyTimeout <= 0 {
		opt.BodyTimeout = DefaultBodyTimeout
	}
	if opt.AckTimeout <= 0 {
		opt.AckTimeout = 8 * time.Second
	}
	if opt.Handles == nil {
		opt.Handles = func(string) bool { return true }
	}
	if m == nil {
		m = NewMetrics(nil)
	}
	if log == nil {
		log = slog.Default()
	}
	return &Ingress{opt: opt, inbox: inbox, m: m, log: log, reads: make(chan struct{}, opt.MaxConcurrentReads),
		addrs: newAddressLimiter(opt.MaxReadsPerAddress)}
}

// Rejection reasons (the label values of warden_deliveries_rejected_total).
const (
	ReasonMethod      = "method"
	ReasonTooLarge    = "too_large"
	ReasonSignature   = "signature"
	ReasonContentType = "content_type"
	ReasonHeaders     = "headers"
	ReasonBusy        = "busy"         // every unverified read slot taken
	ReasonAddressBusy = "address_busy" // the client address's read slots taken
	ReasonReadTimeout = "read_timeout" // the body did not arrive within BodyTimeout
	ReasonRead        = "read"
	ReasonStore       = "store"
)

func (g *Ingress) reject(w http.ResponseWriter, code int, reason, msg string) {
	g.m.Rejected.WithLabelValues(reason).Inc()
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	io.WriteString(w, msg+"\n")
}

// ServeHTTP handles one delivery: refused (with the reason counted) or
// verified, stored and acknowledged.
func (g *Ingress) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	g.m.Received.Inc()
	if r.ContentLength != 0 {
		// The body must arrive within BodyTimeout of the headers: this also
		// bounds what net/http reads of a refused request's body after the
		// answer. Only while a body remains: once it has been read, net/http
		// clears the deadline itself to watch for the client going away.
		// A writer that is not a connection's (a test's recorder) cannot
		// take a deadline; nothing to bound there.
		if err := http.NewResponseController(w).SetReadDeadline(start.Add(g.opt.BodyTimeout)); err != nil &&
			!errors.Is(err, http.ErrNotSupported) {
			g.log.Debug("webhooks: no read deadline on the request", "remote", r.RemoteAddr, "err", err)
		}
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		g.refuseUnread(w, r, http.StatusMethodNotAllowed, ReasonMethod, "webhooks: only POST is accepted")
		return
	}
	if r.ContentLength > MaxBody {
		g.refuseUnread(w, r, http.StatusRequestEntityTooLarge, ReasonTooLarge, "webhooks: body over 25 MiB")
		return
	}
	sig := r.Header.Get("X-Hub-Signature-256")
	if sig == "" {
		g.refuseUnread(w, r, http.StatusUnauthorized, ReasonSignature, "webhooks: missing X-Hub-Signature-256")
		return
	}
	body, ok := g.readBody(w, r)
	if !ok {
		return
	}
	if err := VerifySignature(g.opt.Secrets, sig, body); err != nil {
		g.log.Warn("delivery refused: bad signature", "remote", r.RemoteAddr, "err", err)
		g.reject(w, http.StatusUnauthorized, ReasonSignature, "webhooks: "+err.Error())
		return
	}
	// Authenticated from here on; still, every header is hostile data.
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		g.reject(w, http.StatusUnsupportedMediaType, ReasonContentType,
			"webhooks: Content-Type must be application/json (set the App's webhook content type to JSON)")
		return
	}
	event, id := r.Header.Get("X-GitHub-Event"), r.Header.Get("X-GitHub-Delivery")
	if event == "" || id == "" {
		g.reject(w, http.StatusBadRequest, ReasonHeaders, "webhooks: missing X-GitHub-Event or X-GitHub-Delivery")
		return
	}
	if !validToken(event, 64, false) || !validToken(id, 128, true) {
		g.reject(w, http.StatusBadRequest, ReasonHeaders, "webhooks: malformed X-GitHub-Event or X-GitHub-Delivery")
		return
	}
	log := g.log.With("delivery", id, "event", event)
	if event == "ping" || !g.opt.Handles(event) {
		g.m.Accepted.WithLabelValues("other", "ignored").Inc()
		log.Debug("delivery acknowledged and dropped: event not handled")
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, "ignored: event not handled\n")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), g.opt.AckTimeout)
	defer cancel()
	res, err := g.inbox.Accept(ctx, Incoming{ID: id, Event: event, HookID: r.Header.Get("X-GitHub-Hook-ID"),
		Payload: body, ReceivedAt: start})
	if err != nil {
		log.Error("delivery not stored", "err", err)
		w.Header().Set("Retry-After", "5")
		g.reject(w, http.StatusServiceUnavailable, ReasonStore, "webhooks: the inbox could not store the delivery; redeliver it")
		return
	}
	g.m.Accepted.WithLabelValues(event, res.String()).Inc()
	g.m.AckSeconds.Observe(time.Since(start).Seconds())
	code := http.StatusAccepted
	if res == Duplicate {
		code = http.StatusOK
	}
	log.Debug("delivery acknowledged", "result", res.String())
	w.WriteHeader(code)
	io.WriteString(w, res.String()+"\n")
}

// readBody reads at most MaxBody bytes while holding one of its client
// address's read slots and one of the bounded unauthenticated read slots.
// An address over its cap is refused at once; a request finding every
// slot taken waits up to ReadWait for one.
func (g *Ingress) readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	addr := clientKey(r.RemoteAddr)
	if !g.addrs.acquire(addr) {
		g.log.Debug("delivery refused: too many unverified bodies from one address", "remote", r.RemoteAddr)
		w.Header().Set("Retry-After", retryAfter(g.opt.BodyTimeout))
		g.refuseUnread(w, r, http.StatusTooManyRequests, ReasonAddressBusy, fmt.Sprintf(
			"webhooks: too many deliveries from this address at once (at most %d bodies read before their signature is checked); retry later",
			g.opt.MaxReadsPerAddress))
		return nil, false
	}
	defer g.addrs.release(addr)
	t := time.NewTimer(g.opt.ReadWait)
	defer t.Stop()
	select {
	case g.reads <- struct{}{}:
	case <-t.C:
		w.Header().Set("Retry-After", "1")
		g.refuseUnread(w, r, http.StatusServiceUnavailable, ReasonBusy, "webhooks: too many deliveries being read; retry")
		return nil, false
	case <-r.Context().Done():
		return nil, false
	}
	defer func() { <-g.reads }()
	var buf bytes.Buffer
	if r.ContentLength > 0 {
		// Trust the declared length only so far before the body is authenticated.
		buf.Grow(int(min(r.ContentLength, 1<<20)))
	}
	_, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, MaxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		switch {
		case errors.As(err, &tooBig):
			g.reject(w, http.StatusRequestEntityTooLarge, ReasonTooLarge, "webhooks: body over 25 MiB")
		case errors.Is(err, os.ErrDeadlineExceeded):
			g.log.Warn("delivery refused: body too slow", "remote", r.RemoteAddr, "read", buf.Len(), "err", err)
			w.Header().Set("Connection", "close")
			g.reject(w, http.StatusRequestTimeout, ReasonReadTimeout, fmt.Sprintf(
				"webhooks: the body did not arrive within %s of the headers (GitHub sends a delivery at once)", g.opt.BodyTimeout))
		default:
			g.reject(w, http.StatusBadRequest, ReasonRead, "webhooks: could not read the body")
		}
		return nil, false
	}
	return buf.Bytes(), true
}

// validToken accepts short header values of letters, digits, '_' and (when
// dash is set) '-': what GitHub's event names and delivery GUIDs are made of.
func validToken(s string, max int, dash bool) bool {
	if len(s) == 0 || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_':
		case c == '-' && dash:
		default:
			return false
		}
	}
	return true
}
