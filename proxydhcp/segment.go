package proxydhcp

import (
	"context"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/bettercompute/siteboot/clock"
	"github.com/bettercompute/siteboot/hwid"
)

// Defaults of the provisioning segments (Server.Segments).
const (
	// DefaultRelayPrefixLen is the length of the subnet behind a relay that the server
	// learns from a relayed request's giaddr (Server.RelayPrefixLen).
	DefaultRelayPrefixLen = 24
	// LearnedRelayTTL is how long the server remembers which relay a MAC's requests came
	// through.
	LearnedRelayTTL = 10 * time.Minute
	// maxLearnedRelays bounds the MACs whose relay the server remembers; the oldest go first.
	maxLearnedRelays = 4096
	// linkCacheTTL is how long the subnets of an interface are kept before they are read again.
	linkCacheTTL = 5 * time.Second
)

// BindParam is the query parameter of the chain URL that carries a Binder's token
// (http://SERVER/boot/chain.ipxe?n=TOKEN), the name package ipxe reads it under.
const BindParam = "n"

// Binder binds an answer to iPXE to the machine it goes to (DESIGN.md S1): with a Binder
// set, the server names the token Bind returns in the chain URL of every answer to iPXE that
// it sends unicast to the requester, and names no boot file in an answer it broadcasts (or
// sends through a relay): iPXE then asks on port 4011 (dhcp.c's ProxyDHCP REQUEST, from its
// new address), and that unicast answer carries the token. No token travels in a broadcast.
// Package bootbind's Nonces is one.
type Binder interface {
	// Bind returns a token for an answer to the iPXE of mac sent to the address to. to is
	// invalid when the machine's later requests will not come from it (an IPv6 link-local
	// address). An error means silence (ReasonError).
	Bind(ctx context.Context, mac hwid.MAC, to netip.Addr) (string, error)
}

// BinderFunc adapts a function to a Binder.
type BinderFunc func(ctx context.Context, mac hwid.MAC, to netip.Addr) (string, error)

// Bind calls f(ctx, mac, to).
func (f BinderFunc) Bind(ctx context.Context, mac hwid.MAC, to netip.Addr) (string, error) {
	return f(ctx, mac, to)
}

// unicastTo is the requester's address an answer to req is sent to, when it is sent to the
// requester itself (not broadcast, not through a relay).
func unicastTo(req *Request, relayed bool) (netip.Addr, bool) {
	switch {
	case req.IPv6:
		if relayed {
			return netip.Addr{}, false
		}
		a := req.Source.Addr().WithZone("")
		return a, a.IsValid()
	case req.Port == PortBoot:
		a := req.Source.Addr()
		return a, a.IsValid() && !a.IsUnspecified()
	case req.Relay.IsValid():
		return netip.Addr{}, false
	case req.ClientIP.IsValid():
		return req.ClientIP, true
	}
	return netip.Addr{}, false
}

// onSegment reports whether an answer for mac may go unicast to the address to: to is on
// a subnet of the interface the request came in on (link), an IPv6 link-local address (which
// only the link delivers), on one of Server.Segments, or on the subnet behind the relay that
// mac's own relayed requests came through within LearnedRelayTTL.
func (s *Server) onSegment(link []netip.Prefix, to netip.Addr, mac hwid.MAC) bool {
	to = to.Unmap().WithZone("")
	if to.Is6() && to.IsLinkLocalUnicast() {
		return true
	}
	for _, ps := range [][]netip.Prefix{link, s.Segments} {
		for _, p := range ps {
			if p.Contains(to) {
				return true
			}
		}
	}
	return s.relays.contains(mac, to, s.relayBits(to), s.now())
}

func (s *Server) relayBits(a netip.Addr) int {
	if s.RelayPrefixLen != 0 {
		return s.RelayPrefixLen
	}
	if a.Is6() {
		return 64
	}
	return DefaultRelayPrefixLen
}

func (s *Server) now() time.Time { return clock.Or(s.Clock).Now() }

// learnedRelays remember, per MAC, the relay its last relayed request came through.
type learnedRelays struct {
	mu sync.Mutex
	m  map[hwid.MAC]learnedRelay
}

type learnedRelay struct {
	relay netip.Addr
	at    time.Time
}

func (l *learnedRelays) learn(mac hwid.MAC, relay netip.Addr, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = map[hwid.MAC]learnedRelay{}
	}
	if _, ok := l.m[mac]; !ok && len(l.m) >= maxLearnedRelays {
		var oldest hwid.MAC
		var at time.Time
		for k, r := range l.m {
			if now.Sub(r.at) >= LearnedRelayTTL {
				delete(l.m, k)
			} else if at.IsZero() || r.at.Before(at) {
				oldest, at = k, r.at
			}
		}
		if len(l.m) >= maxLearnedRelays {
			delete(l.m, oldest)
		}
	}
	l.m[mac] = learnedRelay{relay: relay.Unmap(), at: now}
}

func (l *learnedRelays) contains(mac hwid.MAC, a netip.Addr, bits int, now time.Time) bool {
	l.mu.Lock()
	r, ok := l.m[mac]
	l.mu.Unlock()
	if !ok || now.Sub(r.at) >= LearnedRelayTTL || now.Before(r.at) || r.relay.Is4() != a.Is4() {
		return false
	}
	p, err := r.relay.Prefix(bits)
	return err == nil && p.Contains(a)
}

// linkCache keeps the subnets of the interfaces requests came in on, read again after
// linkCacheTTL (in the network namespace of the socket they came in on: prefixesIn).
type linkCache struct {
	mu sync.Mutex
	m  map[int]linkEntry
}

type linkEntry struct {
	prefixes []netip.Prefix
	at       time.Time
}

func (c *linkCache) prefixes(ns, ifIdx int, now time.Time) []netip.Prefix {
	if ifIdx < 0 {
		ifIdx = 0
	}
	c.mu.Lock()
	e, ok := c.m[ifIdx]
	c.mu.Unlock()
	if ok && now.Sub(e.at) < linkCacheTTL && !now.Before(e.at) {
		return e.prefixes
	}
	e = linkEntry{prefixes: prefixesIn(ns, ifIdx), at: now}
	c.mu.Lock()
	if c.m == nil || len(c.m) > 256 {
		c.m = map[int]linkEntry{}
	}
	c.m[ifIdx] = e
	c.mu.Unlock()
	return e.prefixes
}

// interfacePrefixes are the subnets of interface ifIdx's addresses; with ifIdx 0 (a datagram
// the kernel said nothing about: one queued before the socket asked for its interface), of
// every interface's.
func interfacePrefixes(ifIdx int) []netip.Prefix {
	var addrs []net.Addr
	var err error
	if ifIdx == 0 {
		addrs, err = net.InterfaceAddrs()
	} else {
		var ifi *net.Interface
		if ifi, err = net.InterfaceByIndex(ifIdx); err == nil {
			addrs, err = ifi.Addrs()
		}
	}
	if err != nil {
		return nil
	}
	var out []netip.Prefix
	for _, a := range addrs {
		n, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		ip, ok := netip.AddrFromSlice(n.IP)
		if !ok {
			continue
		}
		ones, _ := n.Mask.Size()
		ip = ip.Unmap()
		if ip.Is4() && ones > 32 {
			ones -= 96
		}
		if p, err := ip.Prefix(ones); err == nil {
			out = append(out, p)
		}
	}
	return out
}
