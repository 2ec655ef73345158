package e2e_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/hwid"
	"github.com/bettercompute/siteboot/internal/testpeer"
	"github.com/bettercompute/siteboot/sitelink"
)

// Real sites' topologies: machines with two NICs, a segment behind a DHCP relay, and an
// entry whose UUID is not the machine's.

// discoveredWithin waits up to limit for node's discovered list, as the control plane last
// heard it, to satisfy ok, and returns it.
func (l *lab) discoveredWithin(node string, limit time.Duration, ok func([]sitelink.DiscoveredMachine) bool) ([]sitelink.DiscoveredMachine, bool) {
	var found []sitelink.DiscoveredMachine
	got := waitFor(limit, func() bool {
		found = l.plane.Discovered(node)
		return ok(found)
	})
	return found, got
}

// discoveryWait bounds how long an agent's discovered list takes to reach the control
// plane: the list's throttled report (discovery's 30 s, D2) and the next heartbeat with
// its answer.
const discoveryWait = 30*time.Second + heartbeat + controlTimeout

func listsMAC(mac hwid.MAC) func([]sitelink.DiscoveredMachine) bool {
	return func(ds []sitelink.DiscoveredMachine) bool {
		return slices.ContainsFunc(ds, func(d sitelink.DiscoveredMachine) bool { return d.MAC == mac.String() })
	}
}

// bootpChaddr is a tcpdump filter for BOOTP messages whose client hardware address is mac
// (chaddr is at offset 28 of the BOOTP message, after the 8-byte UDP header).
func bootpChaddr(mac hwid.MAC) string {
	return fmt.Sprintf("udp[36:4] = 0x%02x%02x%02x%02x and udp[40:2] = 0x%02x%02x", mac[0], mac[1], mac[2], mac[3], mac[4], mac[5])
}

// proxyReplyTo is a tcpdump filter for a's proxy DHCP replies to mac.
func proxyReplyTo(a *labAgent, mac hwid.MAC) string {
	return "udp and src host " + a.host.IP.String() + " and (src port 67 or src port 4011) and " + bootpChaddr(mac)
}

// hexhyp is a MAC as iPXE's ${netX/mac:hexhyp} spells it.
func hexhyp(mac hwid.MAC) string { return strings.ReplaceAll(mac.String(), ":", "-") }

// twoNICs: a machine with two NICs and a boot entry only for the second. The firmware
// tries NIC 1 first, which asks and gets no answer, and is listed as discovered; then NIC 2,
// which boots, and everything after the proxy offer (the chain script's query, the
// assertion) names NIC 2, the NIC iPXE booted from, not iPXE's first device.
func twoNICs(t *testing.T, fw firmware, i byte, arch string) {
	l := newLab(t, 2)
	a := l.startAgent("agent-a", 1)
	l.waitActive(a)
	m := newTwoNICMachine("two-nics-"+string(fw), fw, i)
	nic1 := m.nics[0]
	l.bootChecked(a, m, arch)

	if at, ok := l.firstPacket(proxyReplyTo(a, nic1)); ok {
		t.Errorf("the agent answered NIC 1 (%s), which has no entry, at %v", nic1, at.Format(time.StampMilli))
	}
	if _, ok := l.firstPacket(proxyReplyTo(a, m.mac)); !ok {
		t.Errorf("no proxy DHCP reply to NIC 2 (%s) on the wire", m.mac)
	}
	if _, ok := l.firstPacket("udp dst port 67 and " + bootpChaddr(nic1)); !ok {
		t.Errorf("NIC 1 (%s) never asked: the firmware did not try it first, so the test shows nothing", nic1)
	}
	var scripts []string
	for _, r := range l.httpRequests(a.host.IP) {
		if strings.HasPrefix(r, "GET /boot/ipxe?") {
			scripts = append(scripts, r)
		}
	}
	if len(scripts) == 0 {
		t.Errorf("no request for /boot/ipxe on the wire")
	}
	for _, r := range scripts {
		if !strings.Contains(r, "mac="+hexhyp(m.mac)) {
			t.Errorf("the chain script asked %q, want NIC 2's MAC %s", r, hexhyp(m.mac))
		}
	}

	found, ok := l.discoveredWithin(a.name, discoveryWait, listsMAC(nic1))
	if !ok {
		t.Fatalf("NIC 1 (%s) never listed as discovered: %+v", nic1, found)
	}
	if slices.ContainsFunc(found, func(d sitelink.DiscoveredMachine) bool { return d.MAC == m.mac.String() }) {
		t.Errorf("NIC 2 (%s), which has an entry, listed as discovered: %+v", m.mac, found)
	}
	i1 := slices.IndexFunc(found, func(d sitelink.DiscoveredMachine) bool { return d.MAC == nic1.String() })
	if u, err := hwid.ParseUUID(found[i1].ProductUUID); err != nil || !hwid.SameMachine(u, m.uuid) {
		t.Errorf("NIC 1 discovered as %+v, want a spelling of the machine's UUID %s", found[i1], m.uuid)
	}
	if n := a.metrics().sum("siteboot_proxydhcp_silent_total", `reason="unknown"`); n < 1 {
		t.Errorf("proxy DHCP was silent for an unknown NIC %v times", n)
	}
}

// TestE2E_TwoNICsBIOS: SeaBIOS runs QEMU's iPXE ROM of NIC 1, then of NIC 2; iPXE on NIC 2
// numbers it net1, and boots through it.
func TestE2E_TwoNICsBIOS(t *testing.T) {
	t.Parallel()
	twoNICs(t, fwBIOS, 0x21, sitelink.ArchBIOS)
}

// TestE2E_TwoNICsUEFIPXE: OVMF's PXE tries NIC 1, then NIC 2, which loads ipxe.efi; iPXE
// sees both NICs and boots through the one it was loaded from.
func TestE2E_TwoNICsUEFIPXE(t *testing.T) {
	t.Parallel()
	twoNICs(t, fwUEFIPXE, 0x22, sitelink.ArchX86UEFI)
}

// relayLab is a lab whose agent also serves a second segment behind dnsmasq's DHCP relay.
func relayLab(t *testing.T) (*lab, *labAgent) {
	l := newLab(t, 2)
	a := l.startAgent("agent-a", 1)
	l.addRelay(a)
	l.waitActive(a)
	return l, a
}

// checkRelayed checks on the first segment's wire that m's DHCP went through the relay: the
// relay forwarded m's requests to the agent (dnsmasq relays from its giaddr,
// testpeer.RouterIP) and, when answered, the agent's replies went back to the relay.
func (l *lab) checkRelayed(a *labAgent, m *machine, answered bool) {
	t := l.t
	t.Helper()
	relayed := "udp dst port 67 and src host " + testpeer.RouterIP.String() + " and dst host " + a.host.IP.String() + " and " + bootpChaddr(m.mac)
	if _, ok := l.firstPacket(relayed); !ok {
		t.Errorf("no request of %s relayed to %s on the wire", m.mac, a.name)
	}
	if !answered {
		return
	}
	if _, ok := l.firstPacket("udp src port 67 and src host " + a.host.IP.String() + " and dst host " + testpeer.RouterIP.String() + " and " + bootpChaddr(m.mac)); !ok {
		t.Errorf("no proxy DHCP reply of %s to the relay %s for %s on the wire", a.name, testpeer.RouterIP, m.mac)
	}
}

// TestE2E_RelayBIOS: a BIOS machine on the segment behind the relay boots through it: the
// relay forwards its DHCP to the site's server and to the agent, and the agent's proxy
// reply reaches iPXE through the relay.
func TestE2E_RelayBIOS(t *testing.T) {
	t.Parallel()
	l, a := relayLab(t)
	m := newMachine("relay-bios", fwBIOS, 0x31)
	m.routed = true
	l.bootChecked(a, m, sitelink.ArchBIOS)
	l.checkRelayed(a, m, true)
}

// TestE2E_RelayUEFIPXE: OVMF's PXE behind the relay gets the proxy offer through it, asks
// the agent on port 4011 across the router, loads ipxe.efi over TFTP, and iPXE then boots
// through the relay too.
func TestE2E_RelayUEFIPXE(t *testing.T) {
	t.Parallel()
	l, a := relayLab(t)
	m := newMachine("relay-uefi", fwUEFIPXE, 0x32)
	m.routed = true
	l.bootChecked(a, m, sitelink.ArchX86UEFI)
	l.checkRelayed(a, m, true)
}

// TestE2E_RelayUnknown: an unknown machine behind the relay gets no answer and is listed as
// discovered with the relay's address.
func TestE2E_RelayUnknown(t *testing.T) {
	t.Parallel()
	l, a := relayLab(t)
	l.waitReady(a.name)
	m := newMachine("relay-unknown", fwBIOS, 0x33)
	m.routed = true
	l.powerOn(m, bootOpts{rebootOnFail: true})
	l.checkSilent(m, a)
	l.checkRelayed(a, m, false)
	found, ok := l.discoveredWithin(a.name, discoveryWait, listsMAC(m.mac))
	if !ok {
		t.Fatalf("the unknown machine behind the relay never listed as discovered: %+v", found)
	}
	d := found[slices.IndexFunc(found, func(d sitelink.DiscoveredMachine) bool { return d.MAC == m.mac.String() })]
	if d.Relay != testpeer.RouterIP.String() {
		t.Errorf("discovered %+v, want relay %s (the giaddr the relay sets)", d, testpeer.RouterIP)
	}
	if d.Arch != "bios" || d.Count < 1 {
		t.Errorf("discovered %+v, want arch bios", d)
	}
}

// TestE2E_UUIDMismatch: the agent has an entry for the machine's MAC, but with another
// machine's SMBIOS UUID (in none of its three spellings): the machine's option 97 does not
// match, so proxy DHCP stays silent, for a reason of its own, and the firmware falls through.
func TestE2E_UUIDMismatch(t *testing.T) {
	t.Parallel()
	l := newLab(t, 2)
	a := l.startAgent("agent-a", 1)
	l.waitActive(a)
	m := newMachine("uuid-mismatch", fwBIOS, 0x41)
	other, err := hwid.ParseUUID("8a5c1e0b-7d2f-4e36-9b41-0c6d2e8f7a13")
	if err != nil || hwid.SameMachine(other, m.uuid) {
		t.Fatalf("the entry's UUID %s must not be a spelling of the machine's %s (%v)", other, m.uuid, err)
	}
	l.plane.PrepareRamdisk(a.name, []sitelink.ProxyDhcpEntry{{
		MAC: m.mac, UUID: other.String(), Arch: sitelink.ArchBIOS, Workflow: m.workflow(), TokenRef: m.tokenRef(),
		NotAfter: time.Now().Add(time.Hour),
	}})
	l.waitReady(a.name)
	l.powerOn(m, bootOpts{rebootOnFail: true})
	l.checkSilent(m, a)
	if _, ok := l.firstPacket("udp dst port 67 and " + bootpChaddr(m.mac)); !ok {
		t.Fatalf("the machine never asked: the silence shows nothing")
	}
	mt := a.metrics()
	silent := map[string]float64{}
	for k, v := range mt {
		if base, lbl, _ := strings.Cut(k, "{"); base == "siteboot_proxydhcp_silent_total" && v > 0 {
			_, r, _ := strings.Cut(lbl, `reason="`)
			r, _, _ = strings.Cut(r, `"`)
			silent[r] += v
		}
	}
	t.Logf("proxy DHCP silences by reason: %v", silent)
	if n := mt.sum("siteboot_proxydhcp_answered_total"); n != 0 {
		t.Errorf("proxy DHCP answered %v requests of a machine whose UUID is not its entry's", n)
	}
	// The agent declines the machine (its MAC has an entry, so it is not unknown) and counts
	// why: the UUID.
	if silent["declined"] < 1 || silent["unknown"] > 0 {
		t.Errorf("silences by reason %v: want the machine declined, never unknown (its MAC has an entry)", silent)
	}
	if n := mt.sum("siteboot_boot_mismatch_total", `where="dhcp"`, `reason="uuid-mismatch"`); n < 1 {
		t.Errorf("siteboot_boot_mismatch_total{where=dhcp,reason=uuid-mismatch} = %v, want the silence counted as a UUID mismatch", n)
	}
	// Why didn't it boot? The agent's explain names both UUIDs.
	if code, out := a.explain(t, m.mac); code != 0 || !strings.Contains(out, "is not its entry's "+other.String()) {
		t.Errorf("siteagent explain %s: exit %d, want 0 and a UUID mismatch naming the entry's %s\n%s", m.mac, code, other, out)
	} else {
		t.Logf("siteagent explain %s:\n%s", m.mac, out)
	}
}
