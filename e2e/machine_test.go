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
	"sync"
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

// machine is one QEMU machine on taps of the lab's bridge, or of the bridge behind its
// router when routed.
type machine struct {
	name string
	fw   firmware
	mac  hwid.MAC   // the NIC with the boot entry, which the machine boots from
	nics []hwid.MAC // every NIC in boot order, mac among them
	uuid hwid.UUID
	// entryUUID is the spelling of uuid its boot entry holds; zero means uuid as QEMU's
	// -uuid spells it.
	entryUUID hwid.UUID
	// routed puts the machine on the lab's second segment, behind the DHCP relay.
	routed bool
	// unplugged is a NIC whose cable is out: its tap is on no bridge, so what it sends
	// reaches nobody (explain_test.go).
	unplugged hwid.MAC
	// bootLimit bounds power-on to the ramdisk's command line; zero means bootTimeout.
	bootLimit time.Duration
	serial    string
	p         *testpeer.Process
	start     time.Time // power-on: when QEMU was started
	kernel    time.Time // when the serial log first showed the kernel

	mu       sync.Mutex
	restarts []time.Time // when the serial log showed each firmware start (watchRestarts)
}

func (m *machine) workflow() string { return "wf-" + m.name }

// entrySpelling is the UUID the machine's boot entry holds.
func (m *machine) entrySpelling() hwid.UUID {
	if m.entryUUID == (hwid.UUID{}) {
		return m.uuid
	}
	return m.entryUUID
}
func (m *machine) tokenRef() string { return "tok-" + m.name }

// newMachine names a machine; i makes its MAC and UUID.
func newMachine(name string, fw firmware, i byte) *machine {
	u, _ := hwid.ParseUUID(fmt.Sprintf("4c4c4544-0042-1035-8052-c7c04f5a%04x", i))
	mac := hwid.MAC{0x52, 0x54, 0x00, 0xe2, 0xe0, i}
	return &machine{name: name, fw: fw, mac: mac, nics: []hwid.MAC{mac}, uuid: u}
}

// newTwoNICMachine is newMachine with a first NIC (52:54:00:e2:e1:i) before the one that
// has the boot entry (52:54:00:e2:e0:i): the firmware tries the first NIC first.
func newTwoNICMachine(name string, fw firmware, i byte) *machine {
	m := newMachine(name, fw, i)
	m.nics = []hwid.MAC{{0x52, 0x54, 0x00, 0xe2, 0xe1, i}, m.mac}
	// The firmware gives up on NIC 1 first: SeaBIOS's iPXE ROM within seconds, OVMF only
	// after its PXE (four DHCP discovers, over a minute of its own timeouts) and then its
	// HTTP boot (as long again) have failed there.
	m.bootLimit = 2 * bootTimeout
	return m
}

// addressRange is where the site's DHCP server leases the machine its address.
func (m *machine) addressRange() (first, last netip.Addr) {
	if m.routed {
		return netip.MustParseAddr("198.51.100.100"), netip.MustParseAddr("198.51.100.199")
	}
	return netip.MustParseAddr("192.0.2.100"), netip.MustParseAddr("192.0.2.199")
}

// bootOpts change how a machine runs.
type bootOpts struct {
	// rebootOnFail makes SeaBIOS reboot one second after it ran out of boot devices,
	// instead of halting: with -no-reboot QEMU then exits, which shows the fall-through.
	rebootOnFail bool
	// retry lets the firmware retry: rebootOnFail, and QEMU runs without -no-reboot, so
	// the machine boots again until it reaches a kernel (which powers off).
	retry bool
	// noNetBoot (SeaBIOS) gives the NICs no boot ROM and boots from the disk, which the
	// machine has not: it finds nothing to boot and halts, powered on (bmc_test.go).
	noNetBoot bool
	// secureBoot (OVMF) runs the firmware with Secure Boot enforced: the Secure Boot build
	// with SMM and the Microsoft keys enrolled (secureboot_test.go).
	secureBoot bool
	// smbiosUUID gives the machine its UUID as an SMBIOS type 1 field (-smbios
	// type=1,uuid=), instead of QEMU's -uuid (uuid_test.go).
	smbiosUUID bool
	// localDisk (SeaBIOS) gives the machine a disk after its NICs in the boot order, whose
	// boot sector prints localDiskLine on the serial port and halts (localboot_test.go).
	localDisk bool
	// efiDisk (OVMF) gives the machine a disk after its NICs in the boot order, an ESP whose
	// EFI/BOOT/BOOTX64.EFI prints efiDiskLine and powers off (efidisk_test.go), and turns
	// IPv6 off so that the NIC's boot options are PXEv4 and HTTPv4 only.
	efiDisk bool
	// espDir (OVMF), with efiDisk, is the ESP's tree the disk shows in place of
	// efiDiskDir's (sbdisk_test.go: shim and GRUB, for a machine that enforces Secure Boot).
	espDir string
	// httpsCACerts (OVMF) are the CAs the firmware's HTTPS boot trusts, an EFI signature
	// list passed as fw_cfg etc/edk2/https/cacerts (https_firmware_test.go).
	httpsCACerts []byte
}

// powerOn starts m on a new tap of the lab's bridge, once a machine slot is free.
func (l *lab) powerOn(m *machine, o bootOpts) {
	t := l.t
	t.Helper()
	qemu := ""
	if m.fw.arm64() {
		qemu = testpeer.LookPath(t, "qemu-system-aarch64", "qemu-system-arm")
	} else {
		qemu = testpeer.LookPath(t, "qemu-system-x86_64", "qemu-system-x86")
	}
	machineSlots <- struct{}{}
	started := false
	defer func() {
		if !started {
			<-machineSlots
		}
	}()
	ns := l.seg.Bridge
	if m.routed {
		if l.routed == nil {
			t.Fatalf("%s is on the routed segment, and the lab has none", m.name)
		}
		ns = l.routed.Router
	}
	m.serial = filepath.Join(l.dir, m.name+".serial.log")
	args := []string{
		"-accel", "tcg", "-m", "512", "-nodefaults", "-display", "none",
		"-serial", "file:" + m.serial,
	}
	if o.smbiosUUID {
		args = append(args, "-smbios", "type=1,uuid="+m.uuid.String())
	} else {
		args = append(args, "-uuid", m.uuid.String())
	}
	var nics []string
	for k, mac := range m.nics {
		l.mu.Lock()
		l.taps++
		name := fmt.Sprintf("tap%d", l.taps)
		l.mu.Unlock()
		var tap string
		if m.routed {
			tap = l.routed.AddTap(t, name)
		} else {
			tap = l.seg.AddTap(t, name)
		}
		if mac == m.unplugged {
			ns.Run(t, "ip", "link", "set", "dev", tap, "nomaster")
		}
		args = append(args, "-netdev", fmt.Sprintf("tap,id=n%d,ifname=%s,script=no,downscript=no", k, tap))
		nics = append(nics, fmt.Sprintf("virtio-net-pci,netdev=n%d,mac=%s,bootindex=%d", k, mac, k+1))
	}
	if !o.retry {
		args = append(args, "-no-reboot")
	}
	if o.localDisk {
		disk := filepath.Join(l.dir, m.name+".disk.img")
		if err := os.WriteFile(disk, localDiskImage(), 0o600); err != nil {
			t.Fatal(err)
		}
		args = append(args, "-drive", "if=none,id=localdisk,format=raw,file="+disk,
			"-device", fmt.Sprintf("virtio-blk-pci,drive=localdisk,bootindex=%d", len(m.nics)+1))
	}
	if o.efiDisk {
		esp := o.espDir
		if esp == "" {
			esp = efiDiskDir(t, filepath.Join(l.dir, m.name))
		}
		args = append(args, "-drive", "if=none,id=efidisk,format=raw,readonly=on,file=fat:"+esp,
			"-device", fmt.Sprintf("virtio-blk-pci,drive=efidisk,bootindex=%d", len(m.nics)+1))
	}
	switch m.fw {
	case fwARM64PXE, fwARM64HTTP:
		args = append(args, l.aavmfArgs(m, nics, o)...)
	case fwBIOS:
		boot := "n"
		if o.retry || o.rebootOnFail {
			boot = "order=n,reboot-timeout=1000"
		}
		if o.noNetBoot {
			boot = "c"
		}
		args = append(args, "-M", "pc,graphics=off", "-boot", boot)
		for _, nic := range nics {
			if o.noNetBoot {
				nic += ",romfile="
			}
			args = append(args, "-device", nic)
		}
	case fwUEFIPXE, fwUEFIHTTP, fwUEFIPXE6, fwUEFIHTTP6:
		for _, f := range []string{ovmfCode, ovmfVars} {
			testpeer.File(t, f, "ovmf")
		}
		code, varsFile, machineType := ovmfCode, ovmfVars, "q35,graphics=off"
		if o.secureBoot {
			code, varsFile, machineType = ovmfCodeSecBoot, ovmfVarsMS, "q35,smm=on,graphics=off"
			args = append(args, "-global", "driver=cfi.pflash01,property=secure,value=on")
		}
		vars := filepath.Join(l.dir, m.name+".vars.fd")
		b, err := os.ReadFile(varsFile)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(vars, b, 0o600); err != nil {
			t.Fatal(err)
		}
		args = append(args, "-M", machineType,
			"-drive", "if=pflash,format=raw,unit=0,readonly=on,file="+code,
			"-drive", "if=pflash,format=raw,unit=1,file="+vars)
		for _, nic := range nics {
			// No ROM on the NIC: EDK2's own network stack boots, not QEMU's iPXE.
			args = append(args, "-device", nic+",romfile=")
		}
		if o.httpsCACerts != nil {
			certs := filepath.Join(l.dir, m.name+".cacerts")
			if err := os.WriteFile(certs, o.httpsCACerts, 0o600); err != nil {
				t.Fatal(err)
			}
			args = append(args, "-fw_cfg", "name=etc/edk2/https/cacerts,file="+certs)
		}
		switch {
		case m.fw == fwUEFIPXE6: // IPv6 PXE only (ipv6_test.go)
			args = append(args, "-fw_cfg", "name=opt/org.tianocore/IPv4PXESupport,string=no")
		case m.fw == fwUEFIHTTP || m.fw == fwUEFIHTTP6:
			args = append(args,
				"-fw_cfg", "name=opt/org.tianocore/IPv4PXESupport,string=no",
				"-fw_cfg", "name=opt/org.tianocore/IPv6PXESupport,string=no")
		case len(m.nics) > 1 || o.efiDisk:
			// Else OVMF tries IPv6 PXE and IPv6 HTTP boot on the first NIC, for minutes,
			// before the second NIC (or the disk).
			args = append(args,
				"-fw_cfg", "name=opt/org.tianocore/IPv6PXESupport,string=no",
				"-fw_cfg", "name=opt/org.tianocore/IPv6Support,string=no")
		}
	}
	m.start = time.Now()
	// QEMU stays in the foreground (no -daemonize), so it dies with the test binary.
	m.p = testpeer.Start(t, testpeer.Cmd{Path: qemu, Args: args, Netns: ns})
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

// firmwareStartRE is what the firmware prints on the serial console each time the machine
// starts (SeaBIOS's banner; OVMF prints nothing there before its boot manager).
var firmwareStartRE = regexp.MustCompile(`SeaBIOS \(version `)

// watchRestarts notes, until QEMU exits, when each firmware start appeared in the serial
// log (polled every 100 ms), for a machine that retries: the gaps are its retry period.
func (m *machine) watchRestarts() {
	go func() {
		seen := 0
		for {
			serial, _ := os.ReadFile(m.serial)
			if n := len(firmwareStartRE.FindAllIndex(serial, -1)); n > seen {
				m.mu.Lock()
				for range n - seen {
					m.restarts = append(m.restarts, time.Now())
				}
				m.mu.Unlock()
				seen = n
			}
			select {
			case <-m.p.Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
}

// retryPeriod is the longest gap between two firmware starts seen before t, and how many
// starts there were by then.
func (m *machine) retryPeriod(before time.Time) (longest time.Duration, starts int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, at := range m.restarts {
		if at.After(before) {
			break
		}
		starts++
		if i > 0 {
			longest = max(longest, at.Sub(m.restarts[i-1]))
		}
	}
	return longest, starts
}

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
	limit := m.bootLimit
	if limit == 0 {
		limit = bootTimeout
	}
	serial, exited := m.wait(limit, func(b []byte) bool { _, ok := testpeer.Cmdline(b); return ok })
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
// holding the lease at its epoch, with the machine's MAC and its UUID as the entry holds it;
// the token is the one minted for the entry; the cache URL is a grant of the agent that
// served.
func (l *lab) checkBooted(m *machine, words []string, by *labAgent) assertion.Assertion {
	t := l.t
	t.Helper()
	ctx := context.Background()
	text := param(words, "bc.assertion")
	a, err := l.verifier.Verify(ctx, text, assertion.Join{Site: siteID, MACs: m.nics, UUID: m.uuid})
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
		t.Errorf("assertion MAC %s, want %s, the NIC with the entry that the machine booted from (its NICs: %v)", a.MAC, m.mac, m.nics)
	}
	// The assertion carries the entry's UUID (S2), which the firmware's was checked against:
	// QEMU's -uuid in its canonical spelling, or the spelling the test gave the entry. It
	// verified above for a machine reporting QEMU's.
	if want := m.entrySpelling(); a.UUID != want {
		t.Errorf("assertion UUID %s, want %s exactly as the entry holds it (a spelling of it: %v)", a.UUID, want, hwid.SameMachine(a.UUID, want))
	}
	if first, last := m.addressRange(); a.IP.Less(first) || last.Less(a.IP) {
		t.Errorf("assertion IP %s, want the dnsmasq lease in %s-%s", a.IP, first, last)
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
	missing := slices.DeleteFunc(strings.Fields(l.siteCmdline()), func(w string) bool { return slices.Contains(words, w) })
	if len(missing) > 0 || param(words, "bc.gateway") != "https://gateway.e2e.example:443" {
		t.Errorf("command line %q lacks the site's cmdline or parameters", words)
	}
	// A second use of the same assertion is a replay.
	if _, err := l.verifier.Verify(ctx, text, assertion.Join{Site: siteID, MACs: m.nics, UUID: m.uuid}); assertion.ReasonOf(err) != assertion.ReasonReplay {
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
