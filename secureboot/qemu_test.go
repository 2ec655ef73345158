package secureboot_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/bettercompute/siteboot/hwid"
	"github.com/bettercompute/siteboot/internal/testpeer"
	"github.com/bettercompute/siteboot/ipxe"
	"github.com/bettercompute/siteboot/proxydhcp"
	"github.com/bettercompute/siteboot/secureboot"
)

// OVMF's Secure Boot build (SMM, secure flash) and its variables with the Microsoft keys
// enrolled (db holds the UEFI CA that signed shim): with them the firmware enforces Secure
// Boot from the first image it loads.
const (
	ovmfCodeSecBoot = "/usr/share/OVMF/OVMF_CODE_4M.secboot.fd"
	ovmfVarsMS      = "/usr/share/OVMF/OVMF_VARS_4M.ms.fd"
)

// TestQEMU_SecureBootRAMDiskBootsRamdisk: OVMF enforcing Secure Boot boots the chain's RAM
// disk (the image /sb/NONCE/boot.img served to the machine's address) as a disk: it runs
// shim, signed by the UEFI CA, as the removable-media loader; shim runs Debian's signed
// GRUB beside it; GRUB reads the image's configuration, runs net_bootp and loads the
// machine's configuration over TFTP under the key the image carried, with its SMBIOS UUID;
// that configuration (the Decider's boot answer in GRUB's words) loads Debian's signed
// kernel, which shim verifies, and the ramdisk over TFTP from the cache names TFTPCacheURL
// made. The kernel sees exactly the rendered parameters.
//
// The machine runs on QEMU's user-mode network, whose host (10.0.2.2) has a TFTP server of
// its own: the test lays the chain's answers out in that server's directory under the names
// the chain serves them by (the configuration made by the chain for the address the key
// went to, the images from Config.Cache), so no root and no namespace are needed. tftpd
// serving the same names is TestPXE's.
func TestQEMU_SecureBootRAMDiskBootsRamdisk(t *testing.T) {
	kern, initramfs := testpeer.Ramdisk(t)
	out := bootRAMDisk(t, kern, initramfs, func(serial []byte) bool { _, ok := testpeer.Cmdline(serial); return ok })
	words, ok := testpeer.Cmdline(out)
	if !ok {
		t.Fatalf("the ramdisk never printed its command line; serial:\n%s", tail(out, 4000))
	}
	for _, want := range []string{"EFI stub: UEFI Secure Boot is enabled", "secureboot: Secure boot enabled"} {
		if !bytes.Contains(out, []byte(want)) {
			t.Errorf("the serial log never says %q", want)
		}
	}
	for _, w := range []string{"bc.token=TOKEN", "bc.assertion=ASSERTION", "console=ttyS0", "panic=-1"} {
		if !slices.Contains(words, w) {
			t.Errorf("the kernel's command line %q lacks %q", words, w)
		}
	}
}

// TestQEMU_SecureBootRefusesModifiedKernel: the same chain with one byte of the kernel
// changed: GRUB's linux command refuses it through shim ("bad shim signature") and nothing
// boots.
func TestQEMU_SecureBootRefusesModifiedKernel(t *testing.T) {
	kern, initramfs := testpeer.Ramdisk(t)
	modified := bytes.Clone(kern)
	modified[len(modified)/2] ^= 0xff
	out := bootRAMDisk(t, modified, initramfs, func(serial []byte) bool {
		return bytes.Contains(serial, []byte("bad shim signature"))
	})
	if !bytes.Contains(out, []byte("bad shim signature")) {
		t.Errorf("the modified kernel was not refused; serial:\n%s", tail(out, 4000))
	}
	if _, ok := testpeer.Cmdline(out); ok {
		t.Error("the modified kernel booted")
	}
}

// bootRAMDisk boots the chain's RAM disk in OVMF enforcing Secure Boot (see
// TestQEMU_SecureBootRAMDiskBootsRamdisk) with kern and initramfs as the cache's images, and
// returns the serial log once done says so, the machine stops, or 4 minutes pass.
func bootRAMDisk(t *testing.T, kern, initramfs []byte, done func(serial []byte) bool) []byte {
	t.Helper()
	shim, grub := requireChain(t)
	qemu := testpeer.LookPath(t, "qemu-system-x86_64", "qemu-system-x86")
	for _, f := range []string{ovmfCodeSecBoot, ovmfVarsMS} {
		testpeer.File(t, f, "ovmf")
	}

	guest := netip.MustParseAddr("10.0.2.15")
	uuid := hwid.MustParseUUID("4c4c4544-0031-3510-8052-b4c04f4e4b33")
	h := newHarness(t, shim, grub, func(c *secureboot.Config) {
		c.Server = netip.MustParseAddr("10.0.2.2")
		c.Cache = fstest.MapFS{
			"t/" + grant + "/" + kernel: {Data: kern},
			"t/" + grant + "/" + initrd: {Data: initramfs},
		}
	})
	base := bootAnswer
	h.d.set(func(ctx context.Context, q ipxe.Query) ipxe.Answer {
		a := base(ctx, q)
		a.Cmdline = []string{"console=ttyS0", "panic=-1"}
		return a
	})

	// The machine's UEFI HTTP boot, answered and fetched from its address.
	url := h.chain.AnswerDHCP(&proxydhcp.Request{
		MAC: mac, Kind: proxydhcp.KindHTTP, Arch: hwid.ArchX86_64EFI, HasArch: true, Port: proxydhcp.PortDHCP,
		Source: netip.MustParseAddrPort("0.0.0.0:68"), Server: netip.MustParseAddr("10.0.2.2"),
	}).BootFile
	st, img := h.getFrom(guest.String(), http.MethodGet, strings.TrimPrefix(url, "http://10.0.2.2:8080"))
	if st != http.StatusOK {
		t.Fatalf("the RAM disk: status %d", st)
	}
	key := regexpKey.FindStringSubmatch(img)
	if key == nil {
		t.Fatal("no key in the RAM disk's configuration")
	}
	dir := t.TempDir()
	disk := filepath.Join(dir, "boot.img")
	tftpRoot := filepath.Join(dir, "tftp")
	put := func(name string, b []byte) {
		p := filepath.Join(tftpRoot, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(disk, []byte(img), 0o644); err != nil {
		t.Fatal(err)
	}
	// What the chain answers the machine, by the names GRUB will ask.
	name := "boot/grub.cfg?mac=" + mac.String() + "&uuid=" + uuid.String() + "&n=" + key[1]
	for _, n := range []string{name, "cache/t/" + grant + "/" + kernel, "cache/t/" + grant + "/" + initrd} {
		f, err := h.chain.OpenFrom(n, netip.AddrPortFrom(guest, 1024))
		if err != nil {
			t.Fatalf("%s: %v", n, err)
		}
		b, err := io.ReadAll(f)
		if err != nil {
			t.Fatal(err)
		}
		put(n, b)
	}
	cfg, _ := os.ReadFile(filepath.Join(tftpRoot, "boot", "grub.cfg?mac="+mac.String()+"&uuid="+uuid.String()+"&n="+key[1]))
	t.Logf("the machine's configuration:\n%s", cfg)

	vars := filepath.Join(dir, "vars.fd")
	b, err := os.ReadFile(ovmfVarsMS)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(vars, b, 0o600); err != nil {
		t.Fatal(err)
	}
	serial := filepath.Join(dir, "serial.log")
	p := testpeer.Start(t, testpeer.Cmd{
		Path: qemu,
		Args: []string{
			"-accel", "tcg", "-m", "1024", "-nodefaults", "-display", "none",
			"-M", "q35,smm=on,graphics=off", "-global", "driver=cfi.pflash01,property=secure,value=on",
			"-drive", "if=pflash,format=raw,unit=0,readonly=on,file=" + ovmfCodeSecBoot,
			"-drive", "if=pflash,format=raw,unit=1,file=" + vars,
			"-serial", "file:" + serial, "-no-reboot", "-uuid", uuid.String(),
			"-netdev", "user,id=n0,tftp=" + tftpRoot,
			"-device", "virtio-net-pci,netdev=n0,mac=" + mac.String() + ",romfile=,bootindex=2",
			"-drive", "if=none,id=d0,format=raw,readonly=on,file=" + disk,
			"-device", "virtio-blk-pci,drive=d0,bootindex=1",
		},
	})
	t.Cleanup(p.Stop)
	deadline := time.Now().Add(4 * time.Minute)
	for {
		out, _ := os.ReadFile(serial)
		if done(out) || time.Now().After(deadline) {
			p.Stop()
			return out
		}
		select {
		case <-p.Done():
			out, _ = os.ReadFile(serial)
			return out
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
