package harness

import (
	"sync"
	"time"
)

// Clock is a settable clock for Options.Now: it starts at the real time and
// moves only when told (Advance), so a test can cross warden's one-minute
// windows without waiting.
type Clock struct {
	mu     sync.Mutex
	offset time.Duration
}

// Now is the real time plus every Advance so far.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.offset)
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.offset += d
}
