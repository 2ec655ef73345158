package ipmitest

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/bmc"
	"github.com/bettercompute/siteboot/bmc/ipmi"
	"github.com/bettercompute/siteboot/internal/testpeer"
)

// What the simulated BMCs are configured with.
const (
	User = "ADMIN"
	Pass = "ADMIN"
	// GUID is the system GUID ipmi_sim reports (the 16 bytes as sent, in hex).
	GUID = "a123456789abcdefa123456789abcdef"
	MAC  = "52:54:00:12:34:56"
	IP   = "192.0.2.50"
	// OtherUser and OtherPass are a second administrator account on ipmi_sim.
	OtherUser = "operator3"
	OtherPass = "op3-pass"
	// DefaultMaxSessions is the number of sessions each ipmi_sim user may hold at once
	// when SimOptions.MaxSessions is zero.
	DefaultMaxSessions = 10
)

const chassisScript = `#!/bin/sh
# ipmi_sim chassis control: SCRIPT DEVICE get PARM... | set PARM VAL...
D=$(dirname "$0")
shift
echo "$*" >> "$D/calls.log"
op=$1; shift
case "$op" in
get)
	for p in "$@"; do
		case $p in
		power) echo "power:$(cat "$D/power" 2>/dev/null || echo 0)";;
		boot) echo "boot:$(cat "$D/boot" 2>/dev/null || echo default)";;
		*) echo "Invalid parameter: $p"; exit 1;;
		esac
	done;;
set)
	while [ $# -ge 2 ]; do
		case $1 in
		power) echo "$2" > "$D/power";;
		shutdown) [ "$2" = 1 ] && echo 0 > "$D/power";;
		reset) [ "$2" = 1 ] && echo reset >> "$D/resets";;
		boot) echo "$2" > "$D/boot";;
		identify) shift;;
		*) echo "Invalid parameter: $1"; exit 1;;
		esac
		shift 2
	done;;
check) exit 1;;
*) echo "Unknown operation: $op"; exit 1;;
esac
`

const lanScript = `#!/bin/sh
# ipmi_sim LAN config: SCRIPT DEVICE get PARM...; the parameters named in lan-fail fail.
D=$(dirname "$0")
shift
[ "$1" = get ] || exit 0
shift
for p in "$@"; do
	grep -qx "$p" "$D/lan-fail" 2>/dev/null && exit 1
	case $p in
	ip_addr) echo "ip_addr:` + IP + `";;
	ip_addr_src) echo "ip_addr_src:static";;
	mac_addr) echo "mac_addr:` + MAC + `";;
	subnet_mask) echo "subnet_mask:255.255.255.0";;
	default_gw_ip_addr|backup_gw_ip_addr) echo "$p:0.0.0.0";;
	default_gw_mac_addr|backup_gw_mac_addr) echo "$p:00:00:00:00:00:00";;
	*) echo "$p:0";;
	esac
done
`

// SimOptions change how ipmi_sim is configured.
type SimOptions struct {
	// NoGUID leaves the system GUID unconfigured: ipmi_sim then refuses Get System GUID.
	NoGUID bool
	// MaxSessions is how many sessions each user may hold at once; zero means
	// DefaultMaxSessions.
	MaxSessions int
	// Netns runs ipmi_sim inside that network namespace, listening on Addr port 623 there
	// (a BMC's address on a segment the test made); nil means the test's own namespace, on
	// a free loopback port. Addr must be set with Netns. Sim.Ipmitool reaches a simulator
	// in the test's own namespace only.
	Netns *testpeer.Netns
	Addr  netip.Addr
	// Chassis, when set, makes the chassis a machine the test runs (see Chassis): the
	// chassis script keeps no power state of its own.
	Chassis *Chassis
}

// Sim is a running ipmi_sim.
type Sim struct {
	// Addr is host:port of its LAN interface; Port the port alone.
	Addr string
	Port int
	// Dir holds its configuration, the chassis script's state and calls.log.
	Dir  string
	Proc *testpeer.Process
}

// StartSim starts ipmi_sim on a free loopback port, or skips (fails when peers are
// required) when it is not installed.
func StartSim(t testing.TB, o SimOptions) *Sim {
	t.Helper()
	path := testpeer.LookPath(t, "ipmi_sim", "openipmi")
	dir := t.TempDir()
	host, port := "127.0.0.1", 0
	if o.Netns != nil {
		if !o.Addr.IsValid() {
			t.Fatal("ipmitest: SimOptions.Netns without an Addr")
		}
		host, port = o.Addr.String(), 623
	} else {
		port = testpeer.FreePort(t, "udp")
	}
	write := func(name, body string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	script := chassisScript
	if o.Chassis != nil {
		script = machineChassisScript
	}
	chassis := write("chassis.sh", script, 0o755)
	lan := write("lan.conf.sh", lanScript, 0o755)
	guid := "    guid " + GUID + "\n"
	if o.NoGUID {
		guid = ""
	}
	maxSess := o.MaxSessions
	if maxSess <= 0 {
		maxSess = DefaultMaxSessions
	}
	conf := write("lan.conf", fmt.Sprintf(`name "bmctest"
set_working_mc 0x20
  startlan 1
    addr %s %d
    priv_limit admin
    allowed_auths_admin md5
%s    lan_config_program "%s lo"
  endlan
  chassis_control "%s 0x20"
  user 2 true "%s" "%s" admin %d md5
  user 3 true "%s" "%s" admin %d md5
`, host, port, guid, lan, chassis, User, Pass, maxSess, OtherUser, OtherPass, maxSess), 0o644)
	emu := write("sim.emu", "mc_setbmc 0x20\nmc_add 0x20 0 no-device-sdrs 0x23 9 8 0x9f 0x1291 0xf02\nmc_enable 0x20\n", 0o644)
	state := filepath.Join(dir, "state")
	if err := os.Mkdir(state, 0o755); err != nil {
		t.Fatal(err)
	}
	s := &Sim{Addr: net.JoinHostPort(host, strconv.Itoa(port)), Port: port, Dir: dir}
	if o.Chassis != nil {
		o.Chassis.start(t, dir)
	}
	ping := func() error { return RMCPPing(s.Addr) }
	if o.Netns != nil {
		ping = func() error { return o.Netns.Do(func() error { return RMCPPing(s.Addr) }) }
	}
	s.Proc = testpeer.Start(t, testpeer.Cmd{
		Path:      path,
		Args:      []string{"-n", "-c", conf, "-f", emu, "-s", state},
		Dir:       dir,
		Netns:     o.Netns,
		ReadyFunc: ping,
	})
	return s
}

// RMCPPing sends an RMCP/ASF presence ping and waits briefly for the pong.
func RMCPPing(addr string) error {
	c, err := net.Dial("udp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	ping := []byte{0x06, 0x00, 0xff, 0x06, 0x00, 0x00, 0x11, 0xbe, 0x80, 0x01, 0x00, 0x00}
	if _, err := c.Write(ping); err != nil {
		return err
	}
	_ = c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	buf := make([]byte, 64)
	n, err := c.Read(buf)
	if err != nil {
		return err
	}
	if n < 9 || buf[8] != 0x40 {
		return fmt.Errorf("not a pong: % x", buf[:n])
	}
	return nil
}

// Target is the bmc.Target of the simulator's administrator account.
func (s *Sim) Target() bmc.Target {
	return bmc.Target{Driver: ipmi.Name, Address: s.Addr, Username: User, Password: Pass}
}

// FailLAN makes the LAN-config script fail for these parameters ("ip_addr", "mac_addr")
// from now on; none lets every parameter answer again.
func (s *Sim) FailLAN(t testing.TB, params ...string) {
	t.Helper()
	body := strings.Join(params, "\n")
	if body != "" {
		body += "\n"
	}
	if err := os.WriteFile(filepath.Join(s.Dir, "lan-fail"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Calls returns the chassis-control calls made so far ("get power", "set power 1", ...)
// and forgets them.
func (s *Sim) Calls(t testing.TB) []string {
	t.Helper()
	return readLines(t, filepath.Join(s.Dir, "calls.log"), "")
}

// Sets returns only the "set ..." calls.
func Sets(calls []string) []string {
	out := []string{}
	for _, c := range calls {
		if strings.HasPrefix(c, "set ") {
			out = append(out, c)
		}
	}
	return out
}

// readLines returns the lines of p that start with prefix and removes p.
func readLines(t testing.TB, p, prefix string) []string {
	t.Helper()
	b, err := os.ReadFile(p)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	_ = os.Remove(p)
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if l != "" && strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return out
}

// Ipmitool runs the reference client against the simulator as User with pass (cipher
// suite 3 pinned).
func (s *Sim) Ipmitool(t testing.TB, pass string, args ...string) (string, error) {
	t.Helper()
	return Ipmitool(t, s.Port, User, pass, args...)
}

// Ipmitool runs ipmitool lanplus against 127.0.0.1:port (cipher suite 3 pinned).
func Ipmitool(t testing.TB, port int, user, pass string, args ...string) (string, error) {
	t.Helper()
	path := testpeer.LookPath(t, "ipmitool", "ipmitool")
	base := []string{"-I", "lanplus", "-C", "3", "-H", "127.0.0.1", "-p", strconv.Itoa(port), "-U", user, "-P", pass, "-N", "1", "-R", "2"}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, append(base, args...)...).CombinedOutput()
	return string(out), err
}

// MustIpmitool is Ipmitool with the simulator's password, failing the test on error.
func (s *Sim) MustIpmitool(t testing.TB, args ...string) string {
	t.Helper()
	out, err := s.Ipmitool(t, Pass, args...)
	if err != nil {
		t.Fatalf("ipmitool %v: %v\n%s", args, err, out)
	}
	return out
}

// Dial opens the driver with cipher suite 3 pinned (ipmi_sim never answers Get Channel
// Cipher Suites and offers no 17) and closes it at cleanup.
func Dial(t testing.TB, tg bmc.Target) *ipmi.Driver {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	d, err := ipmi.Dial(ctx, ipmi.Config{CipherSuites: []int{3}}, tg)
	if err != nil {
		t.Fatalf("Dial %s: %v", tg.Address, err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

// pyghmiScript runs pyghmi's own FakeBmc (pyghmi.cmd.fakebmc), bound to loopback, printing
// a line for every chassis control it carries out. pyghmi answers Get LAN Configuration
// Parameters with 0xc1 like every command it lacks; the one addition here answers the IP
// address (3) and MAC (5) parameters, so that an inspection can read them while Get System
// GUID still fails as pyghmi (and virtualbmc) answer it.
const pyghmiScript = `import sys
import pyghmi.ipmi.bmc as bmc
from pyghmi.cmd.fakebmc import FakeBmc


class LoopbackBmc(FakeBmc):
    def __init__(self, authdata, port, ignore_boot):
        bmc.Bmc.__init__(self, authdata, port, address='127.0.0.1')
        self.powerstate = 'off'
        self.bootdevice = 'default'
        self.ignore_boot = ignore_boot

    def set_boot_device(self, bootdevice):
        if not self.ignore_boot:
            self.bootdevice = bootdevice

    def handle_raw_request(self, request, session):
        if request['netfn'] == 0x0c and request['command'] == 0x02:
            param = request['data'][1]
            if param == 3:
                return session.send_ipmi_response(data=[0x11] + [` + pyIP + `])
            if param == 5:
                return session.send_ipmi_response(data=[0x11] + [` + pyMAC + `])
            return session.send_ipmi_response(code=0x80)
        return FakeBmc.handle_raw_request(self, request, session)


b = LoopbackBmc({sys.argv[2]: sys.argv[3]}, int(sys.argv[1]), len(sys.argv) > 4 and sys.argv[4] == 'ignore-boot')
print('listening', flush=True)
b.listen()
`

// PyghmiIP and PyghmiMAC are the BMC address and MAC the pyghmi BMC reports.
const (
	PyghmiIP  = "192.0.2.51"
	PyghmiMAC = "52:54:00:65:43:21"
	pyIP      = "192, 0, 2, 51"
	pyMAC     = "0x52, 0x54, 0x00, 0x65, 0x43, 0x21"
)

// Pyghmi is a running pyghmi BMC (FakeBmc: power and boot device in memory).
type Pyghmi struct {
	Addr string
	Port int
	Proc *testpeer.Process
}

// PyghmiOptions are vendor behaviours of a pyghmi BMC.
type PyghmiOptions struct {
	// IgnoreBootDevice answers Set System Boot Options (boot flags) with success and keeps
	// the device it had, as iDRAC10 ignores IPMI's boot device.
	IgnoreBootDevice bool
}

// StartPyghmi starts pyghmi's FakeBmc on a free loopback port with the account User/Pass,
// or skips (fails when peers are required) when python3-pyghmi is not installed.
func StartPyghmi(t testing.TB) *Pyghmi {
	t.Helper()
	return StartPyghmiWith(t, PyghmiOptions{})
}

// StartPyghmiWith is StartPyghmi with vendor behaviours.
func StartPyghmiWith(t testing.TB, o PyghmiOptions) *Pyghmi {
	t.Helper()
	py := testpeer.LookPath(t, "python3", "python3")
	if _, err := os.Stat("/usr/bin/python3"); err == nil {
		py = "/usr/bin/python3" // Debian's, whose dist-packages hold pyghmi
	}
	testpeer.PythonModule(t, py, "pyghmi.cmd.fakebmc", "python3-pyghmi")
	dir := t.TempDir()
	script := filepath.Join(dir, "bmc.py")
	if err := os.WriteFile(script, []byte(pyghmiScript), 0o644); err != nil {
		t.Fatal(err)
	}
	port := testpeer.FreePort(t, "udp")
	p := &Pyghmi{Addr: "127.0.0.1:" + strconv.Itoa(port), Port: port}
	p.Proc = testpeer.Start(t, testpeer.Cmd{
		Path:     py,
		Args:     []string{"-u", script, strconv.Itoa(port), User, Pass, map[bool]string{true: "ignore-boot"}[o.IgnoreBootDevice]},
		Dir:      dir,
		ReadyLog: "^listening",
	})
	return p
}

// Target is the bmc.Target of the pyghmi BMC's account.
func (p *Pyghmi) Target() bmc.Target {
	return bmc.Target{Driver: ipmi.Name, Address: p.Addr, Username: User, Password: Pass}
}

// Actions returns the chassis actions FakeBmc printed so far, in order: "powered on",
// "abruptly remove power", "politely shut down the system".
func (p *Pyghmi) Actions() []string {
	var out []string
	for _, l := range strings.Split(p.Proc.Output(), "\n") {
		l = strings.TrimSpace(l)
		switch l {
		case "powered on", "abruptly remove power", "politely shut down the system":
			out = append(out, l)
		}
	}
	return out
}
