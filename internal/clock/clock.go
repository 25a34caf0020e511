// Package clock holds the settable clocks that tests, the demo and the
// bench pass where warden takes a clock (a func() time.Time): Manual stands
// still until told, Offset runs with real time plus what it was moved by.
package clock

import (
	"sync"
	"time"
)

// Manual is a clock that moves only when told. The zero value reads the
// zero time; New starts it at a given time. It is safe for concurrent use.
type Manual struct {
	mu sync.Mutex
	t  time.Time
}

// New returns a Manual clock reading t.
func New(t time.Time) *Manual { return &Manual{t: t} }

// Now is the time the clock reads.
func (c *Manual) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Set makes the clock read t.
func (c *Manual) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

// Advance moves the clock by d.
func (c *Manual) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// Offset is real time plus an offset that moves only when told, so a test
// or the demo can cross warden's one-minute windows without waiting. The
// zero value reads real time. It is safe for concurrent use.
type Offset struct {
	mu     sync.Mutex
	offset time.Duration
}

// Now is the real time plus the offset.
func (c *Offset) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.offset)
}

// Advance moves the clock forward by d.
func (c *Offset) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.offset += d
}

// Set makes the offset d.
func (c *Offset) Set(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.offset = d
}
