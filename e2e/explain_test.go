package e2e_test

import (
	"strings"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/hwid"
	"github.com/bettercompute/siteboot/internal/testpeer"
	"github.com/bettercompute/siteboot/sitelink"
)

// "Why didn't it boot?" with real firmware: each scenario sets up one way a site breaks a
// boot and ends with `siteagent explain MAC`, which must name it.

// explainSays runs `siteagent explain mac` on a and checks that it exits 0 (or 1 when
// unseen, for a MAC the agent never heard of) and that its first line holds every part.
func explainSays(t *testing.T, a *labAgent, mac hwid.MAC, seen bool, parts ...string) {
	t.Helper()
	code, out := a.explain(t, mac)
	want := 0
	if !seen {
		want = 1
	}
	first, _, _ := strings.Cut(out, "\n")
	ok := code == want && strings.HasPrefix(first, mac.String()+": ")
	for _, p := range parts {
		ok = ok && strings.Contains(first, p)
	}
	if !ok {
		t.Errorf("siteagent explain %s: exit %d, want %d and a first line with %q\n%s", mac, code, want, parts, out)
		return
	}
	t.Logf("siteagent explain %s:\n%s", mac, out)
}

// TestE2E_ExplainUnpluggedNIC: a machine with two NICs whose boot entry names the second,
// whose cable is out. The firmware asks on NIC 1, which has no entry, gets no proxy answer
// there, times out on NIC 2 and falls through. Explain says the entry's NIC was never heard
// from, and that NIC 1 is unknown here.
func TestE2E_ExplainUnpluggedNIC(t *testing.T) {
	t.Parallel()
	l := newLab(t, 2)
	a := l.startAgent("agent-a", 1)
	l.waitActive(a)
	m := newTwoNICMachine("unplugged-nic", fwBIOS, 0x61)
	m.unplugged = m.mac
	nic1 := m.nics[0]
	l.prepare(a.name, m, sitelink.ArchBIOS)
	l.powerOn(m, bootOpts{rebootOnFail: true})
	l.checkSilent(m, a)
	if _, ok := l.firstPacket("udp dst port 67 and " + bootpChaddr(nic1)); !ok {
		t.Fatalf("NIC 1 (%s) never asked: the firmware did not try it, so the test shows nothing", nic1)
	}
	if at, ok := l.firstPacket(bootpChaddr(m.mac)); ok {
		t.Fatalf("the unplugged NIC %s reached the segment at %v", m.mac, at.Format(time.StampMilli))
	}
	explainSays(t, a, m.mac, false, "no DHCP request seen from this MAC on any interface", "boots from this NIC")
	explainSays(t, a, nic1, true, "unknown machine", "no boot entry here")
}

// TestE2E_ExplainRelayForwardsNothing: a machine behind a DHCP relay that forwards its
// requests to the site's DHCP server but not to the agent (the agent is missing from the
// relay's helper addresses). It gets an address and no boot server, and falls through;
// explain says the agent never saw it and names the relay.
func TestE2E_ExplainRelayForwardsNothing(t *testing.T) {
	t.Parallel()
	l := newLab(t, 2)
	a := l.startAgent("agent-a", 1)
	l.addRelay() // to the site's DHCP server only
	l.waitActive(a)
	m := newMachine("relay-nothing", fwBIOS, 0x62)
	m.routed = true
	l.prepare(a.name, m, sitelink.ArchBIOS)
	l.powerOn(m, bootOpts{rebootOnFail: true})
	l.checkSilent(m, a)
	relayed := "udp dst port 67 and src host " + testpeer.RouterIP.String() + " and " + bootpChaddr(m.mac)
	if _, ok := l.firstPacket(relayed + " and dst host " + l.seg.Hosts[0].IP.String()); !ok {
		t.Fatalf("the relay forwarded no request of %s to the site's DHCP server: the test shows nothing", m.mac)
	}
	if at, ok := l.firstPacket(relayed + " and dst host " + a.host.IP.String()); ok {
		t.Fatalf("the relay forwarded a request of %s to the agent at %v", m.mac, at.Format(time.StampMilli))
	}
	explainSays(t, a, m.mac, false, "no DHCP request seen from this MAC on any interface", "check the relay or the VLAN")
}

// blockTFTP drops every TFTP request (UDP 69) that reaches a from the segment, as a
// filter on the segment would: the agent's namespace routes such packets to a blackhole
// before its local table (the capture on the bridge still sees them). Policy routing
// stands in for a netfilter rule, which the test machines' kernels and tools may lack.
func blockTFTP(t *testing.T, a *labAgent) {
	t.Helper()
	h := a.host
	h.Run(t, "ip", "rule", "add", "pref", "10", "iif", h.Iface, "ipproto", "udp", "dport", "69", "blackhole")
	h.Run(t, "ip", "rule", "del", "pref", "0")
	h.Run(t, "ip", "rule", "add", "pref", "100", "lookup", "local")
}

// TestE2E_ExplainTFTPBlocked: UDP 69 is dropped between the machine and the agent. OVMF's
// PXE gets the proxy offer and the answer on port 4011, then asks for ipxe.efi over TFTP,
// which never arrives; explain says so before the firmware moves on to another boot option.
func TestE2E_ExplainTFTPBlocked(t *testing.T) {
	t.Parallel()
	l := newLab(t, 2)
	a := l.startAgent("agent-a", 1)
	l.waitActive(a)
	blockTFTP(t, a)
	m := newMachine("tftp-blocked", fwUEFIPXE, 0x63)
	l.prepare(a.name, m, sitelink.ArchX86UEFI)
	l.powerOn(m, bootOpts{})
	rrq := "udp dst port 69 and dst host " + a.host.IP.String()
	if !waitFor(bootTimeout, func() bool { _, ok := l.firstPacket(rrq); return ok || m.p.Exited() }) || m.p.Exited() {
		t.Fatalf("the firmware never asked %s for its boot file over TFTP", a.name)
	}
	if _, ok := l.firstPacket("udp src port 4011 and src host " + a.host.IP.String()); !ok {
		t.Errorf("no answer of %s on port 4011 on the wire", a.name)
	}
	// EDK2 retries the read for some 20 s before it gives up; explain well within that.
	time.Sleep(3 * time.Second)
	if n := a.metrics().sum("siteboot_tftp_transfers_total"); n != 0 {
		t.Errorf("the agent counted %v TFTP transfers through the block", n)
	}
	explainSays(t, a, m.mac, true, "answered at 4011 but the firmware never asked for the boot file over TFTP")
}

// TestE2E_ExplainStolenNonce: a BIOS machine boots; then another host on the segment,
// which read the machine's script request on the wire, presents its boot nonce from its
// own address. It gets no secret, and explain names the thief's address.
func TestE2E_ExplainStolenNonce(t *testing.T) {
	t.Parallel()
	l := newLab(t, 3)
	a := l.startAgent("agent-a", 1)
	l.waitActive(a)
	m := newMachine("stolen-nonce", fwBIOS, 0x64)
	l.bootChecked(a, m, sitelink.ArchBIOS)
	var script string
	for _, r := range l.httpRequests(a.host.IP) {
		if p, ok := strings.CutPrefix(r, "GET "); ok && strings.HasPrefix(p, "/boot/ipxe?") && strings.Contains(p, "&n=") {
			script = p
		}
	}
	if script == "" {
		t.Fatalf("no script request with a nonce on the wire: %q", l.httpRequests(a.host.IP))
	}
	thief := l.seg.Hosts[2]
	st, body := get(thief.Netns, "http://"+a.host.IP.String()+script)
	if !refused(st, body) {
		t.Fatalf("the thief replaying %s: status %d, secrets %v", script, st, hasSecrets(body))
	}
	explainSays(t, a, m.mac, true, "the nonce was presented from "+thief.IP.String()+", another address")
}
