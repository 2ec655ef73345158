package fakeclock_test

import (
	"sync"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/internal/fakeclock"
)

func TestClock(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	c := fakeclock.New(t0)
	if got := c.Now(); !got.Equal(t0) {
		t.Fatalf("Now = %v, want %v", got, t0)
	}
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() { c.Advance(time.Second) })
	}
	wg.Wait()
	if got := c.Now(); !got.Equal(t0.Add(10 * time.Second)) {
		t.Errorf("after 10 concurrent Advance(1s): %v", got)
	}
	c.Set(t0.Add(-time.Hour))
	if got := c.Now(); !got.Equal(t0.Add(-time.Hour)) {
		t.Errorf("after Set back an hour: %v", got)
	}
}
