package clocktest_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/clock/clocktest"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func TestAdvanceFiresDueTimersInOrder(t *testing.T) {
	c := clocktest.New(t0)
	var mu sync.Mutex
	var wg sync.WaitGroup
	var got []string
	arm := func(d time.Duration, name string) {
		wg.Add(1)
		c.AfterFunc(d, func() {
			defer wg.Done()
			mu.Lock()
			got = append(got, name)
			mu.Unlock()
		})
	}
	arm(3*time.Second, "3s")
	arm(time.Second, "1s")
	stopped := c.AfterFunc(2*time.Second, func() { t.Error("a stopped timer fired") })
	if !stopped.Stop() {
		t.Fatal("Stop of a pending timer = false, want true")
	}
	if stopped.Stop() {
		t.Fatal("second Stop = true, want false")
	}
	if n := c.Pending(); n != 2 {
		t.Fatalf("Pending = %d, want 2", n)
	}
	c.Advance(999 * time.Millisecond)
	if n := c.Pending(); n != 2 {
		t.Fatalf("after 999ms Pending = %d, want 2", n)
	}
	c.Advance(time.Millisecond)
	if n := c.Pending(); n != 1 {
		t.Fatalf("after 1s Pending = %d, want 1", n)
	}
	c.Advance(2 * time.Second)
	wg.Wait()
	if got[1] != "3s" {
		t.Fatalf("fired %v, want [1s 3s]", got)
	}
	if n := c.Pending(); n != 0 {
		t.Fatalf("after 3s Pending = %d, want 0", n)
	}
	if len(got) != 2 {
		t.Fatalf("fired %v, want [1s 3s]", got)
	}
	if got := c.Now(); !got.Equal(t0.Add(3 * time.Second)) {
		t.Errorf("Now = %v, want %v", got, t0.Add(3*time.Second))
	}
	if got := c.Monotonic(); got != 3*time.Second {
		t.Errorf("Monotonic = %v, want 3s", got)
	}
}

func TestFiredTimerDoesNotStop(t *testing.T) {
	c := clocktest.New(t0)
	done := make(chan struct{})
	tm := c.AfterFunc(time.Second, func() { close(done) })
	c.Advance(time.Second)
	<-done
	if tm.Stop() {
		t.Error("Stop after the timer fired = true, want false")
	}
}

func TestSetMovesOnlyTheWall(t *testing.T) {
	c := clocktest.New(t0)
	c.AfterFunc(time.Second, func() { t.Error("Set fired a timer") })
	c.Set(t0.Add(-time.Hour))
	c.Set(t0.Add(24 * time.Hour))
	if got := c.Now(); !got.Equal(t0.Add(24 * time.Hour)) {
		t.Errorf("Now = %v, want a day on", got)
	}
	if got := c.Monotonic(); got != 0 {
		t.Errorf("Monotonic = %v after Set, want 0", got)
	}
	if c.Pending() != 1 {
		t.Errorf("Pending = %d, want 1", c.Pending())
	}
}

func ExampleFake() {
	c := clocktest.New(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	c.AfterFunc(time.Minute, func() { fmt.Println("fired at", c.Now()) })
	c.Advance(time.Hour)
	fmt.Println("now", c.Now())
	// Output:
	// fired at 2026-03-01 12:01:00 +0000 UTC
	// now 2026-03-01 13:00:00 +0000 UTC
}

func TestTimerArmedByATimerRunsInTheSameAdvance(t *testing.T) {
	c := clocktest.New(t0)
	var at []time.Duration
	var tick func()
	tick = func() {
		at = append(at, c.Monotonic())
		if len(at) < 3 {
			c.AfterFunc(time.Second, tick)
		}
	}
	c.AfterFunc(time.Second, tick)
	c.Advance(10 * time.Second)
	want := []time.Duration{time.Second, 2 * time.Second, 3 * time.Second}
	if fmt.Sprint(at) != fmt.Sprint(want) {
		t.Errorf("ran at %v, want %v", at, want)
	}
	if c.Monotonic() != 10*time.Second {
		t.Errorf("Monotonic = %v, want 10s", c.Monotonic())
	}
}
