package bmc_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bettercompute/siteboot/bmc"
)

// These tests run in a synctest bubble: the runner's clock (nil: the real one) and every
// context deadline move on fake time, so a 20-second ramp takes no real time.

// siteMachine is one machine behind a fake BMC.
type siteMachine struct {
	state      bmc.PowerState
	powerOns   []time.Time // when a cycle or on took effect
	sent       []time.Time // when an on or a cycle reached the BMC (busy or not), before its work
	busy       int         // SetPower calls still answered busy, nothing done
	revertIn   int         // reads after a change before it reverts; 0: never
	pendingRev int
	ignoreACPI bool          // a graceful off never ends
	slowSet    time.Duration // each SetPower takes this much longer (a slow BMC)
	network    string
}

type fakeSite struct {
	mu       sync.Mutex
	machines map[string]*siteMachine
	opens    map[string]int
	sessions map[string]int // open sessions per BMC
	peak     map[string]int // most sessions open at once per BMC
	netPeak  map[string]int
	netNow   map[string]int
	calls    []string
}

func newFakeSite() *fakeSite {
	return &fakeSite{machines: map[string]*siteMachine{}, opens: map[string]int{}, sessions: map[string]int{},
		peak: map[string]int{}, netPeak: map[string]int{}, netNow: map[string]int{}}
}

func (s *fakeSite) add(addr string, m *siteMachine) { s.machines[addr] = m }

func (s *fakeSite) Open(_ context.Context, t bmc.Target) (bmc.Driver, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.opens[t.Address]++
	s.sessions[t.Address]++
	s.peak[t.Address] = max(s.peak[t.Address], s.sessions[t.Address])
	return &siteDriver{s: s, addr: t.Address}, nil
}

type siteDriver struct {
	s      *fakeSite
	addr   string
	closed bool
}

func (d *siteDriver) Name() string { return "fake" }
func (d *siteDriver) Close() error {
	d.s.mu.Lock()
	defer d.s.mu.Unlock()
	if !d.closed {
		d.closed = true
		d.s.sessions[d.addr]--
	}
	return nil
}

// busyWhile counts an operation in flight on the machine's network for 50 ms.
func (d *siteDriver) busyWhile(m *siteMachine) {
	d.s.mu.Lock()
	d.s.netNow[m.network]++
	d.s.netPeak[m.network] = max(d.s.netPeak[m.network], d.s.netNow[m.network])
	d.s.mu.Unlock()
	time.Sleep(50 * time.Millisecond)
	d.s.mu.Lock()
	d.s.netNow[m.network]--
	d.s.mu.Unlock()
}

func (d *siteDriver) PowerState(context.Context) (bmc.PowerState, error) {
	m := d.s.machines[d.addr]
	d.busyWhile(m)
	d.s.mu.Lock()
	defer d.s.mu.Unlock()
	if m.pendingRev > 0 {
		if m.pendingRev--; m.pendingRev == 0 {
			if m.state == bmc.PowerOn {
				m.state = bmc.PowerOff
			} else {
				m.state = bmc.PowerOn
			}
		}
	}
	return m.state, nil
}

func (d *siteDriver) SetPower(ctx context.Context, a bmc.PowerAction) error {
	m := d.s.machines[d.addr]
	if a == bmc.PowerActionOn || a == bmc.PowerActionCycle {
		d.s.mu.Lock()
		m.sent = append(m.sent, time.Now())
		d.s.mu.Unlock()
	}
	d.busyWhile(m)
	time.Sleep(m.slowSet)
	d.s.mu.Lock()
	d.s.calls = append(d.s.calls, d.addr+" "+string(a))
	if m.busy > 0 {
		m.busy--
		d.s.mu.Unlock()
		return &bmc.OpError{Driver: "fake", Op: "power", Kind: bmc.ErrRefused, Code: "503 ServiceTemporarilyUnavailable", Message: "busy"}
	}
	switch a {
	case bmc.PowerActionOn, bmc.PowerActionCycle:
		if a == bmc.PowerActionCycle || m.state != bmc.PowerOn {
			m.powerOns = append(m.powerOns, time.Now())
		}
		m.state = bmc.PowerOn
	case bmc.PowerActionForceOff:
		m.state = bmc.PowerOff
	case bmc.PowerActionOff:
		if m.ignoreACPI {
			d.s.mu.Unlock()
			<-ctx.Done()
			return &bmc.OpError{Driver: "fake", Op: "power", Kind: bmc.ErrTimeout, Message: "still on at the deadline", Err: ctx.Err()}
		}
		m.state = bmc.PowerOff
	}
	m.pendingRev = m.revertIn
	d.s.mu.Unlock()
	return nil
}

func machines(n int, group func(i int) string) []bmc.Machine {
	var ms []bmc.Machine
	for i := range n {
		ms = append(ms, bmc.Machine{Name: fmt.Sprintf("m%02d", i), Target: bmc.TargetRef{Driver: "fake", Address: fmt.Sprintf("bmc-%02d", i)},
			Group: group(i), Network: fmt.Sprintf("net-%d", i%2)})
	}
	return ms
}

func siteFor(ms []bmc.Machine, state bmc.PowerState) *fakeSite {
	s := newFakeSite()
	for _, m := range ms {
		s.add(m.Target.Address, &siteMachine{state: state, network: m.Network})
	}
	return s
}

func byStatus(rs []bmc.MachineResult) map[bmc.MachineStatus][]string {
	out := map[bmc.MachineStatus][]string{}
	for _, r := range rs {
		out[r.Status] = append(out[r.Status], r.Machine)
	}
	return out
}

func TestTransitionCycleKeepsTheRampConfirmsAndReportsReverts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ms := machines(20, func(int) string { return "" })
		site := siteFor(ms, bmc.PowerOn)
		site.machines["bmc-03"].revertIn = 1 // reads Off from the first read after the cycle
		site.machines["bmc-07"].busy = 2     // answers busy twice
		r := &bmc.TransitionRunner{
			Executor: &bmc.Executor{Opener: site, MaxConcurrent: 64, Sessions: &bmc.SessionPool{}},
			Limits:   bmc.TransitionLimits{PowerOnRate: 5, Settle: time.Second, Backoff: 500 * time.Millisecond},
		}
		start := time.Now()
		res, err := r.Run(t.Context(), bmc.Transition{ID: "t1", Action: bmc.TransitionCycle, Machines: ms})
		if err != nil {
			t.Fatal(err)
		}
		took := time.Since(start)
		st := byStatus(res)
		if len(st[bmc.MachineDone]) != 19 || len(st[bmc.MachineFailed]) != 1 || st[bmc.MachineFailed][0] != "m03" {
			t.Fatalf("statuses %v, want all done but m03 failed", st)
		}
		for _, x := range res {
			if x.Machine == "m03" && (x.Kind != "differs" || !strings.Contains(x.Reason, "reverted")) {
				t.Errorf("m03: %+v, want a revert reported", x)
			}
			if x.Machine == "m07" && x.Sends != 3 {
				t.Errorf("m07 sends %d, want 3 (two busy answers, then carried out)", x.Sends)
			}
		}
		// 20 power-ons at 5/s: the last starts 3.8 s after the first, the busy machine's
		// retry waits for a later token.
		if took < 3800*time.Millisecond || took > 7*time.Second {
			t.Errorf("transition took %v, want 4-7 s", took)
		}
		sends := 0
		for addr, m := range site.machines {
			if len(m.powerOns) != 1 {
				t.Errorf("%s powered on %d times, want once", addr, len(m.powerOns))
			}
			sends += len(m.sent)
		}
		if sends != 22 {
			t.Errorf("%d power-ons sent, want 22 (20 and two busy answers)", sends)
		}
		// Every power-on request, busy or not, passes the gate: at most 5 in any second,
		// and 100ms apart at least (a late one catches up at twice the rate).
		var sent []time.Time
		for _, m := range site.machines {
			sent = append(sent, m.sent...)
		}
		if n, at := peakInWindow(sent, time.Second); n > 5 {
			t.Errorf("%d power-ons sent in the second from %v, the ramp allows 5", n, at)
		}
		if gap := minGap(sent); gap < 100*time.Millisecond {
			t.Errorf("two power-ons sent %v apart, the ramp allows 100ms at the closest", gap)
		}
		for addr, n := range site.opens {
			if n != 1 || site.peak[addr] != 1 {
				t.Errorf("%s: %d sessions opened, %d at once; want 1 reused", addr, n, site.peak[addr])
			}
		}
		r.Executor.Sessions.Close()
		if n := r.Executor.Sessions.Open(); n != 0 {
			t.Errorf("%d sessions open after Close", n)
		}
	})
}

// TestTransitionRampHoldsInEveryWindow: a slow BMC holds the network's only slot while
// the turns go on; when it lets go, the machines that had their turns send at once. The
// site's bound (at most 5 power-ons in any one second) must hold on the power-ons as
// sent, not only on the turns.
func TestTransitionRampHoldsInEveryWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ms := machines(40, func(int) string { return "" })
		for i := range ms {
			ms[i].Network = "one"
		}
		site := siteFor(ms, bmc.PowerOff)
		site.machines["bmc-00"].slowSet = 2 * time.Second
		r := &bmc.TransitionRunner{
			Executor: &bmc.Executor{Opener: site, MaxConcurrent: 64, Sessions: &bmc.SessionPool{}},
			Limits:   bmc.TransitionLimits{PowerOnRate: 5, NetworkInFlight: 1, Settle: 100 * time.Millisecond},
		}
		var mu sync.Mutex
		var passed []time.Time
		r.OnPowerOn = func(_, _ string, at time.Time) {
			mu.Lock()
			passed = append(passed, at)
			mu.Unlock()
		}
		defer r.Executor.Sessions.Close()
		res, err := r.Run(t.Context(), bmc.Transition{ID: "w", Action: bmc.TransitionOn, Machines: ms})
		if err != nil {
			t.Fatal(err)
		}
		if st := byStatus(res); len(st[bmc.MachineDone]) != 40 {
			t.Fatalf("statuses %v, want all done", st)
		}
		var sent []time.Time
		for _, m := range site.machines {
			sent = append(sent, m.sent...)
		}
		if len(sent) != 40 {
			t.Fatalf("%d power-ons sent, want 40", len(sent))
		}
		if n, at := peakInWindow(sent, time.Second); n > 5 {
			t.Errorf("%d power-ons sent in the second from %v, the ramp allows 5", n, at)
		}
		if gap := minGap(sent); gap < 100*time.Millisecond {
			t.Errorf("two power-ons sent %v apart, the ramp allows 100ms (half its interval) at the closest", gap)
		}
		mu.Lock()
		defer mu.Unlock()
		if n, _ := peakInWindow(passed, time.Second); len(passed) != 40 || n > 5 {
			t.Errorf("OnPowerOn saw %d power-ons, %d in one second; want 40, at most 5", len(passed), n)
		}
	})
}

// peakInWindow returns the most times in any half-open window of length w, and where it
// starts.
func peakInWindow(ts []time.Time, w time.Duration) (int, time.Time) {
	ts = slices.SortedFunc(slices.Values(ts), time.Time.Compare)
	peak, at, j := 0, time.Time{}, 0
	for i := range ts {
		for ts[i].Sub(ts[j]) >= w {
			j++
		}
		if i-j+1 > peak {
			peak, at = i-j+1, ts[j]
		}
	}
	return peak, at
}

func minGap(ts []time.Time) time.Duration {
	gap := time.Hour
	for i := range ts {
		for j := range ts {
			if i != j && !ts[i].After(ts[j]) {
				gap = min(gap, ts[j].Sub(ts[i]))
			}
		}
	}
	return gap
}

func TestTransitionGroupRateAndNetworkInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ms := machines(12, func(i int) string { return fmt.Sprintf("pdu-%d", i%3) })
		site := siteFor(ms, bmc.PowerOff)
		r := &bmc.TransitionRunner{
			Executor: &bmc.Executor{Opener: site, MaxConcurrent: 64},
			Limits:   bmc.TransitionLimits{GroupPowerOnRate: 1, NetworkInFlight: 2, Settle: time.Second},
		}
		res, err := r.Run(t.Context(), bmc.Transition{ID: "t2", Action: bmc.TransitionOn, Machines: ms})
		if err != nil {
			t.Fatal(err)
		}
		if st := byStatus(res); len(st[bmc.MachineDone]) != 12 {
			t.Fatalf("statuses %v, want all done", st)
		}
		groups := map[string][]time.Time{}
		for _, m := range ms {
			groups[m.Group] = append(groups[m.Group], site.machines[m.Target.Address].powerOns...)
		}
		for g, ons := range groups {
			if len(ons) != 4 {
				t.Errorf("group %s: %d power-ons, want 4", g, len(ons))
			}
			if n, at := peakInWindow(ons, time.Second); n > 1 {
				t.Errorf("group %s: %d power-ons in the second from %v, want at most 1", g, n, at)
			}
		}
		for n, p := range site.netPeak {
			if p > 2 {
				t.Errorf("network %s: %d operations in flight, limit 2", n, p)
			}
		}
		if site.netPeak["net-0"] < 2 {
			t.Errorf("network net-0 peaked at %d in flight: the limit of 2 was never reached, the test shows nothing", site.netPeak["net-0"])
		}
	})
}

func TestTransitionSoftOffForcesAfterItsDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ms := machines(2, func(int) string { return "" })
		site := siteFor(ms, bmc.PowerOn)
		site.machines["bmc-01"].ignoreACPI = true
		r := &bmc.TransitionRunner{Executor: &bmc.Executor{Opener: site}, Limits: bmc.TransitionLimits{Settle: time.Second}}
		start := time.Now()
		var forcedAt time.Duration
		r.OnResult = func(_ string, x bmc.MachineResult) {
			if x.Machine == "m01" {
				forcedAt = time.Since(start)
			}
		}
		res, err := r.Run(t.Context(), bmc.Transition{ID: "t3", Action: bmc.TransitionSoftOff, Machines: ms, Deadline: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if res[0].Status != bmc.MachineDone || res[0].Forced {
			t.Errorf("m00: %+v, want done gracefully", res[0])
		}
		if res[1].Status != bmc.MachineDone || !res[1].Forced || res[1].Power != bmc.PowerOff {
			t.Errorf("m01: %+v, want done, forced off", res[1])
		}
		if forcedAt < 30*time.Second {
			t.Errorf("m01 ended %v after the start, before its 30s deadline", forcedAt)
		}
		want := []string{"bmc-01 off", "bmc-01 force-off"}
		var got []string
		for _, c := range site.calls {
			if strings.HasPrefix(c, "bmc-01") {
				got = append(got, c)
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("calls to bmc-01 %v, want %v", got, want)
		}
	})
}

func TestTransitionAbortTakesNoNewAction(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ms := machines(10, func(int) string { return "" })
		site := siteFor(ms, bmc.PowerOff)
		r := &bmc.TransitionRunner{Executor: &bmc.Executor{Opener: site}, Limits: bmc.TransitionLimits{PowerOnRate: 1, Settle: time.Second}}
		run, err := r.Start(t.Context(), bmc.Transition{ID: "t4", Action: bmc.TransitionOn, Machines: ms})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(3500 * time.Millisecond) // tokens at 0, 1, 2, 3 s
		run.Abort()
		res := run.Wait()
		st := byStatus(res)
		if len(st[bmc.MachineDone]) != 4 || len(st[bmc.MachineAborted]) != 6 {
			t.Fatalf("statuses %v, want 4 done and 6 aborted: %+v", st, res)
		}
		if p := run.Progress(); p.Done != 4 || p.Aborted != 6 || p.Pending != 0 {
			t.Errorf("progress %+v", p)
		}
		if n := len(site.calls); n != 4 {
			t.Errorf("%d actions sent, want 4: %v", n, site.calls)
		}
		if got := len(run.Ended(0)); got != 10 {
			t.Errorf("Ended(0) has %d results, want 10", got)
		}
	})
}

// A runner stopped half way (its context ends, nothing cleaned up) and another agent's
// runner, sharing the claim registry, resumes the transition: nothing is cycled twice and
// every machine ends with a result.
func TestTransitionResumesOnAnotherAgent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ms := machines(20, func(int) string { return "" })
		site := siteFor(ms, bmc.PowerOn)
		reg := &bmc.ClaimRegistry{Store: &bmc.MemoryClaimStore{}}
		limits := bmc.TransitionLimits{PowerOnRate: 2, Settle: time.Second}
		a := &bmc.TransitionRunner{Executor: &bmc.Executor{Opener: site, Claims: reg.For("agent-a")}, Limits: limits}
		b := &bmc.TransitionRunner{Executor: &bmc.Executor{Opener: site, Claims: reg.For("agent-b")}, Limits: limits}
		tr := bmc.Transition{ID: "t5", Action: bmc.TransitionCycle, Machines: ms}
		ctx, kill := context.WithCancel(t.Context())
		runA, err := a.Start(ctx, tr)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Second) // about half the machines cycled
		kill()
		<-runA.Done()
		res, err := b.Run(t.Context(), tr)
		if err != nil {
			t.Fatal(err)
		}
		resumed := 0
		for _, x := range res {
			if x.Status != bmc.MachineDone && x.Status != bmc.MachineUnknown {
				t.Errorf("%s: %+v", x.Machine, x)
			}
			if x.Resumed {
				resumed++
			}
		}
		if resumed < 5 || resumed > 15 {
			t.Errorf("%d machines resumed from agent a's records, want about half", resumed)
		}
		for addr, m := range site.machines {
			if len(m.powerOns) > 1 {
				t.Errorf("%s cycled %d times", addr, len(m.powerOns))
			}
		}
		st := byStatus(res)
		for _, x := range res {
			if x.Status != bmc.MachineDone {
				t.Logf("%s: %s %s", x.Machine, x.Kind, x.Reason)
			}
		}
		if len(st[bmc.MachineDone])+len(st[bmc.MachineUnknown]) != 20 || len(st[bmc.MachineDone]) < 18 {
			t.Errorf("statuses %v", st)
		}
	})
}

func TestTransitionValidate(t *testing.T) {
	ok := bmc.Transition{ID: "x", Action: bmc.TransitionOn, Machines: []bmc.Machine{{Name: "a"}}}
	for name, tr := range map[string]bmc.Transition{
		"no id":        {Action: bmc.TransitionOn},
		"slash id":     {ID: "a/b", Action: bmc.TransitionOn},
		"bad action":   {ID: "x", Action: "explode"},
		"twice":        {ID: "x", Action: bmc.TransitionOn, Machines: []bmc.Machine{{Name: "a"}, {Name: "a"}}},
		"unnamed":      {ID: "x", Action: bmc.TransitionOn, Machines: []bmc.Machine{{}}},
		"long name":    {ID: "x", Action: bmc.TransitionOn, Machines: []bmc.Machine{{Name: strings.Repeat("n", 250)}}},
		"negative ddl": {ID: "x", Action: bmc.TransitionSoftOff, Deadline: -1},
	} {
		if err := tr.Validate(); bmc.KindOf(err) != bmc.ErrInvalid {
			t.Errorf("%s: Validate = %v, want ErrInvalid", name, err)
		}
	}
	if err := ok.Validate(); err != nil {
		t.Errorf("valid transition: %v", err)
	}
}
