package e2e_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/bmc"
	"github.com/bettercompute/siteboot/bmc/redfish"
	"github.com/bettercompute/siteboot/internal/testpeer"
)

// Secure Boot through Redfish on a machine that enforces it: sushy-emulator's libvirt
// driver in front of a QEMU (TCG) domain with OVMF's Secure Boot build, of a private
// libvirtd.

const (
	sbLibvirtDomain = "sbC-secureboot"
	sbLibvirtUUID   = "4c4c4544-0042-3610-8053-c2c04f4e4b33"
	sushySBUser     = "sb-admin"
	sushySBPass     = "sb-e2e-secret"
)

// sbLibvirtTimeout bounds one boot of the domain to the firmware's verdict on the disk's
// loader: OVMF under TCG, with SMM, to its boot manager (no network, one disk).
const sbLibvirtTimeout = 4 * time.Minute

// sushySecureBootConfig tells sushy's libvirt driver which OVMF files Secure Boot means: the
// Secure Boot build of the code for UEFI, a copy of the variables with Microsoft's keys
// enrolled (enforcing) for enabled and the one without keys (setup mode, nothing verified)
// for disabled. Sushy tells enabled from disabled by the template of the domain's NVRAM.
var sushySecureBootConfig = fmt.Sprintf(`
SUSHY_EMULATOR_BOOT_LOADER_MAP = {
    'UEFI': {'x86_64': %q},
    'Legacy': {'x86_64': None},
}
SUSHY_EMULATOR_SECURE_BOOT_ENABLED_NVRAM = %q
SUSHY_EMULATOR_SECURE_BOOT_DISABLED_NVRAM = %q
`, ovmfCodeSecBoot, ovmfVarsMS, ovmfVars)

// TestE2E_SushyLibvirtSecureBootRefusesUnsigned: through the Redfish driver, a domain whose
// Secure Boot is off reads disabled; enabled, it reads enabled, and powered on (through
// Redfish too) its firmware refuses the disk's unsigned EFI loader (the serial log says
// "Access Denied" and the loader's line never shows); disabled again, the same domain runs
// that loader, which prints its line and powers the machine off.
func TestE2E_SushyLibvirtSecureBootRefusesUnsigned(t *testing.T) {
	for _, f := range []string{ovmfCodeSecBoot, ovmfVarsMS, ovmfVars} {
		testpeer.File(t, f, "ovmf")
	}
	lv := testpeer.StartLibvirtd(t)
	esp := efiDiskDir(t, lv.Files)
	serial := filepath.Join(lv.Files, "serial.log")
	xml := lv.WriteFile(t, "domain.xml", []byte(fmt.Sprintf(`<domain type='qemu'>
  <name>%s</name>
  <uuid>%s</uuid>
  <memory unit='MiB'>256</memory>
  <vcpu>1</vcpu>
  <os>
    <type arch='x86_64' machine='q35'>hvm</type>
    <loader readonly='yes' secure='no' type='pflash'>%s</loader>
    <nvram template='%s'/>
    <boot dev='hd'/>
  </os>
  <features><acpi/><smm state='on'/></features>
  <on_reboot>destroy</on_reboot>
  <devices>
    <emulator>%s</emulator>
    <disk type='dir' device='disk'>
      <driver name='qemu' type='fat'/>
      <source dir='%s'/>
      <target dev='vda' bus='virtio'/>
      <readonly/>
    </disk>
    <serial type='file'><source path='%s'/><target port='0'/></serial>
    <video><model type='none'/></video>
    <memballoon model='none'/>
  </devices>
</domain>
`, sbLibvirtDomain, sbLibvirtUUID, ovmfCodeSecBoot, ovmfVars, lv.Emulator, esp, serial)))
	lv.Virsh(t, "define", xml)

	sushy := testpeer.SushyEmulator(t, testpeer.SushyConfig{LibvirtURI: lv.URI, Username: sushySBUser, Password: sushySBPass, Extra: sushySecureBootConfig})
	opCtx := func(d time.Duration) context.Context {
		c, cancel := context.WithTimeout(context.Background(), d)
		t.Cleanup(cancel)
		return c
	}
	d, err := redfish.Dial(opCtx(time.Minute), redfish.Config{PollInterval: 500 * time.Millisecond, PowerTimeout: 2 * time.Minute, Timeout: 30 * time.Second},
		bmc.Target{Driver: redfish.Name, Address: sushy.URL, Username: sushySBUser, Password: sushySBPass})
	if err != nil {
		t.Fatalf("Dial sushy-emulator (libvirt driver): %v", err)
	}
	t.Cleanup(func() { _ = d.Close() })

	readSB := func(want bool) {
		t.Helper()
		st, err := d.SecureBoot(opCtx(time.Minute))
		if err != nil || st.Enabled != want {
			t.Fatalf("SecureBoot = %+v, %v; want enabled %v", st, err, want)
		}
		// What the driver read is what libvirt holds: the NVRAM template of enabled.
		x := lv.Virsh(t, "dumpxml", "--inactive", sbLibvirtDomain)
		if got := strings.Contains(x, ovmfVarsMS); got != want {
			t.Fatalf("the domain's NVRAM template is the Microsoft keys' %v, want %v:\n%s", got, want, x)
		}
	}
	refused := regexp.MustCompile(`(?im)^.*(access denied|security violation).*$`)
	// boot powers the domain on through Redfish and returns its serial log once stop says
	// so or the domain is off.
	boot := func(stop func([]byte) bool) []byte {
		t.Helper()
		_ = os.Remove(serial)
		if err := d.SetPower(opCtx(3*time.Minute), bmc.PowerActionOn); err != nil {
			t.Fatalf("power on: %v", err)
		}
		start := time.Now()
		for time.Since(start) < sbLibvirtTimeout {
			out, _ := os.ReadFile(serial)
			if stop(out) {
				return out
			}
			if st := lv.Virsh(t, "domstate", sbLibvirtDomain); st == "shut off" {
				out, _ = os.ReadFile(serial)
				return out
			}
			time.Sleep(time.Second)
		}
		out, _ := os.ReadFile(serial)
		t.Fatalf("no verdict on the loader within %v; serial:\n%s", sbLibvirtTimeout, tail(out, 3000))
		return nil
	}
	off := func() {
		t.Helper()
		if err := d.SetPower(opCtx(3*time.Minute), bmc.PowerActionForceOff); err != nil {
			t.Fatalf("force off: %v", err)
		}
		if st := lv.Virsh(t, "domstate", sbLibvirtDomain); st != "shut off" {
			t.Fatalf("after force off the domain is %q", st)
		}
	}

	readSB(false)
	if err := d.SetSecureBoot(opCtx(time.Minute), true); err != nil {
		t.Fatalf("SetSecureBoot(true): %v", err)
	}
	readSB(true)
	start := time.Now()
	out := boot(func(b []byte) bool { return refused.Match(b) || efiDiskRE.Match(b) })
	t.Logf("Secure Boot enabled: verdict after %v", timeSince(start))
	if !refused.Match(out) || efiDiskRE.Match(out) {
		t.Fatalf("Secure Boot enabled: the firmware did not refuse the unsigned loader; serial:\n%s", tail(out, 3000))
	}
	t.Logf("the firmware: %s", strings.TrimSpace(string(refused.Find(out))))
	off()

	if err := d.SetSecureBoot(opCtx(time.Minute), false); err != nil {
		t.Fatalf("SetSecureBoot(false): %v", err)
	}
	readSB(false)
	start = time.Now()
	out = boot(func(b []byte) bool { return refused.Match(b) || efiDiskRE.Match(b) })
	t.Logf("Secure Boot disabled: verdict after %v", timeSince(start))
	if refused.Match(out) || !efiDiskRE.Match(out) {
		t.Fatalf("Secure Boot disabled: the unsigned loader did not run; serial:\n%s", tail(out, 3000))
	}
}
