package agent

import (
	cryptorand "crypto/rand"
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/bettercompute/siteboot/hwid"
	"github.com/bettercompute/siteboot/ipxe"
	"github.com/bettercompute/siteboot/proxydhcp"
)

// Bounds of the boot nonce store.
const (
	// DefaultNonceWindow is how long after its proxy DHCP answer a machine may fetch its
	// script with the answer's boot nonce (BootConfig.NonceWindow when zero).
	DefaultNonceWindow = 5 * time.Minute
	// MaxNonces bounds the boot nonces held at once; the oldest give way first.
	MaxNonces = 4096
	// MaxNoncesPerMAC bounds the nonces one MAC holds (iPXE's DISCOVER and its 4011
	// request are answered each with one); the oldest not yet presented give way first.
	MaxNoncesPerMAC = 4
)

// unbound says why a /boot/ipxe request may not have the machine's secrets (S1): it is not
// bound to a proxy DHCP answer this agent gave that machine.
type unbound uint8

// Reasons a request is not bound to its machine's DHCP answer.
const (
	bound             unbound = iota
	unboundNoNonce            // "no-nonce": the request names no boot nonce (a MAC-only request)
	unboundUnknown            // "unknown-nonce": a nonce this agent never handed out, or forgot
	unboundLapsed             // "nonce-lapsed": handed out longer ago than the window
	unboundOtherMAC           // "nonce-other-mac": the nonce was handed to another MAC
	unboundOtherOwner         // "nonce-other-address": another address presented the nonce first
	numUnbound
)

func (u unbound) String() string {
	switch u {
	case bound:
		return "bound"
	case unboundNoNonce:
		return "no-nonce"
	case unboundUnknown:
		return "unknown-nonce"
	case unboundLapsed:
		return "nonce-lapsed"
	case unboundOtherMAC:
		return "nonce-other-mac"
	case unboundOtherOwner:
		return "nonce-other-address"
	}
	return "unbound(" + strconv.Itoa(int(u)) + ")"
}

// bootNonces are the one-time boot nonces proxy DHCP names in its answers to iPXE, each
// bound to the MAC it answered and, from the first script request that presents it, to
// that request's address. Bounded (MaxNonces, MaxNoncesPerMAC), on the agent's clock.
type bootNonces struct {
	now  func() time.Time
	rand io.Reader

	mu sync.Mutex
	t  macTokens[nonceState]

	issued  atomic.Uint64
	refused [numUnbound]atomic.Uint64
}

// nonceState is what the store keeps of a nonce beside its MAC and age.
type nonceState struct {
	kind  nonceKind
	owner netip.Addr // the first address that presented it; invalid until then
}

// nonceKind says which answer a boot nonce was named in, and so where it may be presented.
type nonceKind uint8

const (
	nonceIPXE  nonceKind = iota // the chain URL of an answer to iPXE: presented to /boot/ipxe
	nonceShim                   // the shim's directory of a PXE answer (4011): fetched over TFTP
	nonceImage                  // the RAM disk URL of an answer to UEFI HTTP boot: fetched over HTTP
)

// is reports whether st is a nonce of kind k.
func (k nonceKind) is(st nonceState) bool { return st.kind == k }

func newBootNonces(now func() time.Time, rand io.Reader, window time.Duration) *bootNonces {
	if window == 0 {
		window = DefaultNonceWindow
	}
	if rand == nil {
		rand = cryptorand.Reader
	}
	return &bootNonces{now: now, rand: rand, t: newMACTokens[nonceState](window)}
}

// issue mints a nonce of a kind for a DHCP answer to mac: 128 random bits, in hex.
func (s *bootNonces) issue(mac hwid.MAC, kind nonceKind) (string, error) {
	n, err := mintToken(s.rand)
	if err != nil {
		return "", fmt.Errorf("agent: boot nonce: %w", err)
	}
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.t.byMAC[mac]) >= MaxNoncesPerMAC {
		// The oldest one nobody presented yet gives way first, so a burst of DHCP answers
		// for the MAC does not end a boot in progress; else the oldest.
		list := s.t.byMAC[mac]
		victim := list[0]
		for _, x := range list {
			if !s.t.m[x].state.owner.IsValid() {
				victim = x
				break
			}
		}
		s.t.drop(victim)
	}
	s.t.add(n, mac, now, nonceState{kind: kind})
	s.issued.Add(1)
	return n, nil
}

// claim decides whether a script request for mac, presenting nonce from the address from,
// is bound to a DHCP answer: the nonce was handed to mac within the window, and either
// nobody presented it yet (from then owns it) or from already does. A nonce is 128 random
// bits, so a map lookup's timing tells a guesser nothing useful.
func (s *bootNonces) claim(nonce string, mac hwid.MAC, from netip.Addr) unbound {
	u := s.decide(nonce, mac, from)
	s.refused[u].Add(1)
	return u
}

func (s *bootNonces) decide(nonce string, mac hwid.MAC, from netip.Addr) unbound {
	if nonce == "" {
		return unboundNoNonce
	}
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	b, u := s.t.find(nonce, now, nonceIPXE.is)
	switch {
	case u != bound:
		return u
	case b.mac != mac:
		return unboundOtherMAC
	}
	return b.state.own(from)
}

// own binds the nonce to from when nobody presented it yet, and tells whether from is its
// owner.
func (n *nonceState) own(from netip.Addr) unbound {
	switch {
	case !n.owner.IsValid():
		n.owner = from
	case n.owner != from:
		return unboundOtherOwner
	}
	return bound
}

// fetched binds a nonce of the given kind to from, the first address that fetched a file
// under it (tftpd's report of the transfer, or the HTTP connection): it returns the MAC the
// nonce was handed to and bound, or why the fetch is not the machine's.
func (s *bootNonces) fetched(nonce string, kind nonceKind, from netip.Addr) (hwid.MAC, unbound) {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	b, u := s.t.find(nonce, now, kind.is)
	if u != bound {
		return hwid.MAC{}, u
	}
	return b.mac, b.state.own(from)
}

// live reports whether nonce is one of the kind handed out within the window.
func (s *bootNonces) live(nonce string, kind nonceKind) bool {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.t.m[nonce]
	return ok && b.state.kind == kind && !s.t.lapsed(b, now)
}

// fetchedAny reports whether someone fetched under a nonce of kind handed to mac within the
// window.
func (s *bootNonces) fetchedAny(mac hwid.MAC, kind nonceKind) bool {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range s.t.byMAC[mac] {
		if b := s.t.m[n]; b.state.kind == kind && b.state.owner.IsValid() && !s.t.lapsed(b, now) {
			return true
		}
	}
	return false
}

// owns reports whether from fetched first under a nonce of kind handed to mac within the
// window: from is where the machine that got that DHCP answer is.
func (s *bootNonces) owns(mac hwid.MAC, kind nonceKind, from netip.Addr) bool {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range s.t.byMAC[mac] {
		if b := s.t.m[n]; b.state.kind == kind && b.state.owner == from && !s.t.lapsed(b, now) {
			return true
		}
	}
	return false
}

// answerDHCP is proxy DHCP's answer to a machine it decided to boot. iPXE is sent to the
// chain script with a fresh boot nonce (S1): only the script request that presents it
// first, and that address's retries within the window, get the machine's secrets. Other
// clients (the firmware's PXE or HTTP boot) get proxy DHCP's table.
//
// A machine whose entry boots with Secure Boot (secureBootFor) gets the signed chain instead
// when its firmware asks (secureboot.go).
func (a *Agent) answerDHCP(req *proxydhcp.Request, r record) proxydhcp.Decision {
	if !req.IPXE && a.secureBootFor(r) {
		return a.answerSecureBoot(req)
	}
	if !req.IPXE || !req.Server.IsValid() {
		return proxydhcp.Answer()
	}
	n, err := a.nonces.issue(req.MAC, nonceIPXE)
	if err != nil {
		a.log.Error("proxy dhcp: no boot nonce; silence", "mac", req.MAC.String(), "err", err)
		return proxydhcp.Silence(proxydhcp.ReasonDeclined)
	}
	// The chain URL as proxy DHCP would name it (the address the answer comes from, the
	// HTTP port), with the nonce.
	host := req.Server.String()
	if req.Server.Is6() {
		host = "[" + host + "]"
	}
	if p := a.httpPort(); p != 80 {
		host += ":" + strconv.Itoa(p)
	}
	return proxydhcp.AnswerFile("http://" + host + ipxe.PathChain + "?" + ipxe.ParamNonce + "=" + n)
}

// bindScript is /boot/ipxe's S1 rule, after the entry matched: with proxy DHCP running, a
// script with a secret only for the request bound to this agent's DHCP answer to the MAC.
// Without proxy DHCP the site's own DHCP server sends machines here and no nonce exists:
// whoever can reach the agent and knows a MAC with a live entry gets its script (see the
// package doc, "Boot secrets").
func (a *Agent) bindScript(q ipxe.Query) error {
	if a.nonces == nil || a.bound6(q) {
		return nil
	}
	if u := a.nonces.claim(q.Nonce, q.MAC, q.Remote); u != bound {
		return fmt.Errorf("%w: %s", ipxe.ErrUnbound, u)
	}
	return nil
}

// nonceStats adds the boot nonce counters to m (Agent.Stats).
func (a *Agent) nonceStats(m map[string]uint64) {
	bc := a.bootStats()
	m["boot_unbound"], m["boot_uuid_refused"], m["boot_ip_refused"] = bc.Unbound, bc.UUIDRefused, bc.IPRefused
	if a.nonces == nil {
		return
	}
	m["boot_nonces_issued"] = a.nonces.issued.Load()
	for u := unboundNoNonce; u < numUnbound; u++ {
		m["boot_unbound_"+u.String()] = a.nonces.refused[u].Load()
	}
	a.sbStats(m)
}

var descUnbound = prometheus.NewDesc("siteboot_boot_unbound_total",
	"Script requests refused any secret for not being bound to this agent's DHCP answer to the machine, by reason.", []string{"reason"}, nil)

// collectNonces exports the refusals by reason (/metrics).
func (a *Agent) collectNonces(ch chan<- prometheus.Metric) {
	if a.nonces == nil {
		return
	}
	for u := unboundNoNonce; u < numUnbound; u++ {
		ch <- prometheus.MustNewConstMetric(descUnbound, prometheus.CounterValue, float64(a.nonces.refused[u].Load()), u.String())
	}
	a.collectSB(ch)
}
