package ipmi_test

import (
	"context"
	"fmt"
	"net"
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

// The simulated BMC: OpenIPMI's ipmi_sim with a chassis-control script that keeps power
// and boot state in files and logs every call, and a LAN-config script that reports a
// fixed MAC and address.
const (
	simUser = "ADMIN"
	simPass = "ADMIN"
	simGUID = "a123456789abcdefa123456789abcdef"
	simMAC  = "52:54:00:12:34:56"
	simIP   = "192.0.2.50"
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
# ipmi_sim LAN config: SCRIPT DEVICE get PARM...
shift
[ "$1" = get ] || exit 0
shift
for p in "$@"; do
	case $p in
	ip_addr) echo "ip_addr:` + simIP + `";;
	ip_addr_src) echo "ip_addr_src:static";;
	mac_addr) echo "mac_addr:` + simMAC + `";;
	subnet_mask) echo "subnet_mask:255.255.255.0";;
	default_gw_ip_addr|backup_gw_ip_addr) echo "$p:0.0.0.0";;
	default_gw_mac_addr|backup_gw_mac_addr) echo "$p:00:00:00:00:00:00";;
	*) echo "$p:0";;
	esac
done
`

type sim struct {
	addr string
	port int
	dir  string
	proc *testpeer.Process
}

// startSim starts ipmi_sim on a free loopback port, or skips (fails when peers are
// required) when it is not installed.
func startSim(t testing.TB) *sim {
	t.Helper()
	path := testpeer.LookPath(t, "ipmi_sim", "openipmi")
	dir := t.TempDir()
	port := testpeer.FreePort(t, "udp")
	write := func(name, body string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	chassis := write("chassis.sh", chassisScript, 0o755)
	lan := write("lan.sh", lanScript, 0o755)
	conf := write("lan.conf", fmt.Sprintf(`name "bmctest"
set_working_mc 0x20
  startlan 1
    addr 127.0.0.1 %d
    priv_limit admin
    allowed_auths_admin md5
    guid %s
    lan_config_program "%s lo"
  endlan
  chassis_control "%s 0x20"
  user 2 true "%s" "%s" admin 10 md5
  user 3 true "operator3" "op3-pass" admin 10 md5
`, port, simGUID, lan, chassis, simUser, simPass), 0o644)
	emu := write("sim.emu", "mc_setbmc 0x20\nmc_add 0x20 0 no-device-sdrs 0x23 9 8 0x9f 0x1291 0xf02\nmc_enable 0x20\n", 0o644)
	state := filepath.Join(dir, "state")
	if err := os.Mkdir(state, 0o755); err != nil {
		t.Fatal(err)
	}
	s := &sim{addr: "127.0.0.1:" + strconv.Itoa(port), port: port, dir: dir}
	s.proc = testpeer.Start(t, testpeer.Cmd{
		Path:      path,
		Args:      []string{"-n", "-c", conf, "-f", emu, "-s", state},
		Dir:       dir,
		ReadyFunc: func() error { return rmcpPing(s.addr) },
	})
	return s
}

// rmcpPing sends an RMCP/ASF presence ping and waits briefly for the pong.
func rmcpPing(addr string) error {
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

func (s *sim) target() bmc.Target {
	return bmc.Target{Driver: ipmi.Name, Address: s.addr, Username: simUser, Password: simPass}
}

// calls returns the chassis-control calls made so far and forgets them.
func (s *sim) calls(t testing.TB) []string {
	t.Helper()
	p := filepath.Join(s.dir, "calls.log")
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
		if l != "" {
			out = append(out, l)
		}
	}
	return out
}

// sets returns only the "set ..." calls.
func sets(calls []string) []string {
	out := []string{}
	for _, c := range calls {
		if strings.HasPrefix(c, "set ") {
			out = append(out, c)
		}
	}
	return out
}

// ipmitool runs the reference client against the simulator (cipher suite 3 pinned).
func (s *sim) ipmitool(t testing.TB, pass string, args ...string) (string, error) {
	t.Helper()
	return s.ipmitoolAs(t, simUser, pass, args...)
}

func (s *sim) ipmitoolAs(t testing.TB, user, pass string, args ...string) (string, error) {
	t.Helper()
	path := testpeer.LookPath(t, "ipmitool", "ipmitool")
	base := []string{"-I", "lanplus", "-C", "3", "-H", "127.0.0.1", "-p", strconv.Itoa(s.port), "-U", user, "-P", pass, "-N", "1", "-R", "2"}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, append(base, args...)...).CombinedOutput()
	return string(out), err
}

func (s *sim) mustIpmitool(t testing.TB, args ...string) string {
	t.Helper()
	out, err := s.ipmitool(t, simPass, args...)
	if err != nil {
		t.Fatalf("ipmitool %v: %v\n%s", args, err, out)
	}
	return out
}

// dial opens our driver with cipher suite 3 pinned (ipmi_sim never answers Get Channel
// Cipher Suites and offers no 17).
func dial(t testing.TB, s *sim) *ipmi.Driver {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	d, err := ipmi.Dial(ctx, ipmi.Config{CipherSuites: []int{3}}, s.target())
	if err != nil {
		t.Fatalf("Dial: %v\n%s", err, s.proc.Output())
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}
