package bmc_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bettercompute/siteboot/bmc"
	"github.com/bettercompute/siteboot/clock/clocktest"
)

// timingOut is a session whose power actions time out.
type timingOut struct{ *siteDriver }

func (timingOut) SetPower(context.Context, bmc.PowerAction) error {
	return &bmc.OpError{Driver: "fake", Op: "power", Kind: bmc.ErrTimeout}
}

func TestSessionPoolReusesDropsAndEvicts(t *testing.T) {
	ctx := context.Background()
	site := newFakeSite()
	for _, a := range []string{"a", "b", "c", "slow"} {
		site.add(a, &siteMachine{state: bmc.PowerOff})
	}
	opener := bmc.OpenerFunc(func(ctx context.Context, tg bmc.Target) (bmc.Driver, error) {
		d, _ := site.Open(ctx, tg)
		if tg.Address == "slow" {
			return timingOut{d.(*siteDriver)}, nil
		}
		return d, nil
	})
	pool := &bmc.SessionPool{MaxOpen: 2}
	e := &bmc.Executor{Opener: opener, Sessions: pool}
	n := 0
	on := func(addr string) bmc.Outcome {
		n++
		return e.RunOp(ctx, "op-"+string(rune('0'+n)), bmc.TargetRef{Driver: "fake", Address: addr},
			bmc.SetPower{Action: bmc.PowerActionOn}).Outcome
	}
	for range 3 {
		if o := on("a"); o.Status != bmc.StatusOK {
			t.Fatalf("power on a: %+v", o)
		}
	}
	if site.opens["a"] != 1 {
		t.Errorf("a: %d sessions opened for 3 operations, want 1", site.opens["a"])
	}
	on("b")
	on("c") // a third BMC: the least recently used session, a's, is logged out
	if got := pool.Open(); got != 2 {
		t.Errorf("%d sessions open, MaxOpen 2", got)
	}
	if site.sessions["a"] != 0 || site.sessions["b"] != 1 || site.sessions["c"] != 1 {
		t.Errorf("open sessions by BMC %v, want a's logged out", site.sessions)
	}
	// A timeout may have spoilt the session: it is dropped, the next operation opens one.
	on("slow")
	on("slow")
	if site.opens["slow"] != 2 || site.sessions["slow"] != 0 {
		t.Errorf("slow: %d sessions opened, %d open; want each dropped after its timeout", site.opens["slow"], site.sessions["slow"])
	}
	_ = pool.Close()
	if got := pool.Open(); got != 0 || site.sessions["b"] != 0 || site.sessions["c"] != 0 {
		t.Errorf("after Close: %d open, by BMC %v", got, site.sessions)
	}
	if o := on("a"); o.Status != bmc.StatusNotSent || o.Kind != "closed" {
		t.Errorf("an operation through a closed pool: %+v, want not sent, closed", o)
	}
}

// countedPower is the driver Wrap hands an operation: the session, its power actions counted.
type countedPower struct {
	*siteDriver
	n *int
}

func (c countedPower) SetPower(ctx context.Context, a bmc.PowerAction) error {
	*c.n++
	return c.siteDriver.SetPower(ctx, a)
}

func TestExecutorWrapsThePooledSession(t *testing.T) {
	ctx := context.Background()
	site := newFakeSite()
	site.add("a", &siteMachine{state: bmc.PowerOff})
	pool := &bmc.SessionPool{}
	var sessions []bmc.Driver
	actions, done := 0, 0
	e := &bmc.Executor{Opener: site, Sessions: pool,
		Wrap: func(_ context.Context, tg bmc.TargetRef, d bmc.Driver) (bmc.Driver, func()) {
			if tg.Address != "a" {
				t.Errorf("Wrap given target %+v", tg)
			}
			sessions = append(sessions, d)
			if pool.Open() != 1 {
				t.Errorf("Wrap called with %d sessions in the pool, want the operation's", pool.Open())
			}
			return countedPower{d.(*siteDriver), &actions}, func() { done++ }
		}}
	for i, a := range []bmc.PowerAction{bmc.PowerActionOn, bmc.PowerActionForceOff, bmc.PowerActionOn} {
		o := e.RunOp(ctx, "op-"+string(rune('0'+i)), bmc.TargetRef{Driver: "fake", Address: "a"}, bmc.SetPower{Action: a}).Outcome
		if o.Status != bmc.StatusOK {
			t.Fatalf("power %s: %+v", a, o)
		}
	}
	if actions != 3 || done != 3 {
		t.Errorf("%d power actions through the wrapped driver, %d ends told; want 3 and 3", actions, done)
	}
	for _, d := range sessions[1:] {
		if d != sessions[0] {
			t.Errorf("Wrap given another session (%p, first %p): want the pooled one each time", d, sessions[0])
		}
	}
	if site.opens["a"] != 1 || site.sessions["a"] != 1 {
		t.Errorf("a: %d opened, %d open; want the one pooled session (never closed through the wrapper)", site.opens["a"], site.sessions["a"])
	}
}

// TestSessionPoolIdleTimeout: a session idle longer than IdleTimeout is not lent again (the
// BMC may have ended it): the next operation logs in anew, and CloseIdle logs idle ones out
// meanwhile, leaving a session in use and one used recently alone.
func TestSessionPoolIdleTimeout(t *testing.T) {
	ctx := context.Background()
	site := newFakeSite()
	for _, a := range []string{"a", "b"} {
		site.add(a, &siteMachine{state: bmc.PowerOff})
	}
	clk := clocktest.New(time.Unix(1e9, 0))
	pool := &bmc.SessionPool{IdleTimeout: 30 * time.Second, Clock: clk}
	e := &bmc.Executor{Opener: site, Sessions: pool}
	n := 0
	on := func(addr string) {
		t.Helper()
		n++
		if o := e.RunOp(ctx, fmt.Sprint("q", n), bmc.TargetRef{Driver: "fake", Address: addr}, bmc.SetPower{Action: bmc.PowerActionOn}).Outcome; o.Status != bmc.StatusOK {
			t.Fatalf("power on %s: %+v", addr, o)
		}
	}
	on("a")
	clk.Advance(20 * time.Second)
	on("a") // idle 20 s: reused
	if site.opens["a"] != 1 {
		t.Fatalf("a: %d sessions opened after 20 s idle, want the first reused", site.opens["a"])
	}
	clk.Advance(31 * time.Second)
	on("a") // idle 31 s: logged out, a new one opened
	if site.opens["a"] != 2 || site.sessions["a"] != 1 {
		t.Errorf("a after 31 s idle: %d opened, %d open; want a second session, the first logged out", site.opens["a"], site.sessions["a"])
	}
	on("b")
	clk.Advance(25 * time.Second)
	on("b")
	clk.Advance(10 * time.Second) // a idle 35 s, b 10 s
	if got := pool.CloseIdle(); got != 1 || site.sessions["a"] != 0 || site.sessions["b"] != 1 || pool.Open() != 1 {
		t.Errorf("CloseIdle: %d closed; open by BMC %v, pool %d; want a's alone logged out", got, site.sessions, pool.Open())
	}
	if got := (&bmc.SessionPool{}).CloseIdle(); got != 0 {
		t.Errorf("CloseIdle without IdleTimeout: %d", got)
	}
}

// TestSessionPoolForgetsUnusedBMCs: the pool keeps an entry only for a BMC with a session
// open or an operation holding or waiting for it, so after many BMCs were used (two
// executors sharing the pool, so operations wait at the pool; logins that fail; callers
// that give up while waiting) the map shrinks back to the open sessions, and to nothing
// once they are logged out, while no BMC ever has two sessions at once.
func TestSessionPoolForgetsUnusedBMCs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const bmcs, maxOpen = 300, 4
		site := newFakeSite()
		for i := range bmcs {
			site.add(fmt.Sprint("bmc-", i), &siteMachine{state: bmc.PowerOff, slowSet: time.Duration(i%7) * time.Second})
		}
		var failed atomic.Int64
		opener := bmc.OpenerFunc(func(ctx context.Context, tg bmc.Target) (bmc.Driver, error) {
			if strings.HasPrefix(tg.Address, "down-") {
				failed.Add(1)
				return nil, &bmc.OpError{Driver: "fake", Op: "session", Kind: bmc.ErrUnreachable}
			}
			return site.Open(ctx, tg)
		})
		pool := &bmc.SessionPool{MaxOpen: maxOpen, IdleTimeout: time.Minute}
		executors := []*bmc.Executor{
			{Opener: opener, Sessions: pool, MaxConcurrent: 64},
			{Opener: opener, Sessions: pool, MaxConcurrent: 64},
		}
		var wg sync.WaitGroup
		var gaveUp atomic.Int64
		for i := range bmcs {
			for j, e := range executors {
				wg.Go(func() {
					ctx := context.Background()
					if (i+j)%5 == 0 { // gives up after 1.5 s, most likely while the other holds the session
						var cancel context.CancelFunc
						ctx, cancel = context.WithTimeout(ctx, 1500*time.Millisecond)
						defer cancel()
					}
					o := e.RunOp(ctx, fmt.Sprint("op-", i, "-", j), bmc.TargetRef{Driver: "fake", Address: fmt.Sprint("bmc-", i)},
						bmc.SetPower{Action: bmc.PowerActionOn}).Outcome
					if o.Status != bmc.StatusOK {
						gaveUp.Add(1)
					}
				})
			}
			wg.Go(func() {
				executors[i%2].RunOp(context.Background(), fmt.Sprint("down-op-", i), bmc.TargetRef{Driver: "fake", Address: fmt.Sprint("down-", i)},
					bmc.SetPower{Action: bmc.PowerActionOn})
			})
			if i%50 == 49 {
				// Once every goroutine started waits (on a BMC's slow answer, or at the
				// pool), the BMCs in use have entries.
				synctest.Wait()
				if n := pool.Entries(); n == 0 {
					t.Errorf("no entries while operations run")
				}
			}
		}
		wg.Wait()
		if failed.Load() != bmcs || gaveUp.Load() == 0 {
			t.Fatalf("%d failed logins, %d operations given up: the test did not exercise those paths", failed.Load(), gaveUp.Load())
		}
		for addr, n := range site.peak {
			if n > 1 {
				t.Errorf("%s: %d sessions open at once, want at most 1", addr, n)
			}
		}
		if got, open := pool.Entries(), pool.Open(); got != open || open > maxOpen {
			t.Errorf("after %d BMCs used: %d entries, %d sessions open; want entries for the open sessions alone, at most %d", 2*bmcs, got, open, maxOpen)
		}
		time.Sleep(2 * time.Minute)
		if n := pool.CloseIdle(); n == 0 {
			t.Errorf("CloseIdle logged nothing out")
		}
		if got := pool.Entries(); got != 0 || pool.Open() != 0 {
			t.Errorf("after CloseIdle: %d entries, %d open; want 0 and 0", got, pool.Open())
		}
		// Used again, then closed: nothing left either.
		for i := range 10 {
			executors[0].RunOp(context.Background(), fmt.Sprint("again-", i), bmc.TargetRef{Driver: "fake", Address: fmt.Sprint("bmc-", i)},
				bmc.SetPower{Action: bmc.PowerActionForceOff})
		}
		if got := pool.Entries(); got != maxOpen {
			t.Errorf("10 BMCs used again: %d entries, want %d (MaxOpen)", got, maxOpen)
		}
		_ = pool.Close()
		if got := pool.Entries(); got != 0 {
			t.Errorf("after Close: %d entries, want 0", got)
		}
	})
}
