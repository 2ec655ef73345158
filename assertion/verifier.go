package assertion

import (
	"context"
	"crypto"
	"crypto/sha256"
	"errors"
	"fmt"
	"github.com/bettercompute/siteboot/clock"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	"github.com/bettercompute/siteboot/hwid"
)

// RoleSite is the role of a site agent's node.
const RoleSite = "site"

// DefaultSkew is the clock skew allowance when Verifier.Skew is zero; MaxSkew is the most
// Validate accepts.
const (
	DefaultSkew = 30 * time.Second
	MaxSkew     = 5 * time.Minute
)

// Agent is what the control plane knows about a node that may have signed an assertion.
type Agent struct {
	// PublicKey is the node's key (from its certificate): ed25519.PublicKey or
	// *ecdsa.PublicKey on P-256 or P-384.
	PublicKey crypto.PublicKey
	// Site is the site the node belongs to.
	Site string
	// Role is the node's role; only RoleSite may vouch.
	Role string
}

// KeyResolver gives the key, site and role of a node. A node it does not know is
// ErrUnknownAgent (or an error wrapping it); any other error means the answer is unknown
// for now and the assertion is refused as ReasonUnavailable.
type KeyResolver interface {
	ResolveAgent(ctx context.Context, nodeID string) (Agent, error)
}

// KeyResolverFunc adapts a function to KeyResolver.
type KeyResolverFunc func(ctx context.Context, nodeID string) (Agent, error)

// ResolveAgent calls f.
func (f KeyResolverFunc) ResolveAgent(ctx context.Context, nodeID string) (Agent, error) {
	return f(ctx, nodeID)
}

// StaticKeys is a KeyResolver over a fixed map from node id to Agent.
type StaticKeys map[string]Agent

// ResolveAgent returns the map's entry, or ErrUnknownAgent.
func (k StaticKeys) ResolveAgent(_ context.Context, nodeID string) (Agent, error) {
	a, ok := k[nodeID]
	if !ok {
		return Agent{}, fmt.Errorf("%w: %q", ErrUnknownAgent, nodeID)
	}
	return a, nil
}

// LeaseChecker is the control plane's lease check: CheckEpoch returns nil when agent holds
// site's boot lease (`site:SITE:boot`) at epoch, epoch is the lease's current one and the
// lease has not lapsed. A refusal is an error wrapping ErrStaleEpoch (epoch not current) or
// ErrNotLeaseHolder (another holder, none, or lapsed); any other error means the answer is
// unknown for now (ReasonUnavailable).
//
// The lease package's Checker has this method; its errors are its own, so a host maps them
// (see the package documentation, "Wiring").
type LeaseChecker interface {
	CheckEpoch(ctx context.Context, site, agent string, epoch uint64) error
}

// LeaseCheckerFunc adapts a function to LeaseChecker.
type LeaseCheckerFunc func(ctx context.Context, site, agent string, epoch uint64) error

// CheckEpoch calls f.
func (f LeaseCheckerFunc) CheckEpoch(ctx context.Context, site, agent string, epoch uint64) error {
	return f(ctx, site, agent, epoch)
}

// ReplayID identifies one assertion for the replay cache: the first 16 bytes of the SHA-256
// of its payload. It does not depend on the signature, so a second valid signature over the
// same payload (ECDSA signatures are malleable) is still a replay.
type ReplayID [16]byte

// ReplayCache records assertions that were used. Use records id until expires and reports
// whether this is its first use; it must be atomic: of two concurrent calls with one id, at
// most one sees first == true. An entry may be forgotten once now is past expires, never
// before. [MemoryReplayCache] is an in-memory implementation; a control plane with several
// replicas needs one they share.
type ReplayCache interface {
	Use(ctx context.Context, id ReplayID, now, expires time.Time) (first bool, err error)
}

// Join is what the joining machine presents alongside the assertion.
type Join struct {
	// Site is the site the join belongs to (the discovery token's site). Required: an
	// assertion for any other site is ReasonWrongSite.
	Site string
	// MACs are the MAC addresses the machine claims; they must include the asserted MAC.
	MACs []hwid.MAC
	// UUID is the machine's product UUID as it reports it; zero when it reports none. When
	// the assertion names a UUID, this must be the same machine in any spelling of either
	// ([hwid.SameMachine]): the assertion holds the entry's spelling, the machine may report
	// another.
	UUID hwid.UUID
}

// Verifier admits assertions on the control-plane side. Configure it with its exported
// fields; it is safe for concurrent use once configured.
type Verifier struct {
	// Keys resolves the asserted agent's key, site and role. Required.
	Keys KeyResolver
	// Leases checks the agent's epoch against the site's boot lease. Required.
	Leases LeaseChecker
	// Replay remembers used assertions. Required (a *MemoryReplayCache will do for one
	// control-plane process).
	Replay ReplayCache
	// Skew is how far the agent's clock may be from ours, applied at both edges (issued-at
	// in the future; past not-after or 15 minutes of age). Zero means DefaultSkew (30 s).
	Skew time.Duration
	// Clock is the control plane's clock. Nil means [clock.Real].
	Clock clock.Clock
	// Logger receives a debug line per admission and an info line per refusal. Nil
	// discards.
	Logger *slog.Logger

	admitted atomic.Uint64
	refused  [len(reasonNames)]atomic.Uint64
}

// VerifierStats are the Verifier's counters.
type VerifierStats struct {
	// Admitted counts assertions Verify admitted.
	Admitted uint64
	// Refused counts Verify's refusals, by reason.
	Refused RefusedCounts
}

// RefusedCounts counts refusals, one field per [Reason] (the field's comment names it).
// A refusal for a bad configuration (ErrConfig) is not a Reason and is not counted.
type RefusedCounts struct {
	Malformed      uint64 // ReasonMalformed
	UnknownAgent   uint64 // ReasonUnknownAgent
	BadSignature   uint64 // ReasonBadSignature
	NotSiteAgent   uint64 // ReasonNotSiteAgent
	WrongSite      uint64 // ReasonWrongSite
	BadLifetime    uint64 // ReasonBadLifetime
	NotYetValid    uint64 // ReasonNotYetValid
	Expired        uint64 // ReasonExpired
	StaleEpoch     uint64 // ReasonStaleEpoch
	NotLeaseHolder uint64 // ReasonNotLeaseHolder
	MACMismatch    uint64 // ReasonMACMismatch
	UUIDMismatch   uint64 // ReasonUUIDMismatch
	Replay         uint64 // ReasonReplay
	Unavailable    uint64 // ReasonUnavailable
}

// Of returns the count of reason r, 0 for a string that is no Reason: a host that labels
// a metric with the reason's name ranges over [Reasons] and asks Of.
func (c RefusedCounts) Of(r Reason) uint64 {
	if p := c.field(r); p != nil {
		return *p
	}
	return 0
}

// field is the counter of r, nil for no Reason.
func (c *RefusedCounts) field(r Reason) *uint64 {
	switch r {
	case ReasonMalformed:
		return &c.Malformed
	case ReasonUnknownAgent:
		return &c.UnknownAgent
	case ReasonBadSignature:
		return &c.BadSignature
	case ReasonNotSiteAgent:
		return &c.NotSiteAgent
	case ReasonWrongSite:
		return &c.WrongSite
	case ReasonBadLifetime:
		return &c.BadLifetime
	case ReasonNotYetValid:
		return &c.NotYetValid
	case ReasonExpired:
		return &c.Expired
	case ReasonStaleEpoch:
		return &c.StaleEpoch
	case ReasonNotLeaseHolder:
		return &c.NotLeaseHolder
	case ReasonMACMismatch:
		return &c.MACMismatch
	case ReasonUUIDMismatch:
		return &c.UUIDMismatch
	case ReasonReplay:
		return &c.Replay
	case ReasonUnavailable:
		return &c.Unavailable
	}
	return nil
}

// Stats returns the Verifier's counters.
func (v *Verifier) Stats() VerifierStats {
	s := VerifierStats{Admitted: v.admitted.Load()}
	for i, r := range reasons {
		*s.Refused.field(r) = v.refused[i].Load()
	}
	return s
}

// Validate reports a configuration that Verify would refuse to run with.
func (v *Verifier) Validate() error {
	switch {
	case v.Keys == nil:
		return fmt.Errorf("%w: Verifier.Keys is nil", ErrConfig)
	case v.Leases == nil:
		return fmt.Errorf("%w: Verifier.Leases is nil", ErrConfig)
	case v.Replay == nil:
		return fmt.Errorf("%w: Verifier.Replay is nil", ErrConfig)
	case v.Skew < 0 || v.Skew > MaxSkew:
		return fmt.Errorf("%w: Verifier.Skew %v outside 0..%v", ErrConfig, v.Skew, MaxSkew)
	}
	return nil
}

// Verify checks text for the joining machine j and, when every check passes, records it as
// used and returns the assertion. The checks, in order: the text decodes; the agent is
// known; the signature is the agent's under the purpose "discovery-assertion"; the agent is a
// site agent of the asserted site, which is j's site; the lifetime is at most 15 minutes
// and now is within it (with the skew allowance); the asserted epoch is the site's current
// lease epoch and the agent holds the lease; j's MACs include the asserted MAC; the UUID,
// when asserted, is the same machine as j's ([hwid.SameMachine]); and the assertion was not
// used before.
//
// A refusal is a *RefusedError naming its Reason; an invalid configuration is an error
// wrapping ErrConfig.
func (v *Verifier) Verify(ctx context.Context, text string, j Join) (Assertion, error) {
	if err := v.Validate(); err != nil {
		return Assertion{}, err
	}
	a, err := v.verify(ctx, text, j)
	if err != nil {
		var re *RefusedError
		if errors.As(err, &re) {
			if i := reasonIndex(re.Reason); i >= 0 {
				v.refused[i].Add(1)
			}
			if v.Logger != nil {
				v.Logger.LogAttrs(ctx, slog.LevelInfo, "assertion refused",
					slog.String("reason", re.Reason.String()), slog.String("agent", re.Agent),
					slog.String("site", j.Site), slog.Any("err", re.Err))
			}
		}
		return Assertion{}, err
	}
	v.admitted.Add(1)
	if v.Logger != nil && v.Logger.Enabled(ctx, slog.LevelDebug) {
		v.Logger.LogAttrs(ctx, slog.LevelDebug, "assertion admitted",
			slog.String("agent", a.Agent), slog.String("site", a.Site), slog.Uint64("epoch", a.Epoch),
			slog.String("mac", a.MAC.String()), slog.String("workflow", a.Workflow))
	}
	return a, nil
}

func (v *Verifier) verify(ctx context.Context, text string, j Join) (Assertion, error) {
	s, msg, err := decode(text, Purpose)
	if err != nil {
		return Assertion{}, &RefusedError{Reason: ReasonMalformed, Err: err}
	}
	a := s.Assertion
	refuse := func(r Reason, format string, args ...any) error {
		return &RefusedError{Reason: r, Agent: a.Agent, Err: fmt.Errorf(format, args...)}
	}

	agent, err := v.Keys.ResolveAgent(ctx, a.Agent)
	switch {
	case errors.Is(err, ErrUnknownAgent):
		return Assertion{}, refuse(ReasonUnknownAgent, "resolving agent: %w", err)
	case err != nil:
		return Assertion{}, refuse(ReasonUnavailable, "resolving agent: %w", err)
	}
	if err := verifySignature(agent.PublicKey, msg, s.Signature); err != nil {
		return Assertion{}, refuse(ReasonBadSignature, "%w", err)
	}
	if agent.Role != RoleSite {
		return Assertion{}, refuse(ReasonNotSiteAgent, "agent has role %q", agent.Role)
	}
	if agent.Site != a.Site {
		return Assertion{}, refuse(ReasonWrongSite, "agent of site %q asserted site %q", agent.Site, a.Site)
	}
	if j.Site != a.Site {
		return Assertion{}, refuse(ReasonWrongSite, "assertion for site %q, join for site %q", a.Site, j.Site)
	}

	now := clock.Or(v.Clock).Now
	t := now()
	skew := v.Skew
	if skew == 0 {
		skew = DefaultSkew
	}
	if a.NotAfter.Before(a.IssuedAt) || a.NotAfter.Sub(a.IssuedAt) > MaxLifetime {
		return Assertion{}, refuse(ReasonBadLifetime, "issued %s, not after %s",
			a.IssuedAt.Format(time.RFC3339), a.NotAfter.Format(time.RFC3339))
	}
	if a.IssuedAt.After(t.Add(skew)) {
		return Assertion{}, refuse(ReasonNotYetValid, "issued %s, now %s",
			a.IssuedAt.Format(time.RFC3339), t.UTC().Format(time.RFC3339))
	}
	expires := a.NotAfter.Add(skew)
	if oldest := a.IssuedAt.Add(MaxLifetime + skew); oldest.Before(expires) {
		expires = oldest
	}
	if t.After(expires) {
		return Assertion{}, refuse(ReasonExpired, "not after %s, now %s",
			a.NotAfter.Format(time.RFC3339), t.UTC().Format(time.RFC3339))
	}

	switch err := v.Leases.CheckEpoch(ctx, a.Site, a.Agent, a.Epoch); {
	case err == nil:
	case errors.Is(err, ErrStaleEpoch):
		return Assertion{}, refuse(ReasonStaleEpoch, "epoch %d: %w", a.Epoch, err)
	case errors.Is(err, ErrNotLeaseHolder):
		return Assertion{}, refuse(ReasonNotLeaseHolder, "epoch %d: %w", a.Epoch, err)
	default:
		return Assertion{}, refuse(ReasonUnavailable, "checking the lease of site %q: %w", a.Site, err)
	}

	if !slices.Contains(j.MACs, a.MAC) {
		return Assertion{}, refuse(ReasonMACMismatch, "asserted MAC %s not among the machine's %d", a.MAC, len(j.MACs))
	}
	if a.UUID != (hwid.UUID{}) && !hwid.SameMachine(a.UUID, j.UUID) {
		return Assertion{}, refuse(ReasonUUIDMismatch, "asserted UUID %s, machine reports %s", a.UUID, j.UUID)
	}

	first, err := v.Replay.Use(ctx, IDOf(s.Payload), t, expires)
	if err != nil {
		return Assertion{}, refuse(ReasonUnavailable, "replay cache: %w", err)
	}
	if !first {
		return Assertion{}, refuse(ReasonReplay, "already used")
	}
	return a, nil
}

// IDOf returns the replay id of an encoded assertion (Signed.Payload).
func IDOf(payload []byte) ReplayID {
	sum := sha256.Sum256(payload)
	return ReplayID(sum[:16])
}
