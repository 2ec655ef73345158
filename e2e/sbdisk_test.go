package e2e_test

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/examples/siteagent/agent"
	"github.com/bettercompute/siteboot/sitelink"
)

// sbDiskLine is what the ESP's own GRUB configuration of sbESP prints, with GRUB's prefix
// after it: the prefix tells which GRUB read it.
const sbDiskLine = "SITEBOOT-SB-DISK-BOOTED"

var sbDiskRE = regexp.MustCompile(sbDiskLine + ` prefix=(\S*)`)

// sbESP writes an ESP installed for Secure Boot under dir and returns its root: Debian's
// signed shim as EFI/BOOT/BOOTX64.EFI, Debian's signed monolithic GRUB beside it as
// grubx64.efi (shim loads it from its own directory), and a GRUB configuration that prints
// sbDiskLine and GRUB's prefix and powers the machine off ("halt"), so QEMU exits. cfgDir
// is where the configuration goes: "EFI/debian" (what Debian's installer writes, and what
// the network GRUB's give-up loads itself), or "EFI/BOOT" (which only the disk's own GRUB
// reads, as $cmdpath/grub.cfg when $prefix (/EFI/debian) holds none: a machine whose disk
// the give-up must reach by chainloading shim).
func sbESP(t *testing.T, dir, cfgDir string) string {
	t.Helper()
	root := filepath.Join(dir, "esp")
	for _, f := range []struct{ from, to string }{
		{agent.DefaultShim, "EFI/BOOT/BOOTX64.EFI"},
		{filepath.Join(filepath.Dir(agent.DefaultGRUB), "grubx64.efi.signed"), "EFI/BOOT/grubx64.efi"},
	} {
		b, err := os.ReadFile(f.from)
		if err != nil {
			t.Fatal(err)
		}
		to := filepath.Join(root, filepath.FromSlash(f.to))
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(to, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg := filepath.Join(root, filepath.FromSlash(cfgDir), "grub.cfg")
	if err := os.MkdirAll(filepath.Dir(cfg), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg, []byte("echo \""+sbDiskLine+" prefix=${prefix}\"\nhalt\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return root
}

// waitSBDisk waits for m's ESP configuration to run (or the firmware's menu, or QEMU's
// exit) and checks the way there: the configuration ran, read by the GRUB whose prefix
// starts with wantPrefix, no kernel started, OVMF's boot manager started its PXEv4 option
// only (so GRUB booted the disk itself, not the firmware after a returned exit) and never
// opened its menu.
func (l *lab) waitSBDisk(m *machine, wantPrefix string) {
	t := l.t
	t.Helper()
	serial, exited := m.wait(sbBootTimeout, func(b []byte) bool { return sbDiskRE.Match(b) || uiAppRE.Match(b) })
	got := sbDiskRE.FindSubmatch(serial)
	var starts []string
	for _, s := range bdsSteps(serial) {
		if s.verb == "starting" {
			starts = append(starts, s.String())
		}
	}
	t.Logf("%s: %v after power-on; OVMF started %q; the ESP's configuration ran %v", m.name, timeSince(m.start), starts, got != nil)
	if got == nil {
		l.diagnose()
		t.Fatalf("%s: the ESP's configuration never ran (QEMU exited %v)\nserial:\n%s", m.name, exited, tail(serial, 4000))
	}
	t.Logf("%s: the ESP's configuration ran with prefix %s", m.name, got[1])
	if !strings.HasPrefix(string(got[1]), wantPrefix) {
		t.Errorf("%s: the ESP's configuration ran with prefix %s, want %s...", m.name, got[1], wantPrefix)
	}
	if len(starts) != 1 || !strings.Contains(starts[0], "PXEv4") {
		t.Errorf("%s: OVMF's boot manager started %q, want its PXEv4 option alone (GRUB boots the disk)", m.name, starts)
	}
	if uiAppRE.Match(serial) {
		t.Errorf("%s: OVMF opened its menu", m.name)
	}
	if !m.kernel.IsZero() {
		t.Errorf("%s: a kernel started", m.name)
	}
	if !bytes.Contains(serial, []byte("siteboot: booting the local disk")) {
		t.Errorf("%s: the serial log never shows the give-up configuration booting the disk", m.name)
	}
}

// TestE2E_SecureBootGiveUpBootsDisk: under Secure Boot a GRUB give-up reaches the machine's
// disk, where GRUB's own exit would not (Debian 12's shim and GRUB 2.06 hand OVMF success,
// and it opens its menu: TestE2E_SecureBootGRUBGiveUpReturnsToFirmware; tinkerbell/tinkerbell
// #984 for the "exit must fall through" half). OVMF enforcing Secure Boot, the disk after
// the NIC in the boot order, an ESP installed for Secure Boot (shim, signed GRUB):
//
//   - sb-giveup-disk: its entry is withdrawn after proxy DHCP named shim, so the
//     configuration GRUB asks for is the give-up ("unknown"); the network GRUB finds the
//     ESP's /EFI/debian/grub.cfg and runs it itself (its prefix is still the TFTP one).
//   - sb-local-disk: its entry says "boot from the local disk"; the ESP holds no
//     /EFI/debian/grub.cfg, so the network GRUB chainloads the ESP's shim (verified through
//     shim), which loads the disk's GRUB, which reads its own configuration (its prefix is
//     the disk's).
func TestE2E_SecureBootGiveUpBootsDisk(t *testing.T) {
	t.Parallel()
	l, a := newSecureBootLab(t)
	giveUp := newMachine("sb-giveup-disk", fwUEFIPXE, 0x74)
	local := newMachine("sb-local-disk", fwUEFIPXE, 0x75)
	l.prepare(a.name, giveUp, sitelink.ArchX86UEFI)
	l.powerOn(giveUp, bootOpts{secureBoot: true, efiDisk: true, espDir: sbESP(t, filepath.Join(l.dir, giveUp.name), "EFI/debian")})
	l.withdrawAfterShim(a, giveUp)
	l.prepareLocal(a.name, local, sitelink.ArchX86UEFI)
	l.powerOn(local, bootOpts{secureBoot: true, efiDisk: true, espDir: sbESP(t, filepath.Join(l.dir, local.name), "EFI/BOOT")})

	l.waitSBDisk(giveUp, "(tftp,")
	l.waitSBDisk(local, "(hd")

	mt := a.metrics()
	if n := mt.sum("siteboot_boot_answers_total", `answer="unknown"`); n < 1 {
		t.Errorf("%v unknown answers: %s's GRUB never got the give-up", n, giveUp.name)
	}
	if n := mt.sum("siteboot_boot_answers_total", `answer="local"`); n < 1 {
		t.Errorf("%v local answers: %s's GRUB never got the local boot", n, local.name)
	}
	if n := mt.sum("siteboot_boot_answers_total", `answer="script"`); n != 0 {
		t.Errorf("%v boot configurations answered", n)
	}
}

// TestE2E_SecureBootHTTPGiveUpNoLoop: after UEFI HTTP boot GRUB runs from the RAM disk the
// agent served, whose shim is EFI/BOOT/BOOTX64.EFI too; the give-up (here a local-boot
// entry) must not chainload that shim, which would run the same network boot again, for
// ever. The machine's own disk holds shim, GRUB and its configuration in EFI/BOOT only
// (the chainload route). GRUB's search names the first device holding the loader: where
// that is the disk, its GRUB runs; where it is the RAM disk, GRUB skips it and exits, and
// OVMF (Debian 12's GRUB returns success) opens its menu. The test logs which, and fails on
// a second configuration request or a second RAM disk.
func TestE2E_SecureBootHTTPGiveUpNoLoop(t *testing.T) {
	t.Parallel()
	l, a := newSecureBootLab(t)
	m := newMachine("sb-http-local", fwUEFIHTTP, 0x76)
	l.prepareLocal(a.name, m, sitelink.ArchX86UEFI)
	l.powerOn(m, bootOpts{secureBoot: true, efiDisk: true, espDir: sbESP(t, filepath.Join(l.dir, m.name), "EFI/BOOT")})
	serial, exited := m.wait(sbBootTimeout, func(b []byte) bool { return sbDiskRE.Match(b) || uiAppRE.Match(b) })
	if !bytes.Contains(serial, []byte("siteboot: booting the local disk")) {
		l.diagnose()
		t.Fatalf("%s: GRUB never ran the local-boot configuration (QEMU exited %v after %v)\nserial:\n%s", m.name, exited, timeSince(m.start), tail(serial, 4000))
	}
	// Give a loop the time to show: another round through shim and GRUB from the RAM disk
	// asks the agent for the configuration again.
	time.Sleep(20 * time.Second)
	serial, _ = os.ReadFile(m.serial)
	if got := sbDiskRE.FindSubmatch(serial); got != nil {
		t.Logf("%s: the disk's own GRUB ran (prefix %s) %v after power-on: search found the disk before the RAM disk", m.name, got[1], timeSince(m.start))
	} else if uiAppRE.Match(serial) {
		t.Logf("%s: GRUB skipped the RAM disk's shim and exited; OVMF opened its menu (Debian 12's GRUB returns success)", m.name)
	} else {
		t.Errorf("%s: neither the disk's GRUB nor OVMF's menu after the give-up\nserial:\n%s", m.name, tail(serial, 4000))
	}
	if n := bytes.Count(serial, []byte("siteboot: booting the local disk")); n != 1 {
		t.Errorf("%s: the local-boot configuration ran %d times: the give-up went round the network boot again", m.name, n)
	}
	mt := a.metrics()
	if n := mt.sum("siteboot_boot_answers_total", `answer="local"`); n != 1 {
		t.Errorf("%v local answers, want the one", n)
	}
	if !m.kernel.IsZero() {
		t.Errorf("a kernel started")
	}
}
