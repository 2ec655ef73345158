package connlimit

import (
	"container/list"
	"fmt"
	"net/netip"
	"sync"
	"time"

	"github.com/bettercompute/siteboot/clock"
)

// Defaults used for zero RecentConfig fields.
const (
	// DefaultRecentWindow is how long an address stays preferred after Recent.Add: the
	// default window of a boot nonce (bootbind.DefaultWindow), in which a machine answered
	// by proxy DHCP fetches its script, kernel and initrd.
	DefaultRecentWindow = 5 * time.Minute
	// DefaultRecentMax is how many addresses a Recent holds at once.
	DefaultRecentMax = 4096
)

// RecentConfig configures a [Recent]. The zero value is usable.
type RecentConfig struct {
	// Window is how long an address stays preferred after its last Add.
	// DefaultRecentWindow when 0.
	Window time.Duration
	// Max bounds the addresses held; when a new one needs room, the lapsed give way, else
	// the one added longest ago. DefaultRecentMax when 0.
	Max int
	// Clock measures the window (its monotonic reading); nil means [clock.Real].
	Clock clock.Clock
}

// Validate reports negative fields.
func (c RecentConfig) Validate() error {
	switch {
	case c.Window < 0:
		return fmt.Errorf("%w: Recent window %v is negative", ErrLimits, c.Window)
	case c.Max < 0:
		return fmt.Errorf("%w: Recent Max %d is negative", ErrLimits, c.Max)
	}
	return nil
}

// Recent is a [Preferrer] of the addresses a host added within a window: the machines it is
// booting (an address proxy DHCP answered, one that presented its boot nonce, one a live
// entry's script went to), for [Listener.SetPreferred]. Addresses are kept unmapped and
// without a zone, exactly (not by IPv6 prefix). Memory is bounded (RecentConfig.Max).
// Preferred takes a read lock only and never blocks on I/O, as Accept needs. Safe for
// concurrent use; a nil *Recent prefers nothing and ignores Add.
type Recent struct {
	window time.Duration
	max    int
	clock  clock.Clock

	mu    sync.RWMutex
	m     map[netip.Addr]*list.Element // of *recentEntry
	order *list.List                   // least recently added first
}

type recentEntry struct {
	addr  netip.Addr
	until time.Duration // on the clock's monotonic reading
}

var _ Preferrer = (*Recent)(nil)

// NewRecent returns an empty Recent configured by c.
func NewRecent(c RecentConfig) (*Recent, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if c.Window == 0 {
		c.Window = DefaultRecentWindow
	}
	if c.Max == 0 {
		c.Max = DefaultRecentMax
	}
	return &Recent{window: c.Window, max: c.Max, clock: clock.Or(c.Clock),
		m: make(map[netip.Addr]*list.Element), order: list.New()}, nil
}

// Add prefers a for a window from now (renewing it when it is held already). An invalid
// address is ignored.
func (r *Recent) Add(a netip.Addr) {
	if r == nil || !a.IsValid() {
		return
	}
	a = a.Unmap().WithZone("")
	now := r.clock.Monotonic()
	r.mu.Lock()
	defer r.mu.Unlock()
	if e, ok := r.m[a]; ok {
		e.Value.(*recentEntry).until = now + r.window
		r.order.MoveToBack(e)
		return
	}
	// The list is in the order of Add, and so of lapse (one window for all, a monotonic
	// clock): the lapsed are at its front and go first; when the list is still full, the
	// one added longest ago gives way.
	for front := r.order.Front(); front != nil; front = r.order.Front() {
		old := front.Value.(*recentEntry)
		if now < old.until && r.order.Len() < r.max {
			break
		}
		r.order.Remove(front)
		delete(r.m, old.addr)
	}
	r.m[a] = r.order.PushBack(&recentEntry{addr: a, until: now + r.window})
}

// Preferred reports whether a was added within the window (connlimit's [Preferrer]).
func (r *Recent) Preferred(a netip.Addr) bool {
	if r == nil {
		return false
	}
	a = a.Unmap().WithZone("")
	now := r.clock.Monotonic()
	r.mu.RLock()
	defer r.mu.RUnlock()
	e, ok := r.m[a]
	return ok && now < e.Value.(*recentEntry).until
}

// Len returns how many addresses are held; lapsed ones are dropped by the next Add.
func (r *Recent) Len() int {
	if r == nil {
		return 0
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.order.Len()
}
