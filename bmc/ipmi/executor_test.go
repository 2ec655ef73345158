package ipmi_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/bmc"
	"github.com/bettercompute/siteboot/bmc/ipmi"
	"github.com/bettercompute/siteboot/bmc/ipmi/ipmitest"
)

// countingOpener opens IPMI drivers and counts sessions opened and closed.
type countingOpener struct {
	cfg            ipmi.Config
	opened, closed atomic.Int32
	beforePower    func(addr string) // set before the first Open
}

type countedDriver struct {
	*ipmi.Driver
	o    *countingOpener
	addr string
}

func (d countedDriver) Close() error { d.o.closed.Add(1); return d.Driver.Close() }

// PowerState runs the opener's beforePower hook first, so that a test can stop a BMC
// while an operation is in progress on it.
func (d countedDriver) PowerState(ctx context.Context) (bmc.PowerState, error) {
	if d.o.beforePower != nil {
		d.o.beforePower(d.addr)
	}
	return d.Driver.PowerState(ctx)
}

// Inspect answers an empty inventory without asking the BMC: these tests are about the
// Executor's sessions and deadlines, which PowerState alone exercises.
func (countedDriver) Inspect(context.Context) (bmc.Inventory, error) { return bmc.Inventory{}, nil }

func (o *countingOpener) Open(ctx context.Context, t bmc.Target) (bmc.Driver, error) {
	d, err := ipmi.Dial(ctx, o.cfg, t)
	if err != nil {
		return nil, err
	}
	o.opened.Add(1)
	return countedDriver{d, o, t.Address}, nil
}

// An ipmi_sim stopped with SIGSTOP in the middle of the run is a BMC that hangs: the
// operation in progress ends in a timeout (it was sent), the ones queued behind it are not
// sent, and a second ipmi_sim is served all along. Every session opened is closed.
func TestExecutorWithAHangingIpmiSim(t *testing.T) {
	hang, ok := startSim(t), startSim(t)
	o := &countingOpener{cfg: ipmi.Config{CipherSuites: []int{3}, Timeout: 200 * time.Millisecond, Retries: 1}}
	const deadline = 1500 * time.Millisecond
	e := &bmc.Executor{
		Opener: o,
		Credentials: bmc.CredentialsFunc(func(context.Context, string) (bmc.Credential, error) {
			return bmc.Credential{Username: ipmitest.User, Password: ipmitest.Pass}, nil
		}),
		Timeout: deadline,
	}
	ctx := context.Background()
	query := func(id string, s *sim) bmc.Result {
		return e.RunOp(ctx, id, bmc.TargetRef{Driver: ipmi.Name, Address: s.addr, Credential: "ref"}, bmc.Query{})
	}
	// The first operation on the BMC that will hang stops it once its session is open.
	var wg sync.WaitGroup
	hungRes := make([]bmc.Result, 3)
	started := make(chan struct{})
	var stop sync.Once
	o.beforePower = func(addr string) {
		if addr != hang.addr {
			return
		}
		stop.Do(func() {
			if err := syscall.Kill(hang.Proc.PID(), syscall.SIGSTOP); err != nil {
				t.Error(err)
			}
			close(started)
		})
	}
	t.Cleanup(func() { _ = syscall.Kill(hang.Proc.PID(), syscall.SIGCONT) })
	wg.Add(1)
	go func() { defer wg.Done(); hungRes[0] = query("hang-0", hang) }()
	<-started
	for i := 1; i < len(hungRes); i++ {
		wg.Add(1)
		go func() { defer wg.Done(); hungRes[i] = query(fmt.Sprint("hang-", i), hang) }()
	}
	start := time.Now()
	for i := range 10 {
		r := query(fmt.Sprint("ok-", i), ok)
		if r.Outcome.Status != bmc.StatusOK || r.Value.(bmc.QueryResult).Power != bmc.PowerOff {
			t.Fatalf("the answering BMC: %+v", r)
		}
	}
	if took := time.Since(start); took >= deadline {
		t.Errorf("10 operations on the answering BMC took %v, the hanging BMC's deadline is %v", took, deadline)
	}
	wg.Wait()
	if r := hungRes[0]; r.Outcome.Status != bmc.StatusFailed || r.Outcome.Kind != "timeout" {
		t.Errorf("the operation in progress when the BMC hung: %+v", r.Outcome)
	}
	// Queued behind it, the others found a BMC that no longer answers a login, or ran out
	// of time waiting: either way nothing was sent.
	for _, r := range hungRes[1:] {
		if r.Outcome.Status != bmc.StatusNotSent || (r.Outcome.Kind != "timeout" && r.Outcome.Kind != "unreachable") {
			t.Errorf("a queued operation: %+v", r.Outcome)
		}
	}
	if op, cl := o.opened.Load(), o.closed.Load(); op != cl || op != 11 {
		t.Errorf("%d sessions opened, %d closed; want 11 and 11", op, cl)
	}
}
