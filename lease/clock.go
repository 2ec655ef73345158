package lease

import "time"

// Clock gives a controller and a fence their time. Now is the wall clock, written into
// records and compared with their expiry; it may jump. Monotonic never jumps and only
// grows: it measures the fence's window and how long a controller has watched a record.
type Clock interface {
	Now() time.Time
	Monotonic() time.Duration
}

// SystemClock returns the process's clock: time.Now, and the monotonic time elapsed since
// SystemClock was called.
func SystemClock() Clock { return systemClock{origin: time.Now()} }

type systemClock struct{ origin time.Time }

func (c systemClock) Now() time.Time { return time.Now() }

func (c systemClock) Monotonic() time.Duration { return time.Since(c.origin) }
