package assertion

import (
	"errors"
	"slices"
)

// Sentinel errors. Errors returned by this package wrap one of them, or are a *RefusedError.
var (
	// ErrMalformed is wrapped by every decoding failure: bad base64, an unknown version, a
	// field out of bounds, trailing or missing bytes.
	ErrMalformed = errors.New("assertion: malformed")
	// ErrInvalid is wrapped when an Assertion cannot be encoded (a field out of bounds).
	ErrInvalid = errors.New("assertion: invalid field")
	// ErrUnsupportedKey is wrapped when a key is neither Ed25519 nor ECDSA P-256/P-384.
	ErrUnsupportedKey = errors.New("assertion: unsupported key type")
	// ErrUnknownAgent is what a [KeyResolver] returns (or wraps) for a node id it does not know.
	ErrUnknownAgent = errors.New("assertion: unknown agent")
	// ErrStaleEpoch is what a [LeaseChecker] returns (or wraps) for an epoch that is not the
	// lease's current one.
	ErrStaleEpoch = errors.New("assertion: epoch is not the lease's current one")
	// ErrNotLeaseHolder is what a [LeaseChecker] returns (or wraps) when the agent does not
	// hold the lease at that epoch: another agent does, nobody does, or it lapsed.
	ErrNotLeaseHolder = errors.New("assertion: agent does not hold the lease")
	// ErrEntryLapsed is returned by [Issuer.Issue] when the entry's not-after is not after now.
	ErrEntryLapsed = errors.New("assertion: entry lapsed")
	// ErrNoEpoch is returned by [Issuer.Issue] for epoch 0: an agent that holds no lease
	// vouches for nothing.
	ErrNoEpoch = errors.New("assertion: no lease epoch")
	// ErrReplayCacheFull is returned by [MemoryReplayCache.Use] when every slot holds an entry
	// that has not expired yet.
	ErrReplayCacheFull = errors.New("assertion: replay cache full")
	// ErrConfig is wrapped by Validate errors.
	ErrConfig = errors.New("assertion: bad configuration")
)

// Reason is why [Verifier.Verify] refused an assertion, one of the Reason constants. A
// caller compares [ReasonOf](err) with them, or switches on RefusedError.Reason after
// errors.As; a Reason is also an error that matches, under errors.Is, any RefusedError
// carrying it.
type Reason string

// The refusal reasons: stable names meant for logs and metrics. They are untyped
// constants, so that they compare with both a Reason and the string [ReasonOf] returns.
const (
	// ReasonMalformed: the text does not decode (base64, version, bounds, trailing bytes).
	ReasonMalformed = "malformed"
	// ReasonUnknownAgent: the key resolver does not know the asserted agent node id.
	ReasonUnknownAgent = "unknown-agent"
	// ReasonBadSignature: the signature is not the agent's over this payload under the
	// purpose "discovery-assertion" (including a valid signature made for another purpose),
	// or the agent's key is of an unsupported type.
	ReasonBadSignature = "bad-signature"
	// ReasonNotSiteAgent: the signer is a node but not a site agent (role other than "site").
	ReasonNotSiteAgent = "not-site-agent"
	// ReasonWrongSite: the agent belongs to another site than the one asserted, or the
	// assertion names another site than the joining machine's.
	ReasonWrongSite = "wrong-site"
	// ReasonBadLifetime: not-after is before issued-at or more than 15 minutes after it.
	ReasonBadLifetime = "bad-lifetime"
	// ReasonNotYetValid: issued-at is later than now plus the skew allowance.
	ReasonNotYetValid = "not-yet-valid"
	// ReasonExpired: now is past not-after, or past issued-at + 15 minutes, plus the skew.
	ReasonExpired = "expired"
	// ReasonStaleEpoch: the asserted epoch is not the site's current lease epoch (for
	// instance the lease failed over or was released since).
	ReasonStaleEpoch = "stale-epoch"
	// ReasonNotLeaseHolder: the epoch is current but the agent does not hold the lease:
	// another agent does, nobody does, or the lease lapsed.
	ReasonNotLeaseHolder = "not-lease-holder"
	// ReasonMACMismatch: the joining machine's MACs do not include the asserted MAC.
	ReasonMACMismatch = "mac-mismatch"
	// ReasonUUIDMismatch: a UUID is asserted and the machine's is not a spelling of it
	// (or either is a firmware placeholder).
	ReasonUUIDMismatch = "uuid-mismatch"
	// ReasonReplay: this assertion was already used.
	ReasonReplay = "replay"
	// ReasonUnavailable: a resolver, the lease check or the replay cache failed; nothing
	// is known about the assertion, and the same text may be presented again later.
	ReasonUnavailable = "unavailable"
)

var reasonNames = [...]Reason{ReasonMalformed, ReasonUnknownAgent, ReasonBadSignature, ReasonNotSiteAgent,
	ReasonWrongSite, ReasonBadLifetime, ReasonNotYetValid, ReasonExpired, ReasonStaleEpoch,
	ReasonNotLeaseHolder, ReasonMACMismatch, ReasonUUIDMismatch, ReasonReplay, ReasonUnavailable}

var reasons = reasonNames[:]

// reasonIndex numbers the reasons from 0, in declaration order, for counters.
func reasonIndex(r Reason) int { return slices.Index(reasons, r) }

// Reasons lists every refusal reason, in declaration order.
func Reasons() []Reason { return slices.Clone(reasons) }

// String returns the reason's stable name, such as "stale-epoch".
func (r Reason) String() string { return string(r) }

// Error makes a Reason usable as an errors.Is target. It returns the same as String, so
// that printing a Reason shows its name.
func (r Reason) Error() string { return string(r) }

// RefusedError is the error [Verifier.Verify] returns for an assertion it does not admit.
type RefusedError struct {
	Reason Reason
	// Agent is the agent node id the text names when it decoded, else "". It is what the
	// text claims, authenticated only for reasons after ReasonBadSignature.
	Agent string
	// Err is the detail; it may wrap a resolver's, lease checker's or cache's error.
	Err error
}

var _ error = &RefusedError{}

func (e *RefusedError) Error() string {
	s := "assertion: refused (" + e.Reason.String() + ")"
	if e.Agent != "" {
		s += " from agent " + e.Agent
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns the detail.
func (e *RefusedError) Unwrap() error { return e.Err }

// Is reports whether target is e's Reason.
func (e *RefusedError) Is(target error) bool {
	r, ok := target.(Reason)
	return ok && r == e.Reason
}

// ReasonOf returns the name of the refusal reason carried by err (one of the Reason
// constants), or "" when err is nil or not a refusal.
func ReasonOf(err error) string {
	var re *RefusedError
	if errors.As(err, &re) {
		return string(re.Reason)
	}
	return ""
}
