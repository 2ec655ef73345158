package e2e_test

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/hwid"
	"github.com/bettercompute/siteboot/internal/testpeer"
	"github.com/bettercompute/siteboot/ipxebin"
	"github.com/bettercompute/siteboot/sitelink"
)

// The tests here run siteboot's own iPXE build for x86-64 UEFI (package ipxebin's
// snponly-x86_64.efi, served as the agent's ipxe.efi) on OVMF with a local disk after the
// NIC in the boot order, and follow the firmware's boot manager on the serial console:
// each iPXE that gives up must return an error (exit 1), on which OVMF loads its next
// Boot#### option, where a success (iPXE's plain "exit") makes it open its menu (UiApp)
// instead (tinkerbell/tinkerbell #984; Sidero Metal's notes).

// fallThroughTimeout bounds power-on to the disk's EFI application: OVMF's PXE with iPXE
// and its give-up, then OVMF's HTTP boot on the same NIC (its own DHCP timeouts when nobody
// names a URL, over a minute under TCG), then the disk; under TCG on a loaded machine.
const fallThroughTimeout = 2 * bootTimeout

// useOwnIPXE replaces the lab's ipxe.efi (Debian's) with siteboot's snponly build: the
// file the agent names to x86-64 UEFI over PXE and HTTP boot.
func (l *lab) useOwnIPXE() {
	l.t.Helper()
	b, err := fs.ReadFile(ipxebin.Embedded(), ipxebin.SnponlyX8664)
	if err != nil {
		l.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(l.tftpRoot, "ipxe.efi"), b, 0o644); err != nil {
		l.t.Fatal(err)
	}
}

// bdsStepRE is a line of OVMF's boot manager about one of its boot options.
var bdsStepRE = regexp.MustCompile(`BdsDxe: (loading|starting|failed to load) (Boot[0-9A-F]{4}) "([^"]*)"`)

// bdsStep is one such line: what the boot manager did with which option.
type bdsStep struct{ verb, option, desc string }

func (s bdsStep) String() string { return fmt.Sprintf("%s %s %q", s.verb, s.option, s.desc) }

// bdsSteps are the boot manager's lines of a serial log, in order.
func bdsSteps(serial []byte) []bdsStep {
	var out []bdsStep
	for _, m := range bdsStepRE.FindAllSubmatch(serial, -1) {
		out = append(out, bdsStep{string(m[1]), string(m[2]), string(m[3])})
	}
	return out
}

// uiAppRE is OVMF's boot manager starting its menu, as it does when a boot option returned
// success.
var uiAppRE = regexp.MustCompile(`BdsDxe: starting Boot[0-9A-F]{4} "UiApp"`)

// ownIPXERE is the banner of siteboot's iPXE build (v2.0.0) on the console; Debian's
// 1.0.0+git-20190125 prints another version.
var ownIPXERE = regexp.MustCompile(`iPXE 2\.0\.0`)

// fallThrough is what a machine's serial log shows of its boot manager once the disk's
// EFI application ran.
type fallThrough struct {
	steps []bdsStep
	pxe   int // index in steps of the PXEv4 option's start
	next  int // index of the first step after it about another option
}

// waitFallThrough waits for m's disk to boot (efiDiskLine) and checks the way there: OVMF
// started the NIC's PXEv4 option, siteboot's iPXE ran from it, the option returned and the
// boot manager went on to its next option, never to its menu (UiApp), and so on to the
// disk's option, whose application printed efiDiskLine; no kernel ran.
func (l *lab) waitFallThrough(m *machine) fallThrough {
	t := l.t
	t.Helper()
	// The menu is where a machine whose exit came back as success stays: stop there too.
	serial, exited := m.wait(fallThroughTimeout, func(b []byte) bool { return efiDiskRE.Match(b) || uiAppRE.Match(b) })
	steps := bdsSteps(serial)
	var lines []string
	for _, s := range steps {
		lines = append(lines, s.String())
	}
	t.Logf("%s: OVMF's boot manager, in order (%v after power-on):\n%s", m.name, timeSince(m.start), strings.Join(lines, "\n"))
	f := fallThrough{steps: steps, pxe: -1, next: -1}
	for i, s := range steps {
		if f.pxe < 0 && s.verb == "starting" && strings.Contains(s.desc, "PXEv4") {
			f.pxe = i
			continue
		}
		if f.pxe >= 0 && s.option != steps[f.pxe].option {
			f.next = i
			break
		}
	}
	if f.pxe < 0 {
		l.diagnose()
		t.Fatalf("%s: OVMF never started its PXEv4 option (QEMU exited %v)\nserial:\n%s", m.name, exited, tail(serial, 3000))
	}
	if !ownIPXERE.Match(serial) {
		t.Errorf("%s: the serial log never shows siteboot's iPXE (v2.0.0) running", m.name)
	}
	for _, s := range steps {
		if s.desc == "UiApp" || strings.Contains(s.desc, "Boot Manager") || strings.Contains(s.desc, "Firmware Setup") {
			t.Errorf("%s: OVMF opened its menu (%s): an iPXE exit came back as success", m.name, s)
		}
	}
	if f.next < 0 {
		l.diagnose()
		t.Fatalf("%s: OVMF never went on from its PXEv4 option (QEMU exited %v after %v)\nserial:\n%s", m.name, exited, timeSince(m.start), tail(serial, 3000))
	}
	if !efiDiskRE.Match(serial) {
		l.diagnose()
		t.Fatalf("%s: the disk's EFI application never ran (QEMU exited %v after %v)\nserial:\n%s", m.name, exited, timeSince(m.start), tail(serial, 3000))
	}
	disk := -1
	for i, s := range steps {
		if s.verb == "starting" && s.desc == "UEFI Misc Device" {
			disk = i
		}
	}
	if disk < f.next {
		t.Errorf("%s: the disk's option (UEFI Misc Device) never started after the network's", m.name)
	}
	if !m.kernel.IsZero() || kernelRE.Match(serial) {
		t.Errorf("%s: a kernel started", m.name)
	}
	return f
}

// plainExitLine is what the plain-exit script echoes before its "exit".
const plainExitLine = "SITEBOOT-PLAIN-EXIT"

// plainExitPort is the test's own HTTP server on the bridge namespace's address, which
// serves the plain-exit script.
const plainExitPort = 27040

// TestE2E_OVMFExitFallsThrough: every path on which iPXE gives up ends in "exit 1", and
// real firmware then boots its next Boot#### option (the "exit must fall through",
// from tinkerbell/tinkerbell #984). The site's own DHCP server (dnsmasq) hands x86-64 UEFI
// clients siteboot's iPXE from the agent (PXE: ipxe.efi over TFTP; HTTP boot:
// /boot/files/ipxe.efi) and iPXE the agent's chain script, as a site without proxy DHCP in
// front would; the agent's proxy DHCP stays silent for every machine here. The unknown
// machine (no entry) is answered "unknown", the refused one (its entry holds another
// machine's UUID) a refusal, both as the exit script; iPXE exits with status 1 and OVMF goes
// on to its next option (HTTPv4 on the same NIC, which runs iPXE again to the same end) and
// then to the disk, whose EFI application runs, never to its menu. A third machine's iPXE
// chains a script of the site's that ends in a plain "exit", which returns success: siteboot's
// build ends its own embedded script in "exit 1" after autoboot returns, so that machine
// falls through too.
func TestE2E_OVMFExitFallsThrough(t *testing.T) {
	t.Parallel()
	agentIP := testpeer.HostIP(1).String()
	plain := newMachine("ft-plain-exit", fwUEFIPXE, 0x94)
	l := newLab(t, 2,
		"--dhcp-match=set:ipxe,175",
		"--dhcp-vendorclass=set:pxe,PXEClient",
		"--dhcp-vendorclass=set:http,HTTPClient",
		"--dhcp-host="+plain.mac.String()+",set:plainexit",
		"--dhcp-boot=tag:pxe,tag:!ipxe,ipxe.efi,,"+agentIP,
		// EDK2's HTTP boot takes an offer only with option 60 HTTPClient in it.
		"--dhcp-option-force=tag:http,tag:!ipxe,60,HTTPClient",
		"--dhcp-boot=tag:http,tag:!ipxe,http://"+agentIP+"/boot/files/ipxe.efi",
		"--dhcp-boot=tag:ipxe,tag:!plainexit,http://"+agentIP+"/boot/chain.ipxe",
		"--dhcp-boot=tag:ipxe,tag:plainexit,"+bridgeURL(plainExitPort, "/plain-exit.ipxe"))
	l.useOwnIPXE()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /plain-exit.ipxe", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "#!ipxe\necho %s\nexit\n", plainExitLine)
	})
	l.serve(context.Background(), plainExitPort, mux)
	a := l.startAgent("agent-a", 1)
	l.waitActive(a)

	unknown := newMachine("ft-unknown", fwUEFIPXE, 0x91)
	refused := newMachine("ft-refused", fwUEFIPXE, 0x92)
	other, err := hwid.ParseUUID("8a5c1e0b-7d2f-4e36-9b41-0c6d2e8f7a13")
	if err != nil || hwid.SameMachine(other, refused.uuid) {
		t.Fatalf("the entry's UUID %s must not be a spelling of the machine's %s (%v)", other, refused.uuid, err)
	}
	l.plane.PrepareRamdisk(a.name, []sitelink.ProxyDhcpEntry{{
		MAC: refused.mac, UUID: other.String(), Arch: sitelink.ArchX86UEFI, Workflow: refused.workflow(), TokenRef: refused.tokenRef(),
		NotAfter: time.Now().Add(time.Hour),
	}})
	l.waitReady(a.name)

	// Two machines at a time (machineSlots): the third powers on once the first is off (the
	// disk's application powers it off).
	l.powerOn(unknown, bootOpts{efiDisk: true})
	l.powerOn(refused, bootOpts{efiDisk: true})
	for i, m := range []*machine{unknown, refused, plain} {
		if i == 1 {
			l.powerOn(plain, bootOpts{efiDisk: true})
		}
		f := l.waitFallThrough(m)
		t.Logf("%s: iPXE's exit came back as an error: OVMF went from %s to %s; the disk booted %v after power-on",
			m.name, f.steps[f.pxe], f.steps[f.next], timeSince(m.start))
	}
	if serial, _ := os.ReadFile(plain.serial); !bytes.Contains(serial, []byte(plainExitLine)) {
		t.Errorf("%s never ran the plain-exit script", plain.name)
	}
	for _, m := range []*machine{unknown, refused} {
		if serial, _ := os.ReadFile(m.serial); bytes.Contains(serial, []byte(plainExitLine)) {
			t.Errorf("%s ran the plain-exit script; its iPXE should have chained the agent's", m.name)
		}
	}

	mt := a.metrics()
	if n := mt.sum("siteboot_boot_answers_total", `answer="chain"`); n < 2 {
		t.Errorf("%v chain scripts answered, want one to each of the two machines' iPXE at least", n)
	}
	if n := mt.sum("siteboot_boot_answers_total", `answer="unknown"`); n < 1 {
		t.Errorf("%v unknown answers: the unknown machine's iPXE never asked for its script", n)
	}
	var refusals float64
	for _, r := range []string{"mismatch", "uuid-refused", "unbound"} {
		refusals += mt.sum("siteboot_boot_answers_total", `answer="`+r+`"`)
	}
	if refusals < 1 {
		t.Errorf("no refusal answered: the refused machine's iPXE never asked for its script")
	}
	if n := mt.sum("siteboot_boot_answers_total", `answer="script"`); n != 0 {
		t.Errorf("%v boot scripts answered", n)
	}
	if n := mt.sum("siteboot_proxydhcp_answered_total"); n != 0 {
		t.Errorf("proxy DHCP answered %v requests; the site's DHCP server alone names the files here", n)
	}
	if n := mt.sum("siteboot_tftp_transfers_total", `outcome="ok"`); n < 3 {
		t.Errorf("%v TFTP transfers completed, want ipxe.efi to each machine", n)
	}
	t.Logf("agent's answers: chain %v, unknown %v, refusals %v, files %v", mt.sum("siteboot_boot_answers_total", `answer="chain"`),
		mt.sum("siteboot_boot_answers_total", `answer="unknown"`), refusals, mt.sum("siteboot_boot_answers_total", `answer="file"`))
}

// TestE2E_LocalBootUEFI: local boot on purpose over UEFI (MAAS LP#1642298, Foreman #10207,
// Sidero Metal): the network stays first in the boot order and the machine's entry says
// "boot from the local disk". OVMF's PXE gets siteboot's iPXE from the agent at once, the
// agent answers the local-boot script, iPXE exits with status 1 and OVMF boots its next
// options: HTTP boot on the same NIC, which the agent answers the same way, and then the
// disk, whose EFI application runs. No kernel is fetched, and the agent counts local
// answers only.
func TestE2E_LocalBootUEFI(t *testing.T) {
	t.Parallel()
	l := newLab(t, 2)
	l.useOwnIPXE()
	a := l.startAgent("agent-a", 1)
	l.waitActive(a)
	m := newMachine("local-uefi", fwUEFIPXE, 0x93)
	l.prepareLocal(a.name, m, sitelink.ArchX86UEFI)
	l.powerOn(m, bootOpts{efiDisk: true})
	f := l.waitFallThrough(m)
	t.Logf("%s: the local-boot exit came back as an error: OVMF went from %s to %s; the disk booted %v after power-on",
		m.name, f.steps[f.pxe], f.steps[f.next], timeSince(m.start))
	l.checkLocalOnly(a, m)
	mt := a.metrics()
	if served := mt.sum("siteboot_cache_served_total"); served != 0 {
		t.Errorf("the cache served %v requests: a local boot fetches no kernel", served)
	}
}
