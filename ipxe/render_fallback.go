package ipxe

import (
	"strconv"
	"time"
)

// Exit is the script for a machine without a boot entry: exit iPXE with a failure status so
// the firmware falls through to its next boot device.
type Exit struct{}

// Render returns the script; it never fails.
func (Exit) Render() ([]byte, error) {
	s := newScript("no boot entry for this machine; falling through to the next boot device", 0)
	s.line("exit", "1")
	return s.bytes(), nil
}

// Fenced is the script a fenced boot server answers: wait, then reboot, so the firmware asks
// proxy DHCP again and reaches whichever agent is active by then.
type Fenced struct {
	Delay time.Duration // whole seconds; 0 means DefaultFencedDelay
}

// Render returns the script, or a [*ValueError] for a bad Delay.
func (f Fenced) Render() ([]byte, error) {
	d, err := seconds("delay", f.Delay, DefaultFencedDelay)
	if err != nil {
		return nil, err
	}
	ds := strconv.Itoa(d)
	s := newScript("this boot server is not the active one", 0)
	s.line("echo", "siteboot:", "boot", "server", "fenced,", "rebooting", "in", ds, "s")
	s.line("sleep", ds)
	s.line("reboot")
	return s.bytes(), nil
}

// Wait is the wait-and-retry script: sleep, then chain to URL again (normally
// /boot/chain.ipxe); if that fetch fails, wait 10 s and reboot.
type Wait struct {
	Delay time.Duration // whole seconds; 0 means DefaultWaitDelay
	URL   string
}

// Render returns the script, or a [*ValueError] when a value is refused.
func (w Wait) Render() ([]byte, error) {
	d, err := seconds("delay", w.Delay, DefaultWaitDelay)
	if err != nil {
		return nil, err
	}
	if _, err := checkURL("url", w.URL, true); err != nil {
		return nil, err
	}
	ds := strconv.Itoa(d)
	s := newScript("not ready yet; asking again in "+ds+" s", len(w.URL))
	s.line("echo", "siteboot:", "not", "ready,", "asking", "again", "in", ds, "s")
	s.line("sleep", ds)
	s.line("chain", "--replace", "--autofree", w.URL, "||", "goto", "reboot")
	s.reboot()
	return s.bytes(), nil
}
