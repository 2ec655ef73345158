package ipmitest

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Chassis is the chassis of an ipmi_sim whose power the test carries out, for a machine
// the test runs itself (a QEMU machine on a segment): the machine stays the test's own
// process, in the foreground, and dies with the test binary. The chassis script appends
// every call ipmi_sim makes, with its time, to chassis.log in the simulator's folder, and
// keeps the boot device; it leaves power to the test:
//
//   - "set power 1", "set power 0", "set shutdown 1" and "set reset 1" are handed to Power,
//     in the order ipmi_sim made them, from one goroutine of the Chassis that reads the log
//     every ChassisPoll;
//   - "get power" answers 1 while the process the test named with SetPID lives, else 0.
//
// Set it in SimOptions.Chassis; it starts with the simulator and stops at its cleanup.
type Chassis struct {
	// Power carries out one power call. It names the machine's process with SetPID once
	// that runs (and SetPID(0) once it is gone). It may block: later calls wait for it.
	Power func(ChassisAction)

	mu         sync.Mutex
	dir        string
	offset     int64
	calls      []ChassisCall
	dispatched int
}

// ChassisAction is a power call ipmi_sim hands the chassis.
type ChassisAction string

// The power calls.
const (
	ChassisOn      ChassisAction = "on"       // set power 1
	ChassisOff     ChassisAction = "off"      // set power 0: power removed at once
	ChassisSoftOff ChassisAction = "soft-off" // set shutdown 1: the OS is asked to shut down
	ChassisReset   ChassisAction = "reset"    // set reset 1
)

var chassisActions = map[string]ChassisAction{
	"set power 1": ChassisOn, "set power 0": ChassisOff, "set shutdown 1": ChassisSoftOff, "set reset 1": ChassisReset,
}

// ChassisPoll is how often the Chassis reads the script's log.
const ChassisPoll = 20 * time.Millisecond

// ChassisCall is one call of ipmi_sim's chassis script.
type ChassisCall struct {
	// At is when the script ran (its own clock, to the nanosecond).
	At time.Time
	// Call is what ipmi_sim asked: "get power", "set boot pxe", "set power 1".
	Call string
}

// machineChassisScript is the chassis script of a Chassis.
const machineChassisScript = `#!/bin/sh
# ipmi_sim chassis control of a machine the test runs: SCRIPT DEVICE get PARM... | set PARM VAL...
# Every call goes to chassis.log; the test carries out power calls from there and names the
# machine's process in machine.pid.
D=$(dirname "$0")
shift
echo "$(date +%s.%N) $*" >> "$D/chassis.log"
op=$1; shift
case "$op" in
get)
	for p in "$@"; do
		case $p in
		power)
			pid=$(cat "$D/machine.pid" 2>/dev/null)
			if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then echo "power:1"; else echo "power:0"; fi;;
		boot) echo "boot:$(cat "$D/boot" 2>/dev/null || echo default)";;
		*) echo "Invalid parameter: $p"; exit 1;;
		esac
	done;;
set)
	while [ $# -ge 2 ]; do
		case $1 in
		power|shutdown|reset|identify) ;;
		boot) echo "$2" > "$D/boot";;
		*) echo "Invalid parameter: $1"; exit 1;;
		esac
		shift 2
	done;;
check) exit 1;;
*) echo "Unknown operation: $op"; exit 1;;
esac
`

// start begins reading the log in dir until the test's cleanup.
func (c *Chassis) start(t testing.TB, dir string) {
	c.mu.Lock()
	c.dir = dir
	c.mu.Unlock()
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(ChassisPoll)
		defer tick.Stop()
		for {
			for _, a := range c.next() {
				if c.Power != nil {
					c.Power(a)
				}
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(func() {
		close(stop)
		<-done
	})
}

// next reads the log's new lines and returns the power calls not yet handed out.
func (c *Chassis) next() []ChassisAction {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.read()
	var out []ChassisAction
	for ; c.dispatched < len(c.calls); c.dispatched++ {
		if a, ok := chassisActions[c.calls[c.dispatched].Call]; ok {
			out = append(out, a)
		}
	}
	return out
}

// read appends the complete lines written since the last read. Called with c.mu held.
func (c *Chassis) read() {
	f, err := os.Open(filepath.Join(c.dir, "chassis.log"))
	if err != nil {
		return
	}
	defer f.Close()
	if _, err := f.Seek(c.offset, 0); err != nil {
		return
	}
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(f); err != nil {
		return
	}
	b := buf.Bytes()
	end := bytes.LastIndexByte(b, '\n')
	if end < 0 {
		return
	}
	c.offset += int64(end + 1)
	for _, line := range strings.Split(string(b[:end]), "\n") {
		stamp, call, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		c.calls = append(c.calls, ChassisCall{At: parseStamp(stamp), Call: call})
	}
}

// parseStamp reads date's "%s.%N"; a stamp that does not parse is the zero time.
func parseStamp(s string) time.Time {
	sec, frac, _ := strings.Cut(s, ".")
	secs, err := strconv.ParseInt(sec, 10, 64)
	if err != nil {
		return time.Time{}
	}
	ns := int64(0)
	if frac != "" {
		if len(frac) > 9 {
			frac = frac[:9]
		}
		frac += strings.Repeat("0", 9-len(frac))
		if ns, err = strconv.ParseInt(frac, 10, 64); err != nil {
			return time.Time{}
		}
	}
	return time.Unix(secs, ns)
}

// Calls returns every call of the chassis script so far, in order.
func (c *Chassis) Calls() []ChassisCall {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.read()
	return append([]ChassisCall(nil), c.calls...)
}

// SetCalls returns only the "set ..." calls of calls.
func SetCalls(calls []ChassisCall) []string {
	out := []string{}
	for _, c := range calls {
		if strings.HasPrefix(c.Call, "set ") {
			out = append(out, c.Call)
		}
	}
	return out
}

// SetPID names the machine's process: "get power" answers 1 while it lives. Zero says
// the machine is off.
func (c *Chassis) SetPID(pid int) {
	c.mu.Lock()
	dir := c.dir
	c.mu.Unlock()
	p := filepath.Join(dir, "machine.pid")
	if pid <= 0 {
		_ = os.Remove(p)
		return
	}
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, []byte(strconv.Itoa(pid)+"\n"), 0o644); err == nil {
		_ = os.Rename(tmp, p)
	}
}

// Boot is the boot device ipmi_sim last set ("pxe", "cdrom", "default"), as the machine
// would find it at power-on.
func (c *Chassis) Boot() string {
	c.mu.Lock()
	dir := c.dir
	c.mu.Unlock()
	b, err := os.ReadFile(filepath.Join(dir, "boot"))
	if err != nil {
		return "default"
	}
	return strings.TrimSpace(string(b))
}

// SetBoot sets the boot device as the BMC keeps it: a machine that used a one-time
// override sets it back to "default", as a BMC clears it at that boot.
func (c *Chassis) SetBoot(dev string) {
	c.mu.Lock()
	dir := c.dir
	c.mu.Unlock()
	_ = os.WriteFile(filepath.Join(dir, "boot"), []byte(dev+"\n"), 0o644)
}
