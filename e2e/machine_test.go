package e2e_test

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/assertion"
	"github.com/bettercompute/siteboot/hwid"
	"github.com/bettercompute/siteboot/internal/testpeer"
)

// firmware is how a machine network-boots.
type firmware string

const (
	fwBIOS     firmware = "bios"      // SeaBIOS with QEMU's iPXE ROM
	fwUEFIPXE  firmware = "uefi-pxe"  // OVMF's EDK2 PXE
	fwUEFIHTTP firmware = "uefi-http" // OVMF's EDK2 HTTP boot
)

const (
	ovmfCode = "/usr/share/OVMF/OVMF_CODE_4M.fd"
	ovmfVars = "/usr/share/OVMF/OVMF_VARS_4M.fd"
)

// machineSlots holds at most two QEMU machines at a time on the 2 cores CI has.
var machineSlots = make(chan struct{}, 2)

// machine is one QEMU machine on a tap of the lab's bridge.
type machine struct {
	name   string
	fw     firmware
	mac    hwid.MAC
	uuid   hwid.UUID
	serial string
	p      *testpeer.Process
	start  time.Time // power-on: when QEMU was started
	kernel time.Time // when the serial log first showed the kernel
}

func (m *machine) workflow() string { return "wf-" + m.name }
func (m *machine) tokenRef() string { return "tok-" + m.name }

// newMachine names a machine; i makes its MAC and UUID.
func newMachine(name string, fw firmware, i byte) *machine {
	u, _ := hwid.ParseUUID(fmt.Sprintf("4c4c4544-0042-1035-8052-c7c04f5a%04x", i))
	return &machine{name: name, fw: fw, mac: hwid.MAC{0x52, 0x54, 0x00, 0xe2, 0xe0, i}, uuid: u}
}

// bootOpts change how a machine runs.
type bootOpts struct {
	// rebootOnFail makes SeaBIOS reboot one second after it ran out of boot devices,
	// instead of halting: with -no-reboot QEMU then exits, which shows the fall-through.
	rebootOnFail bool
	// retry lets the firmware retry: rebootOnFail, and QEMU runs without -no-reboot, so
	// the machine boots again until it reaches a kernel (which powers off).
	retry bool
}

// powerOn starts m on a new tap of the lab's bridge, once a machine slot is free.
func (l *lab) powerOn(m *machine, o bootOpts) {
	t := l.t
	t.Helper()
	qemu := testpeer.LookPath(t, "qemu-system-x86_64", "qemu-system-x86")
	machineSlots <- struct{}{}
	started := false
	defer func() {
		if !started {
			<-machineSlots
		}
	}()
	l.mu.Lock()
	l.taps++
	tap := l.seg.AddTap(t, fmt.Sprintf("tap%d", l.taps))
	l.mu.Unlock()
	m.serial = filepath.Join(l.dir, m.name+".serial.log")
	args := []string{
		"-accel", "tcg", "-m", "512", "-nodefaults", "-display", "none",
		"-serial", "file:" + m.serial, "-uuid", m.uuid.String(),
		"-netdev", "tap,id=n0,ifname=" + tap + ",script=no,downscript=no",
	}
	if !o.retry {
		args = append(args, "-no-reboot")
	}
	nic := "virtio-net-pci,netdev=n0,mac=" + m.mac.String() + ",bootindex=1"
	switch m.fw {
	case fwBIOS:
		boot := "n"
		if o.retry || o.rebootOnFail {
			boot = "order=n,reboot-timeout=1000"
		}
		args = append(args, "-M", "pc,graphics=off", "-device", nic, "-boot", boot)
	case fwUEFIPXE, fwUEFIHTTP:
		for _, f := range []string{ovmfCode, ovmfVars} {
			if _, err := os.Stat(f); err != nil {
				testpeer.Unavailable(t, "no %s: install the Debian package ovmf", f)
			}
		}
		vars := filepath.Join(l.dir, m.name+".vars.fd")
		b, err := os.ReadFile(ovmfVars)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(vars, b, 0o600); err != nil {
			t.Fatal(err)
		}
		args = append(args, "-M", "q35,graphics=off",
			"-drive", "if=pflash,format=raw,unit=0,readonly=on,file="+ovmfCode,
			"-drive", "if=pflash,format=raw,unit=1,file="+vars,
			// No ROM on the NIC: EDK2's own network stack boots, not QEMU's iPXE.
			"-device", nic+",romfile=")
		if m.fw == fwUEFIHTTP {
			args = append(args,
				"-fw_cfg", "name=opt/org.tianocore/IPv4PXESupport,string=no",
				"-fw_cfg", "name=opt/org.tianocore/IPv6PXESupport,string=no")
		}
	}
	m.start = time.Now()
	m.p = testpeer.Start(t, testpeer.Cmd{Path: qemu, Args: args, Netns: l.seg.Bridge})
	started = true
	// The slot is free again once QEMU exits: the machine powered off or was stopped.
	go func() {
		<-m.p.Done()
		<-machineSlots
	}()
	l.mu.Lock()
	l.machines = append(l.machines, m)
	l.mu.Unlock()
	t.Cleanup(m.p.Stop)
}

// kernelRE is the first line the kernel prints on the serial console.
var kernelRE = regexp.MustCompile(`Linux version [0-9]`)

// wait polls the serial log until done matches it, QEMU exits, or limit passes; it notes
// when the kernel started. It returns the serial log and whether QEMU exited.
func (m *machine) wait(limit time.Duration, done func(serial []byte) bool) ([]byte, bool) {
	deadline := time.Now().Add(limit)
	for {
		serial, _ := os.ReadFile(m.serial)
		if m.kernel.IsZero() && kernelRE.Match(serial) {
			m.kernel = time.Now()
		}
		if done(serial) {
			return serial, false
		}
		if m.p.Exited() {
			serial, _ = os.ReadFile(m.serial)
			if m.kernel.IsZero() && kernelRE.Match(serial) {
				m.kernel = time.Now()
			}
			return serial, true
		}
		if time.Now().After(deadline) {
			return serial, false
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// bootTimeout bounds one machine's boot to the ramdisk under TCG on a loaded machine.
const bootTimeout = 4 * time.Minute

// waitCmdline waits for the ramdisk to print the kernel command line and returns its words.
func (m *machine) waitCmdline(t *testing.T) []string {
	t.Helper()
	serial, exited := m.wait(bootTimeout, func(b []byte) bool { _, ok := testpeer.Cmdline(b); return ok })
	words, ok := testpeer.Cmdline(serial)
	if !ok {
		t.Fatalf("%s (%s) never printed its kernel command line (QEMU exited: %v, after %v)", m.name, m.fw, exited, time.Since(m.start).Round(time.Second))
	}
	return words
}

func param(words []string, name string) string {
	for _, w := range words {
		if v, ok := strings.CutPrefix(w, name+"="); ok {
			return v
		}
	}
	return ""
}

// checkBooted verifies what the machine's kernel command line says, as the ramdisk and the
// control plane would: the assertion verifies for this machine and was signed by the agent
// holding the lease at its epoch, with the machine's MAC and UUID as QEMU spelled it; the
// token is the one minted for the entry; the cache URL is a grant of the agent that served.
func (l *lab) checkBooted(m *machine, words []string, by *labAgent) assertion.Assertion {
	t := l.t
	t.Helper()
	ctx := context.Background()
	text := param(words, "bc.assertion")
	a, err := l.verifier.Verify(ctx, text, assertion.Join{Site: siteID, MACs: []hwid.MAC{m.mac}, UUID: m.uuid})
	if err != nil {
		t.Fatalf("the assertion on %s's command line is refused: %v\ncommand line: %q", m.name, err, words)
	}
	rec, err := l.plane.LeaseRecord(ctx, siteID)
	if err != nil {
		t.Fatal(err)
	}
	if a.Agent != by.name || a.Site != siteID {
		t.Errorf("assertion by %s of %s, want %s of %s", a.Agent, a.Site, by.name, siteID)
	}
	if rec.Holder != by.name || a.Epoch != rec.Epoch || a.Epoch == 0 {
		t.Errorf("assertion at epoch %d; the lease is %v, want %s holding it at that epoch", a.Epoch, rec, by.name)
	}
	if a.MAC != m.mac {
		t.Errorf("assertion MAC %s, want %s", a.MAC, m.mac)
	}
	// QEMU's -uuid is the SMBIOS product UUID in its canonical spelling; the firmware must
	// have reported it (not a byte-swapped spelling) and the assertion must carry it so.
	if a.UUID != m.uuid {
		t.Errorf("assertion UUID %s, want %s exactly as QEMU's -uuid spells it (a spelling of it: %v)", a.UUID, m.uuid, hwid.SameMachine(a.UUID, m.uuid))
	}
	if ip := a.IP; ip.Less(netip.MustParseAddr("192.0.2.100")) || netip.MustParseAddr("192.0.2.199").Less(ip) {
		t.Errorf("assertion IP %s, want the dnsmasq lease in 192.0.2.100-199", a.IP)
	}
	if a.Workflow != m.workflow() {
		t.Errorf("assertion workflow %q, want %q", a.Workflow, m.workflow())
	}
	if want := l.plane.TokenFor(m.workflow(), m.tokenRef()); want == "" || param(words, "bc.token") != want {
		t.Errorf("bc.token %q, want the token minted for the entry %q", param(words, "bc.token"), want)
	}
	if c := param(words, "bc.cache"); !strings.HasPrefix(c, "http://"+by.host.IP.String()+"/cache/t/") {
		t.Errorf("bc.cache %q, want a grant of %s's cache", c, by.name)
	}
	if !slices.Contains(words, "console=ttyS0") || param(words, "bc.gateway") != "https://gateway.e2e.example:443" {
		t.Errorf("command line %q lacks the site's cmdline or parameters", words)
	}
	// A second use of the same assertion is a replay.
	if _, err := l.verifier.Verify(ctx, text, assertion.Join{Site: siteID, MACs: []hwid.MAC{m.mac}, UUID: m.uuid}); assertion.ReasonOf(err) != assertion.ReasonReplay {
		t.Errorf("the assertion used twice: %v, want a replay refusal", err)
	}
	return a
}

// checkCacheServed checks that the kernel and initrd reached the machine through the cache
// grant its command line carries: the machine's HTTP requests on the wire fetched both
// digests under that grant, and the agent's cache served them.
func (l *lab) checkCacheServed(m *machine, words []string, by *labAgent, before metrics) {
	t := l.t
	t.Helper()
	after := by.metrics()
	if served := after.sum("siteboot_cache_served_total") - before.sum("siteboot_cache_served_total"); served < 2 {
		t.Errorf("%s's cache served %v requests during the boot, want the kernel and the initrd", by.name, served)
	}
	grant := strings.TrimPrefix(param(words, "bc.cache"), "http://"+by.host.IP.String())
	reqs := l.httpRequests(by.host.IP)
	for _, sha := range []string{l.kernel, l.initrd} {
		if want := "GET " + grant + sha; grant == "" || !slices.Contains(reqs, want) {
			t.Errorf("no %q among the requests to %s on the wire: %q", want, by.name, reqs)
		}
	}
}

// checkSilent checks that no agent answered m's DHCP on the wire and that the machine's
// firmware fell through: QEMU exited (SeaBIOS asked for the reboot -no-reboot refuses)
// without a kernel having started.
func (l *lab) checkSilent(m *machine, agents ...*labAgent) {
	t := l.t
	t.Helper()
	serial, exited := m.wait(bootTimeout, func([]byte) bool { return false })
	if !exited || !m.kernel.IsZero() {
		t.Errorf("%s: QEMU exited %v, kernel started %v; want the firmware to fall through without a kernel\nserial:\n%s", m.name, exited, !m.kernel.IsZero(), tail(serial, 3000))
	}
	for _, a := range agents {
		if at, ok := l.firstPacket("udp and src host " + a.host.IP.String() + " and (src port 67 or src port 4011)"); ok {
			t.Errorf("%s sent a proxy DHCP reply at %v", a.name, at.Format(time.StampMilli))
		}
		if reqs := l.httpRequests(a.host.IP); len(reqs) != 0 {
			t.Errorf("the machine asked %s for %q", a.name, reqs)
		}
	}
}

var requestLineRE = regexp.MustCompile(`(GET|HEAD) (/\S*) HTTP/1\.[01]`)

// httpRequests returns the request lines ("GET /path") the capture saw the machines send to
// server's port 80, in order (the test's own requests, from the bridge address, left out).
func (l *lab) httpRequests(server netip.Addr) []string {
	out, err := exec.Command("tcpdump", "-r", l.capture, "-n", "-A",
		"tcp dst port 80 and dst host "+server.String()+" and not src host "+testpeer.BridgeIP.String()).Output()
	if err != nil {
		l.t.Fatalf("tcpdump -r %s: %v", l.capture, err)
	}
	var reqs []string
	for _, m := range requestLineRE.FindAllSubmatch(out, -1) {
		reqs = append(reqs, string(m[1])+" "+string(m[2]))
	}
	return reqs
}

// logSlow logs what the firmware printed before the kernel when the kernel started more
// than limit after power-on.
func (m *machine) logSlow(t *testing.T, limit time.Duration) {
	t.Helper()
	if m.kernel.IsZero() || m.kernel.Sub(m.start) <= limit {
		return
	}
	serial, _ := os.ReadFile(m.serial)
	if i := kernelRE.FindIndex(serial); i != nil {
		serial = serial[:i[0]]
	}
	t.Logf("%s (%s): kernel %v after power-on; the firmware said (last 4000 bytes before the kernel):\n%s", m.name, m.fw, m.kernel.Sub(m.start).Round(100*time.Millisecond), tail(serial, 4000))
}
