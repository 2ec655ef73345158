package agent

import (
	"sync"
	"time"

	"github.com/bettercompute/siteboot/hwid"
)

// The likely cause of a machine that proxy DHCP answered and that then asked the agent for
// nothing, as the log says it.
const silentCause = "the site's DHCP server may be offering its own boot file or HTTP boot URL; " +
	"see README, 'What the site's DHCP server must not send'"

// maxSilentWatch bounds the machines watched, and those already named in the log.
const maxSilentWatch = 4096

// silentWatch notices a machine that proxy DHCP answered and that asked the agent for
// nothing within the nonce window (no script, no boot file under its nonce, no iPXE
// request): its firmware most likely took another server's boot file or HTTP boot URL. It
// names each such MAC in the log once and counts every occurrence.
type silentWatch struct {
	mu     sync.Mutex
	due    map[hwid.MAC]time.Time // answered, nothing asked yet: by when it should have
	warned map[hwid.MAC]bool      // named in the log already
	silent uint64                 // answers followed by nothing
}

func newSilentWatch() *silentWatch {
	return &silentWatch{due: map[hwid.MAC]time.Time{}, warned: map[hwid.MAC]bool{}}
}

// answered records an answer to mac: it should ask for something before due.
func (w *silentWatch) answered(mac hwid.MAC, due time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.due[mac]; !ok && len(w.due) >= maxSilentWatch {
		return // bounded: a flood of answers is not watched beyond this
	}
	w.due[mac] = due
}

// asked records that mac asked the agent for something after its answer.
func (w *silentWatch) asked(mac hwid.MAC) {
	w.mu.Lock()
	delete(w.due, mac)
	w.mu.Unlock()
}

// sweep ends the watches due by now and returns the MACs to name in the log: those not
// named before.
func (w *silentWatch) sweep(now time.Time) []hwid.MAC {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []hwid.MAC
	for mac, due := range w.due {
		if now.Before(due) {
			continue
		}
		delete(w.due, mac)
		w.silent++
		if w.warned[mac] {
			continue
		}
		if len(w.warned) >= maxSilentWatch {
			clear(w.warned)
		}
		w.warned[mac] = true
		out = append(out, mac)
	}
	return out
}

func (w *silentWatch) count() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.silent
}

// sweepSilent logs the machines that proxy DHCP answered and that then asked for nothing.
func (a *Agent) sweepSilent() {
	for _, mac := range a.silent.sweep(a.clock.Now()) {
		a.log.Warn("a machine proxy DHCP answered asked this agent for nothing", "mac", mac.String(),
			"window", a.nonceWindow(), "likely_cause", silentCause)
	}
}
