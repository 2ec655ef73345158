// Package assertiontest gives a test a ready key pair for package assertion: an Issuer
// for one site agent and a Verifier that trusts it, on one fake clock, with the site's
// boot lease held by that agent until the test moves it. An embedder tests with it the
// code that issues assertions (a boot handler) or takes them (a join endpoint) without
// minting keys or writing a lease check.
//
// A Pair holds no goroutines, sockets or files: it needs no Close.
package assertiontest

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"sync"
	"time"

	"github.com/bettercompute/siteboot/assertion"
	"github.com/bettercompute/siteboot/clock/clocktest"
	"github.com/bettercompute/siteboot/hwid"
)

// Pair is an Issuer for agent Agent of site Site and a Verifier that knows the agent's
// key and checks the site's lease against the Pair's own lease, which the agent holds at
// epoch 1 from the start. Both sides run on Clock. The fields may be changed before use
// (a Verifier.Skew, an Issuer.Lifetime); the lease only through SetLease.
type Pair struct {
	Site, Agent string
	// Key is the agent's node key; Verifier.Keys holds its public half.
	Key ed25519.PrivateKey
	// Clock is both sides' clock, showing 2026-01-01 12:00 UTC at first.
	Clock *clocktest.Fake
	// Issuer signs as Agent of Site.
	Issuer *assertion.Issuer
	// Verifier trusts the Issuer: Keys knows the agent (role assertion.RoleSite), Leases
	// is the Pair's lease, Replay a fresh MemoryReplayCache.
	Verifier *assertion.Verifier

	mu     sync.Mutex
	holder string
	epoch  uint64
}

// New returns a Pair for agent of site, on a new Ed25519 key. The ids follow the
// assertion encoding's rules (1 to 56 of [A-Za-z0-9._:-]); one that does not makes Issue
// fail with assertion.ErrConfig.
func New(site, agent string) *Pair {
	_, key, err := ed25519.GenerateKey(nil)
	if err != nil {
		panic("assertiontest: " + err.Error())
	}
	p := &Pair{Site: site, Agent: agent, Key: key, Clock: clocktest.New(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)), holder: agent, epoch: 1}
	p.Issuer = &assertion.Issuer{Site: site, Agent: agent, Signer: key, Clock: p.Clock}
	p.Verifier = &assertion.Verifier{
		Keys:   assertion.StaticKeys{agent: {PublicKey: key.Public(), Site: site, Role: assertion.RoleSite}},
		Leases: assertion.LeaseCheckerFunc(p.checkEpoch),
		Replay: &assertion.MemoryReplayCache{},
		Clock:  p.Clock,
	}
	return p
}

// Lease returns who holds the site's boot lease and at which epoch ("" when nobody does).
func (p *Pair) Lease() (holder string, epoch uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.holder, p.epoch
}

// SetLease moves the site's boot lease: to another holder or epoch (a failover), or to
// nobody (holder ""). An assertion made under the old epoch is then refused as
// stale-epoch; one by an agent that no longer holds it, as not-lease-holder.
func (p *Pair) SetLease(holder string, epoch uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.holder, p.epoch = holder, epoch
}

// Issue signs an assertion that the agent served mac, at the lease's current epoch, as
// the agent's boot handler would.
func (p *Pair) Issue(ctx context.Context, mac hwid.MAC) (string, error) {
	_, epoch := p.Lease()
	return p.Issuer.Issue(ctx, assertion.Fields{Epoch: epoch, MAC: mac})
}

// Join returns what a machine with mac joining the Pair's site presents beside an
// assertion.
func (p *Pair) Join(mac hwid.MAC) assertion.Join {
	return assertion.Join{Site: p.Site, MACs: []hwid.MAC{mac}}
}

// checkEpoch answers as a control plane's lease check does, with package assertion's
// refusals.
func (p *Pair) checkEpoch(_ context.Context, site, agent string, epoch uint64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case site != p.Site || epoch == 0 || epoch != p.epoch:
		return fmt.Errorf("%w: epoch %d of site %q, current %d", assertion.ErrStaleEpoch, epoch, site, p.epoch)
	case p.holder == "" || agent != p.holder:
		return fmt.Errorf("%w: held by %q", assertion.ErrNotLeaseHolder, p.holder)
	}
	return nil
}
