package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/bmc"
	"github.com/bettercompute/siteboot/bmc/ipmi/ipmitest"
	"github.com/bettercompute/siteboot/examples/siteagent/controlplane"
	"github.com/bettercompute/siteboot/hwid"
	"github.com/bettercompute/siteboot/internal/testpeer"
	"github.com/bettercompute/siteboot/sitelink"
)

// BMC access end to end: OpenIPMI's ipmi_sim on a host of the lab's segment, in front of
// a QEMU machine on that segment, driven by the control plane's EnsureRamdisk through the
// agent's bmc.* commands; and sushy-emulator's fake Redfish driver the same way.

// ensureLimit bounds one EnsureRamdisk (a failsafe, not a figure asserted): each of its
// two commands waits for the agent's next heartbeat and its answer, runs within the
// agent's BMC deadline (bmc.DefaultOpTimeout) and comes back in the heartbeat after.
const ensureLimit = 2*(2*(heartbeat+controlTimeout)) + 2*bmc.DefaultOpTimeout

// bmcMachine is a QEMU machine behind ipmi_sim: the simulator runs in a host namespace of
// the segment (the BMC's address there), its chassis script logs every call and hands
// power to the test (ipmitest.Chassis), and the test starts and stops the machine with
// the lab's powerOn, so QEMU stays in the foreground and dies with the test binary. A
// power-on finds the boot device ipmi_sim last set: PXE (used once, then back to
// "default", as a BMC clears a one-time override at that boot) boots the machine from
// the network with pxe's options; anything else gives it no boot ROM and no disk, so it
// halts powered on with nothing to boot.
type bmcMachine struct {
	l       *lab
	m       *machine
	host    *testpeer.Host
	sim     *ipmitest.Sim
	chassis *ipmitest.Chassis
	pxe     bootOpts

	powerMu sync.Mutex // one power change at a time
	mu      sync.Mutex
	running *testpeer.Process
	ons     []powerOnEvent
	pxeOn   chan powerOnEvent // each power-on that found the PXE override
}

type powerOnEvent struct {
	at   time.Time // QEMU started
	boot string    // the boot device it found
}

// addBMC starts ipmi_sim on host i of the segment in front of m, and stores its
// credential in the control plane under m's reference.
func (l *lab) addBMC(i int, m *machine, pxe bootOpts) *bmcMachine {
	t := l.t
	t.Helper()
	b := &bmcMachine{l: l, m: m, host: l.seg.Hosts[i], pxe: pxe, pxeOn: make(chan powerOnEvent, 4)}
	b.chassis = &ipmitest.Chassis{Power: b.power}
	b.sim = ipmitest.StartSim(t, ipmitest.SimOptions{Netns: b.host.Netns, Addr: b.host.IP, Chassis: b.chassis})
	l.plane.SetCredential(b.credRef(), bmc.Credential{Username: ipmitest.User, Password: ipmitest.Pass})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("chassis log of %s's BMC:\n%s", m.name, b.chassisLog())
		}
	})
	return b
}

func (b *bmcMachine) credRef() string { return "bmc/" + b.m.name }

// target is the BMC as a bmc.* command names it: the IPMI driver at the simulator's
// address (port 623), its credential by reference. No cipher suites are named: the
// agent's driver tries 17 then 3, and ipmi_sim offers only 3.
func (b *bmcMachine) target() sitelink.BMCTarget {
	return sitelink.BMCTarget{Driver: "ipmi", Address: b.host.IP.String(), Credential: b.credRef()}
}

// entry is m's boot entry, as EnsureRamdisk sends it.
func (m *machine) entry(arch string) sitelink.ProxyDhcpEntry {
	return sitelink.ProxyDhcpEntry{MAC: m.mac, UUID: m.entrySpelling().String(), Arch: arch, Workflow: m.workflow(), TokenRef: m.tokenRef(), NotAfter: time.Now().Add(time.Hour)}
}

// power carries out one of ipmi_sim's power calls, from the Chassis' goroutine: what
// powerOn writes into the machine is the test goroutine's to read once waitPXEOn returned
// (a second power-on from the BMC would race with it, and fails the test either way). A
// powerOn that fails there marks the test failed; the test's own waits then end it.
func (b *bmcMachine) power(a ipmitest.ChassisAction) {
	switch a {
	case ipmitest.ChassisOn:
		b.on()
	case ipmitest.ChassisOff, ipmitest.ChassisSoftOff:
		b.off()
	case ipmitest.ChassisReset:
		b.off()
		b.on()
	}
}

// pressPower powers the machine on with its own button, not through the BMC, and waits
// until its firmware found nothing to boot: it stays on, halted.
func (b *bmcMachine) pressPower() {
	t := b.l.t
	t.Helper()
	b.on()
	idle := []byte("No bootable device.")
	serial, exited := b.m.wait(bootTimeout, func(s []byte) bool { return bytes.Contains(s, idle) })
	if exited || !bytes.Contains(serial, idle) {
		t.Fatalf("%s, powered on without a boot override: QEMU exited %v; want it on with nothing to boot\nserial:\n%s", b.m.name, exited, tail(serial, 3000))
	}
}

func (b *bmcMachine) on() {
	b.powerMu.Lock()
	defer b.powerMu.Unlock()
	b.mu.Lock()
	p := b.running
	b.mu.Unlock()
	if p != nil && !p.Exited() {
		return
	}
	boot := b.chassis.Boot()
	o := bootOpts{noNetBoot: true}
	if boot == "pxe" {
		b.chassis.SetBoot("default")
		o = b.pxe
	}
	b.l.powerOn(b.m, o)
	p = b.m.p
	ev := powerOnEvent{at: b.m.start, boot: boot}
	b.chassis.SetPID(p.PID())
	b.mu.Lock()
	b.running = p
	b.ons = append(b.ons, ev)
	b.mu.Unlock()
	go func() {
		<-p.Done()
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.running == p {
			b.chassis.SetPID(0)
		}
	}()
	if boot == "pxe" {
		select {
		case b.pxeOn <- ev:
		default: // a power-on more than the test waits for: checkOnePowerCycle says so
		}
	}
}

func (b *bmcMachine) off() {
	b.powerMu.Lock()
	defer b.powerMu.Unlock()
	b.mu.Lock()
	p := b.running
	b.mu.Unlock()
	if p == nil || p.Exited() {
		return
	}
	p.Kill() // power removed at once
	b.chassis.SetPID(0)
}

// waitPXEOn waits for the power-on that found the PXE override. What powerOn wrote into
// the machine is the test goroutine's to read from here on.
func (b *bmcMachine) waitPXEOn(limit time.Duration) powerOnEvent {
	b.l.t.Helper()
	select {
	case ev := <-b.pxeOn:
		return ev
	case <-time.After(limit):
		b.l.t.Fatalf("the machine was never powered on with the PXE override within %v; chassis log:\n%s", limit, b.chassisLog())
		return powerOnEvent{}
	}
}

func (b *bmcMachine) powerOns() []powerOnEvent {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.ons)
}

func (b *bmcMachine) chassisLog() string {
	var s strings.Builder
	for _, c := range b.chassis.Calls() {
		fmt.Fprintf(&s, "%s %s\n", c.At.Format("15:04:05.000"), c.Call)
	}
	return s.String()
}

// checkOnePowerCycle checks the chassis log of EnsureRamdisk's two commands: the boot
// override, then one power cycle, which ipmi_sim carries out as power off, then on; and
// returns when the BMC powered the machine off and on. Exactly one power-on came from the
// BMC.
func (b *bmcMachine) checkOnePowerCycle() (off, on time.Time) {
	t := b.l.t
	t.Helper()
	calls := b.chassis.Calls()
	sets := ipmitest.SetCalls(calls)
	if want := []string{"set boot pxe", "set power 0", "set power 1"}; !slices.Equal(sets, want) {
		t.Errorf("the BMC's chassis calls that change the machine: %q, want %q", sets, want)
	}
	for _, c := range calls {
		switch {
		case c.Call == "set power 0" && off.IsZero():
			off = c.At
		case c.Call == "set power 1" && on.IsZero():
			on = c.At
		}
	}
	if ons := b.powerOns(); len(ons) != 2 || ons[0].boot == "pxe" || ons[1].boot != "pxe" {
		t.Errorf("power-ons %+v, want the machine's own button (no override), then one from the BMC with PXE", ons)
	}
	return off, on
}

// bmcOps are the "bmc: operation" lines of an agent's log (each with its outcome and
// duration).
func bmcOps(a *labAgent) string {
	var out []string
	for _, line := range strings.Split(a.p.Output(), "\n") {
		if strings.Contains(line, `msg="bmc: operation"`) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// bmcCounters are an agent's BMC counters, from its metrics.
func bmcCounters(m metrics) string {
	var out []string
	for k, v := range m {
		if strings.HasPrefix(k, "siteboot_bmc_") && v != 0 {
			out = append(out, fmt.Sprintf("%s %v", k, v))
		}
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}

// TestE2E_BMCIPMIEnsureRamdisk: the control plane's EnsureRamdisk sends the machine's
// entry, a one-time PXE boot and a power cycle through the agent to ipmi_sim, which powers
// the QEMU machine (on, halted with nothing to boot) off and on again; the machine boots
// the ramdisk through the agent and its assertion verifies. The chassis log shows one
// power cycle; the agent's metrics count the operations; a bmc.query afterwards reads the
// machine off (the ramdisk powered it off) from whether its QEMU lives.
func TestE2E_BMCIPMIEnsureRamdisk(t *testing.T) {
	t.Parallel()
	testpeer.LookPath(t, "ipmi_sim", "openipmi")
	l := newLab(t, 3)
	a := l.startAgent("agent-a", 1)
	l.waitActive(a)
	l.waitReady(a.name)
	m := newMachine("bmc-ipmi", fwBIOS, 0x30)
	bm := l.addBMC(2, m, bootOpts{retry: true})
	bm.pressPower()

	before := a.metrics()
	ctx, cancel := context.WithTimeout(context.Background(), ensureLimit)
	defer cancel()
	called := time.Now()
	steps, err := l.plane.EnsureRamdisk(ctx, siteID, controlplane.RamdiskMachine{Entries: []sitelink.ProxyDhcpEntry{m.entry(sitelink.ArchBIOS)}, BMC: bm.target()})
	if err != nil {
		t.Fatalf("EnsureRamdisk: %v (%+v)\nchassis log:\n%s", err, steps, bm.chassisLog())
	}
	ensured := time.Now()
	if steps.Agent != a.name || steps.Boot.Status != "ok" || steps.Power.Status != "ok" || steps.PowerReused || steps.Power.Replayed {
		t.Errorf("steps %+v; want both commands run by %s, ok, nothing replayed", steps, a.name)
	}
	for id, kind := range map[string]string{steps.BootID: sitelink.KindBMCBoot, steps.PowerID: sitelink.KindBMCPower} {
		if r, reused, ok := l.plane.BMCResult(id); !ok || reused || r.ID != id || r.Kind != kind || r.Status != "ok" {
			t.Errorf("result of %s: %+v (reused %v, ended %v), want %s ok from the agent's report", id, r, reused, ok, kind)
		}
	}

	ev := bm.waitPXEOn(ensureLimit)
	words := m.waitCmdline(t)
	l.checkBooted(m, words, a)
	l.checkCacheServed(m, words, a, before)
	off, on := bm.checkOnePowerCycle()
	if t.Failed() {
		return
	}
	t.Logf("bmc.power cycle to the ramdisk's kernel: %v (ipmi_sim powered the machine off at the cycle, on %v later; QEMU started %v after that; "+
		"kernel %v after QEMU started; EnsureRamdisk took %v, the kernel came %v after it was called)",
		m.kernel.Sub(off).Round(100*time.Millisecond), on.Sub(off).Round(time.Millisecond), ev.at.Sub(on).Round(time.Millisecond),
		m.kernel.Sub(ev.at).Round(100*time.Millisecond), ensured.Sub(called).Round(time.Millisecond), m.kernel.Sub(called).Round(100*time.Millisecond))
	t.Logf("chassis log:\n%s", bm.chassisLog())
	t.Logf("%s's BMC operations:\n%s", a.name, bmcOps(a))

	// The ramdisk powered the machine off: the BMC says so, and inspects it.
	if !waitFor(30*time.Second, m.p.Exited) {
		t.Fatalf("the machine did not power off after the ramdisk ran")
	}
	id, err := l.plane.BMC(siteID, sitelink.KindBMCQuery, sitelink.BMCCommand{Target: bm.target()})
	if err != nil {
		t.Fatal(err)
	}
	q, err := l.plane.WaitBMC(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if q.Status != "ok" || q.Power != string(bmc.PowerOff) || q.Inventory == nil || q.Inventory.BMCMAC != ipmitest.MAC || q.Inventory.UUID == "" {
		t.Errorf("bmc.query after the ramdisk powered off: %+v (inventory %+v), want the machine off, the BMC's MAC %s and a UUID", q, q.Inventory, ipmitest.MAC)
	}

	mt := a.metrics()
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"siteboot_bmc_operations_total", []string{`kind="bmc.boot"`, `outcome="ok"`}, 1},
		{"siteboot_bmc_operations_total", []string{`kind="bmc.power"`, `outcome="ok"`}, 1},
		{"siteboot_bmc_operations_total", []string{`kind="bmc.query"`, `outcome="ok"`}, 1},
		{"siteboot_bmc_operations_total", nil, 3},
		{"siteboot_bmc_claims_total", []string{`answer="granted"`}, 2},
		{"siteboot_bmc_claims_total", nil, 2},
		{"siteboot_bmc_replayed_total", nil, 0},
		{"siteboot_bmc_operations_in_flight", nil, 0},
	} {
		if got := mt.sum(c.name, c.labels...) - before.sum(c.name, c.labels...); c.name != "siteboot_bmc_operations_in_flight" && got != c.want {
			t.Errorf("%s%v went up by %v, want %v (BMC counters: %s)", c.name, c.labels, got, c.want, bmcCounters(mt))
		} else if c.name == "siteboot_bmc_operations_in_flight" && mt.sum(c.name) != c.want {
			t.Errorf("%s = %v, want %v", c.name, mt.sum(c.name), c.want)
		}
	}
}

// bmcFailoverLab is the start of the BMC failover tests: two agents on the segment (agent-a
// active, agent-b its standby, both ready) and a machine behind ipmi_sim on host 3, which
// its own button has powered on.
func bmcFailoverLab(t *testing.T, name string, mac byte) (l *lab, a, b *labAgent, m *machine, bm *bmcMachine) {
	t.Helper()
	testpeer.LookPath(t, "ipmi_sim", "openipmi")
	l = newLab(t, 4)
	a = l.startAgent("agent-a", 1)
	l.waitActive(a)
	b = l.startAgent("agent-b", 2)
	l.waitReady(a.name)
	l.waitReady(b.name)
	m = newMachine(name, fwBIOS, mac)
	bm = l.addBMC(3, m, bootOpts{retry: true})
	bm.pressPower()
	return l, a, b, m, bm
}

// TestE2E_BMCFailoverReusesPowerCycle: as TestE2E_BMCIPMIEnsureRamdisk with two agents,
// and the holder is killed right after it power-cycled the machine: its claim report
// recorded, the heartbeat that would carry the result never sent. The control plane
// reuses the recorded outcome once the dead agent's session timed out (the standby is
// never sent the power cycle); the standby is promoted only after the lease expired, gets
// the machine's entry, and the machine, which retries, boots from it. The chassis log
// shows one power-on.
//
// Bounds, from the lab's settings: EnsureRamdisk ends within sessionTimeout + heartbeat +
// control timeout of the kill (the dead agent counts as gone sessionTimeout after its last
// heartbeat, and the standby's next heartbeat routes the command); the lease's expiry and
// the standby's promotion as in TestE2E_TwoAgentsFailover; and the machine boots on the
// firmware's try under way when the standby became active or on the next one (at most one
// firmware start in between, counted from the serial log in this run).
func TestE2E_BMCFailoverReusesPowerCycle(t *testing.T) {
	t.Parallel()
	l, a, b, m, bm := bmcFailoverLab(t, "bmc-failover", 0x31)

	// The holder dies the moment its claim report of the power cycle is recorded.
	var (
		kill     sync.Once
		killed   time.Time
		atKill   metrics
		killedCh = make(chan struct{})
	)
	l.plane.OnBMCReport = func(node string, c sitelink.Command, o bmc.Outcome) {
		if node != a.name || c.Kind != sitelink.KindBMCPower {
			return
		}
		kill.Do(func() {
			atKill = a.metrics()
			a.p.Kill()
			killed = time.Now()
			close(killedCh)
		})
	}
	ctx := context.Background()
	first, _ := l.plane.LeaseRecord(ctx, siteID)
	type ensured struct {
		steps controlplane.RamdiskSteps
		err   error
		at    time.Time
	}
	done := make(chan ensured, 1)
	called := time.Now()
	go func() {
		ectx, cancel := context.WithTimeout(ctx, ensureLimit)
		defer cancel()
		s, err := l.plane.EnsureRamdisk(ectx, siteID, controlplane.RamdiskMachine{Entries: []sitelink.ProxyDhcpEntry{m.entry(sitelink.ArchBIOS)}, BMC: bm.target()})
		done <- ensured{s, err, time.Now()}
	}()
	select {
	case <-killedCh:
	case e := <-done:
		t.Fatalf("EnsureRamdisk ended before the holder's power cycle was reported: %+v, %v\nchassis log:\n%s", e.steps, e.err, bm.chassisLog())
	case <-time.After(ensureLimit):
		t.Fatalf("the holder never reported the power cycle's claim within %v\nchassis log:\n%s", ensureLimit, bm.chassisLog())
	}
	ev := bm.waitPXEOn(ensureLimit)
	m.watchRestarts()
	// What the holder counted as it died: the boot override done, the power cycle sent
	// and still in flight (waiting for the answer to its claim report).
	if g, f, boot := atKill.sum("siteboot_bmc_claims_total", `answer="granted"`), atKill.sum("siteboot_bmc_operations_in_flight"),
		atKill.sum("siteboot_bmc_operations_total", `kind="bmc.boot"`, `outcome="ok"`); g != 2 || f != 1 || boot != 1 {
		t.Errorf("agent-a's BMC counters at the kill: %s; want 2 claims granted, bmc.boot ok, 1 in flight", bmcCounters(atKill))
	}
	t.Logf("agent-a's BMC counters as it was killed: %s", bmcCounters(atKill))

	// The power cycle's outcome is reused once agent-a's session has timed out.
	routeBound := sessionTimeout + heartbeat + controlTimeout
	var e ensured
	select {
	case e = <-done:
	case <-time.After(ensureLimit):
		t.Fatalf("EnsureRamdisk did not end within %v of the kill", ensureLimit)
	}
	if e.err != nil {
		t.Fatalf("EnsureRamdisk: %v (%+v)", e.err, e.steps)
	}
	steps := e.steps
	if steps.Agent != a.name || steps.Boot.Status != "ok" || !steps.PowerReused || !steps.Power.Replayed || steps.Power.Status != "ok" {
		t.Errorf("steps %+v; want the entry and both commands on %s, the power cycle's outcome reused from its claim record", steps, a.name)
	}
	rec, _, err := l.plane.Claims().Store.Get(ctx, steps.PowerID)
	if err != nil || rec.State != bmc.ClaimReported || rec.Node != a.name || rec.Outcome.Status != bmc.StatusOK {
		t.Errorf("the power cycle's claim: %+v, %v; want reported ok by %s", rec, err, a.name)
	}
	t.Logf("EnsureRamdisk ended %v after agent-a was killed, with the power cycle's outcome reused (bound sessionTimeout+heartbeat+control timeout = %v, margin %v)",
		e.at.Sub(killed).Round(time.Millisecond), routeBound, (routeBound - e.at.Sub(killed)).Round(time.Millisecond))
	if d := e.at.Sub(killed); d > routeBound {
		t.Errorf("EnsureRamdisk ended %v after the kill, want within sessionTimeout+heartbeat+control timeout = %v", d, routeBound)
	}

	// The lease: renewed for the dead holder until its session timed out, then expired;
	// only then is agent-b promoted.
	t.Logf("%s killed %v after EnsureRamdisk was called", a.name, killed.Sub(called).Round(time.Millisecond))
	expires, active := l.waitTakeover(a, b, first.Expires, killed)

	// The machine boots from agent-b.
	offer, startsBefore, startsAfter := l.bootedAfterTakeover(m, b, first.Epoch, expires, active)
	off, on := bm.checkOnePowerCycle()
	t.Logf("bmc.power cycle to the ramdisk's kernel across the failover: %v (ipmi_sim powered the machine off at the cycle, on %v later, QEMU started %v after that; "+
		"agent-a killed %v after the cycle; kernel %v after agent-b was active; %d firmware starts before it, %d from then to the kernel; %s answered %v after the expiry)",
		m.kernel.Sub(off).Round(100*time.Millisecond), on.Sub(off).Round(time.Millisecond), ev.at.Sub(on).Round(time.Millisecond),
		killed.Sub(off).Round(time.Millisecond), m.kernel.Sub(active).Round(100*time.Millisecond), startsBefore, startsAfter,
		b.name, offer.Sub(expires).Round(time.Millisecond))
	t.Logf("chassis log (one power-on from the BMC):\n%s", bm.chassisLog())

	// agent-b never sent anything to the BMC: the power cycle was not sent again.
	if mb := b.metrics(); mb.sum("siteboot_bmc_claims_total") != 0 || mb.sum("siteboot_bmc_operations_total") != 0 {
		t.Errorf("agent-b's BMC counters: %s; want no claim and no operation", bmcCounters(mb))
	}
}

// TestE2E_BMCClaimedNeverReportedIsUnknown: the holder is killed the moment the control
// plane grants its claim of the power cycle, before the grant reaches it, so it never sends
// the cycle and never reports. Once its session has timed out the command ends "unknown"
// from its claim record (the plane cannot know whether the BMC got it): EnsureRamdisk
// returns that as the power step's error, the standby, promoted after the lease expired,
// sends no claim and no BMC operation, and the BMC never changed the machine's power.
func TestE2E_BMCClaimedNeverReportedIsUnknown(t *testing.T) {
	t.Parallel()
	l, a, b, m, bm := bmcFailoverLab(t, "bmc-unknown", 0x32)

	var (
		kill   sync.Once
		killed time.Time
	)
	l.plane.OnBMCClaim = func(node string, c sitelink.Command) {
		if node != a.name || c.Kind != sitelink.KindBMCPower {
			return
		}
		kill.Do(func() {
			a.p.Kill()
			killed = time.Now()
		})
	}
	ctx := context.Background()
	first, _ := l.plane.LeaseRecord(ctx, siteID)
	ectx, cancel := context.WithTimeout(ctx, ensureLimit)
	defer cancel()
	steps, err := l.plane.EnsureRamdisk(ectx, siteID, controlplane.RamdiskMachine{Entries: []sitelink.ProxyDhcpEntry{m.entry(sitelink.ArchBIOS)}, BMC: bm.target()})
	ended := time.Now()
	if killed.IsZero() {
		t.Fatalf("the holder's power cycle was never claimed: %+v, %v\nchassis log:\n%s", steps, err, bm.chassisLog())
	}
	var se *controlplane.StepError
	if !errors.As(err, &se) || se.Step != "bmc.power cycle" || se.Result.Status != string(bmc.StatusUnknown) || !se.Result.Replayed {
		t.Fatalf("EnsureRamdisk: %+v, %v; want the power step unknown, from its claim record", steps, err)
	}
	if steps.Boot.Status != "ok" || steps.PowerReused {
		t.Errorf("steps %+v; want the boot override ok and the power cycle not reused", steps)
	}
	rec, _, err := l.plane.Claims().Store.Get(ctx, steps.PowerID)
	if err != nil || rec.State != bmc.ClaimGranted || rec.Node != a.name {
		t.Errorf("the power cycle's claim: %+v, %v; want granted to %s and never reported", rec, err, a.name)
	}
	routeBound := sessionTimeout + heartbeat + controlTimeout
	t.Logf("EnsureRamdisk ended %v after agent-a was killed with its claim granted: %s (bound sessionTimeout+heartbeat+control timeout = %v)",
		ended.Sub(killed).Round(time.Millisecond), se.Result.Message, routeBound)
	if d := ended.Sub(killed); d > routeBound {
		t.Errorf("EnsureRamdisk ended %v after the kill, want within %v", d, routeBound)
	}

	// agent-b takes the lease over and sends nothing to the BMC; the machine's power was
	// never changed by it (the override alone was set).
	l.waitTakeover(a, b, first.Expires, killed)
	if mb := b.metrics(); mb.sum("siteboot_bmc_claims_total") != 0 || mb.sum("siteboot_bmc_operations_total") != 0 {
		t.Errorf("agent-b's BMC counters: %s; want no claim and no operation", bmcCounters(mb))
	}
	if sets := ipmitest.SetCalls(bm.chassis.Calls()); !slices.Equal(sets, []string{"set boot pxe"}) {
		t.Errorf("the BMC's chassis calls that change the machine: %q, want only the boot override", sets)
	}
	if ons := bm.powerOns(); len(ons) != 1 {
		t.Errorf("power-ons %+v, want only the machine's own button", ons)
	}
}

// sushyGet reads a resource of sushy-emulator from inside ns, with basic auth.
func sushyGet(t *testing.T, ns *testpeer.Netns, url, user, pass string, v any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth(user, pass)
	resp, err := nsClient(ns).Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}

// sushySystem is what the test reads of sushy's ComputerSystem.
type sushySystem struct {
	PowerState string
	Boot       struct {
		BootSourceOverrideEnabled string
		BootSourceOverrideTarget  string
	}
}

// resetPosts counts the ComputerSystem.Reset requests in sushy's request log.
func resetPosts(s *testpeer.Sushy) int {
	return strings.Count(s.Process.Output(), "Actions/ComputerSystem.Reset HTTP/1.1\" 20")
}

// TestE2E_BMCRedfishSushy: the same flow through the agent's bmc.* commands against
// sushy-emulator's fake Redfish driver, on a host of the segment with basic auth. The
// fake has no VM, so no machine boots here (TestE2E_BMCIPMIEnsureRamdisk boots one); what
// is checked is that the calls land on the BMC and that the results come back by command
// id: a bmc.query inspects the system (its MAC and UUID make the entry); EnsureRamdisk's
// one-time PXE boot lands differently ("differs"), because sushy stores every override as
// Continuous and the driver reads that back, and EnsureRamdisk then sends no power cycle; with
// PersistentBoot the override and the power cycle land (sushy's fake changes power 1-11 s
// after the call, which the driver waits for), and a second bmc.query reads the machine on.
func TestE2E_BMCRedfishSushy(t *testing.T) {
	t.Parallel()
	l := newLab(t, 3)
	a := l.startAgent("agent-a", 1)
	l.waitActive(a)
	l.waitReady(a.name)
	m := newMachine("bmc-sushy", fwBIOS, 0x32)
	h := l.seg.Hosts[2]
	const user, pass = "sushy-admin", "sushy-e2e-secret"
	sushy := testpeer.SushyEmulator(t, testpeer.SushyConfig{
		Systems:  []testpeer.SushySystem{{UUID: m.uuid.String(), Name: m.name, PowerState: "Off", NICs: [][2]string{{m.mac.String(), "192.0.2.150"}}}},
		Username: user, Password: pass,
		Netns: h.Netns, Addr: h.IP,
	})
	l.plane.SetCredential("bmc/"+m.name, bmc.Credential{Username: user, Password: pass})
	tg := sitelink.BMCTarget{Driver: "redfish", Address: sushy.URL, Credential: "bmc/" + m.name}
	sysURL := sushy.URL + "/redfish/v1/Systems/" + m.uuid.String()
	system := func() sushySystem {
		var s sushySystem
		sushyGet(t, h.Netns, sysURL, user, pass, &s)
		return s
	}
	ctx, cancel := context.WithTimeout(context.Background(), ensureLimit)
	defer cancel()
	before := a.metrics()
	query := func() sitelink.BMCResult {
		t.Helper()
		id, err := l.plane.BMC(siteID, sitelink.KindBMCQuery, sitelink.BMCCommand{Target: tg})
		if err != nil {
			t.Fatal(err)
		}
		r, err := l.plane.WaitBMC(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if r.ID != id || r.Kind != sitelink.KindBMCQuery {
			t.Errorf("query %s answered as %s %s", id, r.ID, r.Kind)
		}
		return r
	}

	// Inspection: the entry comes from what the BMC says of the machine.
	q := query()
	if q.Status != "ok" || q.Power != string(bmc.PowerOff) || q.Inventory == nil || !slices.Equal(q.Inventory.MACs, []string{m.mac.String()}) || q.Inventory.UUID != m.uuid.String() {
		t.Fatalf("bmc.query: %+v (inventory %+v), want the system off with MAC %s and UUID %s", q, q.Inventory, m.mac, m.uuid)
	}
	mac, err := hwid.ParseMAC(q.Inventory.MACs[0])
	if err != nil {
		t.Fatal(err)
	}
	entry := sitelink.ProxyDhcpEntry{MAC: mac, UUID: q.Inventory.UUID, Arch: sitelink.ArchBIOS, Workflow: m.workflow(), TokenRef: m.tokenRef(), NotAfter: time.Now().Add(time.Hour)}
	rm := controlplane.RamdiskMachine{Entries: []sitelink.ProxyDhcpEntry{entry}, BMC: tg}

	// A one-time override: sushy keeps it Continuous; the step ends "differs" with what the
	// driver read back, and no power cycle follows.
	steps, err := l.plane.EnsureRamdisk(ctx, siteID, rm)
	var se *controlplane.StepError
	if !errors.As(err, &se) || se.Step != "bmc.boot pxe once" || se.Result.Status != "differs" || !strings.Contains(se.Result.Message, "Continuous") || steps.PowerID != "" {
		t.Fatalf("EnsureRamdisk with a one-time override on sushy: %v (%+v), want the boot step to differ (kept Continuous) and no power step", err, steps)
	}
	if r, _, ok := l.plane.BMCResult(steps.BootID); !ok || r.ID != steps.BootID || r.Status != "differs" || r.ErrorKind != "differs" {
		t.Errorf("result of %s: %+v, want it to differ, with its kind", steps.BootID, r)
	}
	t.Logf("one-time PXE on sushy: %s (%s): %s", se.Result.Status, se.Result.ErrorKind, se.Result.Message)
	if s := system(); s.Boot.BootSourceOverrideTarget != "Pxe" || s.PowerState != "Off" {
		t.Errorf("sushy's system after the step that differed: %+v, want the override landed (Pxe) and the power untouched (Off)", s)
	}
	if n := resetPosts(sushy); n != 0 {
		t.Errorf("sushy got %d Reset requests after the boot step failed, want none", n)
	}

	// PersistentBoot: both land.
	rm.PersistentBoot = true
	started := time.Now()
	steps, err = l.plane.EnsureRamdisk(ctx, siteID, rm)
	if err != nil {
		t.Fatalf("EnsureRamdisk with PersistentBoot on sushy: %v (%+v)", err, steps)
	}
	if steps.Agent != a.name || steps.Boot.Status != "ok" || steps.Power.Status != "ok" || steps.PowerReused {
		t.Errorf("steps %+v; want both commands run by %s, ok", steps, a.name)
	}
	for id, kind := range map[string]string{steps.BootID: sitelink.KindBMCBoot, steps.PowerID: sitelink.KindBMCPower} {
		if r, reused, ok := l.plane.BMCResult(id); !ok || reused || r.ID != id || r.Kind != kind || r.Status != "ok" {
			t.Errorf("result of %s: %+v (reused %v), want %s ok from the agent's report", id, r, reused, kind)
		}
	}
	t.Logf("EnsureRamdisk with PersistentBoot on sushy's fake: %v (its power changes land 1-11 s after the call); Reset requests in sushy's log: %d",
		time.Since(started).Round(time.Millisecond), resetPosts(sushy))
	if s := system(); s.Boot.BootSourceOverrideTarget != "Pxe" || s.Boot.BootSourceOverrideEnabled != "Continuous" || s.PowerState != "On" {
		t.Errorf("sushy's system after EnsureRamdisk: %+v, want PXE Continuous and power on", s)
	}
	if n := resetPosts(sushy); n < 1 {
		t.Errorf("sushy got no Reset request for the power cycle")
	}
	if q := query(); q.Status != "ok" || q.Power != string(bmc.PowerOn) {
		t.Errorf("bmc.query after the power cycle: %+v, want on", q)
	}
	// The agent holds the entry EnsureRamdisk sent it.
	if !waitFor(2*(heartbeat+controlTimeout), func() bool {
		return len(l.plane.Pending(a.name)) == 0 && a.metrics().sum("siteboot_boot_entries") == 1
	}) {
		t.Errorf("the agent never acknowledged the machine's entry: pending %v, entries %v", l.plane.Pending(a.name), a.metrics().sum("siteboot_boot_entries"))
	}

	mt := a.metrics()
	for _, c := range []struct {
		labels []string
		want   float64
	}{
		{[]string{`kind="bmc.query"`, `outcome="ok"`}, 2},
		{[]string{`kind="bmc.boot"`, `outcome="differs"`}, 1},
		{[]string{`kind="bmc.boot"`, `outcome="ok"`}, 1},
		{[]string{`kind="bmc.power"`, `outcome="ok"`}, 1},
		{nil, 5},
	} {
		if got := mt.sum("siteboot_bmc_operations_total", c.labels...) - before.sum("siteboot_bmc_operations_total", c.labels...); got != c.want {
			t.Errorf("siteboot_bmc_operations_total%v went up by %v, want %v (BMC counters: %s)", c.labels, got, c.want, bmcCounters(mt))
		}
	}
	if got := mt.sum("siteboot_bmc_claims_total", `answer="granted"`) - before.sum("siteboot_bmc_claims_total", `answer="granted"`); got != 3 {
		t.Errorf("claims granted went up by %v, want 3 (two boots, one power cycle)", got)
	}
	// The credential never reaches the agent's log.
	if strings.Contains(a.p.Output(), pass) {
		t.Errorf("the BMC password is in the agent's log")
	}
}
