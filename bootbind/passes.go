package bootbind

import (
	"time"

	"net/netip"
	"sync"
	"sync/atomic"

	"github.com/bettercompute/siteboot/hwid"
)

// MaxPassAddrs bounds the addresses one pass remembers as having got a DHCPv6 answer.
const MaxPassAddrs = 4

// Passes are the IPv6 boot passes: where a script request over IPv6 cannot carry a nonce
// (iPXE takes its chain URL from the site's DHCPv6 server, see the package doc), the pass a
// MAC got with its firmware's DHCP answer binds it instead, for the window, to:
//
//   - an address that got one of those DHCPv6 answers (Issue's to), or
//   - the MAC's own addresses: its modified EUI-64 interface identifier (SLAAC, link-local),
//     or an address the host's neighbour table (Neighbor) resolves to the MAC,
//
// and only on a provisioning segment (Segment). Anyone else is refused. Safe for concurrent
// use.
type Passes struct {
	cfg Config
	// Segment reports whether an address is on a provisioning segment (an on-link prefix of
	// the boot interface: OnLink). Nil: every IPv6 address is.
	Segment func(netip.Addr) bool
	// Neighbor resolves an on-link address to the link-layer address it answers from (the
	// host's neighbour cache, NeighborMAC on Linux). Nil: no lookup.
	Neighbor func(netip.Addr) (hwid.MAC, bool)

	mu sync.Mutex
	m  map[hwid.MAC]*pass

	issued, used atomic.Uint64
}

type pass struct {
	issued token[struct{}]
	addrs  []netip.Addr
}

// NewPasses returns an empty store.
func NewPasses(c Config) *Passes {
	c = c.withDefaults()
	return &Passes{cfg: c, m: map[hwid.MAC]*pass{}}
}

// Issue gives mac a pass: its firmware was answered now, over DHCPv6 to the address to (an
// invalid to: over DHCPv4, or through a relay). A live pass keeps the addresses it had.
func (p *Passes) Issue(mac hwid.MAC, to netip.Addr) {
	now := p.cfg.Clock.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	t := tokens[struct{}]{window: p.cfg.Window}
	b, ok := p.m[mac]
	if ok && t.lapsed(&b.issued, now) {
		ok = false
	}
	if !ok {
		if len(p.m) >= p.cfg.Max {
			p.evict(now)
		}
		b = &pass{}
		p.m[mac] = b
	}
	b.issued = token[struct{}]{mac: mac, issued: now}
	if to = to.WithZone(""); to.Is6() && !to.Is4In6() {
		if len(b.addrs) >= MaxPassAddrs {
			b.addrs = b.addrs[1:]
		}
		b.addrs = append(b.addrs, to)
	}
	p.issued.Add(1)
}

func (p *Passes) evict(now time.Time) {
	t := tokens[struct{}]{window: p.cfg.Window}
	var oldest hwid.MAC
	var at *pass
	for k, b := range p.m {
		if t.lapsed(&b.issued, now) {
			delete(p.m, k)
			continue
		}
		if at == nil || b.issued.issued.Before(at.issued.issued) {
			oldest, at = k, b
		}
	}
	if len(p.m) >= p.cfg.Max && at != nil {
		delete(p.m, oldest)
	}
}

// Claim decides whether a script request over IPv6 for mac from the address from holds the
// MAC's pass.
func (p *Passes) Claim(mac hwid.MAC, from netip.Addr) Reason {
	from = from.WithZone("")
	if !from.Is6() || from.Is4In6() {
		return NoPass
	}
	if p.Segment != nil && !p.Segment(from) {
		return OffSegment
	}
	now := p.cfg.Clock.Now()
	p.mu.Lock()
	b, ok := p.m[mac]
	t := tokens[struct{}]{window: p.cfg.Window}
	switch {
	case !ok:
		p.mu.Unlock()
		return NoPass
	case t.lapsed(&b.issued, now):
		delete(p.m, mac)
		p.mu.Unlock()
		return Lapsed
	}
	answered := false
	for _, a := range b.addrs {
		answered = answered || a == from
	}
	p.mu.Unlock()
	if !answered && !IsEUI64(from, mac) {
		if p.Neighbor == nil {
			return OtherAddress
		}
		if n, ok := p.Neighbor(from); !ok || n != mac {
			return OtherAddress
		}
	}
	p.used.Add(1)
	return Bound
}

// IsEUI64 reports whether a's interface identifier is mac's modified EUI-64 (RFC 4291
// appendix A), as SLAAC and link-local addresses spell it.
func IsEUI64(a netip.Addr, mac hwid.MAC) bool {
	if !a.Is6() || a.Is4In6() {
		return false
	}
	b := a.As16()
	return b[8] == mac[0]^0x02 && b[9] == mac[1] && b[10] == mac[2] && b[11] == 0xff && b[12] == 0xfe &&
		b[13] == mac[3] && b[14] == mac[4] && b[15] == mac[5]
}

// PassStats are a Passes store's counters.
type PassStats struct{ Issued, Used uint64 }

// Stats returns the store's counters.
func (p *Passes) Stats() PassStats { return PassStats{Issued: p.issued.Load(), Used: p.used.Load()} }
