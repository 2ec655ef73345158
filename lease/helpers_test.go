package lease_test

import (
	"github.com/bettercompute/siteboot/clock/clocktest"
	"github.com/bettercompute/siteboot/lease/leasetest"
)

type fakeClock = clocktest.Fake

func newFakeClock() *fakeClock { return leasetest.NewClock() }

// zeroReader is a Rand that yields zero bytes, for reproducible heartbeat numbers.
type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
