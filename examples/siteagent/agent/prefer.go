package agent

import (
	"net/netip"
	"sync"
	"time"

	"github.com/bettercompute/siteboot/connlimit"
)

// maxPreferred bounds the addresses the boot HTTP listener keeps room for.
const maxPreferred = 4096

// preferred are the addresses the boot HTTP listener keeps room for (connlimit's reserve):
// those proxy DHCP answered in a unicast answer, those that presented their boot nonce, and
// those a live entry's script went to, each for a nonce window. Lookups take a read lock and never block on I/O, as connlimit's
// Accept needs.
type preferred struct {
	now    func() time.Time
	window time.Duration

	mu sync.RWMutex
	m  map[netip.Addr]time.Time // address -> until
}

func newPreferred(now func() time.Time, window time.Duration) *preferred {
	return &preferred{now: now, window: window, m: map[netip.Addr]time.Time{}}
}

// add keeps room for a for a window from now.
func (p *preferred) add(a netip.Addr) {
	if p == nil || !a.IsValid() {
		return
	}
	a = a.Unmap().WithZone("")
	now := p.now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.m[a]; !ok && len(p.m) >= maxPreferred {
		// Full: the lapsed give way, else the one that lapses first.
		var first netip.Addr
		var firstUntil time.Time
		for b, until := range p.m {
			if !now.Before(until) {
				delete(p.m, b)
			} else if !first.IsValid() || until.Before(firstUntil) {
				first, firstUntil = b, until
			}
		}
		if len(p.m) >= maxPreferred {
			delete(p.m, first)
		}
	}
	p.m[a] = now.Add(p.window)
}

// Preferred implements connlimit.Preferrer.
func (p *preferred) Preferred(a netip.Addr) bool {
	p.mu.RLock()
	until, ok := p.m[a.Unmap().WithZone("")]
	p.mu.RUnlock()
	return ok && p.now().Before(until)
}

var _ connlimit.Preferrer = (*preferred)(nil)

// nonceWindow is Boot.NonceWindow, or its default.
func (a *Agent) nonceWindow() time.Duration {
	if w := a.cfg.Boot.NonceWindow; w > 0 {
		return w
	}
	return DefaultNonceWindow
}
