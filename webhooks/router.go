package webhooks

import (
	"context"
	"fmt"
	"sort"
	"strings"
)

// Delivery is one delivery handed to a handler.
type Delivery struct {
	Seq      int64
	ID       string
	Event    string
	Payload  []byte
	Attempt  int // 1 for the first try
	Meta     Meta
	FromSelf bool // the sender is warden's own bot
}

// Result is what a handler did: a short outcome for the record and metrics.
type Result struct {
	Outcome string
}

// Handler processes one delivery of the events it is registered for.
// Deliveries are handled at least once: the delivery is marked done only
// after Handle returns success, in a transaction of its own, so a crash or a
// failed completion after the handler's writes hands the same delivery to a
// handler again. Handlers must therefore be idempotent, both towards GitHub
// (look up or key a write before trying it again) and locally (keyed
// upserts, not appends).
type Handler interface {
	Handle(ctx context.Context, d *Delivery) (Result, error)
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, d *Delivery) (Result, error)

// Handle calls f.
func (f HandlerFunc) Handle(ctx context.Context, d *Delivery) (Result, error) { return f(ctx, d) }

// Router sends each delivery to the handler registered for its event. Events
// caused by warden's own bot go to the event's Bookkeeper when it has one and
// are otherwise only recorded: warden never acts on its own writes.
type Router struct {
	handlers    map[string]Handler
	bookkeepers map[string]Handler
}

// NewRouter returns an empty router.
func NewRouter() *Router {
	return &Router{handlers: map[string]Handler{}, bookkeepers: map[string]Handler{}}
}

// Handle registers h for event. Registering an event twice panics: two
// handlers for one event is a wiring mistake.
func (r *Router) Handle(event string, h Handler) {
	if _, dup := r.handlers[event]; dup {
		panic(fmt.Sprintf("webhooks: two handlers for %q", event))
	}
	r.handlers[event] = h
}

// Bookkeep registers the handler that records (never acts on) deliveries of
// event caused by warden itself.
func (r *Router) Bookkeep(event string, h Handler) { r.bookkeepers[event] = h }

// Handles reports whether event has a handler; ingress drops other events.
func (r *Router) Handles(event string) bool {
	_, ok := r.handlers[event]
	return ok
}

// Events lists the handled events, sorted.
func (r *Router) Events() []string {
	out := make([]string, 0, len(r.handlers))
	for e := range r.handlers {
		out = append(out, e)
	}
	sort.Strings(out)
	return out
}

// Outcomes the router itself records.
const (
	OutcomeSelf      = "self"      // caused by warden's own bot; recorded only (a bookkeeper's note follows ": ")
	OutcomeUnhandled = "unhandled" // no handler (the router changed since it was stored)
)

// Dispatch implements Handler.
func (r *Router) Dispatch(ctx context.Context, d *Delivery) (Result, error) {
	if d.FromSelf {
		if b, ok := r.bookkeepers[d.Event]; ok {
			res, err := b.Handle(ctx, d)
			res.Outcome = OutcomeSelf + ": " + res.Outcome
			return res, err
		}
		return Result{Outcome: OutcomeSelf}, nil
	}
	h, ok := r.handlers[d.Event]
	if !ok {
		return Result{Outcome: OutcomeUnhandled}, nil
	}
	return h.Handle(ctx, d)
}

// IsBot reports whether login is the given bot login, compared as GitHub
// compares logins (case-insensitively).
func IsBot(login, bot string) bool {
	return bot != "" && strings.EqualFold(login, bot)
}
