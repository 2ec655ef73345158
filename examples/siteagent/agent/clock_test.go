package agent_test

import (
	"sync"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/clock"
	"github.com/bettercompute/siteboot/examples/siteagent/agent"
)

// fakeClock is an agent.Clock that moves only when the test says so. A timer whose moment
// has come runs its function in its own goroutine, as time.AfterFunc does.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	mono   time.Duration
	timers []*fakeTimer
}

type fakeTimer struct {
	c       *fakeClock
	d, at   time.Duration
	f       func()
	pending bool
}

var _ agent.Clock = (*fakeClock)(nil)

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC), mono: time.Hour}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Monotonic() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mono
}

func (c *fakeClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{c: c, d: d, at: c.mono + d, f: f, pending: true}
	c.timers = append(c.timers, t)
	return t
}

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := t.pending
	t.pending = false
	return was
}

// Advance moves the clock by d and starts every timer that came due.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now, c.mono = c.now.Add(d), c.mono+d
	var due []func()
	kept := c.timers[:0]
	for _, t := range c.timers {
		switch {
		case t.pending && t.at <= c.mono:
			t.pending = false
			due = append(due, t.f)
		case t.pending:
			kept = append(kept, t)
		}
	}
	c.timers = kept
	c.mu.Unlock()
	for _, f := range due {
		go f()
	}
}

// waitTimer waits (in real time, briefly) until a timer of length d is pending: the
// goroutine that sets it has reached that point.
func (c *fakeClock) waitTimer(t *testing.T, d time.Duration) {
	t.Helper()
	waitFor(t, "a pending timer of "+d.String(), func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, tm := range c.timers {
			if tm.pending && tm.d == d {
				return true
			}
		}
		return false
	})
}

// waitFor polls cond until it holds. It waits for goroutines to get through work that
// takes no time of the fake clock, so its bound is generous and says nothing about speed.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not reached", what)
		}
		time.Sleep(time.Millisecond)
	}
}
