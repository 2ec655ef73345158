package e2e_test

import (
	"net"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/ipxebin"
	"github.com/bettercompute/siteboot/sitelink"
)

// TestE2E_IPv6HTTPS: on an IPv6-only segment, the agent boots over https under a boot
// certificate for its IPv4 and IPv6 boot addresses, plain HTTP refused. OVMF's IPv6 PXE
// loads the agent's snponly build (patched to trust the boot CA) over TFTP from the agent's
// IPv6 address; iPXE takes its address and the https chain URL from dnsmasq (stateful
// DHCPv6) and fetches the chain, the script, the kernel and the initrd over https from
// [agent]:443. The assertion names the machine's DHCPv6 lease, the cache URL is an https
// grant under the agent's bracketed address, no plain HTTP request crossed the segment over
// IPv6, and the capture holds none of the secrets handed out.
func TestE2E_IPv6HTTPS(t *testing.T) {
	t.Parallel()
	l := startLabIPv6(t, 2, false, "https")
	capture, stopCapture := fullCapture(l)
	at := agent6(1)
	ca := newBootCA(t, l.dir, "boot CA", net.IP(l.seg.Hosts[1].IP.AsSlice()), net.IP(at.AsSlice()))
	l.tftpRoot = "" // the agent's own builds, trusting the boot CA
	l.bootExtra += ca.bootTLSKeys()
	a := l.startAgent("agent-a", 1)
	l.waitActive(a)

	m := newMachine("ipv6-https", fwUEFIPXE6, 0xa4)
	l.prepare(a.name, m, sitelink.ArchX86UEFI)
	before := a.metrics()
	l.powerOn(m, bootOpts{})
	words := m.waitCmdline(t)
	m.logSlow(t, time.Minute)
	t.Logf("%s: power-on to kernel %v over IPv6 and https, to the ramdisk's command line %v", m.name,
		m.kernel.Sub(m.start).Round(100*time.Millisecond), timeSince(m.start))

	// Before the capture stops: what crossed the segment over IPv6.
	if reqs := l.http6Requests(at); len(reqs) != 0 {
		t.Errorf("plain HTTP requests to the agent over IPv6 on the wire: %q", reqs)
	}
	// iPXE took its chain URL from dnsmasq (stateful DHCPv6: no nonce): the script request
	// was bound by the pass of the agent's DHCPv6 answer to the firmware.
	if n := a.metrics().sum("siteboot_boot_v6_passes_total", `event="used"`); n < 1 {
		t.Errorf("%v IPv6 boot passes used, want the script request's", n)
	}
	as := l.checkBootedHTTPS(m, words, a, at, before, capture, stopCapture, ipxebin.SnponlyX8664)
	if !as.IP.Is6() || as.IP.Less(lease6First) || lease6Last.Less(as.IP) || as.MAC != m.mac || as.Agent != a.name {
		t.Errorf("assertion for %s at %s by %s, want %s at its DHCPv6 lease in %s-%s by %s", as.MAC, as.IP, as.Agent, m.mac, lease6First, lease6Last, a.name)
	}
}
