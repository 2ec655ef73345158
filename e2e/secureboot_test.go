package e2e_test

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/examples/siteagent/agent"
	"github.com/bettercompute/siteboot/internal/testpeer"
	"github.com/bettercompute/siteboot/sitelink"
)

// OVMF's Secure Boot build (SMM, secure flash) and its variables with the Microsoft keys
// enrolled (db holds the UEFI CA that signed shim): with them the firmware enforces Secure
// Boot from the first image it loads.
const (
	ovmfCodeSecBoot = "/usr/share/OVMF/OVMF_CODE_4M.secboot.fd"
	ovmfVarsMS      = "/usr/share/OVMF/OVMF_VARS_4M.ms.fd"
)

// sbBootTimeout bounds a Secure Boot machine's power-on to the ramdisk's command line. Beside
// UEFI PXE's own time (bootTimeout), the signed chain fetches shim (1 MiB) and GRUB (3.7 MiB)
// and then GRUB fetches the kernel and initrd over TFTP, GRUB's in blocks of 512 and 1,024
// bytes with one round trip each, under TCG on a loaded machine: twice bootTimeout.
const sbBootTimeout = 2 * bootTimeout

// sbRefusalTimeout bounds power-on to a refusal on the serial console: the firmware's PXE
// or the signed chain up to GRUB's linux command, without the kernel's boot.
const sbRefusalTimeout = bootTimeout

// requireSecureBoot skips (or fails under SITEBOOT_REQUIRE_PEERS=1) without the signed
// chain's packages.
func requireSecureBoot(t *testing.T) {
	t.Helper()
	for file, pkg := range map[string]string{
		ovmfCodeSecBoot: "ovmf", ovmfVarsMS: "ovmf",
		agent.DefaultShim: "shim-signed", agent.DefaultGRUB: "grub-efi-amd64-signed",
	} {
		testpeer.File(t, file, pkg)
	}
}

// newSecureBootLab is a lab whose site DHCP server names the agent (host 1) as next server
// with an empty boot file, as a Secure Boot site's must (GRUB reads its server from the
// acknowledgement only, see package grubcfg), and one agent that boots x86-64 UEFI entries
// through the signed chain (boot.secure_boot = true).
func newSecureBootLab(t *testing.T) (*lab, *labAgent) {
	requireSecureBoot(t)
	l := newLab(t, 2, "--dhcp-boot=,,"+testpeer.HostIP(1).String())
	l.bootExtra = "secure_boot = true\n"
	a := l.startAgent("agent-a", 1)
	l.waitActive(a)
	return l, a
}

var sbLineRE = regexp.MustCompile(`(?im)^.*(secure ?boot|shim|bad shim signature|access denied|security violation).*$`)

// sbLines are the serial log's lines that say what Secure Boot did.
func sbLines(serial []byte) []string {
	var out []string
	for _, l := range sbLineRE.FindAll(bytes.ReplaceAll(serial, []byte("\r"), nil), -1) {
		out = append(out, strings.TrimSpace(string(l)))
	}
	return slices.Compact(out)
}

// checkEnforced checks that the serial log shows Secure Boot enforced on the way to the
// kernel: the EFI stub found it enabled (so the firmware ran shim, GRUB and the kernel
// verified), and so did the kernel.
func checkEnforced(t *testing.T, m *machine) {
	t.Helper()
	serial, _ := os.ReadFile(m.serial)
	lines := sbLines(serial)
	t.Logf("%s: the serial log's Secure Boot lines:\n%s", m.name, strings.Join(lines, "\n"))
	for _, want := range []string{"EFI stub: UEFI Secure Boot is enabled", "secureboot: Secure boot enabled"} {
		if !bytes.Contains(serial, []byte(want)) {
			t.Errorf("%s: the serial log never says %q", m.name, want)
		}
	}
}

// bootSecure powers on a Secure Boot machine with an entry of a's and checks it booted the
// ramdisk through the signed chain: the assertion verifies, the kernel and initrd came from
// a's cache under the entry's grant, and Secure Boot was enforced.
func (l *lab) bootSecure(a *labAgent, m *machine) []string {
	t := l.t
	t.Helper()
	l.prepare(a.name, m, sitelink.ArchX86UEFI)
	before := a.metrics()
	m.bootLimit = sbBootTimeout
	l.powerOn(m, bootOpts{secureBoot: true})
	words := m.waitCmdline(t)
	m.logSlow(t, 2*time.Minute)
	t.Logf("%s: power-on to kernel %v, to the ramdisk's command line %v", m.name, m.kernel.Sub(m.start).Round(100*time.Millisecond), timeSince(m.start))
	l.checkBooted(m, words, a)
	checkEnforced(t, m)
	after := a.metrics()
	if served := after.sum("siteboot_cache_served_total") - before.sum("siteboot_cache_served_total"); served < 2 {
		t.Errorf("%s's cache served %v requests during the boot, want the kernel and the initrd", a.name, served)
	}
	if n := after.sum("siteboot_secureboot_keys_total", `event="activated"`); n < 1 {
		t.Errorf("no boot key was activated: %v", n)
	}
	if n := after.sum("siteboot_secureboot_unbound_total"); n != 0 {
		t.Errorf("%v GRUB configuration requests were refused", n)
	}
	return words
}

// TestE2E_SecureBootPXE: OVMF enforcing Secure Boot loads shim (signed by the UEFI CA) over
// the agent's TFTP from the name its 4011 answer gives, under a boot nonce; shim loads
// Debian's signed network GRUB from the directory of the proxy offer's name; GRUB reads the
// agent's /grub/grub.cfg from the server the site's DHCP named, fetches the machine's key
// file, then its configuration (the agent's answer for the address the key went to), then
// Debian's signed kernel, which shim verifies, and the ramdisk, all over TFTP from the cache
// under the entry's grant.
func TestE2E_SecureBootPXE(t *testing.T) {
	t.Parallel()
	l, a := newSecureBootLab(t)
	m := newMachine("sb-pxe", fwUEFIPXE, 41)
	l.bootSecure(a, m)
	after := a.metrics()
	if n := after.sum("siteboot_secureboot_answers_total", `kind="pxe"`); n < 2 {
		t.Errorf("proxy DHCP named the signed chain %v times, want the offer and the 4011 answer", n)
	}
	if reqs := l.httpRequests(a.host.IP); len(reqs) != 0 {
		t.Errorf("the Secure Boot machine asked HTTP for %q; the signed GRUB has only TFTP", reqs)
	}
}

// TestE2E_SecureBootHTTP: OVMF's HTTP boot, enforcing Secure Boot, fetches the RAM disk the
// proxy's URL names (/sb/NONCE/boot.img: shim, GRUB and a configuration with the machine's
// boot key), boots shim from it, and GRUB, configured by its own DHCP, fetches the machine's
// configuration, the signed kernel and the ramdisk over TFTP.
func TestE2E_SecureBootHTTP(t *testing.T) {
	t.Parallel()
	l, a := newSecureBootLab(t)
	m := newMachine("sb-http", fwUEFIHTTP, 42)
	l.bootSecure(a, m)
	reqs := l.httpRequests(a.host.IP)
	image := regexp.MustCompile(`^GET /sb/[0-9a-f]{32}/boot\.img$`)
	if !slices.ContainsFunc(reqs, image.MatchString) {
		t.Errorf("the firmware never fetched its RAM disk: %q", reqs)
	}
	if n := a.metrics().sum("siteboot_secureboot_answers_total", `kind="http"`); n < 1 {
		t.Errorf("proxy DHCP named the RAM disk %v times", n)
	}
}

// TestE2E_SecureBootRefusesUnsignedIPXE: an entry that does not boot with Secure Boot gets
// Debian's iPXE, which is not signed: the firmware enforcing Secure Boot downloads it and
// refuses to start it, and no kernel runs.
func TestE2E_SecureBootRefusesUnsignedIPXE(t *testing.T) {
	t.Parallel()
	requireSecureBoot(t)
	l := newLab(t, 2)
	a := l.startAgent("agent-a", 1)
	l.waitActive(a)
	m := newMachine("sb-ipxe", fwUEFIPXE, 43)
	no := false
	l.plane.PrepareRamdisk(a.name, []sitelink.ProxyDhcpEntry{{
		MAC: m.mac, UUID: m.uuid.String(), Arch: sitelink.ArchX86UEFI, Workflow: m.workflow(), TokenRef: m.tokenRef(),
		NotAfter: time.Now().Add(time.Hour), SecureBoot: &no,
	}})
	l.waitReady(a.name)
	l.powerOn(m, bootOpts{secureBoot: true})
	refused := regexp.MustCompile(`(?i)(access denied|security violation)`)
	serial, exited := m.wait(sbRefusalTimeout, refused.Match)
	lines := sbLines(serial)
	t.Logf("%s: the serial log's Secure Boot lines:\n%s", m.name, strings.Join(lines, "\n"))
	if !refused.Match(serial) {
		t.Fatalf("the firmware never refused ipxe.efi (QEMU exited %v after %v); serial:\n%s", exited, timeSince(m.start), tail(serial, 3000))
	}
	if !bytes.Contains(serial, []byte("NBP file downloaded successfully")) {
		t.Errorf("the refusal did not follow a download of ipxe.efi; serial:\n%s", tail(serial, 3000))
	}
	if !m.kernel.IsZero() || kernelRE.Match(serial) {
		t.Error("a kernel started")
	}
	if n := a.metrics().sum("siteboot_boot_answers_total", `answer="script"`); n != 0 {
		t.Errorf("%v boot scripts answered: the unsigned iPXE ran", n)
	}
}

// TestE2E_SecureBootRefusesModifiedKernel: the site's kernel with one byte changed (its
// digest pinned, so the cache serves exactly it) goes through the signed chain to GRUB,
// whose linux command has shim verify it and refuses it: "bad shim signature"; no kernel
// runs.
func TestE2E_SecureBootRefusesModifiedKernel(t *testing.T) {
	t.Parallel()
	requireSecureBoot(t)
	l := newLab(t, 2, "--dhcp-boot=,,"+testpeer.HostIP(1).String())
	kernel, _ := testpeer.Ramdisk(t)
	modified := bytes.Clone(kernel)
	modified[len(modified)/2] ^= 0x01
	mux := http.NewServeMux()
	mux.HandleFunc("GET /images/vmlinuz-modified", func(w http.ResponseWriter, r *http.Request) {
		http.ServeContent(w, r, "vmlinuz", time.Time{}, bytes.NewReader(modified))
	})
	const modifiedPort = originPort + 10
	l.serve(context.Background(), modifiedPort, mux)
	l.kernelURL, l.kernel = bridgeURL(modifiedPort, "/images/vmlinuz-modified"), sha256Hex(modified)
	l.bootExtra = "secure_boot = true\n"
	a := l.startAgent("agent-a", 1)
	l.waitActive(a)
	m := newMachine("sb-badkernel", fwUEFIPXE, 44)
	l.prepare(a.name, m, sitelink.ArchX86UEFI)
	l.powerOn(m, bootOpts{secureBoot: true})
	serial, exited := m.wait(sbRefusalTimeout+2*time.Minute, func(b []byte) bool { return bytes.Contains(b, []byte("bad shim signature")) })
	lines := sbLines(serial)
	t.Logf("%s: the serial log's Secure Boot lines:\n%s", m.name, strings.Join(lines, "\n"))
	if !bytes.Contains(serial, []byte("bad shim signature")) {
		t.Fatalf("GRUB never refused the modified kernel (QEMU exited %v after %v); serial:\n%s", exited, timeSince(m.start), tail(serial, 3000))
	}
	if !m.kernel.IsZero() || kernelRE.Match(serial) {
		t.Error("the modified kernel started")
	}
	// GRUB got as far as the kernel: the agent answered its configuration and served the
	// kernel from the cache.
	if n := a.metrics().sum("siteboot_boot_answers_total", `answer="script"`); n < 1 {
		t.Errorf("%v boot configurations answered", n)
	}
}

// withdrawAfterShim withdraws m's entry at a once proxy DHCP named shim at 4011 (the only
// Secure Boot machine so far), before GRUB asks for its configuration (shim and GRUB go
// over TFTP first), so that the configuration GRUB gets is a give-up ("unknown").
func (l *lab) withdrawAfterShim(a *labAgent, m *machine) {
	t := l.t
	t.Helper()
	if !waitFor(sbBootTimeout, func() bool {
		return a.metrics().sum("siteboot_secureboot_answers_total", `kind="pxe"`) >= 2
	}) {
		l.diagnose()
		t.Fatalf("proxy DHCP never named the signed chain at 4011")
	}
	l.plane.CleanUp(a.name, m.workflow())
	if !waitFor(30*time.Second, func() bool { return len(l.plane.Pending(a.name)) == 0 }) {
		t.Fatalf("%s never applied the clean-up", a.name)
	}
}

// grubReturnedRE is what OVMF's boot manager prints when the boot option it started (shim,
// then GRUB) came back to it: it loads the next boot option (Boot0002) when that option
// returned an error, and its own menu (Boot0000 "UiApp") when it returned success.
var grubReturnedRE = regexp.MustCompile(`BdsDxe: loading (Boot0002|Boot0000 "UiApp")`)

// TestE2E_SecureBootGRUBGiveUpReturnsToFirmware: every GRUB give-up answers the exit
// configuration, which on this machine (no disk) finds nothing to boot and runs "exit 1",
// so that the firmware gets control back at once, where a
// missing configuration made the Chain retry and then reboot into the same network boot
// (tinkerbell/tinkerbell #984 for the "exit must fall through" half). A Secure Boot machine
// gets shim and GRUB under its entry; the entry is then withdrawn, so the configuration
// GRUB asks for is a give-up ("unknown"). GRUB runs the exit configuration and OVMF's boot
// manager gets control back in the same boot. Whether it then moves on to its next boot
// option depends on GRUB returning the error: Debian 12's shim and signed GRUB 2.06 return
// success, and OVMF opens its menu (UiApp) instead; the test logs which. That is why the
// exit configuration boots the disk itself (TestE2E_SecureBootGiveUpBootsDisk).
func TestE2E_SecureBootGRUBGiveUpReturnsToFirmware(t *testing.T) {
	t.Parallel()
	l, a := newSecureBootLab(t)
	m := newMachine("sb-giveup", fwUEFIPXE, 0x73)
	l.prepare(a.name, m, sitelink.ArchX86UEFI)
	l.powerOn(m, bootOpts{secureBoot: true})
	l.withdrawAfterShim(a, m)
	serial, exited := m.wait(sbBootTimeout, func(b []byte) bool { return grubReturnedRE.Match(b) })
	unknown := a.metrics().sum("siteboot_boot_answers_total", `answer="unknown"`)
	if unknown < 1 || !bytes.Contains(serial, []byte("Welcome to GRUB!")) {
		l.diagnose()
		t.Fatalf("GRUB never asked for its configuration after the entry went (unknown answers %v)\nserial:\n%s", unknown, tail(serial, 3000))
	}
	got := grubReturnedRE.FindSubmatch(serial)
	if got == nil {
		l.diagnose()
		t.Fatalf("the firmware never got control back from GRUB (QEMU exited %v after %v)\nserial:\n%s", exited, timeSince(m.start), tail(serial, 3000))
	}
	if n := bytes.Count(serial, []byte(`BdsDxe: starting Boot0001`)); n != 1 {
		t.Errorf("Boot0001 (PXE) started %d times: GRUB rebooted into the network boot instead of returning", n)
	}
	if !m.kernel.IsZero() {
		t.Errorf("a kernel started")
	}
	if string(got[1]) == "Boot0002" {
		t.Logf("GRUB's exit came back as an error: OVMF moved on to its next boot option, after %v", timeSince(m.start))
	} else {
		t.Logf("GRUB's exit came back as success: OVMF opened its menu (UiApp), not the next boot option (Debian 12's shim and GRUB 2.06), after %v", timeSince(m.start))
	}
}
