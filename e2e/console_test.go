package e2e_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"testing"

	"github.com/bettercompute/siteboot/bootevents"
	"github.com/bettercompute/siteboot/hwid"
	"github.com/bettercompute/siteboot/sitelink"
	"github.com/bettercompute/siteboot/syslogd"
)

// A machine's own console in its timeline: the agent runs its syslog receiver on port 514 of
// its boot address (boot.syslog_listen), the chain script sets iPXE's syslog console to it,
// and siteboot's iPXE builds (which have that console; Debian's do not) send every console
// line there. The lines land in the machine's boot in /debug/machines/{mac}, with the
// secrets of every URL redacted.

// syslogAt is the [boot] key that runs the agent's syslog receiver on port 514 of host i.
func (l *lab) syslogAt(i int) string {
	return fmt.Sprintf("syslog_listen = %q\n", l.seg.Hosts[i].IP.String()+":514")
}

// report is a's answer on /debug/machines/{mac}; ok is false when it did not answer 200.
func (a *labAgent) report(mac hwid.MAC) (bootevents.Report, bool) {
	var rep bootevents.Report
	st, body := get(a.host.Netns, "http://127.0.0.1:9464/debug/machines/"+mac.String())
	if st != http.StatusOK || json.Unmarshal([]byte(body), &rep) != nil || rep.Machine == nil {
		return rep, false
	}
	return rep, true
}

// consoleLines returns the console lines of every boot of mac in a's timeline.
func (a *labAgent) consoleLines(mac hwid.MAC) []bootevents.Line {
	rep, ok := a.report(mac)
	if !ok {
		return nil
	}
	var lines []bootevents.Line
	for _, b := range rep.Machine.Boots {
		lines = append(lines, b.Console...)
	}
	return lines
}

// urlSecrets returns the secrets of the HTTP requests to server on the segment: every query
// value (the boot nonce, the discovery parameters) and every path segment after /t/ (the
// cache grant), of 8 bytes or more.
func (l *lab) urlSecrets(server netip.Addr) []string {
	var secrets []string
	for _, r := range l.httpRequests(server) {
		_, target, _ := strings.Cut(r, " ")
		u, err := url.Parse(target)
		if err != nil {
			continue
		}
		for _, vs := range u.Query() {
			for _, v := range vs {
				if len(v) >= 8 {
					secrets = append(secrets, v)
				}
			}
		}
		if _, after, ok := strings.Cut(u.Path, "/t/"); ok {
			if grant, _, _ := strings.Cut(after, "/"); len(grant) >= 8 {
				secrets = append(secrets, grant)
			}
		}
	}
	return secrets
}

// checkConsole waits until a's timeline of m holds iPXE's console lines, at least one of
// them a fetch from a's boot address, and checks that none holds a secret of the URLs m
// fetched (on the wire in clear) or a discovery token or assertion, and that the cache
// fetches are there with their grants redacted.
func (l *lab) checkConsole(a *labAgent, m *machine) {
	t := l.t
	t.Helper()
	agentURL := "http://" + a.host.IP.String() + "/"
	var lines []bootevents.Line
	fetched := func() bool {
		lines = a.consoleLines(m.mac)
		for _, ln := range lines {
			if strings.Contains(ln.Text, agentURL) {
				return true
			}
		}
		return false
	}
	// The lines were sent before the kernel was fetched; the wait covers a loaded receiver.
	if !waitFor(bootTimeout, fetched) {
		rep, _ := a.report(m.mac)
		b, _ := json.MarshalIndent(rep, "", "  ")
		t.Fatalf("%s's timeline holds %d console lines, none a fetch from %s\n%s", m.mac, len(lines), agentURL, b)
	}
	var text strings.Builder
	for _, ln := range lines {
		fmt.Fprintf(&text, "  %s %s %s\n", ln.Time.Format("15:04:05.000"), ln.Peer, ln.Text)
	}
	t.Logf("%s's console in %s's timeline (%d lines):\n%s", m.mac, a.name, len(lines), text.String())
	secrets := l.urlSecrets(a.host.IP)
	if len(secrets) == 0 {
		t.Fatalf("no secret in the URLs %s fetched from %s: the check below shows nothing", m.name, a.name)
	}
	redactedGrant := false
	for _, ln := range lines {
		if strings.Contains(ln.Text, "bc.token=") || strings.Contains(ln.Text, "bc.assertion=") {
			t.Errorf("a console line holds a discovery token or assertion: %q", ln.Text)
		}
		redactedGrant = redactedGrant || strings.Contains(ln.Text, "/cache/t/"+syslogd.Redacted+"/")
		for _, s := range secrets {
			if strings.Contains(ln.Text, s) {
				t.Errorf("a console line holds a secret of the URLs on the wire (%.6s...): %q", s, ln.Text)
			}
		}
	}
	// iPXE printed the kernel's and the initrd's cache URLs; the timeline holds them without
	// the grant.
	if !redactedGrant {
		t.Errorf("no console line holds a cache fetch with its grant redacted (/cache/t/%s/)", syslogd.Redacted)
	}
	// explain prints the same lines.
	code, out := a.explain(t, m.mac)
	if code != 0 || !strings.Contains(out, "  console: ") {
		t.Errorf("siteagent explain %s: exit %d, want 0 and the console lines\n%s", m.mac, code, out)
	}
}

// TestE2E_ConsoleLinesUEFIPXE: OVMF's PXE loads the agent's own snponly.efi (no tftp_root);
// its console lines, from the chain script's syslog setting on, are in the machine's
// timeline with their URLs redacted.
func TestE2E_ConsoleLinesUEFIPXE(t *testing.T) {
	t.Parallel()
	l := newLab(t, 2)
	l.ownBuilds = true
	l.bootExtra = l.syslogAt(1)
	a := l.startAgent("agent-a", 1)
	l.waitActive(a)
	m := newMachine("console-uefi", fwUEFIPXE, 0x97)
	l.bootChecked(a, m, sitelink.ArchX86UEFI)
	if n := a.metrics().sum("siteboot_tftp_transfers_total", `outcome="ok"`); n < 1 {
		t.Errorf("%v TFTP transfers completed, want the agent's snponly.efi", n)
	}
	l.checkConsole(a, m)
}

// TestE2E_ConsoleLinesBIOS: SeaBIOS's iPXE ROM (Debian's, without the syslog console) is
// told by the site's DHCP server to chain siteboot's undionly.kpxe, as in
// TestE2E_LocalBootBIOSOwnIPXE; that build runs the agent's chain script, which points its
// console at the agent, and boots the ramdisk. Its lines are in the machine's timeline.
func TestE2E_ConsoleLinesBIOS(t *testing.T) {
	t.Parallel()
	l := newOwnBIOSLab(t, consoleScriptPort)
	l.bootExtra = l.syslogAt(1)
	a := l.startAgent("agent-a", 1)
	l.waitActive(a)
	m := newMachine("console-bios", fwBIOS, 0x98)
	l.bootChecked(a, m, sitelink.ArchBIOS)
	l.checkConsole(a, m)
}

// consoleScriptPort is TestE2E_ConsoleLinesBIOS's own HTTP server on the bridge namespace's
// address, which serves the site's script.
const consoleScriptPort = 27042
