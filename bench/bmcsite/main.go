// Command bmcsite power-cycles many simulated Redfish BMCs (bmctest on loopback, each
// slow, now and then busy, capped at a few sessions, some reverting the change) twice:
// through bmc.TransitionRunner with a ramp, and through a plain loop over the driver with
// no limits, the peer. It prints each run's figures, the checks of the transition and the
// ratio of their times.
//
//	go run ./bench/bmcsite -n 1000 -rate 50
package main

import (
	"context"
	"flag"
	"fmt"
	"math"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/bettercompute/siteboot/bmc"
	"github.com/bettercompute/siteboot/bmc/bmctest"
	"github.com/bettercompute/siteboot/bmc/redfish"
)

// Config is one run's setting.
type Config struct {
	N           int
	Rate        float64 // power-ons per second
	MinLatency  time.Duration
	MaxLatency  time.Duration
	Transient   float64
	MaxSessions int
	RevertEvery int // one BMC in RevertEvery reverts
	InFlight    int
	Seed        uint64
}

// Report is what a run measured.
type Report struct {
	Name         string
	Took         time.Duration
	Statuses     map[string]int
	CycledTwice  int
	Unreported   int // machines without a result
	Reverts      int // BMCs that revert
	RevertsFound int // of them, reported failed with a reason
	RevertsOK    int // of them, reported done (not noticed)
	PeakSessions int // most sessions open at one BMC
	PeakPerSec   int // most power-ons carried out in any one-second window, site-wide
	PeakSentSec  int // most power-on requests sent (as they passed the ramp, client side) in any one-second window
	PeakArrived  int // most power-ons arrived at their BMCs (before their latency) in any one-second window
	Transients   int
	FirstOn      time.Duration // first and last power-on, from the start
	LastOn       time.Duration
	start        time.Time
	sent         *sendTimes
}

type site struct {
	srvs   []*bmctest.Server
	revert []bool
}

func newSite(c Config) *site {
	s := &site{}
	for i := range c.N {
		f := bmctest.Faults{MinLatency: c.MinLatency, MaxLatency: c.MaxLatency, TransientRate: c.Transient, Seed: c.Seed + uint64(i)}
		rev := c.RevertEvery > 0 && i%c.RevertEvery == c.RevertEvery/2
		if rev {
			f.RevertPowerAfterReads = 1 // the driver's own read shows the change, the next does not
		}
		srv := bmctest.NewServer(bmctest.Options{Mockup: bmctest.OpenBMC, MaxSessions: c.MaxSessions, Faults: f})
		srv.SetPowerState("On")
		s.srvs = append(s.srvs, srv)
		s.revert = append(s.revert, rev)
	}
	return s
}

func (s *site) close() {
	for _, srv := range s.srvs {
		srv.Close()
	}
}

func (s *site) measure(r *Report) {
	var all, sent []time.Time
	for i, srv := range s.srvs {
		rs := srv.PowerOns()
		if len(rs) > 1 {
			r.CycledTwice++
		}
		all = append(all, rs...)
		sent = append(sent, srv.PowerOnsSent()...)
		r.PeakSessions = max(r.PeakSessions, srv.PeakSessions())
		r.Transients += srv.Transients()
		if s.revert[i] {
			r.Reverts++
		}
	}
	slices.SortFunc(all, func(a, b time.Time) int { return a.Compare(b) })
	if len(all) > 0 {
		r.FirstOn, r.LastOn = all[0].Sub(r.start), all[len(all)-1].Sub(r.start)
	}
	r.PeakPerSec = peakPerSecond(all)
	r.PeakArrived = peakPerSecond(sent)
	if r.sent == nil { // the plain loop: no ramp lets its sends go
		r.PeakSentSec = r.PeakArrived
	} else {
		r.PeakSentSec = peakPerSecond(r.sent.times)
	}
}

// sendTimes collects when the ramp let each power-on go.
type sendTimes struct {
	mu    sync.Mutex
	times []time.Time
}

func (s *sendTimes) add(_, _ string, at time.Time) {
	s.mu.Lock()
	s.times = append(s.times, at)
	s.mu.Unlock()
}

// peakPerSecond returns the most of ts in any half-open one-second window.
func peakPerSecond(ts []time.Time) int {
	slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
	peak, j := 0, 0
	for i := range ts {
		for ts[i].Sub(ts[j]) >= time.Second {
			j++
		}
		peak = max(peak, i-j+1)
	}
	return peak
}

func driverConfig() redfish.Config {
	return redfish.Config{PollInterval: 200 * time.Millisecond, RetryWait: 500 * time.Millisecond, Timeout: 10 * time.Second}
}

// Transition runs the cycle through bmc.TransitionRunner.
func Transition(ctx context.Context, c Config) Report {
	s := newSite(c)
	defer s.close()
	reg := bmc.NewRegistry()
	reg.Register(redfish.Name, driverConfig())
	pool := &bmc.SessionPool{}
	exec := &bmc.Executor{Opener: reg, MaxConcurrent: c.InFlight, Sessions: pool,
		Credentials: bmc.CredentialsFunc(func(context.Context, string) (bmc.Credential, error) {
			return bmc.Credential{Username: bmctest.DefaultUsername, Password: bmctest.DefaultPassword}, nil
		})}
	sent := &sendTimes{}
	r := &bmc.TransitionRunner{Executor: exec, OnPowerOn: sent.add, Limits: bmc.TransitionLimits{PowerOnRate: c.Rate, NetworkInFlight: c.InFlight,
		Settle: 100 * time.Millisecond, Backoff: 250 * time.Millisecond, Attempts: 8}}
	tr := bmc.Transition{ID: "bench", Action: bmc.TransitionCycle}
	for i, srv := range s.srvs {
		tr.Machines = append(tr.Machines, bmc.Machine{Name: fmt.Sprint(i),
			Target: bmc.TargetRef{Driver: redfish.Name, Address: srv.URL, Credential: "site"}})
	}
	start := time.Now()
	res, err := r.Run(ctx, tr)
	rep := Report{Name: "transition", Took: time.Since(start), Statuses: map[string]int{}, start: start, sent: sent}
	_ = pool.Close()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bmcsite:", err)
		os.Exit(1)
	}
	for i, x := range res {
		if x.Status == "" {
			rep.Unreported++
			continue
		}
		rep.Statuses[string(x.Status)]++
		if s.revert[i] {
			switch {
			case x.Status == bmc.MachineFailed && x.Reason != "":
				rep.RevertsFound++
			case x.Status == bmc.MachineDone:
				rep.RevertsOK++
			}
		}
	}
	rep.Unreported += c.N - len(res)
	s.measure(&rep)
	return rep
}

// Loop runs the cycle as a plain loop over the driver: every machine at once, a session
// each, no ramp, no confirming read.
func Loop(ctx context.Context, c Config) Report {
	s := newSite(c)
	defer s.close()
	rep := Report{Name: "plain loop", Statuses: map[string]int{}}
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now()
	for i, srv := range s.srvs {
		wg.Go(func() {
			status := "done"
			d, err := redfish.Dial(ctx, driverConfig(), bmc.Target{Driver: redfish.Name, Address: srv.URL,
				Username: bmctest.DefaultUsername, Password: bmctest.DefaultPassword})
			if err == nil {
				err = d.SetPower(ctx, bmc.PowerActionCycle)
				_ = d.Close()
			}
			if err != nil {
				status = "failed"
			}
			mu.Lock()
			rep.Statuses[status]++
			if s.revert[i] {
				if status == "done" {
					rep.RevertsOK++
				} else {
					rep.RevertsFound++
				}
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	rep.Took, rep.start = time.Since(start), start
	s.measure(&rep)
	return rep
}

func (r Report) String() string {
	return fmt.Sprintf("%-10s took %6.2fs power-ons from %.2fs to %.2fs statuses %v cycled-twice %d unreported %d reverts %d (reported failed %d, reported done %d) peak-sessions/BMC %d peak-power-ons/s sent %d arrived %d carried-out %d busy-answers %d",
		r.Name, r.Took.Seconds(), r.FirstOn.Seconds(), r.LastOn.Seconds(), r.Statuses, r.CycledTwice, r.Unreported, r.Reverts, r.RevertsFound, r.RevertsOK, r.PeakSessions, r.PeakSentSec, r.PeakArrived, r.PeakPerSec, r.Transients)
}

// Check lists what the transition must show: within 10% of the ramp's bound, none cycled
// twice, none unreported, every revert reported failed, at most MaxSessions at any BMC,
// at most the ramp's rate (rounded up) of power-ons sent in any one second.
func Check(c Config, r Report) []string {
	var bad []string
	bound := time.Duration(float64(c.N) / c.Rate * float64(time.Second))
	if r.Took > bound+bound/10 {
		bad = append(bad, fmt.Sprintf("took %v, over 110%% of the ramp's %v", r.Took, bound))
	}
	if r.CycledTwice != 0 {
		bad = append(bad, fmt.Sprintf("%d cycled twice", r.CycledTwice))
	}
	if r.Unreported != 0 {
		bad = append(bad, fmt.Sprintf("%d unreported", r.Unreported))
	}
	if r.RevertsFound != r.Reverts {
		bad = append(bad, fmt.Sprintf("%d of %d reverts reported failed", r.RevertsFound, r.Reverts))
	}
	if lim := int(math.Ceil(c.Rate)); r.PeakSentSec > lim {
		bad = append(bad, fmt.Sprintf("%d power-ons sent in one second, ramp %d", r.PeakSentSec, lim))
	}
	if r.PeakSessions > c.MaxSessions {
		bad = append(bad, fmt.Sprintf("%d sessions at one BMC, cap %d", r.PeakSessions, c.MaxSessions))
	}
	return bad
}

func main() {
	c := Config{}
	flag.IntVar(&c.N, "n", 1000, "simulated BMCs")
	flag.Float64Var(&c.Rate, "rate", 50, "power-ons per second (the ramp)")
	flag.DurationVar(&c.MinLatency, "min-latency", 20*time.Millisecond, "least latency per request")
	flag.DurationVar(&c.MaxLatency, "max-latency", 200*time.Millisecond, "most latency per request")
	flag.Float64Var(&c.Transient, "busy", 0.02, "share of requests answered 503 (busy)")
	flag.IntVar(&c.MaxSessions, "sessions", 4, "session cap of each BMC")
	flag.IntVar(&c.RevertEvery, "revert-every", 100, "one BMC in this many reverts the change")
	flag.IntVar(&c.InFlight, "in-flight", 256, "operations in flight (the network's limit)")
	flag.Uint64Var(&c.Seed, "seed", 1, "seed of the simulated faults")
	loop := flag.Bool("loop", true, "also run the plain loop (the peer)")
	flag.Parse()
	ctx := context.Background()
	t := Transition(ctx, c)
	fmt.Println(t)
	bad := Check(c, t)
	for _, b := range bad {
		fmt.Println("CHECK FAILED:", b)
	}
	if *loop {
		l := Loop(ctx, c)
		fmt.Println(l)
		fmt.Printf("ratio transition/loop time %.2f\n", t.Took.Seconds()/l.Took.Seconds())
	}
	if len(bad) > 0 {
		os.Exit(1)
	}
}
