package e2e_test

import (
	"os"
	"path/filepath"
	"slices"
	"time"

	"testing"

	"github.com/bettercompute/siteboot/examples/siteagent/agent"
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
	_, a, _ := bootOne(t, fwBIOS, 1, agent.ArchBIOS)
	after := a.metrics()
	if n := after.sum("siteboot_proxydhcp_answered_total", `port="67"`); n < 1 {
		t.Errorf("proxy DHCP answered %v requests on port 67", n)
	}
}

// TestE2E_UEFIPXE: OVMF's own EDK2 PXE gets its address from dnsmasq and the boot server
// from proxy DHCP, asks again on port 4011, loads ipxe.efi over the agent's TFTP, and iPXE
// then boots the ramdisk.
func TestE2E_UEFIPXE(t *testing.T) {
	t.Parallel()
	l, a, _ := bootOne(t, fwUEFIPXE, 2, agent.ArchX86UEFI)
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
}

// TestE2E_UEFIHTTP: OVMF's HTTP boot takes the URL of ipxe.efi from proxy DHCP (option 60
// HTTPClient), fetches it from the agent's /boot/files/, and iPXE then boots the ramdisk.
func TestE2E_UEFIHTTP(t *testing.T) {
	t.Parallel()
	l, a, _ := bootOne(t, fwUEFIHTTP, 3, agent.ArchX86UEFI)
	if reqs := l.httpRequests(a.host.IP); !slices.Contains(reqs, "GET /boot/files/ipxe.efi") {
		t.Errorf("the firmware never fetched /boot/files/ipxe.efi: %q", reqs)
	}
	if n := a.metrics().sum("siteboot_tftp_transfers_total"); n != 0 {
		t.Errorf("%v TFTP transfers on an HTTP boot", n)
	}
}
