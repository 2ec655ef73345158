package e2e_test

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/internal/testpeer"
	"github.com/bettercompute/siteboot/ipxe"
	"github.com/bettercompute/siteboot/ipxebin"
	"github.com/bettercompute/siteboot/sitelink"
)

// siteTFTPRoot writes siteboot's iPXE build for x86-64 UEFI as ipxe.efi into a directory of
// its own, for the site's DHCP server to serve over TFTP itself (dnsmasq --enable-tftp): a
// fenced agent's TFTP refuses every request, so a site that hands out iPXE from elsewhere
// is the one whose machines reach the fenced agent's scripts over PXE.
func siteTFTPRoot(t *testing.T) string {
	t.Helper()
	b, err := fs.ReadFile(ipxebin.Embedded(), ipxebin.SnponlyX8664)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "site-tftp")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ipxe.efi"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// logTimeRE is the time of a line of the agent's text log.
var logTimeRE = regexp.MustCompile(`^\s*time=(\S+) `)

// logTimes returns when the agent logged each line holding msg, in order. The agent's log
// holds every answer (a packet capture under load may miss one).
func (a *labAgent) logTimes(t *testing.T, msg string) []time.Time {
	t.Helper()
	var out []time.Time
	for _, line := range strings.Split(a.p.Output(), "\n") {
		if !strings.Contains(line, msg) {
			continue
		}
		m := logTimeRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		at, err := time.Parse(time.RFC3339Nano, m[1])
		if err != nil {
			t.Fatalf("the agent's log time %q: %v", m[1], err)
		}
		out = append(out, at)
	}
	return out
}

// TestE2E_OVMFFencedFallsThrough: a machine whose site's DHCP server names the agent's chain
// URL, while the agent is fenced (another node holds the boot lease and no agent will
// answer), waits out the fenced answer and then boots its disk: real firmware (OVMF) and
// siteboot's iPXE build, the disk after the NIC in the boot order. iPXE runs no body of the
// fenced 503, so its chain script backs off through its attempts (ipxe.DefaultAttempts,
// sleeping ipxe.DefaultDelay doubling: 2 + 4 + 8 s), gives up and runs "exit 1"; OVMF goes
// on to its next option (HTTP boot on the same NIC, which gets iPXE from the fenced agent's
// /boot/files and ends the same way) and then to the disk, whose EFI application runs,
// never to its menu (UiApp). Before, the give-up was a reboot, and the machine came back to
// the same network boot for as long as no agent was active (QEMU runs with -no-reboot here,
// so a reboot ends the run and the test fails). The site's DHCP server serves iPXE over
// TFTP itself: a fenced agent's TFTP refuses every request.
//
// The bound comes from the settings: each iPXE run asks /boot/ipxe exactly DefaultAttempts
// times (the agent's log and counter), and its first and last asks are at least the
// back-off's sum apart (iPXE sleeps it) and at most that plus a slack per ask for a loaded
// TCG machine.
func TestE2E_OVMFFencedFallsThrough(t *testing.T) {
	t.Parallel()
	agentIP := testpeer.HostIP(1).String()
	siteIP := testpeer.HostIP(0).String()
	l := newLab(t, 2,
		"--enable-tftp", "--tftp-root="+siteTFTPRoot(t),
		"--dhcp-match=set:ipxe,175",
		"--dhcp-vendorclass=set:pxe,PXEClient",
		"--dhcp-vendorclass=set:http,HTTPClient",
		"--dhcp-boot=tag:pxe,tag:!ipxe,ipxe.efi,,"+siteIP,
		"--dhcp-option-force=tag:http,tag:!ipxe,60,HTTPClient",
		"--dhcp-boot=tag:http,tag:!ipxe,http://"+agentIP+"/boot/files/ipxe.efi",
		"--dhcp-boot=tag:ipxe,http://"+agentIP+"/boot/chain.ipxe")
	l.useOwnIPXE()
	l.holdLease("agent-holder")
	a := l.startAgent("agent-a", 1)
	m := newMachine("ft-fenced", fwUEFIPXE, 0x95)
	l.prepare(a.name, m, sitelink.ArchX86UEFI)
	if a.active() {
		t.Fatalf("%s is active while agent-holder holds the lease", a.name)
	}

	l.powerOn(m, bootOpts{efiDisk: true})
	f := l.waitFallThrough(m)
	t.Logf("%s: iPXE gave up on the fenced agent with exit 1: OVMF went from %s to %s; the disk booted %v after power-on",
		m.name, f.steps[f.pxe], f.steps[f.next], timeSince(m.start))

	serial, _ := os.ReadFile(m.serial)
	giveUp := []byte("siteboot: giving up after " + strconv.Itoa(ipxe.DefaultAttempts) + " attempts")
	runs := bytes.Count(serial, giveUp)
	if runs < 1 {
		t.Errorf("%s: the serial log never shows the chain script giving up (%q)", m.name, giveUp)
	}

	// Each iPXE run asked exactly DefaultAttempts times, spaced by the back-off.
	var backoff time.Duration
	for i, d := 0, ipxe.DefaultDelay; i < ipxe.DefaultAttempts-1; i++ {
		backoff += d
		d = min(2*d, ipxe.DefaultMaxDelay)
	}
	const perAsk = 10 * time.Second // a request and iPXE's own work between asks, under TCG on a loaded machine
	limit := backoff + ipxe.DefaultAttempts*perAsk
	asks := a.logTimes(t, `msg="ipxe: fenced, machine told to wait and then give up"`)
	if len(asks) != runs*ipxe.DefaultAttempts {
		t.Errorf("%d fenced answers in the agent's log, want %d for each of the %d runs of iPXE that gave up", len(asks), ipxe.DefaultAttempts, runs)
	}
	for r := 0; r+ipxe.DefaultAttempts <= len(asks); r += ipxe.DefaultAttempts {
		span := asks[r+ipxe.DefaultAttempts-1].Sub(asks[r])
		t.Logf("iPXE run %d: %d asks over %v (back-off %v, bound %v)", r/ipxe.DefaultAttempts+1, ipxe.DefaultAttempts, span.Round(100*time.Millisecond), backoff, limit)
		if span < backoff-time.Second || span > limit {
			t.Errorf("iPXE run %d asked over %v, want between the back-off %v and %v", r/ipxe.DefaultAttempts+1, span, backoff, limit)
		}
	}

	mt := a.metrics()
	if n := mt.sum("siteboot_boot_answers_total", `answer="fenced"`); n != float64(len(asks)) || n < ipxe.DefaultAttempts {
		t.Errorf("%v fenced answers counted, want one for each of the %d in the agent's log (and at least %d)", n, len(asks), ipxe.DefaultAttempts)
	}
	if n := mt.sum("siteboot_boot_answers_total", `answer="script"`); n != 0 {
		t.Errorf("%v boot scripts answered by a fenced agent", n)
	}
	if n := mt.sum("siteboot_proxydhcp_answered_total"); n != 0 {
		t.Errorf("the fenced agent's proxy DHCP answered %v requests", n)
	}
	if !m.kernel.IsZero() {
		t.Errorf("a kernel started")
	}
}
