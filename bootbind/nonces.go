package bootbind

import (
	"context"
	cryptorand "crypto/rand"
	"fmt"
	"io"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bettercompute/siteboot/clock"
	"github.com/bettercompute/siteboot/hwid"
)

// Defaults used when the corresponding Config field is zero, and fixed bounds.
const (
	// DefaultWindow is how long after its DHCP answer a machine may present the answer's
	// nonce.
	DefaultWindow = 5 * time.Minute
	// DefaultMaxNonces bounds the nonces (and, apart, the keys and the passes) held at once;
	// the lapsed, else the oldest, give way first.
	DefaultMaxNonces = 4096
	// MaxNoncesPerMAC bounds the nonces one MAC holds. When a new one needs room, the oldest
	// issued to the same address gives way first, then the oldest nobody presented, then the
	// oldest: answers to one requester never push out another's nonce.
	MaxNoncesPerMAC = 4
)

// Config is what a Nonces, Keys or Passes store is built with.
type Config struct {
	// Window is how long a nonce, key or pass lives after it was issued. Default
	// DefaultWindow.
	Window time.Duration
	// Max bounds the tokens held at once. Default DefaultMaxNonces.
	Max int
	// Clock is the store's clock. Default clock.Real.
	Clock clock.Clock
	// Rand is where tokens come from. Default crypto/rand.
	Rand io.Reader
}

// Validate reports settings that cannot work.
func (c Config) Validate() error {
	if c.Window < 0 || c.Max < 0 {
		return fmt.Errorf("bootbind: negative Window or Max")
	}
	return nil
}

func (c Config) withDefaults() Config {
	if c.Window == 0 {
		c.Window = DefaultWindow
	}
	if c.Max == 0 {
		c.Max = DefaultMaxNonces
	}
	c.Clock = clock.Or(c.Clock)
	if c.Rand == nil {
		c.Rand = cryptorand.Reader
	}
	return c
}

// Kind says which answer a nonce was named in, and so where it may be presented.
type Kind uint8

// Kinds of nonce.
const (
	KindChain Kind = iota // the chain URL of an answer to iPXE: presented with the script request
	KindShim              // the shim's directory of a PXE answer (4011): fetched over TFTP
	KindImage             // the RAM disk URL of an answer to UEFI HTTP boot: fetched over HTTP
	numKinds
)

// Nonces are the one-time boot nonces named in proxy DHCP answers, each bound to the MAC it
// was handed to and to one address: the address the answer was sent to when it was sent to
// one (a unicast answer), else the first address that presents it. Bounded (Config.Max,
// MaxNoncesPerMAC), on the store's clock. Safe for concurrent use.
type Nonces struct {
	cfg Config

	// Neighbor, if set, resolves an on-link address to the link-layer address it answers
	// from (NeighborMAC on Linux). A nonce sent to no single address (a broadcast answer)
	// is then not bound to a first presenter whose address resolves to another MAC than the
	// nonce's: a bystander on the segment that read it cannot take it without spoofing the
	// machine's MAC. Addresses off the link are not in the table and are not checked.
	// Set it before the store is used.
	Neighbor func(netip.Addr) (hwid.MAC, bool)

	mu    sync.Mutex
	t     tokens[nonceState]
	dirty bool

	// fileMu serialises SaveFile and LoadFile; filePath is the file last saved or loaded
	// whole.
	fileMu   sync.Mutex
	filePath string

	issued  atomic.Uint64
	refused [numReasons]atomic.Uint64
}

// nonceState is what the store keeps of a nonce beside its MAC and age.
type nonceState struct {
	kind      Kind
	owner     netip.Addr // the address it belongs to; invalid until one presents it
	presented bool       // someone presented it
}

// NewNonces returns an empty store.
func NewNonces(c Config) *Nonces {
	c = c.withDefaults()
	return &Nonces{cfg: c, t: newTokens[nonceState](c.Window, c.Max)}
}

// Issue mints a nonce of a kind for a DHCP answer to mac that goes to the address to: the
// nonce belongs to that address from the start. When to is invalid (an answer no single
// address receives) the first address that presents it owns it.
func (s *Nonces) Issue(mac hwid.MAC, kind Kind, to netip.Addr) (string, error) {
	n, err := mint(s.cfg.Rand)
	if err != nil {
		return "", fmt.Errorf("bootbind: nonce: %w", err)
	}
	to = to.Unmap().WithZone("")
	now := s.cfg.Clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.t.byMAC[mac]) >= MaxNoncesPerMAC {
		s.t.drop(s.victim(mac, to))
	}
	s.t.add(n, mac, now, now, nonceState{kind: kind, owner: to})
	s.dirty = true
	s.issued.Add(1)
	return n, nil
}

// victim is the nonce of mac that gives way to a new one for the address to.
func (s *Nonces) victim(mac hwid.MAC, to netip.Addr) string {
	list := s.t.byMAC[mac]
	if to.IsValid() {
		for _, x := range list {
			if s.t.m[x].state.owner == to {
				return x
			}
		}
	}
	for _, x := range list {
		if !s.t.m[x].state.presented {
			return x
		}
	}
	return list[0]
}

// Bind issues a chain nonce for an answer to the iPXE of mac that goes to the address to
// (proxydhcp.Binder).
func (s *Nonces) Bind(ctx context.Context, mac hwid.MAC, to netip.Addr) (string, error) {
	return s.Issue(mac, KindChain, to)
}

// Claim decides whether a script request for mac, presenting a chain nonce from the address
// from, is bound to a DHCP answer: the nonce was handed to mac within the window, and belongs
// to from (or nobody presented it yet: from then owns it). Each refusal is counted.
func (s *Nonces) Claim(nonce string, mac hwid.MAC, from netip.Addr) Reason {
	r := s.claim(nonce, mac, from.Unmap().WithZone(""))
	s.refused[r].Add(1)
	return r
}

func (s *Nonces) claim(nonce string, mac hwid.MAC, from netip.Addr) Reason {
	if nonce == "" {
		return NoNonce
	}
	now := s.cfg.Clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	b, r := s.t.find(nonce, now, KindChain.is)
	switch {
	case r != Bound:
		return r
	case b.mac != mac:
		return OtherMAC
	}
	return s.own(&b.state, b.mac, from)
}

func (k Kind) is(st nonceState) bool { return st.kind == k }

// own binds the nonce to from when it belongs to nobody yet, and tells whether from is its
// owner.
func (s *Nonces) own(n *nonceState, mac hwid.MAC, from netip.Addr) Reason {
	switch {
	case !n.owner.IsValid():
		if s.Neighbor != nil {
			if m, ok := s.Neighbor(from); ok && m != mac {
				return OtherAddress
			}
		}
		n.owner = from
		s.dirty = true
	case n.owner != from:
		return OtherAddress
	}
	if !n.presented {
		n.presented, s.dirty = true, true
	}
	return Bound
}

// Fetched binds a nonce of the given kind to from, the first address that fetched a file
// under it (or checks it against the address it was sent to): it returns the MAC the nonce
// was handed to and Bound, or why the fetch is not the machine's.
func (s *Nonces) Fetched(nonce string, kind Kind, from netip.Addr) (hwid.MAC, Reason) {
	from = from.Unmap().WithZone("")
	now := s.cfg.Clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	b, r := s.t.find(nonce, now, kind.is)
	if r != Bound {
		return hwid.MAC{}, r
	}
	return b.mac, s.own(&b.state, b.mac, from)
}

// Live reports whether nonce is one of the kind handed out within the window.
func (s *Nonces) Live(nonce string, kind Kind) bool {
	now := s.cfg.Clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.t.m[nonce]
	return ok && b.state.kind == kind && !s.t.lapsed(b, now)
}

// FetchedAny reports whether someone presented a nonce of kind handed to mac within the
// window.
func (s *Nonces) FetchedAny(mac hwid.MAC, kind Kind) bool {
	now := s.cfg.Clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range s.t.byMAC[mac] {
		if b := s.t.m[n]; b.state.kind == kind && b.state.presented && !s.t.lapsed(b, now) {
			return true
		}
	}
	return false
}

// Owns reports whether from presented a nonce of kind handed to mac within the window: from
// is where the machine that got that DHCP answer is.
func (s *Nonces) Owns(mac hwid.MAC, kind Kind, from netip.Addr) bool {
	from = from.Unmap().WithZone("")
	now := s.cfg.Clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range s.t.byMAC[mac] {
		if b := s.t.m[n]; b.state.kind == kind && b.state.presented && b.state.owner == from && !s.t.lapsed(b, now) {
			return true
		}
	}
	return false
}

// Issued is how many nonces the store has issued.
func (s *Nonces) Issued() uint64 { return s.issued.Load() }

// Refused is how many Claims were refused for reason r (Bound: how many were not).
func (s *Nonces) Refused(r Reason) uint64 {
	if r >= numReasons {
		return 0
	}
	return s.refused[r].Load()
}

// Len is how many nonces the store holds.
func (s *Nonces) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.t.m)
}
