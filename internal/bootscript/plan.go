package bootscript

import (
	"fmt"
	"strconv"
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
}

// Attempts writes a fetch retried with back-off: body(onFail) writes one attempt, whose
// failure goes on at the label onFail (in a language with labels); between attempts the
// script says which failed and sleeps sleeps[i]. After the last it says it gives up, loads
// again when it is set and otherwise, or when that fails, waits RebootDelay and reboots.
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
	if again != "" {
		w.Again(again)
	}
	rebootLater(w)
}

// Fenced writes the fenced script's steps: say so, wait seconds, reboot.
func Fenced(w Writer, seconds int) {
	w.Echo(fmt.Sprintf("boot server fenced, rebooting in %d s", seconds))
	w.Sleep(seconds)
	w.Reboot()
}

// Wait writes the wait-and-retry script's steps: say so, sleep seconds, load target; when
// that fails, wait RebootDelay and reboot.
func Wait(w Writer, seconds int, target string) {
	w.Echo(fmt.Sprintf("not ready, asking again in %d s", seconds))
	w.Sleep(seconds)
	w.Again(target)
	rebootLater(w)
}

func rebootLater(w Writer) {
	w.Label(LabelReboot)
	w.Sleep(RebootDelay)
	w.Reboot()
}
