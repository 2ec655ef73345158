package ipxebin_test

import (
	"bytes"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/internal/testpeer"
	"github.com/bettercompute/siteboot/ipxebin"
)

// firmware is one machine the smoke test boots a build on.
type firmware struct {
	name     string // subtest
	build    string // the build, by its name in Embedded
	arch     string // what iPXE's ${buildarch} says in that build
	platform string // what iPXE's ${platform} says
	qemu     string // the emulator, and the Debian package providing it
	qemuPkg  string
	// trust: boot the build as Builds hands it out trusting a CA (for the BIOS build, the
	// image repacked), not as built.
	trust bool
	// files are the firmware files the machine needs, each with its Debian package.
	files [][2]string
	// args are QEMU's arguments apart from the network, the serial port and the common ones;
	// dir is the test's directory, for a writable copy of the firmware's variables.
	args func(t *testing.T, dir string) []string
}

const (
	aavmfCode = "/usr/share/AAVMF/AAVMF_CODE.fd"
	aavmfVars = "/usr/share/AAVMF/AAVMF_VARS.fd"
	ovmfCode  = "/usr/share/OVMF/OVMF_CODE_4M.fd"
	ovmfVars  = "/usr/share/OVMF/OVMF_VARS_4M.fd"
)

var firmwares = []firmware{
	{
		name: "arm64-AAVMF", build: ipxebin.SnponlyARM64, arch: "arm64", platform: "efi",
		qemu: "qemu-system-aarch64", qemuPkg: "qemu-system-arm",
		files: [][2]string{{aavmfCode, "qemu-efi-aarch64"}, {aavmfVars, "qemu-efi-aarch64"}},
		args: func(t *testing.T, dir string) []string {
			return []string{
				"-M", "virt", "-cpu", "cortex-a57", "-m", "512",
				"-drive", "if=pflash,format=raw,unit=0,readonly=on,file=" + aavmfCode,
				"-drive", "if=pflash,format=raw,unit=1,file=" + copyFile(t, aavmfVars, dir),
				"-device", "virtio-net-pci,netdev=n0,romfile=,bootindex=1",
			}
		},
	},
	{
		name: "x86_64-OVMF", build: ipxebin.SnponlyX8664, arch: "x86_64", platform: "efi",
		qemu: "qemu-system-x86_64", qemuPkg: "qemu-system-x86",
		files: [][2]string{{ovmfCode, "ovmf"}, {ovmfVars, "ovmf"}},
		args: func(t *testing.T, dir string) []string {
			return []string{
				"-M", "q35", "-m", "512",
				"-drive", "if=pflash,format=raw,unit=0,readonly=on,file=" + ovmfCode,
				"-drive", "if=pflash,format=raw,unit=1,file=" + copyFile(t, ovmfVars, dir),
				// No option ROM: OVMF's own virtio-net driver and PXE stack, the SNP
				// snponly.efi runs on.
				"-device", "virtio-net-pci,netdev=n0,romfile=,bootindex=1",
			}
		},
	},
	{
		// SeaBIOS with QEMU's iPXE ROM on the NIC, which loads the build over TFTP: the
		// build as served trusting a CA, repacked, so its decompressor must accept the
		// repacked block.
		name: "bios-SeaBIOS-repacked", build: ipxebin.UndionlyKPXE, arch: "i386", platform: "pcbios", trust: true,
		qemu: "qemu-system-x86_64", qemuPkg: "qemu-system-x86",
		files: [][2]string{{"/usr/lib/ipxe/qemu/efi-virtio.rom", "ipxe-qemu"}},
		args: func(t *testing.T, dir string) []string {
			return []string{
				"-M", "pc,graphics=off", "-m", "512", "-boot", "n",
				"-device", "virtio-net-pci,netdev=n0,bootindex=1",
			}
		},
	},
}

// bootTimeout bounds one boot to the smoke script's echo: under TCG on a loaded two-core
// machine AAVMF and OVMF take under a minute to run the script, idle under 20 seconds.
const bootTimeout = 8 * time.Minute

// TestQEMU_BuildsBootAndLogToSyslog boots each embedded build on real firmware (AAVMF on
// an emulated Cortex-A57, OVMF on x86-64, SeaBIOS with QEMU's iPXE ROM for the BIOS build,
// repacked to trust a CA) from QEMU's user-mode network, whose
// DHCP names the build as the boot file and whose TFTP server serves it. The build must
// print iPXE's banner on the serial console, run its embedded script (autoboot on the NIC
// it booted from), and then run the script that autoboot fetches by the same name: the
// test puts that script in the build's place as soon as the banner shows (the firmware has
// read the build by then, and iPXE has yet to configure the NIC by DHCP). The script points
// iPXE's syslog console at the host and echoes the build's platform and architecture, which
// must reach both the serial console and a syslog receiver on the host.
//
// QEMU runs in a network namespace of the test's own, where the receiver binds the syslog
// port (514, which iPXE always uses) on loopback: QEMU's user-mode network delivers what
// the guest sends to 10.0.2.2 there. Nothing binds on the host's network.
func TestQEMU_BuildsBootAndLogToSyslog(t *testing.T) {
	for _, fw := range firmwares {
		t.Run(fw.name, func(t *testing.T) {
			qemu := testpeer.LookPath(t, fw.qemu, fw.qemuPkg)
			for _, f := range fw.files {
				testpeer.File(t, f[0], f[1])
			}
			testpeer.RequireRoot(t)
			bootSmoke(t, qemu, fw)
		})
	}
}

func bootSmoke(t *testing.T, qemu string, fw firmware) {
	bin, err := fs.ReadFile(ipxebin.Embedded(), fw.build)
	if err != nil {
		t.Fatal(err)
	}
	if fw.trust {
		if bin, err = ipxebin.WithTrust(bin, newCA(t, "smoke CA")); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	tftp := filepath.Join(dir, "tftp")
	if err := os.Mkdir(tftp, 0o755); err != nil {
		t.Fatal(err)
	}
	bootFile := filepath.Join(tftp, fw.build)
	if err := os.WriteFile(bootFile, bin, 0o644); err != nil {
		t.Fatal(err)
	}
	marker := fmt.Sprintf("siteboot-smoke platform=%s arch=%s", fw.platform, fw.arch)
	script := "#!ipxe\nset syslog 10.0.2.2\necho siteboot-smoke platform=${platform} arch=${buildarch}\nsleep 600\n"

	ns := testpeer.NewNetns(t)
	var rx net.PacketConn
	if err := ns.Do(func() (err error) {
		rx, err = net.ListenPacket("udp4", "127.0.0.1:514")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer rx.Close()
	syslog := make(chan string, 64)
	go func() {
		defer close(syslog)
		buf := make([]byte, 2048)
		for {
			n, _, err := rx.ReadFrom(buf)
			if err != nil {
				return
			}
			select {
			case syslog <- string(buf[:n]):
			default:
			}
		}
	}()

	serial := filepath.Join(dir, "serial.log")
	args := append([]string{
		"-accel", "tcg", "-nodefaults", "-display", "none", "-no-reboot",
		"-serial", "file:" + serial,
		"-netdev", "user,id=n0,tftp=" + tftp + ",bootfile=" + fw.build,
	}, fw.args(t, dir)...)
	start := time.Now()
	p := testpeer.Start(t, testpeer.Cmd{Path: qemu, Args: args, Netns: ns})
	defer p.Stop()

	deadline := time.After(bootTimeout)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var out []byte
	swapped, echoed, logged := false, false, false
	for !echoed || !logged {
		select {
		case <-deadline:
			t.Fatalf("after %v: banner seen %v, script echoed %v, syslog received %v; serial:\n%s",
				bootTimeout, swapped, echoed, logged, tail(out, 4000))
		case <-p.Done():
			out, _ = os.ReadFile(serial)
			t.Fatalf("QEMU exited (%v); serial:\n%s", p.Err(), tail(out, 4000))
		case msg, ok := <-syslog:
			if !ok {
				t.Fatal("syslog receiver closed")
			}
			t.Logf("syslog: %q", msg)
			if strings.Contains(msg, marker) {
				logged = true
			}
		case <-tick.C:
			out, _ = os.ReadFile(serial)
			if !swapped && bytes.Contains(out, []byte("iPXE 2.0.0")) {
				// Replace the build by the script under the same name, atomically: the
				// firmware has read the build, iPXE has not asked for the boot file yet.
				tmp := bootFile + ".new"
				if err := os.WriteFile(tmp, []byte(script), 0o644); err != nil {
					t.Fatal(err)
				}
				if err := os.Rename(tmp, bootFile); err != nil {
					t.Fatal(err)
				}
				swapped = true
				t.Logf("banner after %v", time.Since(start).Round(time.Second))
			}
			if swapped && bytes.Contains(out, []byte(marker)) {
				echoed = true
			}
		}
	}
	t.Logf("script echoed and logged after %v", time.Since(start).Round(time.Second))
}

func copyFile(t *testing.T, src, dir string) string {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(dir, filepath.Base(src))
	if err := os.WriteFile(dst, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return dst
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
