package discovery_test

import (
	"time"

	"github.com/bettercompute/siteboot/clock/clocktest"
)

// fakeClock is the shared fake: Advance runs the timers that fall due, in order, each at
// its own instant, on the calling goroutine.
type fakeClock = clocktest.Fake

var epoch = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func newFakeClock() *fakeClock { return clocktest.New(epoch) }
