package clock

import "time"

// Clock gives a package its time.
type Clock interface {
	// Now is the wall clock: written into records and compared with expiries. It may jump.
	Now() time.Time
	// Monotonic is the time elapsed since some fixed moment of this Clock. It never goes
	// back and never jumps: windows (a fence's, a throttle's) are measured with it.
	Monotonic() time.Duration
	// AfterFunc calls f in its own goroutine once d has passed, like [time.AfterFunc].
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a pending [Clock.AfterFunc] call. [*time.Timer] implements it.
type Timer interface {
	// Stop prevents the call if it has not started, reporting whether it did so.
	Stop() bool
}

// Real is the process's clock: time.Now, the monotonic time elapsed since the program
// started, and time.AfterFunc.
var Real Clock = realClock{}

// Or returns c, or [Real] when c is nil: what a package does with its Clock field.
func Or(c Clock) Clock {
	if c == nil {
		return Real
	}
	return c
}

var origin = time.Now()

type realClock struct{}

func (realClock) Now() time.Time                            { return time.Now() }
func (realClock) Monotonic() time.Duration                  { return time.Since(origin) }
func (realClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }
