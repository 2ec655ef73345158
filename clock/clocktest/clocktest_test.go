package clocktest_test

import (
	"context"
	"errors"
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

// TestBlockUntilContextWaitsForTheTimer: BlockUntilContext returns only once the other
// goroutine has armed its timer, so the Advance that follows fires it.
func TestBlockUntilContextWaitsForTheTimer(t *testing.T) {
	c := clocktest.New(t0)
	c.AfterFunc(time.Hour, func() {}) // one already pending: the test waits for two
	release := make(chan struct{})
	fired := make(chan struct{})
	go func() {
		<-release
		c.AfterFunc(time.Second, func() { close(fired) })
	}()

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.BlockUntilContext(ctx, 2); !errors.Is(err, context.Canceled) {
		t.Fatalf("BlockUntilContext before the timer, ctx done: %v, want context.Canceled", err)
	}

	close(release)
	if err := c.BlockUntilContext(context.Background(), 2); err != nil {
		t.Fatal(err)
	}
	if c.Pending() != 2 {
		t.Fatalf("Pending after BlockUntilContext(2) = %d", c.Pending())
	}
	c.Advance(time.Second)
	select {
	case <-fired:
	default:
		t.Fatal("the timer BlockUntilContext waited for did not fire at its deadline")
	}
}

// TestBlockUntilContextCountsOnlyPendingTimers: a stopped timer is not waited for.
func TestBlockUntilContextCountsOnlyPendingTimers(t *testing.T) {
	c := clocktest.New(t0)
	c.AfterFunc(time.Second, func() {}).Stop()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.BlockUntilContext(ctx, 1); !errors.Is(err, context.Canceled) {
		t.Errorf("BlockUntilContext(1) with only a stopped timer: %v, want context.Canceled", err)
	}
	if err := c.BlockUntilContext(ctx, 0); err != nil {
		t.Errorf("BlockUntilContext(0): %v, want nil even with ctx done", err)
	}
}

// TestBlockUntilTimerTellsTimersApart: a short timer already pending does not satisfy a
// wait for a longer one; the longer one, once armed, does.
func TestBlockUntilTimerTellsTimersApart(t *testing.T) {
	c := clocktest.New(t0)
	c.AfterFunc(time.Second, func() {})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.BlockUntilTimer(ctx, 5*time.Second); !errors.Is(err, context.Canceled) {
		t.Fatalf("BlockUntilTimer(5s) with a 1s timer: %v, want context.Canceled", err)
	}
	if err := c.BlockUntilTimer(ctx, time.Second); err != nil {
		t.Fatalf("BlockUntilTimer(1s) with a 1s timer: %v", err)
	}

	go c.AfterFunc(5*time.Second, func() {})
	if err := c.BlockUntilTimer(context.Background(), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	// The deadline counts from now: after 1s the 5s timer is 4s away.
	c.Advance(time.Second)
	if err := c.BlockUntilTimer(ctx, 5*time.Second); !errors.Is(err, context.Canceled) {
		t.Errorf("BlockUntilTimer(5s) once the timer is 4s away: %v, want context.Canceled", err)
	}
}

// ExampleFake_BlockUntilContext: a goroutine arms a timer; the test waits for it before
// moving time, so the Advance cannot come first.
func ExampleFake_BlockUntilContext() {
	c := clocktest.New(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	done := make(chan struct{})
	go c.AfterFunc(time.Minute, func() { close(done) })

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.BlockUntilContext(ctx, 1); err != nil {
		fmt.Println(err)
		return
	}
	c.Advance(time.Minute)
	<-done
	fmt.Println("fired at", c.Now())
	// Output:
	// fired at 2026-03-01 12:01:00 +0000 UTC
}
