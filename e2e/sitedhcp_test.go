package e2e_test

import (
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/internal/testpeer"
	"github.com/bettercompute/siteboot/sitelink"
)

// packetTimes returns the times of the packets of the capture that match a tcpdump filter
// expression, in order.
func (l *lab) packetTimes(filter string) []time.Time {
	l.t.Helper()
	out, err := exec.Command("tcpdump", "-r", l.capture, "-n", "-tt", filter).Output()
	if err != nil {
		l.t.Fatalf("tcpdump -r %s %q: %v", l.capture, filter, err)
	}
	var ts []time.Time
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		sec, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			continue
		}
		ts = append(ts, time.Unix(0, int64(sec*1e9)))
	}
	return ts
}

// TestE2E_SiteDHCPAnswersFirst: the site's DHCP server answers first and fast, with an
// address and no boot file (pixiecore's README.booting.md; warewulf3 #137: iPXE takes such
// an offer and stops). SeaBIOS's iPXE ROM powers on while only dnsmasq is on the segment:
// dnsmasq answers, there is nothing to boot, and the firmware tries again (SeaBIOS's boot
// retry). The agent then comes up and gets the machine's entry; the firmware keeps asking,
// and once a boot file arrives from proxy DHCP the machine boots the ramdisk through the
// agent. On the attempt that boots, the capture shows which server's offer came first (it
// varies from run to run; iPXE waits for proxy offers after the first offer, so it boots
// either way), and the test logs it.
func TestE2E_SiteDHCPAnswersFirst(t *testing.T) {
	t.Parallel()
	l := newLab(t, 2)
	m := newMachine("site-first", fwBIOS, 0x70)
	m.bootLimit = 2 * bootTimeout
	l.powerOn(m, bootOpts{retry: true})
	m.watchRestarts()
	site := testpeer.HostIP(0).String()

	// Only the site's DHCP server: an address, no boot file; the firmware finds nothing
	// and starts again.
	serial, _ := m.wait(bootTimeout, func(s []byte) bool { return len(firmwareStartRE.FindAllIndex(s, -1)) >= 2 })
	if n := len(firmwareStartRE.FindAllIndex(serial, -1)); n < 2 {
		l.diagnose()
		t.Fatalf("the firmware never tried again after the site's DHCP answer (%d starts)\nserial:\n%s", n, tail(serial, 3000))
	}
	siteOffers := l.packetTimes("udp and src host " + site + " and src port 67 and " + bootpChaddr(m.mac))
	if len(siteOffers) == 0 {
		t.Fatalf("dnsmasq never answered %s", m.mac)
	}
	t.Logf("first attempt: dnsmasq answered %s %d times, no proxy DHCP on the segment", m.mac, len(siteOffers))

	a := l.startAgent("agent-a", 1)
	l.waitActive(a)
	l.prepare(a.name, m, sitelink.ArchBIOS)
	ready := time.Now()
	words := m.waitCmdline(t)
	l.checkBooted(m, words, a)
	_, starts := m.retryPeriod(time.Now())
	t.Logf("booted %v after the entry was ready, after %d firmware starts", timeSince(ready), starts)

	// The exchange that booted: the agent's first offer to the machine, and the site's
	// offers of the same exchange (within iPXE's 2 s wait for proxy offers before it).
	agentOffers := l.packetTimes(proxyReplyTo(a, m.mac))
	if len(agentOffers) == 0 {
		t.Fatalf("no proxy DHCP reply from %s in the capture", a.name)
	}
	first := agentOffers[0]
	siteOffers = l.packetTimes("udp and src host " + site + " and src port 67 and " + bootpChaddr(m.mac))
	var before time.Duration = -1
	for _, at := range siteOffers {
		if !at.After(first) && first.Sub(at) < 2*time.Second {
			before = first.Sub(at)
		}
	}
	if before >= 0 {
		t.Logf("on the exchange that booted, dnsmasq's answer came %v before the agent's, and iPXE took the agent's boot file", before.Round(time.Microsecond))
	} else {
		t.Logf("on the exchange that booted, the agent answered before dnsmasq")
	}
}

// option60NoOption43 runs an OVMF machine (EDK2's own PXE) on a segment whose DHCP server,
// dnsmasq, answers with option 60 "PXEClient" and no option 43 (FOG's docs, #188), plus
// dnsmasqArgs: EDK2 then takes the site's offer as a boot-server offer (its "BINL" kind) and
// asks that offer's next server on port 4011 for the boot file. It waits until the machine
// boots the ramdisk or its serial log matches giveUp, and returns the lab, the agent, the
// machine, the serial log and the kernel command line's words (nil when it did not boot).
func option60NoOption43(t *testing.T, i byte, giveUp *regexp.Regexp, dnsmasqArgs ...string) (*lab, *labAgent, *machine, []byte, []string) {
	l := newLab(t, 2, append([]string{"--dhcp-option-force=60,PXEClient"}, dnsmasqArgs...)...)
	a := l.startAgent("agent-a", 1)
	l.waitActive(a)
	m := newMachine("opt60-"+strconv.Itoa(int(i)), fwUEFIPXE, i)
	l.prepare(a.name, m, sitelink.ArchX86UEFI)
	l.powerOn(m, bootOpts{})
	serial, _ := m.wait(bootTimeout, func(b []byte) bool {
		_, ok := testpeer.Cmdline(b)
		return ok || giveUp.Match(b)
	})
	words, _ := testpeer.Cmdline(serial)
	return l, a, m, serial, words
}

// explainsWhy asks the agent why m did not boot and checks that the answer names the site's
// DHCP server's option 60 PXEClient without option 43.
func explainsWhy(t *testing.T, a *labAgent, m *machine) {
	t.Helper()
	var out string
	says := func() bool { return strings.Contains(out, "option 60 PXEClient") && strings.Contains(out, "option 43") }
	// The agent's events of the last requests may trail the firmware's console a little.
	waitFor(30*time.Second, func() bool {
		_, out = a.explain(t, m.mac)
		return says()
	})
	t.Logf("siteagent explain %s:\n%s", m.mac, out)
	if !says() {
		t.Errorf("siteagent explain %s does not say why (option 60 PXEClient without option 43):\n%s", m.mac, out)
	}
}

// ipxeGaveUpRE is what iPXE prints when its DHCP gave it nothing to boot.
var ipxeGaveUpRE = regexp.MustCompile(`No more network devices`)

// TestE2E_SiteDHCPOption60NoOption43NextServerAgent: the site's DHCP server sends option 60
// PXEClient without option 43 and names the agent as next server. EDK2 asks the agent on
// port 4011, gets ipxe.efi and loads it over TFTP. iPXE's own DHCP then takes the site's
// offer as its ProxyDHCP offer too (it carries PXEClient) and asks the site's server at
// 4011, where nothing answers: "Nothing to boot". The machine boots, or the agent says why.
func TestE2E_SiteDHCPOption60NoOption43NextServerAgent(t *testing.T) {
	t.Parallel()
	l, a, m, serial, words := option60NoOption43(t, 0x71, ipxeGaveUpRE, "--dhcp-boot=,,"+testpeer.HostIP(1).String())
	mt := a.metrics()
	if n := mt.sum("siteboot_proxydhcp_answered_total", `port="4011"`); n < 1 {
		t.Errorf("proxy DHCP answered %v requests on port 4011, want the firmware's boot-server request", n)
	}
	if n := mt.sum("siteboot_tftp_transfers_total", `outcome="ok"`); n < 1 {
		t.Errorf("%v TFTP transfers went through, want ipxe.efi", n)
	}
	if words != nil {
		l.checkBooted(m, words, a)
		return
	}
	site := testpeer.HostIP(0).String()
	t.Logf("iPXE's requests to the site's server at 4011: %d; serial: %s", len(l.packetTimes("udp and dst host "+site+" and dst port 4011 and "+bootpChaddr(m.mac))),
		ipxeGaveUpRE.Find(serial))
	explainsWhy(t, a, m)
}

// TestE2E_SiteDHCPOption60NoOption43NoNextServer: the same without the agent as next server
// (dnsmasq names itself): EDK2's PXE never asks the agent at 4011 and finds no valid offer;
// its HTTP boot then loads ipxe.efi from the agent, and iPXE takes the site's server as its
// ProxyDHCP server as above. The machine boots, or the agent says why.
func TestE2E_SiteDHCPOption60NoOption43NoNextServer(t *testing.T) {
	t.Parallel()
	l, a, m, _, words := option60NoOption43(t, 0x72, ipxeGaveUpRE)
	if words != nil {
		l.checkBooted(m, words, a)
		return
	}
	toAgent := len(l.packetTimes("udp and dst host " + a.host.IP.String() + " and dst port 4011 and " + bootpChaddr(m.mac)))
	site := len(l.packetTimes("udp and dst host " + testpeer.HostIP(0).String() + " and dst port 4011 and " + bootpChaddr(m.mac)))
	t.Logf("requests at 4011: to the site's server %d, to the agent %d", site, toAgent)
	if toAgent != 0 {
		t.Errorf("the firmware asked the agent at 4011 %d times and still did not boot", toAgent)
	}
	explainsWhy(t, a, m)
}
