package assertion_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/assertion"
	"github.com/bettercompute/siteboot/clock/clocktest"
	"github.com/bettercompute/siteboot/hwid"
)

// signText signs a under purpose the way the package documents it, independently of the
// package's own signing code: "siteboot/" + purpose + 0x00 + payload, then base64url of
// payload || signature.
func signText(t testing.TB, key ed25519.PrivateKey, purpose string, a assertion.Assertion) string {
	t.Helper()
	payload, err := a.MarshalBinary()
	if err != nil {
		t.Fatalf("MarshalBinary: %v", err)
	}
	msg := append([]byte("siteboot/"+purpose+"\x00"), payload...)
	sig := ed25519.Sign(key, msg)
	return base64.RawURLEncoding.EncodeToString(append(payload, sig...))
}

func seedKey(b byte) ed25519.PrivateKey {
	seed := make([]byte, ed25519.SeedSize)
	for i := range seed {
		seed[i] = b + byte(i)
	}
	return ed25519.NewKeyFromSeed(seed)
}

// fakeLease is a LeaseChecker whose answer a test changes (a failover, a release).
type fakeLease struct {
	mu     sync.Mutex
	holder map[string]string
	epoch  map[string]uint64
	err    error
}

func (l *fakeLease) set(site, holder string, epoch uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.holder == nil {
		l.holder, l.epoch = map[string]string{}, map[string]uint64{}
	}
	l.holder[site], l.epoch[site] = holder, epoch
}

// CheckEpoch answers as the lease package's Checker does, with this package's sentinels.
func (l *fakeLease) CheckEpoch(_ context.Context, site, agent string, epoch uint64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.err != nil:
		return l.err
	case epoch == 0 || epoch != l.epoch[site]:
		return fmt.Errorf("%w: epoch %d, current %d", assertion.ErrStaleEpoch, epoch, l.epoch[site])
	case l.holder[site] == "" || l.holder[site] != agent:
		return fmt.Errorf("%w: held by %q", assertion.ErrNotLeaseHolder, l.holder[site])
	}
	return nil
}

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// site is a test world: site "site-a" with agents "agent-a1" (lease holder at epoch 7) and
// "agent-a2", site "site-b" with "agent-b1", a worker node, an issuer for agent-a1 and a
// verifier, on fake clocks.
type site struct {
	keyA1, keyA2, keyB1, keyWorker ed25519.PrivateKey
	agentClock, cpClock            *clocktest.Fake
	lease                          *fakeLease
	replay                         *assertion.MemoryReplayCache
	issuer                         *assertion.Issuer
	verifier                       *assertion.Verifier
	mac                            hwid.MAC
	uuid                           hwid.UUID
	fields                         assertion.Fields
	join                           assertion.Join
}

func newSite(t testing.TB) *site {
	s := &site{
		keyA1: seedKey(1), keyA2: seedKey(2), keyB1: seedKey(3), keyWorker: seedKey(4),
		agentClock: clocktest.New(t0), cpClock: clocktest.New(t0.Add(20 * time.Second)),
		lease:  &fakeLease{},
		replay: &assertion.MemoryReplayCache{},
		mac:    hwid.MustParseMAC("3c:ec:ef:12:34:56"),
		uuid:   hwid.MustParseUUID("4c4c4544-0031-3510-8052-b4c04f4e4b32"),
	}
	s.lease.set("site-a", "agent-a1", 7)
	s.lease.set("site-b", "agent-b1", 3)
	s.issuer = &assertion.Issuer{Site: "site-a", Agent: "agent-a1", Signer: s.keyA1, Clock: s.agentClock}
	s.verifier = &assertion.Verifier{
		Keys: assertion.StaticKeys{
			"agent-a1": {PublicKey: s.keyA1.Public(), Site: "site-a", Role: assertion.RoleSite},
			"agent-a2": {PublicKey: s.keyA2.Public(), Site: "site-a", Role: assertion.RoleSite},
			"agent-b1": {PublicKey: s.keyB1.Public(), Site: "site-b", Role: assertion.RoleSite},
			"worker-1": {PublicKey: s.keyWorker.Public(), Site: "site-a", Role: "worker"},
		},
		Leases: s.lease,
		Replay: s.replay,
		Clock:  s.cpClock,
	}
	s.fields = assertion.Fields{
		Epoch: 7, MAC: s.mac, IP: netip.MustParseAddr("192.0.2.20"), UUID: s.uuid,
		Workflow: "wf-1", NotAfter: t0.Add(2 * time.Hour),
	}
	s.join = assertion.Join{
		Site: "site-a",
		MACs: []hwid.MAC{hwid.MustParseMAC("3c:ec:ef:12:34:57"), s.mac},
		UUID: s.uuid,
	}
	return s
}

func (s *site) issue(t testing.TB) string {
	t.Helper()
	text, err := s.issuer.Issue(context.Background(), s.fields)
	if err != nil {
		t.Fatalf("Issue: %v", err)
	}
	return text
}

// assertionFor returns the assertion agent-a1 would issue now for s.fields, for tests that
// sign variants by hand.
func (s *site) assertionFor() assertion.Assertion {
	return assertion.Assertion{
		Site: "site-a", Agent: "agent-a1", Epoch: 7, MAC: s.mac,
		IP: netip.MustParseAddr("192.0.2.20"), UUID: s.uuid, Workflow: "wf-1",
		IssuedAt: t0, NotAfter: t0.Add(15 * time.Minute),
	}
}

func rawURL(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

func rawURLDecode(s string) ([]byte, error) { return base64.RawURLEncoding.DecodeString(s) }

func mustP256(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}
