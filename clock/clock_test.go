package clock_test

import (
	"testing"
	"time"

	"github.com/bettercompute/siteboot/clock"
	"github.com/bettercompute/siteboot/clock/clocktest"
)

func TestOr(t *testing.T) {
	if clock.Or(nil) != clock.Real {
		t.Error("Or(nil) is not Real")
	}
	f := clocktest.New(time.Unix(0, 0))
	if clock.Or(f) != clock.Clock(f) {
		t.Error("Or(f) is not f")
	}
}

func TestRealMonotonicGrowsAndTimerStops(t *testing.T) {
	a := clock.Real.Monotonic()
	b := clock.Real.Monotonic()
	if b < a {
		t.Errorf("Monotonic went back: %v then %v", a, b)
	}
	tm := clock.Real.AfterFunc(time.Hour, func() { t.Error("fired") })
	if !tm.Stop() {
		t.Error("Stop of a pending real timer = false")
	}
}
