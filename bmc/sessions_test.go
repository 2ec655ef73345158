package bmc_test

import (
	"context"
	"testing"

	"github.com/bettercompute/siteboot/bmc"
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
