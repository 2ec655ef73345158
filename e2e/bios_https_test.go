package e2e_test

import (
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/internal/testpeer"
	"github.com/bettercompute/siteboot/ipxebin"
	"github.com/bettercompute/siteboot/sitelink"
)

// TestE2E_BIOSHTTPS: SeaBIOS with QEMU's iPXE ROM (Debian's, without HTTPS) asks proxy DHCP,
// which, the chain being https and the ROM's option 175 lacking HTTPS, names the agent's own
// undionly.kpxe (repacked to trust the boot CA) over TFTP; that iPXE then fetches the chain,
// the script, the kernel and the initrd over https, and the ramdisk's assertion verifies.
// After the ROM's TFTP fetch of the build, nothing of the boot goes over plain HTTP or TFTP,
// and the segment's capture holds none of the secrets handed out.
func TestE2E_BIOSHTTPS(t *testing.T) {
	t.Parallel()
	l := newLab(t, 2)
	capture, stopCapture := fullCapture(l)
	agentIP := l.seg.Hosts[1].IP
	ca := newBootCA(t, l.dir, "boot CA", net.IP(agentIP.AsSlice()))
	l.tftpRoot = "" // the agent's own builds
	l.bootExtra = ca.bootTLSKeys()
	a := l.startAgent("agent-a", 1)
	l.waitActive(a)

	m := newMachine("bios-https", fwBIOS, 0xb1)
	l.prepare(a.name, m, sitelink.ArchBIOS)
	before := a.metrics()
	l.powerOn(m, bootOpts{})
	words := m.waitCmdline(t)
	m.logSlow(t, time.Minute)
	t.Logf("%s: power-on to kernel %v over https, to the ramdisk's command line %v", m.name, m.kernel.Sub(m.start).Round(100*time.Millisecond), timeSince(m.start))
	if serial, _ := os.ReadFile(m.serial); !ownIPXERE.Match(serial) {
		t.Errorf("the serial log never shows siteboot's iPXE (v2.0.0) running")
	}

	l.checkBootedHTTPS(m, words, a, a.host.IP, before, capture, stopCapture, ipxebin.UndionlyKPXE)
	mt := a.metrics()
	if n := mt.sum("siteboot_tftp_transfers_total", `outcome="ok"`); n != 1 {
		t.Errorf("%v TFTP transfers completed, want one: the ROM's fetch of undionly.kpxe", n)
	}
	build, err := fs.ReadFile(ipxebin.Embedded(), ipxebin.UndionlyKPXE)
	if err != nil {
		t.Fatal(err)
	}
	served, err := ipxebin.WithTrust(build, ca.cert)
	if err != nil {
		t.Fatal(err)
	}
	if b := mt.sum("siteboot_tftp_bytes_total"); b < float64(len(served)) {
		t.Errorf("TFTP sent %v bytes, want at least the repacked build's %d", b, len(served))
	}
	// Plain HTTP from the machine to the agent: none (the bridge's own request, the refusal
	// checkBootedHTTPS makes, is not the machine's).
	filter := fmt.Sprintf("tcp and dst port 80 and dst host %s and not src host %s", agentIP, testpeer.BridgeIP)
	if n := countPackets(t, capture, filter); n != 0 {
		t.Errorf("%d packets of plain HTTP from the machine to the agent, want none", n)
	}
}

// TestE2E_BIOSHTTPSOtherCA: the BIOS build repacked to trust one CA (the site's own, in
// tftp_root, which SeaBIOS's ROM chains as the site's DHCP server says: newOwnBIOSLab)
// meets an agent whose boot certificate comes from another: iPXE refuses the handshake, the
// boot stops with "Permission denied" on the serial console, and the agent serves the
// machine no script, kernel or initrd.
func TestE2E_BIOSHTTPSOtherCA(t *testing.T) {
	t.Parallel()
	l := newOwnBIOSLabScheme(t, 29093, "https")
	agentIP := l.seg.Hosts[1].IP
	trusted := newBootCA(t, l.dir, "trusted CA", net.IP(agentIP.AsSlice()))
	served := newBootCA(t, l.dir, "other CA", net.IP(agentIP.AsSlice()))
	patched, err := (&ipxebin.Builds{CA: trusted.cert}).ReadFile(ipxebin.UndionlyKPXE)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(l.tftpRoot, "undionly.kpxe"), patched, 0o644); err != nil {
		t.Fatal(err)
	}
	l.bootExtra = served.bootTLSKeys()
	a := l.startAgent("agent-a", 1)
	l.waitActive(a)

	m := newMachine("bios-other-ca", fwBIOS, 0xb2)
	l.prepare(a.name, m, sitelink.ArchBIOS)
	l.powerOn(m, bootOpts{})
	l.checkOtherCARefused(m, a, bootTimeout)
}
