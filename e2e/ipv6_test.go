package e2e_test

import (
	"context"
	"net/http"
	"net/netip"
	"net/url"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/assertion"
	"github.com/bettercompute/siteboot/internal/testpeer"
	"github.com/bettercompute/siteboot/sitelink"
)

// Firmware that boots over IPv6 only (machine_test.go's powerOn).
const (
	fwUEFIPXE6  firmware = "uefi-pxe6"  // OVMF's EDK2 IPv6 PXE (IPv4 PXE off)
	fwUEFIHTTP6 firmware = "uefi-http6" // OVMF's EDK2 HTTP boot (PXE off) on a segment with no IPv4 DHCP
)

// The IPv6-only segment: the site's DHCPv6 server (dnsmasq, host 0) at site6, agent host i
// at agent6(i), machines' leases in lease6First..lease6Last.
var (
	site6       = netip.MustParseAddr("2001:db8::10")
	lease6First = netip.MustParseAddr("2001:db8::100")
	lease6Last  = netip.MustParseAddr("2001:db8::1ff")
)

func agent6(i int) netip.Addr {
	a := site6.As16()
	a[15] = byte(0x10 + i)
	return netip.AddrFrom16(a)
}

// newLab6 builds an IPv6-only segment for machines: as newLab (the control plane, the image
// origin and the capture on the bridge namespace, agents on hosts 1..), but the site's
// server on host 0 is dnsmasq sending router advertisements (M flag: stateful DHCPv6) and
// leasing addresses by DHCPv6, with no IPv4 DHCP at all. Over stateful DHCPv6 iPXE uses only
// the address server's settings (proxydhcp's doc, "DHCPv6"), so dnsmasq names the chain URL
// of the agent on host 1 to the user class iPXE, as a site's server must. The agents run
// with boot.server_ip6 and boot.dhcpv6 (and TFTP and HTTP dual-stack).
func newLab6(t *testing.T, hosts int) *lab { return newLabIPv6(t, hosts, false) }

// newLabIPv6 is newLab6; with dual, dnsmasq also leases IPv4 addresses (192.0.2.100-199),
// so the segment is dual-stack.
func newLabIPv6(t *testing.T, hosts int, dual bool) *lab {
	t.Helper()
	return startLabIPv6(t, hosts, dual, "http")
}

// startLabIPv6 is newLabIPv6 where dnsmasq names the agent's chain URL under scheme
// ("http", or "https" for agents that boot over https).
func startLabIPv6(t *testing.T, hosts int, dual bool, scheme string) *lab {
	t.Helper()
	l := startLab(t, hosts, "ipxe.efi")
	l.bootExtra = "server_ip6 = \"2001:db8::1{i}\"\ndhcpv6     = true\n"
	for i, h := range l.seg.Hosts {
		addr := site6
		if i > 0 {
			addr = agent6(i)
		}
		h.Run(t, "ip", "-6", "addr", "add", addr.String()+"/64", "dev", h.Iface, "nodad")
	}

	h := l.seg.Hosts[0]
	chain := scheme + "://[" + agent6(1).String() + "]/boot/chain.ipxe"
	var v4 []string
	if dual {
		v4 = []string{"--no-ping", "--dhcp-range=192.0.2.100,192.0.2.199,255.255.255.0,10m"}
	}
	l.dnsmasq = testpeer.Start(t, testpeer.Cmd{
		Path: "dnsmasq",
		Args: append(v4,
			"--no-daemon", "--conf-file=/dev/null", "--port=0", "--user=root", "--group=root",
			"--interface="+h.Iface, "--bind-interfaces", "--log-dhcp", "--log-facility=-",
			"--enable-ra", "--dhcp-range="+lease6First.String()+","+lease6Last.String()+",64,10m",
			"--dhcp-userclass=set:ipxe,iPXE",
			"--dhcp-option=tag:ipxe,option6:bootfile-url,"+chain,
			"--dhcp-leasefile="+filepath.Join(l.dir, "dnsmasq.leases"),
			"--pid-file="+filepath.Join(l.dir, "dnsmasq.pid"),
		),
		Netns: h.Netns, ReadyLog: "DHCPv6",
	})
	return l
}

// checkBooted6 is checkBooted for a machine that booted over IPv6: the assertion verifies
// and names the machine's MAC, its UUID and its DHCPv6 lease (the address its script request
// came from), and bc.cache is a grant of the agent's cache under its bracketed IPv6 address.
func (l *lab) checkBooted6(m *machine, words []string, by *labAgent, at netip.Addr) assertion.Assertion {
	t := l.t
	t.Helper()
	ctx := context.Background()
	a, err := l.verifier.Verify(ctx, param(words, "bc.assertion"), assertion.Join{Site: siteID, MACs: m.nics, UUID: m.uuid})
	if err != nil {
		t.Fatalf("the assertion on %s's command line is refused: %v\ncommand line: %q", m.name, err, words)
	}
	rec, _ := l.plane.LeaseRecord(ctx, siteID)
	if a.Agent != by.name || rec.Holder != by.name || a.Epoch != rec.Epoch || a.Epoch == 0 {
		t.Errorf("assertion by %s at epoch %d; lease %v", a.Agent, a.Epoch, rec)
	}
	if a.MAC != m.mac || a.UUID != m.uuid {
		t.Errorf("assertion MAC %s UUID %s, want %s %s", a.MAC, a.UUID, m.mac, m.uuid)
	}
	if !a.IP.Is6() || a.IP.Less(lease6First) || lease6Last.Less(a.IP) {
		t.Errorf("assertion IP %s, want the machine's DHCPv6 lease in %s-%s", a.IP, lease6First, lease6Last)
	}
	if want := l.plane.TokenFor(m.workflow(), m.tokenRef()); want == "" || param(words, "bc.token") != want {
		t.Errorf("bc.token %q, want the token minted for the entry %q", param(words, "bc.token"), want)
	}
	if c, want := param(words, "bc.cache"), "http://["+at.String()+"]/cache/t/"; !strings.HasPrefix(c, want) {
		t.Errorf("bc.cache %q, want a grant of %s's cache under %s", c, by.name, want)
	}
	t.Logf("%s booted over IPv6: assertion for %s at %s by %s, epoch %d", m.name, a.MAC, a.IP, a.Agent, a.Epoch)
	return a
}

// http6Requests are the request lines the capture saw machines send to server's port 80
// over IPv6.
func (l *lab) http6Requests(server netip.Addr) []string {
	out, err := exec.Command("tcpdump", "-r", l.capture, "-n", "-A", "ip6 and tcp dst port 80 and dst host "+server.String()).Output()
	if err != nil {
		l.t.Fatalf("tcpdump -r %s: %v", l.capture, err)
	}
	var reqs []string
	for _, m := range requestLineRE.FindAllSubmatch(out, -1) {
		reqs = append(reqs, string(m[1])+" "+string(m[2]))
	}
	return reqs
}

// exchange6 logs the DHCPv6 and TFTP exchange of the capture, for the record.
func (l *lab) exchange6() {
	out, _ := exec.Command("tcpdump", "-r", l.capture, "-n", "-tt", "-v", "ip6 and (udp port 546 or udp port 547 or udp port 4011 or (udp port 69))").CombinedOutput()
	l.t.Logf("DHCPv6 and TFTP requests on the segment (last 6000 bytes):\n%s", tail(out, 6000))
}

func bootIPv6(t *testing.T, fw firmware, i byte) {
	l := newLab6(t, 2)
	a := l.startAgent("agent-a", 1)
	l.waitActive(a)
	m := newMachine(string(fw), fw, i)
	l.prepare(a.name, m, sitelink.ArchX86UEFI)
	before := a.metrics()
	l.powerOn(m, bootOpts{})
	words := m.waitCmdline(t)
	t.Logf("%s: power-on to kernel %v, to the ramdisk's command line %v", m.name, m.kernel.Sub(m.start).Round(100*time.Millisecond), timeSince(m.start))
	as := l.checkBooted6(m, words, a, agent6(1))
	after := a.metrics()
	// iPXE took its chain URL from dnsmasq (stateful DHCPv6: no nonce), so the script was
	// bound by the pass of the agent's DHCPv6 answer to the firmware; and the chain script
	// sent iPXE's ${netX/ip6}, which is the lease the assertion names.
	if n := after.sum("siteboot_boot_v6_passes_total", `event="used"`); n < 1 {
		t.Errorf("%v IPv6 boot passes used, want the script request's", n)
	}
	var script string
	for _, r := range l.http6Requests(agent6(1)) {
		if strings.HasPrefix(r, "GET /boot/ipxe?") {
			script = r
		}
	}
	_, query, _ := strings.Cut(script, "?")
	if q, err := url.ParseQuery(query); err != nil || q.Get("ip") != as.IP.String() {
		t.Errorf("script request %q, want ip=%s (iPXE's ${netX/ip6})", script, as.IP)
	}
	t.Logf("script request: %s", script)
	if served := after.sum("siteboot_cache_served_total") - before.sum("siteboot_cache_served_total"); served < 2 {
		t.Errorf("the cache served %v requests during the boot, want the kernel and the initrd", served)
	}
	if n := after.sum("siteboot_proxydhcp_answered_total", `port="547"`); n < 1 {
		t.Errorf("proxy DHCP answered %v DHCPv6 requests", n)
	}
	reqs := l.http6Requests(agent6(1))
	for _, want := range []string{"GET /boot/chain.ipxe", "GET /boot/files/ipxe.efi"} {
		if want == "GET /boot/files/ipxe.efi" && fw != fwUEFIHTTP6 {
			continue
		}
		if !slices.Contains(reqs, want) {
			t.Errorf("no %q over IPv6 among %q", want, reqs)
		}
	}
	if fw == fwUEFIPXE6 {
		if n := after.sum("siteboot_proxydhcp_answered_total", `port="4011"`); n < 1 {
			t.Errorf("proxy DHCP answered %v boot-server requests (4011)", n)
		}
		if n := after.sum("siteboot_tftp_transfers_total", `outcome="ok"`); n != 1 {
			t.Errorf("%v TFTP transfers completed, want ipxe.efi over IPv6", n)
		}
	}
	l.exchange6()
}

// TestE2E_IPv6PXE: on an IPv6-only segment, OVMF's IPv6 PXE takes the agent's DHCPv6
// ADVERTISE beside dnsmasq's, asks the agent again on [::]:4011, loads ipxe.efi over TFTP
// from [agent]; iPXE gets its address and the chain URL from dnsmasq (stateful DHCPv6) and
// boots the ramdisk from the agent over IPv6: the assertion names the machine's DHCPv6
// lease, the cache URLs the agent's bracketed address.
func TestE2E_IPv6PXE(t *testing.T) {
	t.Parallel()
	bootIPv6(t, fwUEFIPXE6, 0x61)
}

// TestE2E_IPv6HTTPBoot: the same with OVMF's HTTP boot (PXE off): it takes the agent's
// HTTPClient ADVERTISE and fetches ipxe.efi from http://[agent]/boot/files/ipxe.efi.
func TestE2E_IPv6HTTPBoot(t *testing.T) {
	t.Parallel()
	bootIPv6(t, fwUEFIHTTP6, 0x62)
}

// silent6 waits until the agent was silent for the machine's DHCPv6 requests at least twice
// for reason, then checks that the capture holds no DHCPv6 answer from the agent.
func (l *lab) silent6(a *labAgent, m *machine, reason string) {
	t := l.t
	t.Helper()
	if !waitFor(bootTimeout, func() bool {
		return a.metrics().sum("siteboot_proxydhcp_silent_total", `port="547"`, `reason="`+reason+`"`) >= 2
	}) {
		t.Fatalf("%s was never silent (%s) for %s's DHCPv6 requests", a.name, reason, m.name)
	}
	// The agent's DHCPv6 replies would leave from its link-local address (to a multicast
	// request) or its global one.
	var ll string
	for _, f := range strings.Fields(a.host.Run(t, "ip", "-6", "-o", "addr", "show", "dev", a.host.Iface, "scope", "link")) {
		if p, err := netip.ParsePrefix(f); err == nil && p.Addr().IsLinkLocalUnicast() {
			ll = p.Addr().String()
		}
	}
	if ll == "" {
		t.Fatalf("%s has no link-local address", a.name)
	}
	if at, ok := l.firstPacket("ip6 and udp and (src host " + ll + " or src host " + agent6(1).String() + ") and (src port 547 or src port 4011)"); ok {
		t.Errorf("%s sent a DHCPv6 reply at %v", a.name, at.Format(time.StampMilli))
	}
	mt := a.metrics()
	if n := mt.sum("siteboot_proxydhcp_answered_total"); n != 0 {
		t.Errorf("proxy DHCP answered %v requests", n)
	}
	if reqs := l.http6Requests(agent6(1)); len(reqs) != 0 {
		t.Errorf("the machine asked the agent for %q", reqs)
	}
}

// TestE2E_IPv6Unknown: a machine without an entry that PXE-boots over IPv6 gets no DHCPv6
// answer and is listed as discovered, with the MAC read from its EUI-64 link-local address
// (OVMF sends a DUID-UUID) and its UUID from that DUID.
func TestE2E_IPv6Unknown(t *testing.T) {
	t.Parallel()
	l := newLab6(t, 2)
	a := l.startAgent("agent-a", 1)
	l.waitActive(a)
	l.waitReady(a.name)
	m := newMachine("unknown6", fwUEFIPXE6, 0x63)
	l.powerOn(m, bootOpts{})
	l.silent6(a, m, "unknown")
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
	// The list keeps the last arch sent: OVMF's IPv6 HTTP boot (arch 16) follows its PXE.
	if d := found[i]; d.ProductUUID != m.uuid.SMBIOS().String() || (d.Arch != "x86_64-efi" && d.Arch != "x86_64-efi-http") {
		t.Errorf("discovered %+v, want UUID %s (QEMU's %s as EDK2's DUID-UUID carries it), arch x86_64-efi or x86_64-efi-http", d, m.uuid.SMBIOS(), m.uuid)
	}
	m.p.Stop()
}

// TestE2E_IPv6Fenced: another agent holds the lease; ours has an entry for the machine and
// stays silent over DHCPv6 too (reason fenced), and its script over IPv6 answers 503.
func TestE2E_IPv6Fenced(t *testing.T) {
	t.Parallel()
	l := newLab6(t, 2)
	l.holdLease("agent-holder")
	a := l.startAgent("agent-a", 1)
	m := newMachine("fenced6", fwUEFIPXE6, 0x64)
	l.prepare(a.name, m, sitelink.ArchX86UEFI)
	if a.active() {
		t.Fatalf("%s is active while agent-holder holds the lease", a.name)
	}
	l.powerOn(m, bootOpts{})
	l.silent6(a, m, "fenced")
	u := "http://[" + agent6(1).String() + "]/boot/ipxe?mac=" + m.mac.String()
	if st, _ := get(l.seg.Hosts[0].Netns, u); st != http.StatusServiceUnavailable {
		t.Errorf("the fenced agent's script over IPv6 answered %d, want 503", st)
	}
	m.p.Stop()
}

// TestE2E_IPv6DualStack: on a dual-stack segment (dnsmasq leasing IPv4 and, by stateful
// DHCPv6, IPv6 addresses), one agent with IPv6 on boots two machines at once, each's
// firmware over the family it tries: OVMF with its defaults tries IPv4 PXE first (proxy
// DHCP on 67 and 4011, TFTP over IPv4), OVMF with IPv4 PXE off boots over IPv6. The agent's
// TFTP and HTTP are one dual-stack socket each. iPXE then goes on over whichever family its
// boot file URL names: Debian's iPXE, configured by both DHCPv4 and DHCPv6, takes the
// DHCPv6 server's chain URL over the IPv4 proxy's, so both machines' scripts come over IPv6
// (bound by the boot pass their firmware's answer issued). Each boot's assertion and cache
// URL are checked for the family the script came over.
func TestE2E_IPv6DualStack(t *testing.T) {
	t.Parallel()
	l := newLabIPv6(t, 2, true)
	a := l.startAgent("agent-a", 1)
	l.waitActive(a)
	m4 := newMachine("dual-v4first", fwUEFIPXE, 0x65)
	m6 := newMachine("dual-v6only", fwUEFIPXE6, 0x66)
	l.prepare(a.name, m4, sitelink.ArchX86UEFI)
	l.prepare(a.name, m6, sitelink.ArchX86UEFI)
	l.powerOn(m4, bootOpts{})
	l.powerOn(m6, bootOpts{})
	for _, m := range []*machine{m4, m6} {
		words := m.waitCmdline(t)
		over := "IPv4"
		if strings.HasPrefix(param(words, "bc.cache"), "http://[") {
			over = "IPv6"
			l.checkBooted6(m, words, a, agent6(1))
		} else {
			l.checkBooted(m, words, a)
		}
		t.Logf("%s (%s): script and ramdisk over %s; power-on to the ramdisk's command line %v", m.name, m.fw, over, timeSince(m.start))
		if m == m6 && over != "IPv6" {
			t.Errorf("%s has IPv4 PXE off but booted over %s", m.name, over)
		}
	}
	// The IPv4-first firmware read ipxe.efi over IPv4, the other over IPv6: one socket.
	for _, filter := range []string{"ip and udp dst port 69 and dst host " + a.host.IP.String(), "ip6 and udp dst port 69 and dst host " + agent6(1).String()} {
		if _, ok := l.firstPacket(filter); !ok {
			t.Errorf("no TFTP request in the capture for %q", filter)
		}
	}
	mt := a.metrics()
	for _, port := range []string{"67", "547"} {
		if n := mt.sum("siteboot_proxydhcp_answered_total", `port="`+port+`"`); n < 1 {
			t.Errorf("proxy DHCP answered %v requests on port %s", n, port)
		}
	}
	l.exchange6()
}
