package agent

import (
	"time"

	"github.com/bettercompute/siteboot/discovery"
)

// Clock is the agent's time, handed to every part whose rules depend on it: the wall clock
// of boot entries, discovery, cache grants and assertions, the monotonic reading of the
// lease fence, and the timer of the heartbeat and of discovery's report throttle. A test
// hands in a fake one and moves it by hand; nil in [Options] means the system clock.
type Clock interface {
	Now() time.Time
	// Monotonic is the time elapsed since some fixed moment, never going back: the fence
	// measures its window with it, so a wall clock that jumps cannot extend it.
	Monotonic() time.Duration
	// AfterFunc calls f in its own goroutine once d has passed, like [time.AfterFunc].
	// The Timer's Stop prevents the call if it has not started.
	AfterFunc(d time.Duration, f func()) discovery.Timer
}

// systemClock is the process's clock, the Clock of a nil Options.Clock.

type systemClock struct{ origin time.Time }

func (systemClock) Now() time.Time                                      { return time.Now() }
func (c systemClock) Monotonic() time.Duration                          { return time.Since(c.origin) }
func (systemClock) AfterFunc(d time.Duration, f func()) discovery.Timer { return time.AfterFunc(d, f) }
