package agent

import (
	cryptorand "crypto/rand"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bettercompute/siteboot/hwid"
)

// MaxKeysPerMAC bounds the boot keys one MAC holds; the oldest give way first.
const MaxKeysPerMAC = 4

// pendingKeyTimeout is how long a key file's transfer may run before its key is given up
// (tftpd ends a transfer whose client went silent within seconds; this only keeps a lost
// report from holding the MAC's one key in flight).
const pendingKeyTimeout = 30 * time.Second

// errKeyInFlight: the MAC's key file is being sent; a second request waits for its end.
var errKeyInFlight = errors.New("agent: a boot key for this MAC is in flight")

// bootKeys are the keys the signed GRUB presents for its machine's configuration (n=KEY):
// 128 random bits each, bound to a MAC and to the address they were delivered to, valid
// for the nonce window. A key reaches the machine either in the RAM disk an HTTP boot
// fetched (delivered over that TCP connection: active at once) or in the key file GRUB
// fetches over TFTP (active only once tftpd reports the transfer completed to the address
// that fetched shim under the MAC's nonce: pending until then, one per MAC at a time).
type bootKeys struct {
	now  func() time.Time
	rand io.Reader

	mu      sync.Mutex
	t       macTokens[keyState]
	pending map[hwid.MAC]string // the key whose file is in flight

	issued, activated, dropped, busy atomic.Uint64
}

// keyState is what the store keeps of a key beside its MAC and age: where it was
// delivered, invalid while it is pending. A key is active once it has an address.
type keyState struct {
	ip netip.Addr
}

func (k keyState) active() bool { return k.ip.IsValid() }

func newBootKeys(now func() time.Time, rand io.Reader, window time.Duration) *bootKeys {
	if window == 0 {
		window = DefaultNonceWindow
	}
	if rand == nil {
		rand = cryptorand.Reader
	}
	s := &bootKeys{now: now, rand: rand, t: newMACTokens[keyState](window), pending: map[hwid.MAC]string{}}
	s.t.onDrop = func(k string, mac hwid.MAC) {
		if s.pending[mac] == k {
			delete(s.pending, mac)
		}
		s.dropped.Add(1)
	}
	return s
}

// issue mints a key for mac: active and delivered to ip when ip is valid, else pending.
func (s *bootKeys) issue(mac hwid.MAC, ip netip.Addr) (string, error) {
	k, err := mintToken(s.rand)
	if err != nil {
		return "", fmt.Errorf("agent: boot key: %w", err)
	}
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if !ip.IsValid() {
		if p, ok := s.pending[mac]; ok {
			if now.Sub(s.t.m[p].issued) < pendingKeyTimeout {
				s.busy.Add(1)
				return "", errKeyInFlight
			}
			s.t.drop(p)
		}
		s.pending[mac] = k
	}
	for len(s.t.byMAC[mac]) >= MaxKeysPerMAC {
		s.t.drop(s.t.byMAC[mac][0])
	}
	s.t.add(k, mac, now, keyState{ip: ip})
	s.issued.Add(1)
	if ip.IsValid() {
		s.activated.Add(1)
	}
	return k, nil
}

// resolve ends the transfer of mac's pending key file: the key becomes active, delivered
// to peer, when the transfer completed and peer is where the machine is; otherwise it is
// dropped. It reports whether a key was pending, and whether it became active.
func (s *bootKeys) resolve(mac hwid.MAC, peer netip.Addr, delivered bool) (pending, active bool) {
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
	b := s.t.m[k]
	b.state.ip = peer
	s.activated.Add(1)
	return true, true
}

// claim decides whether a configuration request for mac presenting key from the address
// from is the machine's: the key is active, was handed to mac within the window, and was
// delivered to from.
func (s *bootKeys) claim(key string, mac hwid.MAC, from netip.Addr) unbound {
	if key == "" {
		return unboundNoNonce
	}
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	b, u := s.t.find(key, now, keyState.active)
	switch {
	case u != bound:
		return u
	case b.mac != mac:
		return unboundOtherMAC
	case b.state.ip != from:
		return unboundOtherOwner
	}
	return bound
}
