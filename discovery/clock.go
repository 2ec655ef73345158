package discovery

import "time"

// Clock is the time source of a [List]: the current time for first- and last-seen, the
// day's forgetting and the report throttle, and a timer for the trailing report. A test hands
// in a fake one and moves it by hand; nil means the system clock.
type Clock interface {
	Now() time.Time
	// AfterFunc calls f in its own goroutine once d has passed, like [time.AfterFunc].
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a pending [Clock.AfterFunc] call. [*time.Timer] implements it.
type Timer interface {
	// Stop prevents the call if it has not started, reporting whether it did so.
	Stop() bool
}

type systemClock struct{}

func (systemClock) Now() time.Time                            { return time.Now() }
func (systemClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }
