package e2e_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/hwid"
	"github.com/bettercompute/siteboot/sitelink"
)

// scriptStatus asks an agent for m's script from the bridge namespace, as a machine would.
func (l *lab) scriptStatus(a *labAgent, m *machine) int {
	st, _ := get(l.seg.Bridge, "http://"+a.host.IP.String()+"/boot/ipxe?mac="+m.mac.String())
	return st
}

// TestE2E_Unknown: a machine the agent has no entry for gets no proxy DHCP answer, is
// listed as discovered with its UUID, and its firmware falls through.
func TestE2E_Unknown(t *testing.T) {
	t.Parallel()
	l := newLab(t, 2)
	a := l.startAgent("agent-a", 1)
	l.waitActive(a)
	l.waitReady(a.name)
	m := newMachine("unknown", fwBIOS, 4)
	l.powerOn(m, bootOpts{rebootOnFail: true})
	l.checkSilent(m, a)

	var found []sitelink.DiscoveredMachine
	if !waitFor(discoveryWait, func() bool {
		found = l.plane.Discovered(a.name)
		return len(found) > 0
	}) {
		t.Fatalf("the control plane never heard of the unknown machine")
	}
	i := slices.IndexFunc(found, func(d sitelink.DiscoveredMachine) bool { return d.MAC == m.mac.String() })
	if i < 0 || len(found) != 1 {
		t.Fatalf("discovered %+v, want only %s", found, m.mac)
	}
	d := found[0]
	// Option 97 carries the UUID with its first three fields little-endian (iPXE sends it
	// so, as EFI GUIDs are laid out): the list keeps it as sent, which is QEMU's -uuid in
	// its byte-swapped spelling; the control plane's matcher compares all spellings.
	u, err := hwid.ParseUUID(d.ProductUUID)
	if err != nil || u != m.uuid.SMBIOS() || !hwid.SameMachine(u, m.uuid) || d.Arch != "bios" || d.Count < 1 {
		t.Errorf("discovered %+v, want UUID %s (QEMU's %s as option 97 carries it), arch bios", d, m.uuid.SMBIOS(), m.uuid)
	}
	mt := a.metrics()
	if n, s := mt.sum("siteboot_proxydhcp_answered_total"), mt.sum("siteboot_proxydhcp_silent_total", `reason="unknown"`); n != 0 || s < 1 {
		t.Errorf("proxy DHCP answered %v and was silent for an unknown machine %v times", n, s)
	}
	// Why didn't it boot? The agent's explain says it is unknown here.
	if code, out := a.explain(t, m.mac); code != 0 || !strings.Contains(out, "unknown machine") || !strings.Contains(out, "no boot entry") {
		t.Errorf("siteagent explain %s: exit %d, want 0 and an unknown machine\n%s", m.mac, code, out)
	} else {
		t.Logf("siteagent explain %s:\n%s", m.mac, out)
	}
}

// holdLease makes node an enrolled agent of the site that heartbeats the control plane
// in process until the test ends, and waits until it holds the lease.
func (l *lab) holdLease(node string) {
	l.t.Helper()
	l.plane.Enroll(siteID, node)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for beat := uint64(1); ctx.Err() == nil; beat++ {
			l.plane.Sync(ctx, sitelink.StatusReport{Site: siteID, Node: node, Beat: beat})
			select {
			case <-ctx.Done():
			case <-time.After(heartbeat):
			}
		}
	}()
	l.t.Cleanup(func() {
		cancel()
		<-done
	})
	if !waitFor(agentStartWait, func() bool {
		rec, _ := l.plane.LeaseRecord(ctx, siteID)
		return rec.Holder == node
	}) {
		l.t.Fatalf("%s never got the lease", node)
	}
}

// TestE2E_Fenced: another enrolled agent, connected, holds the lease; ours has an entry for
// the machine but is silent, its scripts answer 503, and the firmware falls through.
func TestE2E_Fenced(t *testing.T) {
	t.Parallel()
	l := newLab(t, 2)
	l.holdLease("agent-holder")
	a := l.startAgent("agent-a", 1)
	m := newMachine("fenced", fwBIOS, 5)
	l.prepare(a.name, m, sitelink.ArchBIOS)
	if a.active() {
		t.Fatalf("%s is active while agent-holder holds the lease", a.name)
	}
	l.powerOn(m, bootOpts{rebootOnFail: true})
	l.checkSilent(m, a)
	if st := l.scriptStatus(a, m); st != http.StatusServiceUnavailable {
		t.Errorf("the fenced agent's script for %s answered %d, want 503", m.mac, st)
	}
	mt := a.metrics()
	if n, s := mt.sum("siteboot_proxydhcp_answered_total"), mt.sum("siteboot_proxydhcp_silent_total", `reason="fenced"`); n != 0 || s < 1 {
		t.Errorf("proxy DHCP answered %v and was silent as fenced %v times", n, s)
	}
	if rec, _ := l.plane.LeaseRecord(context.Background(), siteID); rec.Holder != "agent-holder" {
		t.Errorf("lease %v, want agent-holder's throughout", rec)
	}
	// Why didn't it boot? The agent's explain says it is fenced.
	if code, out := a.explain(t, m.mac); code != 0 || !strings.Contains(out, "fenced: this agent does not hold the boot lease") {
		t.Errorf("siteagent explain %s: exit %d, want 0 and fenced\n%s", m.mac, code, out)
	} else {
		t.Logf("siteagent explain %s:\n%s", m.mac, out)
	}
}

// TestE2E_TwoAgentsFailover: two agents on one segment with entries for the same machines.
// Only the holder answers; then the holder is killed right after a machine's power-on, the
// standby answers only once the holder's lease expired, and the machine boots from it.
//
// The failover's bounds follow from the lab's settings, not from a quiet machine's figures.
// After the kill the controller renews the dead holder's lease until its session times out,
// so the lease expires at most sessionTimeout + a tick + leaseTTL after the kill; the standby
// is promoted within two ticks of the expiry (one to see the record unchanged for a TTL on
// the controller's own clock, one more for a tick in flight) and is active after its next
// heartbeat and that heartbeat's answer. The machine, which retries, then boots from the try
// under way or the next one: at most one firmware start (SeaBIOS's banner on the serial
// console) between the standby becoming active and the kernel.
func TestE2E_TwoAgentsFailover(t *testing.T) {
	t.Parallel()
	l := newLab(t, 3)
	a := l.startAgent("agent-a", 1)
	l.waitActive(a)
	b := l.startAgent("agent-b", 2)
	m1 := newMachine("holder", fwBIOS, 6)
	m2 := newMachine("failover", fwBIOS, 7)
	for _, x := range []*labAgent{a, b} {
		l.plane.PrepareRamdisk(x.name, []sitelink.ProxyDhcpEntry{
			{MAC: m1.mac, UUID: m1.uuid.String(), Arch: sitelink.ArchBIOS, Workflow: m1.workflow(), TokenRef: m1.tokenRef(), NotAfter: time.Now().Add(time.Hour)},
			{MAC: m2.mac, UUID: m2.uuid.String(), Arch: sitelink.ArchBIOS, Workflow: m2.workflow(), TokenRef: m2.tokenRef(), NotAfter: time.Now().Add(time.Hour)},
		})
	}
	l.waitReady(a.name)
	l.waitReady(b.name)

	// Only the holder answers.
	before := a.metrics()
	l.powerOn(m1, bootOpts{})
	words := m1.waitCmdline(t)
	l.checkBooted(m1, words, a)
	l.checkCacheServed(m1, words, a, before)
	if at, ok := l.firstPacket("udp and src host " + b.host.IP.String() + " and (src port 67 or src port 4011)"); ok {
		t.Errorf("the standby sent a proxy DHCP reply at %v", at.Format(time.StampMilli))
	}
	mb := b.metrics()
	if n, s := mb.sum("siteboot_proxydhcp_answered_total"), mb.sum("siteboot_proxydhcp_silent_total", `reason="fenced"`); n != 0 || s < 1 {
		t.Errorf("the standby answered %v and was silent as fenced %v times", n, s)
	}
	if st := l.scriptStatus(b, m1); st != http.StatusServiceUnavailable {
		t.Errorf("the standby's script answered %d, want 503", st)
	}
	if t.Failed() {
		return
	}

	// Failover: the holder dies right after the machine's power-on.
	ctx := context.Background()
	first, _ := l.plane.LeaseRecord(ctx, siteID)
	l.powerOn(m2, bootOpts{retry: true})
	m2.watchRestarts()
	a.p.Kill()
	killed := time.Now()
	t.Logf("%s killed %v after power-on", a.name, killed.Sub(m2.start).Round(time.Millisecond))
	expires, active := l.waitTakeover(a, b, first.Expires, killed)

	offer, startsBefore, startsAfter := l.bootedAfterTakeover(m2, b, first.Epoch, expires, active)
	t.Logf("failover: %s answered %v after the expiry; kernel started %v after the expiry, %v after %s was active; "+
		"%d firmware starts before that, %d from then to the kernel (bound 1); %v after power-on",
		b.name, offer.Sub(expires).Round(time.Millisecond), m2.kernel.Sub(expires).Round(time.Millisecond), m2.kernel.Sub(active).Round(time.Millisecond), b.name,
		startsBefore, startsAfter, m2.kernel.Sub(m2.start).Round(100*time.Millisecond))
}

// waitTakeover waits, after the holder a was killed at killed, for the lease to move to b
// and for b's fence to become active, and checks both against bounds that follow from the
// lab's settings: the controller renews the dead holder's lease until its session times
// out, so the lease ends at most sessionTimeout + a tick + leaseTTL after the kill (at the
// last expiry it wrote for a, from lastExpiry on); b is promoted no earlier than that and
// active within two ticks, a heartbeat and its answer. It returns when a's lease expired and
// when b was active.
func (l *lab) waitTakeover(a, b *labAgent, lastExpiry, killed time.Time) (expires, active time.Time) {
	t := l.t
	t.Helper()
	ctx := context.Background()
	expires = lastExpiry
	expiryBound := sessionTimeout + tickInterval + leaseTTL
	activeBound := 2*tickInterval + heartbeat + controlTimeout
	var promoted time.Time
	if !waitFor(2*(expiryBound+activeBound), func() bool {
		rec, _ := l.plane.LeaseRecord(ctx, siteID)
		if rec.Holder == a.name && rec.Expires.After(expires) {
			expires = rec.Expires
		}
		if rec.Holder == b.name {
			promoted = time.Now()
			return true
		}
		return false
	}) {
		t.Fatalf("the lease never moved to %s in %v after %s was killed", b.name, 2*(expiryBound+activeBound), a.name)
	}
	if !waitFor(2*activeBound, func() bool {
		active = time.Now()
		return b.active()
	}) {
		t.Fatalf("%s holds the lease but its fence never became active", b.name)
	}
	t.Logf("%s's lease expired %v after the kill (bound sessionTimeout+tick+TTL = %v, margin %v); "+
		"%s promoted %v and active %v after the expiry (bound 2 ticks+heartbeat+control timeout = %v, margin %v)",
		a.name, expires.Sub(killed).Round(time.Millisecond), expiryBound, (expiryBound - expires.Sub(killed)).Round(time.Millisecond),
		b.name, promoted.Sub(expires).Round(time.Millisecond), active.Sub(expires).Round(time.Millisecond), activeBound, (activeBound - active.Sub(expires)).Round(time.Millisecond))
	if d := expires.Sub(killed); d > expiryBound {
		t.Errorf("the dead holder's lease expired %v after the kill, want within sessionTimeout+tick+TTL = %v", d, expiryBound)
	}
	if promoted.Before(expires) {
		t.Errorf("%s promoted at %v, before %s's lease expired at %v", b.name, promoted.Format(time.StampMilli), a.name, expires.Format(time.StampMilli))
	}
	if d := active.Sub(expires); d > activeBound {
		t.Errorf("%s active %v after the expiry, want within 2 ticks+heartbeat+control timeout = %v", b.name, d, activeBound)
	}
	return expires, active
}

// bootedAfterTakeover checks that m, retrying, booted from b after b took over from a dead
// holder whose lease (at firstEpoch) expired at expires and b was active at active: the
// assertion is b's at a higher epoch, b's first proxy DHCP reply came after the expiry, and
// the firmware started at most once from b becoming active to the kernel (the try under
// way boots, or the next one: counted in firmware starts from the serial log, not in
// seconds, because a loaded machine stretches the firmware's retry period, 29 s seen against
// 9 s). It returns b's first reply and the firmware starts before and after active.
func (l *lab) bootedAfterTakeover(m *machine, b *labAgent, firstEpoch uint64, expires, active time.Time) (offer time.Time, before, after int) {
	t := l.t
	t.Helper()
	words := m.waitCmdline(t)
	as := l.checkBooted(m, words, b)
	if as.Epoch <= firstEpoch {
		t.Errorf("epoch %d after the failover, want more than %d", as.Epoch, firstEpoch)
	}
	offer, ok := l.firstPacket("udp and src host " + b.host.IP.String() + " and (src port 67 or src port 4011)")
	switch {
	case !ok:
		t.Errorf("no proxy DHCP reply of %s on the wire", b.name)
	case offer.Before(expires):
		t.Errorf("%s answered at %v, before the dead holder's lease expired at %v", b.name, offer.Format(time.StampMilli), expires.Format(time.StampMilli))
	}
	if m.kernel.IsZero() {
		t.Fatalf("the machine's kernel never started")
	}
	_, before = m.retryPeriod(active)
	_, toKernel := m.retryPeriod(m.kernel)
	if n := toKernel - before; n > 1 {
		t.Errorf("the machine's firmware started %d times between %s becoming active and the kernel, want at most once (the try under way, or the next one boots)", n, b.name)
	}
	return offer, before, toKernel - before
}
