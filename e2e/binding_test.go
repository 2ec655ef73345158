package e2e_test

import (
	"bytes"
	"encoding/binary"
	"net"
	"net/netip"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/hwid"
	"github.com/bettercompute/siteboot/internal/testpeer"
	"github.com/bettercompute/siteboot/sitelink"
)

// ipxeBootRequest is a DHCPREQUEST as iPXE sends it to a proxy's port 4011 (dhcp.c
// dhcp_proxy_tx) for mac from the address ciaddr: user class iPXE, arch 7, no UUID. With
// firmware set it is the firmware's own (EDK2's PXE) request instead: no user class.
func ipxeBootRequest(mac hwid.MAC, ciaddr netip.Addr, firmware bool) []byte {
	b := make([]byte, 240, 300)
	b[0], b[1], b[2] = 1, 1, 6
	binary.BigEndian.PutUint32(b[4:8], 0x38380001)
	c := ciaddr.As4()
	copy(b[12:16], c[:])
	copy(b[28:34], mac[:])
	copy(b[236:240], []byte{99, 130, 83, 99})
	opt := func(code byte, v ...byte) { b = append(append(b, code, byte(len(v))), v...) }
	opt(53, 3)
	opt(60, []byte("PXEClient:Arch:00007:UNDI:003010")...)
	opt(93, 0, 7)
	if !firmware {
		opt(77, []byte("iPXE")...)
	}
	b = append(b, 255)
	for len(b) < 300 {
		b = append(b, 0)
	}
	return b
}

// routedHost adds a host on the lab's routed segment (behind the router, not through any
// relay) at ip, with a default route through the router.
func (l *lab) routedHost(ip string) *testpeer.Netns {
	t := l.t
	t.Helper()
	if l.routed == nil {
		l.routed = l.seg.AddRouted(t)
	}
	far := testpeer.NewNetns(t)
	r := l.routed.Router
	r.Run(t, "ip", "link", "add", "vfar", "type", "veth", "peer", "name", "eth0", "netns", far.Name())
	r.Run(t, "ip", "link", "set", "vfar", "master", "br1", "up")
	far.Run(t, "ip", "addr", "add", ip+"/24", "dev", "eth0")
	far.Run(t, "ip", "link", "set", "eth0", "up")
	far.Run(t, "ip", "route", "add", "default", "via", testpeer.RouterIP.String())
	return far
}

// askFrom sends req from ns (port 68 of ip) to the agent's port 4011 and returns every
// datagram that comes back within wait.
func askFrom(t *testing.T, ns *testpeer.Netns, ip string, to netip.Addr, req []byte, wait time.Duration) [][]byte {
	t.Helper()
	var conn net.PacketConn
	if err := ns.Do(func() (err error) {
		conn, err = net.ListenPacket("udp4", ip+":68")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.WriteTo(req, net.UDPAddrFromAddrPort(netip.AddrPortFrom(to, 4011))); err != nil {
		t.Fatal(err)
	}
	var got [][]byte
	conn.SetReadDeadline(time.Now().Add(wait))
	for {
		buf := make([]byte, 1500)
		n, _, err := conn.ReadFrom(buf)
		if err != nil {
			return got
		}
		got = append(got, buf[:n])
	}
}

// TestE2E_OffSegmentRequester: a host on another network, routed to
// the boot segment and behind no relay (198.51.100.77), sends iPXE's port-4011 REQUEST for a
// MAC the agent has an entry for: no answer, no nonce, counted as off-segment. Its firmware
// REQUEST for the MAC issues no IPv6 boot pass (dual stack, DHCPv6 on), so a host on the
// segment polling /boot/ipxe over IPv6 for the MAC gets no secret; nor does the routed host
// asking /boot/ipxe without a nonce.
func TestE2E_OffSegmentRequester(t *testing.T) {
	t.Parallel()
	l := newLabIPv6(t, 3, true)
	a := l.startAgent("agent-a", 1)
	l.waitActive(a)
	m := newMachine("off-segment", fwUEFIPXE, 0x51)
	l.prepare(a.name, m, sitelink.ArchX86UEFI)
	farIP := "198.51.100.77"
	far := l.routedHost(farIP)

	for _, firmware := range []bool{false, true} {
		if got := askFrom(t, far, farIP, a.host.IP, ipxeBootRequest(m.mac, netip.MustParseAddr(farIP), firmware), 3*time.Second); len(got) != 0 {
			t.Errorf("the routed host's 4011 REQUEST (firmware %v) got %d answers: %q", firmware, len(got), got)
		}
	}
	mt := a.metrics()
	if n := mt.sum("siteboot_proxydhcp_silent_total", `port="4011"`, `reason="off-segment"`); n < 2 {
		t.Errorf("off-segment silences on 4011: %v, want 2", n)
	}
	if n := mt.sum("siteboot_boot_v6_passes_total", `event="issued"`); n != 0 {
		t.Errorf("%v IPv6 boot passes issued for the off-segment firmware REQUEST", n)
	}
	if st, body := get(far, "http://"+a.host.IP.String()+"/boot/ipxe?mac="+m.mac.String()); !refused(st, body) {
		t.Errorf("the routed host's script request: status %d, secrets %v", st, hasSecrets(body))
	}
	// A host on the segment at 2001:db8::99 polls for the MAC over IPv6.
	h := l.seg.Hosts[2]
	h.Run(t, "ip", "-6", "addr", "add", "2001:db8::99/64", "dev", h.Iface, "nodad")
	u := "http://[" + agent6(1).String() + "]/boot/ipxe?mac=" + m.mac.String()
	for range 3 {
		if st, body := get(h.Netns, u); !refused(st, body) {
			t.Errorf("a host on the segment polling over IPv6: status %d, secrets %v", st, hasSecrets(body))
		}
	}
}

// refused says whether a script answer turned the requester away: the exit script (a 200,
// so that iPXE runs it and the firmware moves on) or any other status than 200, with no
// secret either way.
func refused(status int, body string) bool {
	if hasSecrets(body) {
		return false
	}
	return status != 200 || (strings.HasSuffix(strings.TrimSpace(body), "exit 1") && !strings.Contains(body, "kernel"))
}

func hasSecrets(body string) bool {
	return strings.Contains(body, "bc.token=") || strings.Contains(body, "bc.assertion=") || strings.Contains(body, "/cache/t/")
}

var chainNonceRE = regexp.MustCompile(`chain\.ipxe\?n=([0-9a-f]{32})`)

// TestE2E_BroadcastBystander: a host on the bridge listens on UDP 68, as
// any host there can, while a BIOS machine boots through iPXE: it reads the proxy offers the
// agent broadcasts, and none names a nonce (iPXE gets its chain URL in the unicast answer to
// its port-4011 REQUEST). Any nonce it did read, presented from its own address, would get no
// secret; the machine boots.
func TestE2E_BroadcastBystander(t *testing.T) {
	t.Parallel()
	l := newLab(t, 3)
	a := l.startAgent("agent-a", 1)
	l.waitActive(a)
	h := l.seg.Hosts[2]
	var conn net.PacketConn
	if err := h.Do(func() (err error) {
		conn, err = net.ListenPacket("udp4", "0.0.0.0:68")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var offers, nonces []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 1500)
		for {
			n, from, err := conn.ReadFrom(buf)
			if err != nil {
				return
			}
			if !strings.HasPrefix(from.String(), a.host.IP.String()+":") || n < 240 {
				continue
			}
			mu.Lock()
			offers = append(offers, string(bytes.TrimRight(buf[108:236], "\x00")))
			for _, x := range chainNonceRE.FindAllSubmatch(buf[:n], -1) {
				nonces = append(nonces, string(x[1]))
			}
			mu.Unlock()
		}
	}()
	m := newMachine("bystander", fwBIOS, 0x52)
	l.bootChecked(a, m, sitelink.ArchBIOS)
	conn.Close()
	<-done
	mu.Lock()
	defer mu.Unlock()
	t.Logf("the bystander read %d proxy offers from the agent (boot files %q) and %d nonces", len(offers), offers, len(nonces))
	if len(offers) == 0 {
		t.Fatal("the bystander read no broadcast from the agent: it shows nothing")
	}
	if len(nonces) != 0 {
		t.Errorf("broadcasts named %d nonces: %v", len(nonces), nonces)
	}
	for _, n := range nonces {
		if st, body := get(h.Netns, "http://"+a.host.IP.String()+"/boot/ipxe?mac="+m.mac.String()+"&n="+n); !refused(st, body) {
			t.Errorf("the bystander presenting a nonce it read: status %d, secrets %v", st, hasSecrets(body))
		}
	}
}
