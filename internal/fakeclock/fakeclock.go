package fakeclock

import (
	"time"

	"github.com/bettercompute/siteboot/clock/clocktest"
)

// Clock is [clocktest.Fake].
//
// Deprecated: use clocktest.Fake; kept until bmc's tests move to it.
type Clock = clocktest.Fake

// New returns a clock showing t.
//
// Deprecated: use clocktest.New.
func New(t time.Time) *Clock { return clocktest.New(t) }
