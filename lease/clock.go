package lease

import "github.com/bettercompute/siteboot/clock"

// Clock gives a controller and a fence their time. Now is the wall clock, written into
// records and compared with their expiry; it may jump. Monotonic never jumps and only
// grows: it measures the fence's window and how long a controller has watched a record.
//
// Deprecated: use [clock.Clock], which this is.
type Clock = clock.Clock

// SystemClock returns [clock.Real].
//
// Deprecated: use clock.Real, or leave the Clock field nil.
func SystemClock() Clock { return clock.Real }
