package discovery

import "github.com/bettercompute/siteboot/clock"

// Clock is the time source of a [List]: the current time for first- and last-seen, the
// day's forgetting and the report throttle, and a timer for the trailing report. A test hands
// in a [github.com/bettercompute/siteboot/clock/clocktest.Fake]; nil means [clock.Real].
//
// Deprecated: use [clock.Clock], which this is.
type Clock = clock.Clock

// Timer is a pending [clock.Clock.AfterFunc] call.
//
// Deprecated: use [clock.Timer], which this is.
type Timer = clock.Timer
