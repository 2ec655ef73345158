package etcdstore_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/bmc"
	"github.com/bettercompute/siteboot/bmc/bmctest"
	"github.com/bettercompute/siteboot/bmc/redfish"
	"github.com/bettercompute/siteboot/lease/etcdstore"
	"github.com/bettercompute/siteboot/lease/etcdstore/internal/etcdpeer"
)

// A power-cycle of 30 simulated Redfish BMCs by agent A, killed half way (its context
// ends; nothing is cleaned up), is resumed by agent B; both claim each step in one real
// etcd. No machine is cycled twice, every machine ends with a result, and the machines A
// finished are not sent again.
func TestTransitionFailoverOnEtcd(t *testing.T) {
	p := etcdpeer.Start(t)
	const n = 30
	var srvs []*bmctest.Server
	tr := bmc.Transition{ID: "cycle-failover", Action: bmc.TransitionCycle}
	for i := range n {
		s := bmctest.NewServer(bmctest.Options{Mockup: bmctest.OpenBMC, MaxSessions: 4,
			Faults: bmctest.Faults{MinLatency: 5 * time.Millisecond, MaxLatency: 40 * time.Millisecond, Seed: uint64(i)}})
		t.Cleanup(s.Close)
		s.SetPowerState("On")
		srvs = append(srvs, s)
		tr.Machines = append(tr.Machines, bmc.Machine{Name: fmt.Sprint("m", i),
			Target: bmc.TargetRef{Driver: redfish.Name, Address: s.URL, Credential: "site"}})
	}
	runner := func(node string) *bmc.TransitionRunner {
		reg := bmc.NewRegistry()
		reg.Register(redfish.Name, redfish.Config{PollInterval: 50 * time.Millisecond})
		claims := &bmc.ClaimRegistry{Store: &bmc.RegisterClaimStore{Register: &etcdstore.Register{Client: p.NewClient(t)}}}
		return &bmc.TransitionRunner{
			Executor: &bmc.Executor{Opener: reg, Claims: claims.For(node), Sessions: &bmc.SessionPool{},
				Credentials: bmc.CredentialsFunc(func(context.Context, string) (bmc.Credential, error) {
					return bmc.Credential{Username: bmctest.DefaultUsername, Password: bmctest.DefaultPassword}, nil
				})},
			Limits: bmc.TransitionLimits{PowerOnRate: 10, Settle: 50 * time.Millisecond, Backoff: 100 * time.Millisecond},
		}
	}
	a := runner("agent-a")
	ctx, kill := context.WithCancel(t.Context())
	var ended atomic.Int32
	a.OnResult = func(string, bmc.MachineResult) {
		if ended.Add(1) == n/2 {
			kill()
		}
	}
	runA, err := a.Start(ctx, tr)
	if err != nil {
		t.Fatal(err)
	}
	<-runA.Done()
	doneByA := map[string]bool{}
	for _, x := range runA.Wait() {
		if x.Status == bmc.MachineDone {
			doneByA[x.Machine] = true
		}
	}
	if len(doneByA) < n/2-2 || len(doneByA) == n {
		t.Fatalf("agent a finished %d machines before it was killed, want about half", len(doneByA))
	}

	b := runner("agent-b")
	res, err := b.Run(t.Context(), tr)
	if err != nil {
		t.Fatal(err)
	}
	store := &bmc.RegisterClaimStore{Register: &etcdstore.Register{Client: p.Client}}
	unknown := 0
	for _, x := range res {
		// A machine is unknown exactly when agent a's first send was in flight as a was
		// killed: a holds its grant and never reported, or reported it cut short (a
		// timeout, which may have cycled it).
		rec, _, err := store.Get(t.Context(), tr.ID+"/"+x.Machine+"/act/1")
		if err != nil {
			t.Fatal(err)
		}
		inFlight := rec.Node == "agent-a" && (rec.State == bmc.ClaimGranted ||
			rec.State == bmc.ClaimReported && (rec.Outcome.Status == bmc.StatusUnknown || rec.Outcome.Kind == "timeout"))
		switch {
		case doneByA[x.Machine] && (!x.Resumed || x.Status != bmc.MachineDone):
			t.Errorf("%s, done by agent a: %+v, want done from a's record", x.Machine, x)
		case inFlight != (x.Status == bmc.MachineUnknown):
			t.Errorf("%s: %+v; its claim record %+v", x.Machine, x, rec)
		case x.Status == bmc.MachineUnknown:
			unknown++
		case x.Status != bmc.MachineDone:
			t.Errorf("%s: %+v", x.Machine, x)
		}
	}
	t.Logf("agent a finished %d; agent b: %d unknown (in flight at a's end)", len(doneByA), unknown)
	if unknown > n/2 {
		t.Errorf("%d machines unknown", unknown)
	}
	for i, s := range srvs {
		if got := len(s.PowerOns()); got > 1 {
			t.Errorf("m%d cycled %d times", i, got)
		} else if got == 0 && res[i].Status == bmc.MachineDone {
			t.Errorf("m%d reported done and never cycled", i)
		}
		if s.PeakSessions() > 2 {
			t.Errorf("m%d: %d sessions at once, want at most one per agent", i, s.PeakSessions())
		}
	}
}
