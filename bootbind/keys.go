package bootbind

import (
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bettercompute/siteboot/hwid"
)

// MaxKeysPerMAC bounds the boot keys one MAC holds; the oldest give way first.
const MaxKeysPerMAC = 4

// PendingKeyTimeout is how long a key file's transfer may run before its key is given up
// (a TFTP server ends a transfer whose client went silent within seconds; this only keeps a
// lost report from holding the MAC's one key in flight).
const PendingKeyTimeout = 30 * time.Second

// ErrKeyInFlight: the MAC's key file is being sent; a second request waits for its end.
var ErrKeyInFlight = errors.New("bootbind: a boot key for this MAC is in flight")

// Keys are the keys a signed boot loader presents for its machine's configuration: 128
// random bits each, bound to a MAC and to the address they were delivered to, valid for the
// window. A key reaches the machine either over a connection whose peer is known (active at
// once) or in a file whose transfer is reported later (pending until Resolve, one per MAC at
// a time). Once a newer key of a MAC is active, its older keys stop working. Safe for
// concurrent use.
type Keys struct {
	cfg Config

	mu      sync.Mutex
	t       tokens[keyState]
	pending map[hwid.MAC]string // the key whose file is in flight

	issued, activated, dropped, busy atomic.Uint64
}

// keyState is where a key was delivered, invalid while it is pending.
type keyState struct {
	ip netip.Addr
}

func (k keyState) active() bool { return k.ip.IsValid() }

// NewKeys returns an empty store.
func NewKeys(c Config) *Keys {
	c = c.withDefaults()
	s := &Keys{cfg: c, t: newTokens[keyState](c.Window, c.Max), pending: map[hwid.MAC]string{}}
	s.t.onDrop = func(k string, mac hwid.MAC) {
		if s.pending[mac] == k {
			delete(s.pending, mac)
		}
		s.dropped.Add(1)
	}
	return s
}

// Issue mints a key for mac: active and delivered to ip when ip is valid, else pending.
func (s *Keys) Issue(mac hwid.MAC, ip netip.Addr) (string, error) {
	k, err := mint(s.cfg.Rand)
	if err != nil {
		return "", fmt.Errorf("bootbind: boot key: %w", err)
	}
	ip = ip.Unmap().WithZone("")
	now := s.cfg.Clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if !ip.IsValid() {
		if p, ok := s.pending[mac]; ok {
			if now.Sub(s.t.m[p].issued) < PendingKeyTimeout {
				s.busy.Add(1)
				return "", ErrKeyInFlight
			}
			s.t.drop(p)
		}
		s.pending[mac] = k
	}
	for len(s.t.byMAC[mac]) >= MaxKeysPerMAC {
		s.t.drop(s.t.byMAC[mac][0])
	}
	s.t.add(k, mac, now, now, keyState{ip: ip})
	s.issued.Add(1)
	if ip.IsValid() {
		s.activated.Add(1)
		s.dropOlder(mac, k)
	}
	return k, nil
}

// dropOlder drops mac's keys issued before k, now that k is active (a pending one too).
func (s *Keys) dropOlder(mac hwid.MAC, k string) {
	for _, x := range append([]string(nil), s.t.byMAC[mac]...) {
		if x == k {
			return
		}
		s.t.drop(x)
	}
}

// Resolve ends the transfer of mac's pending key file: the key becomes active, delivered to
// peer, when the transfer completed and peer is where the machine is (delivered); otherwise
// it is dropped. It reports whether a key was pending, and whether it became active.
func (s *Keys) Resolve(mac hwid.MAC, peer netip.Addr, delivered bool) (pending, active bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k, ok := s.pending[mac]
	if !ok {
		return false, false
	}
	delete(s.pending, mac)
	if !delivered {
		s.t.drop(k)
		return true, false
	}
	s.t.m[k].state.ip = peer.Unmap().WithZone("")
	s.activated.Add(1)
	s.dropOlder(mac, k)
	return true, true
}

// Claim decides whether a configuration request for mac presenting key from the address
// from is the machine's: the key is active and the MAC's newest active one, was handed to
// mac within the window, and was delivered to from.
func (s *Keys) Claim(key string, mac hwid.MAC, from netip.Addr) Reason {
	if key == "" {
		return NoNonce
	}
	now := s.cfg.Clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	b, r := s.t.find(key, now, keyState.active)
	switch {
	case r != Bound:
		return r
	case b.mac != mac:
		return OtherMAC
	case b.state.ip != from.Unmap().WithZone(""):
		return OtherAddress
	}
	return Bound
}

// KeyStats are a Keys store's counters.
type KeyStats struct {
	Issued, Activated, Dropped, Busy uint64
}

// Stats returns the store's counters.
func (s *Keys) Stats() KeyStats {
	return KeyStats{Issued: s.issued.Load(), Activated: s.activated.Load(), Dropped: s.dropped.Load(), Busy: s.busy.Load()}
}
