package discovery

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/bettercompute/siteboot/clock"
	"github.com/bettercompute/siteboot/hwid"
)

// Defaults used when the corresponding [SilentConfig] field is zero.
const (
	// DefaultSilentWindow is how long after its answer a machine has to ask the host for
	// something before it counts as silent: the default window of a boot nonce
	// (bootbind.DefaultWindow), in which a machine answered by proxy DHCP fetches its script.
	DefaultSilentWindow = 5 * time.Minute
	// DefaultSilentMax bounds the machines watched at once, and apart those already named.
	DefaultSilentMax = 4096
)

// SilentConfig configures a [Silent]. The zero value is usable.
type SilentConfig struct {
	// Window is how long after Answered a machine has to ask (Asked) before Sweep counts it
	// silent. Zero means DefaultSilentWindow; set it to the boot binding's window.
	Window time.Duration
	// Max bounds the machines watched at once (an answer beyond it is not watched, and
	// counted in SilentStats.Unwatched) and, apart, the MACs Sweep remembers having named.
	// Zero means DefaultSilentMax; at most 65536.
	Max int
	// Clock measures the window (its monotonic reading); nil means [clock.Real].
	Clock clock.Clock
}

// Validate reports a field out of range.
func (c *SilentConfig) Validate() error {
	switch {
	case c.Max < 0 || c.Max > maxMax:
		return fmt.Errorf("%w: Silent Max %d not in 0..%d", ErrConfig, c.Max, maxMax)
	case c.Window < 0:
		return fmt.Errorf("%w: negative Silent Window %v", ErrConfig, c.Window)
	}
	return nil
}

// SilentStats are a Silent's counters, for a host to export.
type SilentStats struct {
	Answered  uint64 // Answered calls watched
	Unwatched uint64 // Answered calls not watched: Max machines were watched already
	Returned  uint64 // watches ended by Asked within the window
	Silent    uint64 // watches ended by Sweep: answered, then nothing asked within the window
	Watching  uint64 // machines watched now
}

// Silent notices a machine that the host answered (proxy DHCP named a boot file) and that
// then asked the host for nothing within a window: no script, no file under its nonce, no
// iPXE request. Its firmware most likely took another server's boot file or HTTP boot URL
// (the site's own DHCP server offering one), which a host should tell its operator once
// per machine and count every time. Memory is bounded (SilentConfig.Max); the window runs
// on the injected clock. Safe for concurrent use.
//
// The host calls Answered when proxy DHCP answers a machine, Asked whenever the machine
// asks for anything after (its script, a boot file, a chain), and Sweep periodically (on
// its own ticker, say every few seconds): Sweep ends the watches that ran out and returns
// the MACs to name in the log.
type Silent struct {
	window time.Duration
	max    int
	clock  clock.Clock

	mu    sync.Mutex
	due   map[hwid.MAC]time.Duration // answered, nothing asked yet: by when it should have (monotonic)
	named map[hwid.MAC]struct{}      // returned by Sweep already
	stats SilentStats
}

// NewSilent returns a Silent watching nothing, configured by c.
func NewSilent(c SilentConfig) (*Silent, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &Silent{
		window: cmp0(c.Window, DefaultSilentWindow),
		max:    cmp0(c.Max, DefaultSilentMax),
		clock:  clock.Or(c.Clock),
		due:    make(map[hwid.MAC]time.Duration),
		named:  make(map[hwid.MAC]struct{}),
	}, nil
}

// Answered records that the host answered mac: it should ask for something within the
// window from now. Answering a watched machine again starts its window over. A zero MAC is
// ignored; beyond Max machines watched, a new one is not watched (counted in Unwatched),
// so a flood of answers costs no memory.
func (s *Silent) Answered(mac hwid.MAC) {
	if mac.IsZero() {
		return
	}
	due := s.clock.Monotonic() + s.window
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.due[mac]; !ok && len(s.due) >= s.max {
		s.stats.Unwatched++
		return
	}
	s.due[mac] = due
	s.stats.Answered++
}

// Asked records that mac asked the host for something: its watch ends, and it is not
// silent. A MAC not watched is ignored.
func (s *Silent) Asked(mac hwid.MAC) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.due[mac]; ok {
		delete(s.due, mac)
		s.stats.Returned++
	}
}

// Sweep ends the watches whose window has run out by now, counting each in Silent, and
// returns, in MAC order, those of the MACs it has not returned before: a host names each
// silent machine in its log once. The record of MACs named is bounded by Max and starts
// over when full.
func (s *Silent) Sweep() []hwid.MAC {
	now := s.clock.Monotonic()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []hwid.MAC
	for mac, due := range s.due {
		if now < due {
			continue
		}
		delete(s.due, mac)
		s.stats.Silent++
		if _, ok := s.named[mac]; ok {
			continue
		}
		if len(s.named) >= s.max {
			clear(s.named)
		}
		s.named[mac] = struct{}{}
		out = append(out, mac)
	}
	slices.SortFunc(out, func(a, b hwid.MAC) int { return slices.Compare(a[:], b[:]) })
	return out
}

// Stats returns the counters.
func (s *Silent) Stats() SilentStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.Watching = uint64(len(s.due))
	return st
}
