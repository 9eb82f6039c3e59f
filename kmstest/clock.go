package kmstest

import (
	"sync"
	"time"
)

// Clock is a settable clock for kms.Options.Now, safe for concurrent use:
// it starts at a fixed time and moves only when the test advances it.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a Clock at 2026-03-04T05:06:07Z.
func NewClock() *Clock { return ClockAt(time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)) }

// ClockAt returns a Clock at t.
func ClockAt(t time.Time) *Clock { return &Clock{t: t} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock on by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// Set sets the clock to t, which may be before its time.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}
