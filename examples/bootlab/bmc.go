package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/bettercompute/siteboot/bmc"
	"github.com/bettercompute/siteboot/bmc/bmctest"
	"github.com/bettercompute/siteboot/examples/siteagent/controlplane"
	"github.com/bettercompute/siteboot/sitelink"
)

// ramdiskRun is machine n's boot through its BMC: the control plane's metal.ensureRamdisk
// (the entry, bmc.boot PXE once, bmc.power cycle) through agent-a, which is stopped right
// after it power-cycled the machine, before it could report that in a heartbeat.
type ramdiskRun struct {
	srv       *bmctest.Server // the machine's BMC: a fake Redfish BMC (DMTF's mockup)
	stopped   time.Time       // when agent-a was stopped
	fenceEnds time.Time       // when agent-a's fence would end, as it stood then
	done      chan struct{}
	steps     controlplane.RamdiskSteps
	err       error
}

// ensureRamdiskThenStop starts machine n's ensureRamdisk through agent-a and returns once
// agent-a has power-cycled the machine and been stopped; the step itself finishes after the
// failover, from agent-b.
func (l *lab) ensureRamdiskThenStop(ctx context.Context, out *printer, a *labAgent, n int) (*ramdiskRun, error) {
	r := &ramdiskRun{srv: bmctest.NewServer(bmctest.Options{}), done: make(chan struct{})}
	go func() { <-ctx.Done(); r.srv.Close() }()
	l.plane.SetCredential("bmc/m"+fmt.Sprint(n), bmc.Credential{Username: bmctest.DefaultUsername, Password: bmctest.DefaultPassword})
	killed := make(chan struct{})
	var once sync.Once
	l.plane.OnBMCReport = func(node string, c sitelink.Command, o bmc.Outcome) {
		if node == a.name && c.Kind == sitelink.KindBMCPower {
			once.Do(func() {
				r.fenceEnds = time.Now().Add(a.a.Fence().Remaining)
				r.stopped = time.Now()
				a.stop()
				close(killed)
			})
		}
	}
	e := sitelink.ProxyDhcpEntry{
		MAC: machineMAC(n), UUID: machineUUID(n).String(), Arch: sitelink.ArchX86UEFI,
		Workflow: fmt.Sprintf("wf-%02d", n), NotAfter: time.Now().Add(2 * time.Hour), TokenRef: fmt.Sprintf("tok-%02d", n),
	}
	go func() {
		defer close(r.done)
		r.steps, r.err = l.plane.EnsureRamdisk(ctx, siteID, controlplane.RamdiskMachine{
			Entries: []sitelink.ProxyDhcpEntry{e},
			BMC:     sitelink.BMCTarget{Driver: "redfish", Address: r.srv.URL, Credential: "bmc/m" + fmt.Sprint(n)},
		})
	}()
	select {
	case <-killed:
	case <-r.done:
		return nil, fmt.Errorf("ensureRamdisk ended before agent-a power-cycled the machine: %v", r.err)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	boots := r.srv.Boots()
	out.linef("m%02d's BMC (fake Redfish, %s): ensureRamdisk through %s: boot entry, bmc.boot pxe once, bmc.power cycle; the machine powered on into %s",
		n, r.srv.URL, a.name, bootTargets(boots))
	return r, nil
}

// check waits for the step to finish after the failover and adds what must hold.
func (r *ramdiskRun) check(ctx context.Context, out *printer, must func(string, bool, string, ...any)) {
	select {
	case <-r.done:
	case <-ctx.Done():
		r.err = ctx.Err()
	}
	cycles := 0
	for _, q := range r.srv.Requests() {
		if q.Method == http.MethodPost && strings.HasSuffix(q.Path, "ComputerSystem.Reset") {
			cycles++
		}
	}
	if r.err == nil {
		out.linef("ensureRamdisk finished from agent-b: the power cycle's recorded outcome (%s) reused, not sent again", r.steps.Power.Status)
	}
	must("ensureRamdisk finished after the failover, reusing the power cycle agent-a ran", r.err == nil && r.steps.PowerReused, "%v", r.err)
	boots := r.srv.Boots()
	must("the machine was power-cycled once, into its one-time PXE boot", len(boots) == 1 && boots[0].Target == "Pxe", "boots %s, %d reset requests", bootTargets(boots), cycles)
}

func bootTargets(boots []bmctest.Boot) string {
	var s []string
	for _, b := range boots {
		s = append(s, b.Target)
	}
	return "[" + strings.Join(s, " ") + "]"
}
