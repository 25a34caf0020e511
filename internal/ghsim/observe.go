package ghsim

import "net/http"

// Exchange is one REST request and its answer, for conformance tests.
type Exchange struct {
	Method  string
	Pattern string // the chi route pattern, e.g. /repos/{owner}/{repo}/issues/{number}
	Path    string
	Status  int
	Header  http.Header
	Body    []byte
	Request []byte // the request body
}

// Delivered is one webhook the simulator sent (or tried to).
type Delivered struct {
	Event   string
	Action  string
	Payload []byte
}

// Observe registers functions called for every REST exchange and every
// webhook delivery attempt (either may be nil). Call before use.
func (s *Sim) Observe(rest func(Exchange), hook func(Delivered)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onExchange, s.onDelivery = rest, hook
}
