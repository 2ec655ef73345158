package ipxe

import (
	"time"

	"github.com/bettercompute/siteboot/internal/bootscript"
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

// LocalBoot is the script for an entry that says "boot from the local disk": on BIOS, boot
// the first hard disk (sanboot --no-describe --drive 0x80), and where that fails or on UEFI,
// exit iPXE with a failure status so the firmware boots its next boot entry. A plain exit
// returns success, on which UEFI opens its Boot Manager instead.
type LocalBoot struct{}

// Render returns the script; it never fails.
func (LocalBoot) Render() ([]byte, error) {
	s := newScript("boot from the local disk", 0)
	s.line("iseq", "${platform}", "pcbios", "&&", "sanboot", "--no-describe", "--drive", "0x80", "||", "exit", "1")
	s.line("exit", "1")
	return s.bytes(), nil
}

// Fenced is the script a fenced boot server answers: wait, then give up with "exit 1", so
// the firmware boots its next boot entry (the disk) instead of this network boot again. The
// handler sends it with 503, whose body iPXE does not run: there the chain script's own
// back-off is the wait, and it ends in the same "exit 1".
type Fenced struct {
	Delay time.Duration // whole seconds; 0 means DefaultFencedDelay
}

// Render returns the script, or a [*ValueError] for a bad Delay.
func (f Fenced) Render() ([]byte, error) { return render(lang.Fenced(f.Delay)) }

// Wait is the wait-and-retry script: sleep, then chain to URL again (normally
// /boot/chain.ipxe); if that fetch fails (the server is gone), wait 10 s and reboot, so the
// firmware asks DHCP again and reaches whichever agent is active.
type Wait struct {
	Delay time.Duration // whole seconds; 0 means DefaultWaitDelay
	URL   string
}

// Render returns the script, or a [*ValueError] when a value is refused.
func (w Wait) Render() ([]byte, error) {
	if _, err := checkURL("url", w.URL, true); err != nil {
		return nil, err
	}
	return render(lang.Wait(w.Delay, w.URL))
}

// render writes a script the core planned.
func render(sc bootscript.Script, err error) ([]byte, error) {
	if err != nil {
		return nil, err
	}
	s := newScript(sc.Comment, sc.Size)
	sc.Steps(s)
	return s.bytes(), nil
}
