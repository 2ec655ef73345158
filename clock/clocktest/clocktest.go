// Package clocktest provides a fake [clock.Clock] for tests: time moves only when the test
// says so, and timers fire when it passes their deadline.
package clocktest

import (
	"context"
	"sync"
	"time"

	"github.com/bettercompute/siteboot/clock"
)

// Fake is a [clock.Clock] that moves only when told. Advance moves the wall and the
// monotonic reading together and runs the AfterFunc calls that fall due, in deadline order,
// each at its own instant and on the calling goroutine, so that a test sees their effects
// when Advance returns; Set moves the wall clock alone, forward or back, as a clock that
// is stepped does, and runs nothing. It is safe for concurrent use.
//
// A test that advances while another goroutine arms a timer first waits for the timer
// with BlockUntilContext or BlockUntilTimer: an Advance that comes before the timer is
// armed moves past its deadline without running it.
type Fake struct {
	mu     sync.Mutex
	wall   time.Time
	mono   time.Duration
	timers []*timer
	seq    uint64
	armed  chan struct{} // closed and replaced each time a timer is armed
}

var _ clock.Clock = (*Fake)(nil)

// New returns a Fake showing t, monotonic reading 0.
func New(t time.Time) *Fake { return &Fake{wall: t} }

// Now implements [clock.Clock].
func (c *Fake) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.wall
}

// Monotonic implements [clock.Clock].
func (c *Fake) Monotonic() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mono
}

// AfterFunc implements [clock.Clock]: f runs during the Advance that reaches now+d, on
// the goroutine calling Advance. A call with d <= 0 runs at the next Advance, even
// Advance(0).
func (c *Fake) AfterFunc(d time.Duration, f func()) clock.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	t := &timer{c: c, at: c.mono + max(d, 0), seq: c.seq, f: f}
	c.timers = append(c.timers, t)
	if c.armed != nil {
		close(c.armed)
		c.armed = nil
	}
	return t
}

// BlockUntilContext waits until at least n AfterFunc calls wait for their deadline, and
// returns nil then, or ctx's error if ctx is done first. A stopped or fired timer no
// longer counts.
func (c *Fake) BlockUntilContext(ctx context.Context, n int) error {
	return c.blockUntil(ctx, func() bool { return len(c.timers) >= n })
}

// BlockUntilTimer waits until an AfterFunc call is pending whose deadline is d or more
// from now, and returns nil then, or ctx's error if ctx is done first. It tells the timer
// a test waits for from shorter ones the code under test already holds.
func (c *Fake) BlockUntilTimer(ctx context.Context, d time.Duration) error {
	return c.blockUntil(ctx, func() bool {
		for _, t := range c.timers {
			if t.at-c.mono >= d {
				return true
			}
		}
		return false
	})
}

// blockUntil waits until ok, called under c.mu, holds.
func (c *Fake) blockUntil(ctx context.Context, ok func() bool) error {
	for {
		c.mu.Lock()
		if ok() {
			c.mu.Unlock()
			return nil
		}
		if c.armed == nil {
			c.armed = make(chan struct{})
		}
		armed := c.armed
		c.mu.Unlock()
		select {
		case <-armed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Pending returns how many AfterFunc calls wait for their deadline. To wait for the code
// under test to arm a timer, use BlockUntilContext or BlockUntilTimer.
func (c *Fake) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

// Advance moves the clock by d (d < 0 is treated as 0). On the way it runs each pending
// call whose deadline it reaches, earliest first (in the order armed when equal), with the
// clock showing that deadline, including calls armed by the calls it runs.
func (c *Fake) Advance(d time.Duration) {
	c.mu.Lock()
	target := c.mono + max(d, 0)
	for {
		i := -1
		for j, t := range c.timers {
			if t.at <= target && (i < 0 || t.at < c.timers[i].at || t.at == c.timers[i].at && t.seq < c.timers[i].seq) {
				i = j
			}
		}
		if i < 0 {
			break
		}
		t := c.timers[i]
		c.timers = append(c.timers[:i:i], c.timers[i+1:]...)
		t.fired = true
		if t.at > c.mono {
			c.wall = c.wall.Add(t.at - c.mono)
			c.mono = t.at
		}
		c.mu.Unlock()
		t.f()
		c.mu.Lock()
	}
	c.wall = c.wall.Add(target - c.mono)
	c.mono = target
	c.mu.Unlock()
}

// Set moves the wall clock to t, forward or back, leaving the monotonic reading and the
// timers as they are.
func (c *Fake) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.wall = t
}

type timer struct {
	c     *Fake
	at    time.Duration
	seq   uint64
	f     func()
	fired bool
}

// Stop implements [clock.Timer].
func (t *timer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	if t.fired {
		return false
	}
	for i, p := range t.c.timers {
		if p == t {
			t.c.timers = append(t.c.timers[:i:i], t.c.timers[i+1:]...)
			t.fired = true
			return true
		}
	}
	return false
}
