package e2e_test

import (
	"bytes"
	"context"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/hwid"
	"github.com/bettercompute/siteboot/internal/testpeer"
	"github.com/bettercompute/siteboot/ipxebin"
	"github.com/bettercompute/siteboot/sitelink"
)

// The arm64 machines: AAVMF (EDK2 for QEMU's virt board) on an emulated Cortex-A57 under
// qemu-system-aarch64, booting siteboot's arm64 snponly.efi from the agent and then Debian's
// arm64 kernel with an initramfs around Debian's arm64 busybox.
const (
	fwARM64PXE  firmware = "arm64-pxe"  // AAVMF's EDK2 PXE (option 93 = 11)
	fwARM64HTTP firmware = "arm64-http" // AAVMF's EDK2 HTTP boot (option 93 = 19)
)

func (f firmware) arm64() bool { return f == fwARM64PXE || f == fwARM64HTTP }

const (
	aavmfCode = "/usr/share/AAVMF/AAVMF_CODE.fd"
	aavmfVars = "/usr/share/AAVMF/AAVMF_VARS.fd"

	// arm64CacheEnv names the folder holding the arm64 kernel and busybox that
	// e2e/arm64-ramdisk.sh downloads; arm64CacheDefault is the script's default.
	arm64CacheEnv     = "SITEBOOT_ARM64_CACHE"
	arm64CacheDefault = "/var/cache/siteboot-e2e/arm64"

	// arm64OriginPort serves the arm64 ramdisk on the bridge namespace's address, beside
	// the lab's origin for the x86 one.
	arm64OriginPort = 29082

	// arm64Cmdline is the site's kernel command line for arm64 machines: the virt board's
	// UART is a PL011 (ttyAMA0).
	arm64Cmdline = "console=ttyAMA0 panic=-1"

	// arm64BootTimeout bounds power-on to the ramdisk's command line of one arm64 machine.
	// Everything runs on one emulated Cortex-A57 under TCG, which translates each guest
	// instruction: AAVMF starts and brings up its network stack, fetches the iPXE build,
	// iPXE fetches (over https: decrypts in emulated code) a 33 MB uncompressed kernel
	// Image, and Linux boots. On a two-core machine under a load average of 9 to 17 (other
	// test runs, two CPU burners) both arm64 paths took 25 s to 90 s (e2e/doc.go): the
	// bound is four times the slowest, for CI's full suite with two machines at a time.
	arm64BootTimeout = 6 * time.Minute
)

// arm64Ramdisk returns Debian's arm64 kernel and the ramdisk's initramfs around Debian's
// static arm64 busybox, from the folder e2e/arm64-ramdisk.sh fills. It skips (fails when
// peers are required) when they are not there.
func arm64Ramdisk(t *testing.T) (kernel, initrd []byte) {
	t.Helper()
	dir := os.Getenv(arm64CacheEnv)
	if dir == "" {
		dir = arm64CacheDefault
	}
	var files [2][]byte
	for i, f := range [2][2]string{{"vmlinuz", "linux-image-arm64"}, {"busybox", "busybox-static:arm64"}} {
		p := filepath.Join(dir, f[0])
		b, err := os.ReadFile(p)
		if err != nil {
			testpeer.Unavailable(t, "no arm64 %s (%v): run e2e/arm64-ramdisk.sh as root, which downloads Debian's %s into %s (%s names another folder)",
				f[0], err, f[1], dir, arm64CacheEnv)
		}
		files[i] = b
	}
	return files[0], testpeer.RamdiskInitrd(files[1])
}

// newARM64Lab is newLab whose agents serve the arm64 ramdisk (kernel, initrd, and the
// site's command line for the virt board) and their own iPXE builds (no TFTP root:
// Debian's ipxe package has no arm64 build).
func newARM64Lab(t *testing.T) *lab {
	t.Helper()
	testpeer.LookPath(t, "qemu-system-aarch64", "qemu-system-arm")
	for _, f := range []string{aavmfCode, aavmfVars} {
		testpeer.File(t, f, "qemu-efi-aarch64")
	}
	kernel, initrd := arm64Ramdisk(t)
	l := newLab(t, 2)
	l.tftpRoot = ""
	mux := http.NewServeMux()
	for name, data := range map[string][]byte{"vmlinuz": kernel, "initrd.cpio": initrd} {
		mux.HandleFunc("GET /arm64/"+name, func(w http.ResponseWriter, r *http.Request) {
			http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(data))
		})
	}
	l.serve(context.Background(), arm64OriginPort, mux)
	l.kernel, l.initrd = sha256Hex(kernel), sha256Hex(initrd)
	l.kernelURL, l.initrdURL = bridgeURL(arm64OriginPort, "/arm64/vmlinuz"), bridgeURL(arm64OriginPort, "/arm64/initrd.cpio")
	l.kernelImage, l.initrdImage = kernel, initrd
	l.cmdline = arm64Cmdline
	return l
}

// aavmfArgs are QEMU's arguments for m on AAVMF: the virt board with a Cortex-A57, the
// firmware with a copy of its variables, and the NICs without a ROM (EDK2's own virtio-net
// driver and network stack). For HTTP boot, PXE is off (as for OVMF in powerOn). The CAs
// of o.httpsCACerts go to the firmware as they do to OVMF.
func (l *lab) aavmfArgs(m *machine, nics []string, o bootOpts) []string {
	t := l.t
	t.Helper()
	vars := filepath.Join(l.dir, m.name+".vars.fd")
	b, err := os.ReadFile(aavmfVars)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(vars, b, 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"-M", "virt", "-cpu", "cortex-a57",
		"-drive", "if=pflash,format=raw,unit=0,readonly=on,file=" + aavmfCode,
		"-drive", "if=pflash,format=raw,unit=1,file=" + vars}
	for _, nic := range nics {
		args = append(args, "-device", nic+",romfile=")
	}
	if m.fw == fwARM64HTTP {
		args = append(args,
			"-fw_cfg", "name=opt/org.tianocore/IPv4PXESupport,string=no",
			"-fw_cfg", "name=opt/org.tianocore/IPv6PXESupport,string=no")
	}
	if o.httpsCACerts != nil {
		certs := filepath.Join(l.dir, m.name+".cacerts")
		if err := os.WriteFile(certs, o.httpsCACerts, 0o600); err != nil {
			t.Fatal(err)
		}
		args = append(args, "-fw_cfg", "name=etc/edk2/https/cacerts,file="+certs)
	}
	return args
}

// arm64KernelRE is the arm64 kernel's first line: Debian's arm64 flavour.
var arm64KernelRE = regexp.MustCompile(`Linux version [0-9][^ ]*-arm64 `)

// bootARM64 gives a an entry for m, powers m on (with o) and waits for the ramdisk's command line;
// it checks that the kernel that ran is Debian's arm64 one, and returns the command line's
// words and a's metrics from before the power-on.
func (l *lab) bootARM64(a *labAgent, m *machine, o bootOpts) ([]string, metrics) {
	t := l.t
	t.Helper()
	m.bootLimit = arm64BootTimeout
	l.prepare(a.name, m, sitelink.ArchARM64EFI)
	before := a.metrics()
	l.powerOn(m, o)
	words := m.waitCmdline(t)
	m.logSlow(t, 3*time.Minute)
	t.Logf("%s: power-on to kernel %v, to the ramdisk's command line %v (bound %v)", m.name,
		m.kernel.Sub(m.start).Round(100*time.Millisecond), timeSince(m.start), arm64BootTimeout)
	serial, _ := os.ReadFile(m.serial)
	if k := arm64KernelRE.Find(serial); k == nil {
		t.Errorf("%s: no arm64 kernel's banner on the serial console", m.name)
	} else {
		t.Logf("%s: %s", m.name, bytes.TrimSpace(k))
	}
	return words, before
}

// dhcpArchs returns the client architectures (DHCP option 93) of the DHCP requests that
// mac sent on the segment, each once, in order.
func (l *lab) dhcpArchs(mac hwid.MAC) []uint16 {
	var archs []uint16
	for _, p := range l.udpPayloads("udp dst port 67 and ether src " + mac.String()) {
		// Options follow the fixed BOOTP fields and the magic cookie (RFC 2131).
		for i := 240; i+1 < len(p); {
			code := p[i]
			if code == 0 {
				i++
				continue
			}
			n := int(p[i+1])
			if code == 255 || i+2+n > len(p) {
				break
			}
			if code == 93 && n >= 2 {
				if a := uint16(p[i+2])<<8 | uint16(p[i+3]); !slices.Contains(archs, a) {
					archs = append(archs, a)
				}
			}
			i += 2 + n
		}
	}
	return archs
}

// TestE2E_ARM64PXE: AAVMF's PXE (arch 11) gets the agent's arm64 snponly.efi over TFTP,
// patched to trust the boot CA; iPXE then fetches the chain, the script, Debian's arm64
// kernel and the initrd over https, and the ramdisk's assertion verifies. A plain request
// is refused, and the segment's capture holds none of the secrets handed out.
func TestE2E_ARM64PXE(t *testing.T) {
	t.Parallel()
	l := newARM64Lab(t)
	capture, stopCapture := fullCapture(l)
	agentIP := l.seg.Hosts[1].IP
	ca := newBootCA(t, l.dir, "boot CA", net.IP(agentIP.AsSlice()))
	l.bootExtra = ca.bootTLSKeys()
	a := l.startAgent("agent-a", 1)
	l.waitActive(a)

	m := newMachine("arm64-pxe", fwARM64PXE, 0xa1)
	words, before := l.bootARM64(a, m, bootOpts{})
	archs := l.dhcpArchs(m.mac)
	t.Logf("client architectures in the machine's DHCP requests: %v", archs)
	if !slices.Contains(archs, uint16(hwid.ArchARM64EFI)) || slices.Contains(archs, uint16(hwid.ArchARM64EFIHTTP)) {
		t.Errorf("client architectures in the machine's DHCP requests: %v, want arm64 UEFI PXE (11) and not HTTP boot (19)", archs)
	}
	build, err := fs.ReadFile(ipxebin.Embedded(), ipxebin.SnponlyARM64)
	if err != nil {
		t.Fatal(err)
	}
	if b := a.metrics().sum("siteboot_tftp_bytes_total"); b < float64(len(build)) {
		t.Errorf("TFTP sent %v bytes, want at least the arm64 build's %d", b, len(build))
	}
	l.checkBootedHTTPS(m, words, a, a.host.IP, before, capture, stopCapture, ipxebin.SnponlyARM64)
}

// TestE2E_ARM64HTTP: AAVMF's HTTP boot (arch 19) takes the URL of the agent's arm64
// snponly.efi from proxy DHCP and fetches it from /boot/files/; iPXE then boots Debian's
// arm64 kernel and the initrd from the agent's cache over plain HTTP, and the ramdisk's
// assertion verifies. No TFTP.
func TestE2E_ARM64HTTP(t *testing.T) {
	t.Parallel()
	l := newARM64Lab(t)
	a := l.startAgent("agent-a", 1)
	l.waitActive(a)

	m := newMachine("arm64-http", fwARM64HTTP, 0xa2)
	words, before := l.bootARM64(a, m, bootOpts{})
	l.checkBooted(m, words, a)
	l.checkCacheServed(m, words, a, before)
	archs := l.dhcpArchs(m.mac)
	t.Logf("client architectures in the machine's DHCP requests: %v", archs)
	if !slices.Contains(archs, uint16(hwid.ArchARM64EFIHTTP)) {
		t.Errorf("client architectures in the machine's DHCP requests: %v, want arm64 UEFI HTTP boot (19)", archs)
	}
	if reqs := l.httpRequests(a.host.IP); !slices.Contains(reqs, "GET /boot/files/"+ipxebin.SnponlyARM64) {
		t.Errorf("the firmware never fetched /boot/files/%s: %q", ipxebin.SnponlyARM64, reqs)
	}
	if n := a.metrics().sum("siteboot_tftp_transfers_total"); n != 0 {
		t.Errorf("%v TFTP transfers on an HTTP boot", n)
	}
}

// TestE2E_ARM64HTTPSFirmware: AAVMF, with the boot CA enrolled through QEMU's
// etc/edk2/https/cacerts, fetches the agent's arm64 snponly.efi by UEFI HTTP boot over https
// (proxy DHCP names an https URL: firmware_https), and iPXE boots on over https to the
// ramdisk, whose assertion verifies. Nothing of the boot goes over plain HTTP or TFTP, and
// the segment's capture holds none of the secrets handed out.
func TestE2E_ARM64HTTPSFirmware(t *testing.T) {
	t.Parallel()
	l := newARM64Lab(t)
	capture, stopCapture := fullCapture(l)
	agentIP := l.seg.Hosts[1].IP
	ca := newBootCA(t, l.dir, "boot CA", net.IP(agentIP.AsSlice()))
	l.bootExtra = ca.bootTLSKeys() + "firmware_https = true\n"
	a := l.startAgent("agent-a", 1)
	l.waitActive(a)

	m := newMachine("arm64-https-firmware", fwARM64HTTP, 0xa3)
	words, _ := l.bootARM64(a, m, bootOpts{httpsCACerts: efiSignatureList(ca.cert)})
	archs := l.dhcpArchs(m.mac)
	t.Logf("client architectures in the machine's DHCP requests: %v", archs)
	if !slices.Contains(archs, uint16(hwid.ArchARM64EFIHTTP)) {
		t.Errorf("client architectures in the machine's DHCP requests: %v, want arm64 UEFI HTTP boot (19)", archs)
	}
	l.checkFirmwareHTTPS(m, words, a, capture, stopCapture)
}

// TestE2E_ARM64HTTPSOtherCA: AAVMF's PXE loads the arm64 snponly build patched to trust one
// CA (the site's own build in tftp_root, under the name proxy DHCP's default table gives
// arm64 UEFI), while the agent's boot certificate comes from another: iPXE refuses the
// handshake, the boot stops with iPXE's "Permission denied" on the serial console, and the
// agent serves the machine no script, kernel or initrd.
func TestE2E_ARM64HTTPSOtherCA(t *testing.T) {
	t.Parallel()
	l := newARM64Lab(t)
	l.tftpRoot = filepath.Join(l.dir, "tftp") // startLab made it: the site's own builds
	agentIP := l.seg.Hosts[1].IP
	trusted := newBootCA(t, l.dir, "trusted CA", net.IP(agentIP.AsSlice()))
	served := newBootCA(t, l.dir, "other CA", net.IP(agentIP.AsSlice()))
	build, err := fs.ReadFile(ipxebin.Embedded(), ipxebin.SnponlyARM64)
	if err != nil {
		t.Fatal(err)
	}
	patched, err := ipxebin.WithTrust(build, trusted.cert)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(l.tftpRoot, "ipxe-arm64.efi"), patched, 0o644); err != nil {
		t.Fatal(err)
	}
	l.bootExtra = served.bootTLSKeys()
	a := l.startAgent("agent-a", 1)
	l.waitActive(a)

	m := newMachine("arm64-other-ca", fwARM64PXE, 0xa4)
	m.bootLimit = arm64BootTimeout
	l.prepare(a.name, m, sitelink.ArchARM64EFI)
	l.powerOn(m, bootOpts{})
	l.checkOtherCARefused(m, a, arm64BootTimeout)
}

// checkOtherCARefused waits (up to limit) for m's iPXE, trusting a CA other than the one
// that issued a's boot certificate, to stop at the https chain with iPXE's "Permission
// denied" on the serial console, and checks that no kernel started and that a answered no
// /boot/ request and served nothing from its cache.
func (l *lab) checkOtherCARefused(m *machine, a *labAgent, limit time.Duration) {
	t := l.t
	t.Helper()
	refusal := func(b []byte) []byte {
		b = unwrapConsole(b)
		i := bytes.Index(b, []byte("chain.ipxe"))
		if i < 0 {
			return nil
		}
		return ipxeErrorRE.Find(b[i:])
	}
	serial, exited := m.wait(limit, func(b []byte) bool { return refusal(b) != nil })
	line := refusal(serial)
	if line == nil {
		t.Fatalf("no iPXE error after the https chain (QEMU exited %v):\n%s", exited, tail(serial, 3000))
	}
	t.Logf("iPXE on the serial console: %s", bytes.TrimSpace(line))
	if !bytes.Contains(line, []byte("Permission denied")) {
		t.Errorf("iPXE's error %q is not the refusal of an untrusted certificate (Permission denied)", bytes.TrimSpace(line))
	}
	if !m.kernel.IsZero() {
		t.Error("a kernel started")
	}
	mt := a.metrics()
	if n := mt.sum("siteboot_boot_answers_total"); n != 0 {
		t.Errorf("the agent answered %v /boot/ requests, want none: iPXE must refuse the handshake", n)
	}
	if n := mt.sum("siteboot_cache_served_total"); n != 0 {
		t.Errorf("the cache served %v requests, want none", n)
	}
	if n := mt.sum("siteboot_tftp_transfers_total", `outcome="ok"`); n < 1 {
		t.Errorf("%v TFTP transfers completed, want the iPXE build", n)
	}
}

// consoleWidth is the width of a BIOS text console: SeaBIOS copies the screen to the serial
// port, ending each row that fills it with a line break of its own.
const consoleWidth = 80

// unwrapConsole joins each serial console line of exactly consoleWidth characters to the next
// one, undoing the screen's wrap (iPXE's error line with its URL is often longer).
func unwrapConsole(b []byte) []byte {
	lines := bytes.Split(b, []byte("\r\n"))
	var out []byte
	for i, l := range lines {
		out = append(out, l...)
		if i < len(lines)-1 && len(l) != consoleWidth {
			out = append(out, "\r\n"...)
		}
	}
	return out
}
