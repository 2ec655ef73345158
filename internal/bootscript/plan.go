package bootscript

import (
	"fmt"
	"strconv"
	"time"
)

// Labels the plans name: where the last failed attempt goes, and where a failed [Writer.Again]
// goes.
const (
	LabelFailed = "failed"
	LabelReboot = "reboot"
)

// Writer writes the steps of a plan in one script language. The plans pass only text of
// their own (labels, messages) and what the renderer gave them, already checked.
type Writer interface {
	// Label marks the place that a failed command naming it goes on at. A language whose
	// failed commands fall through to the next line writes nothing.
	Label(name string)
	// Echo shows "siteboot: MSG" on the console; msg is words of [A-Za-z0-9,] separated by
	// single spaces.
	Echo(msg string)
	// Sleep pauses for seconds.
	Sleep(seconds int)
	// Again loads target (a URL or file name the renderer checked) in place of the script;
	// when that fails, the script goes on at LabelReboot.
	Again(target string)
	// Reboot restarts the machine.
	Reboot()
	// GiveUp leaves the boot loader so that the firmware boots something other than this
	// network boot: its next boot option (iPXE: "exit 1", a failure, on which UEFI boots its
	// next Boot#### option where a success opens its Boot Manager), or the local disk
	// itself where the loader cannot hand a failure back (GRUB). It does not return.
	GiveUp()
}

// Attempts writes a fetch retried with back-off: body(onFail) writes one attempt, whose
// failure goes on at the label onFail (in a language with labels); between attempts the
// script says which failed and sleeps sleeps[i]. After the last it says it gives up and then:
//
//   - with again set (a script that boots what the server told it to: the machine has a
//     live entry), loads again, and when that fails too (the server is gone), waits
//     RebootDelay and reboots, so that the firmware asks DHCP again and reaches whichever
//     boot server is active now; where none is, nobody names a boot file and the firmware
//     moves on by itself, so the reboot does not bring it back here;
//   - without (the chain, which asks the server what to do and got no answer it could run:
//     the server fenced, refusing or unreachable), gives up ([Writer.GiveUp]), so that a
//     site whose DHCP server names the chain URL and whose boot server stays away boots
//     the machine's disk instead of the same network boot over and over.
func Attempts(w Writer, sleeps []int, again string, body func(onFail string)) {
	n := len(sleeps) + 1
	for i := 1; i <= n; i++ {
		onFail := LabelFailed
		if i < n {
			onFail = "retry" + strconv.Itoa(i)
		}
		body(onFail)
		if i < n {
			w.Label(onFail)
			w.Echo(fmt.Sprintf("attempt %d of %d failed, retrying in %d s", i, n, sleeps[i-1]))
			w.Sleep(sleeps[i-1])
		}
	}
	w.Label(LabelFailed)
	w.Echo(fmt.Sprintf("giving up after %d attempts", n))
	if again == "" {
		w.GiveUp()
		return
	}
	w.Again(again)
	rebootLater(w)
}

// Script is a whole script the core plans: the comment its header carries, about how many
// bytes its steps take, and the steps.
type Script struct {
	Comment string
	Size    int
	Steps   func(Writer)
}

// Fenced is the fenced script: say so, wait delay (whole seconds; 0 means
// DefaultFencedDelay), give up ([Writer.GiveUp]). A reboot would bring the machine back to
// the same answer wherever the site's own DHCP server names this boot server, over and
// over while no agent is active; giving up boots its disk instead. A failover within the
// wait is still reached where the loader asks again during it (iPXE's chain script retries
// its fetch before it gets here).
func (l *Lang) Fenced(delay time.Duration) (Script, error) {
	d, err := l.Seconds("delay", delay, DefaultFencedDelay)
	if err != nil {
		return Script{}, err
	}
	return Script{Comment: "this boot server is not the active one", Steps: func(w Writer) {
		w.Echo(fmt.Sprintf("boot server fenced, giving up in %d s", d))
		w.Sleep(d)
		w.GiveUp()
	}}, nil
}

// Wait is the wait-and-retry script: say so, sleep delay (whole seconds; 0 means
// DefaultWaitDelay), load target (checked by the renderer); when that fails (the server is
// gone), wait RebootDelay and reboot, as [Attempts] does after loading again.
func (l *Lang) Wait(delay time.Duration, target string) (Script, error) {
	d, err := l.Seconds("delay", delay, DefaultWaitDelay)
	if err != nil {
		return Script{}, err
	}
	return Script{Comment: fmt.Sprintf("not ready yet; asking again in %d s", d), Size: len(target), Steps: func(w Writer) {
		w.Echo(fmt.Sprintf("not ready, asking again in %d s", d))
		w.Sleep(d)
		w.Again(target)
		rebootLater(w)
	}}, nil
}

func rebootLater(w Writer) {
	w.Label(LabelReboot)
	w.Sleep(RebootDelay)
	w.Reboot()
}
