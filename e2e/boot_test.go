package e2e_test

import (
	"bytes"
	"encoding/hex"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/sitelink"
)

// bootOne runs one agent and one machine with a boot entry, and checks the boot end to end.
func bootOne(t *testing.T, fw firmware, i byte, arch string) (*lab, *labAgent, *machine) {
	l := newLab(t, 2)
	a := l.startAgent("agent-a", 1)
	l.waitActive(a)
	m := newMachine(string(fw), fw, i)
	l.bootChecked(a, m, arch)
	return l, a, m
}

// bootChecked gives a an entry for m (on m.mac, with arch), powers m on, and checks that it
// booted the ramdisk through a, with the kernel and initrd from a's cache.
func (l *lab) bootChecked(a *labAgent, m *machine, arch string) []string {
	t := l.t
	t.Helper()
	l.prepare(a.name, m, arch)
	before := a.metrics()
	l.powerOn(m, bootOpts{})
	words := m.waitCmdline(t)
	m.logSlow(t, time.Minute)
	t.Logf("%s: power-on to kernel %v, to the ramdisk's command line %v", m.name, m.kernel.Sub(m.start).Round(100*time.Millisecond), timeSince(m.start))
	l.checkBooted(m, words, a)
	l.checkCacheServed(m, words, a, before)
	return words
}

// TestE2E_BIOS: SeaBIOS with QEMU's iPXE ROM boots through proxy DHCP on port 67, the chain
// script and the machine's script, and the kernel and initrd from the agent's cache.
func TestE2E_BIOS(t *testing.T) {
	t.Parallel()
	_, a, m := bootOne(t, fwBIOS, 1, sitelink.ArchBIOS)
	after := a.metrics()
	if n := after.sum("siteboot_proxydhcp_answered_total", `port="67"`); n < 1 {
		t.Errorf("proxy DHCP answered %v requests on port 67", n)
	}
	// The good boot's path with timings: DHCP to the script and its assertion.
	code, out := a.explain(t, m.mac)
	if code != 0 || !strings.Contains(out, ": booted: DHCP to assertion in") {
		t.Errorf("siteagent explain %s: exit %d, want 0 and a boot to the assertion\n%s", m.mac, code, out)
	}
	for _, step := range []string{" dhcpv4 ", " script ", " assertion "} {
		if !strings.Contains(out, step) {
			t.Errorf("siteagent explain %s: no %q step in the path\n%s", m.mac, strings.TrimSpace(step), out)
		}
	}
	t.Logf("siteagent explain %s:\n%s", m.mac, out)
}

// TestE2E_UEFIPXE: OVMF's own EDK2 PXE gets its address from dnsmasq and the boot server
// from proxy DHCP, asks again on port 4011, loads ipxe.efi over the agent's TFTP, and iPXE
// then boots the ramdisk.
func TestE2E_UEFIPXE(t *testing.T) {
	t.Parallel()
	l, a, _ := bootOne(t, fwUEFIPXE, 2, sitelink.ArchX86UEFI)
	after := a.metrics()
	for _, port := range []string{"67", "4011"} {
		if n := after.sum("siteboot_proxydhcp_answered_total", `port="`+port+`"`); n < 1 {
			t.Errorf("proxy DHCP answered %v requests on port %s", n, port)
		}
	}
	// OVMF asks for the size first and aborts that transfer (error 8), then reads the file.
	efi, err := os.Stat(filepath.Join(l.tftpRoot, "ipxe.efi"))
	if err != nil {
		t.Fatal(err)
	}
	if n, b := after.sum("siteboot_tftp_transfers_total", `outcome="ok"`), after.sum("siteboot_tftp_bytes_total"); n != 1 || b < float64(efi.Size()) {
		t.Errorf("%v TFTP transfers completed with %v bytes, want one of ipxe.efi (%d bytes)", n, b, efi.Size())
	}
	// OVMF asks windowsize 4 (RFC 7440); the capture shows the agent granting it and the
	// firmware acknowledging one block in four, not every block.
	l.tcpdump.Stop()
	from, to := l.tftpPackets(a.host.IP, true), l.tftpPackets(a.host.IP, false)
	var granted bool
	var data int
	for _, p := range from {
		switch {
		case len(p) > 2 && p[1] == 6 && bytes.Contains(p, []byte("windowsize\x004\x00")):
			granted = true
		case len(p) > 2 && p[1] == 3:
			data++
		}
	}
	acks := 0
	for _, p := range to {
		if len(p) >= 4 && p[1] == 4 {
			acks++
		}
	}
	// A window may cross the bridge as one UDP GSO packet, so DATA packets are not blocks.
	blocks := int(efi.Size()/1468) + 1
	t.Logf("TFTP on the segment: windowsize 4 granted %v; ipxe.efi's %d blocks went in %d DATA packets, %d ACKs came back", granted, blocks, data, acks)
	if !granted {
		t.Error("no OACK from the agent granted windowsize 4")
	}
	if acks == 0 || acks > blocks/2 {
		t.Errorf("%d ACKs for ipxe.efi's %d blocks, want the firmware to acknowledge windows of 4, not every block", acks, blocks)
	}
}

// tftpPackets returns the UDP payloads of the segment's capture sent by agent (fromAgent) or
// to it, on any port but DHCP's.
func (l *lab) tftpPackets(agent netip.Addr, fromAgent bool) [][]byte {
	l.t.Helper()
	dir := "dst"
	if fromAgent {
		dir = "src"
	}
	return l.udpPayloads("udp and " + dir + " host " + agent.String() + " and not port 67 and not port 68 and not port 4011")
}

// udpPayloads returns the UDP payloads of the IPv4 packets of the segment's capture that
// match a tcpdump filter expression, as tcpdump prints them in hex.
func (l *lab) udpPayloads(filter string) [][]byte {
	l.t.Helper()
	out, err := exec.Command("tcpdump", "-r", l.capture, "-n", "-x", filter).Output()
	if err != nil {
		l.t.Fatalf("tcpdump -r %s: %v", l.capture, err)
	}
	var pkts [][]byte
	var cur []byte
	flush := func() {
		// An IPv4 header (its length in the low nibble of byte 0), then UDP's 8 bytes.
		if len(cur) > 0 && cur[0]>>4 == 4 {
			if off := int(cur[0]&0x0f)*4 + 8; len(cur) > off {
				pkts = append(pkts, cur[off:])
			}
		}
		cur = nil
	}
	for _, line := range strings.Split(string(out), "\n") {
		hexPart, ok := strings.CutPrefix(strings.TrimSpace(line), "0x")
		if !ok {
			flush()
			continue
		}
		_, words, _ := strings.Cut(hexPart, ":")
		for _, w := range strings.Fields(words) {
			b, err := hex.DecodeString(w)
			if err != nil {
				break
			}
			cur = append(cur, b...)
		}
	}
	flush()
	return pkts
}

// TestE2E_UEFIHTTP: OVMF's HTTP boot takes the URL of ipxe.efi from proxy DHCP (option 60
// HTTPClient), fetches it from the agent's /boot/files/, and iPXE then boots the ramdisk.
func TestE2E_UEFIHTTP(t *testing.T) {
	t.Parallel()
	l, a, _ := bootOne(t, fwUEFIHTTP, 3, sitelink.ArchX86UEFI)
	if reqs := l.httpRequests(a.host.IP); !slices.Contains(reqs, "GET /boot/files/ipxe.efi") {
		t.Errorf("the firmware never fetched /boot/files/ipxe.efi: %q", reqs)
	}
	if n := a.metrics().sum("siteboot_tftp_transfers_total"); n != 0 {
		t.Errorf("%v TFTP transfers on an HTTP boot", n)
	}
}
