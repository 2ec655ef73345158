package discovery

import (
	"errors"
	"fmt"
	"strings"

	"github.com/bettercompute/siteboot/hwid"
)

// Reason says why a machine has no candidate MAC, or why its identity check failed. The
// strings are the ones a provisioning system reports to its operators.
type Reason string

const (
	// ReasonNotSeen: no MAC was seen from the UUID (in any spelling) in the last 24 hours,
	// or the only one was first seen outside the window around the power command.
	ReasonNotSeen Reason = "not-seen"
	// ReasonAmbiguous: more than one MAC was seen from the UUID in the last 24 hours.
	ReasonAmbiguous Reason = "ambiguous"
	// ReasonSharedUUID: another machine of the site has the same UUID (in some spelling).
	ReasonSharedUUID Reason = "shared-uuid"
	// ReasonMACEnrolled: an enrolled machine already has the MAC.
	ReasonMACEnrolled Reason = "mac-enrolled"
	// ReasonIdentityMismatch: the booted machine's own report does not match the enrolled
	// machine.
	ReasonIdentityMismatch Reason = "machine-identity-mismatch"
)

// Sentinels, one per Reason, that a [*MatchError] unwraps to, for errors.Is.
var (
	ErrNotSeen          = errors.New("discovery: " + string(ReasonNotSeen))
	ErrAmbiguous        = errors.New("discovery: " + string(ReasonAmbiguous))
	ErrSharedUUID       = errors.New("discovery: " + string(ReasonSharedUUID))
	ErrMACEnrolled      = errors.New("discovery: " + string(ReasonMACEnrolled))
	ErrIdentityMismatch = errors.New("discovery: " + string(ReasonIdentityMismatch))
)

// ErrUnusableUUID is returned by [Match] for a machine whose UUID is a firmware placeholder
// (the zero UUID included): such a UUID names no machine, so nothing can match it.
var ErrUnusableUUID = errors.New("discovery: no usable product UUID")

// ErrQuery is returned by [Match] for a Query without its times.
var ErrQuery = errors.New("discovery: incomplete query")

// MatchError is why [Match] names no candidate, or why [Identity.Verify] failed.
type MatchError struct {
	Reason     Reason
	UUID       hwid.UUID  // the enrolled UUID the rule was applied to
	MACs       []hwid.MAC // the MACs concerned: every MAC seen (ambiguous), the MAC (mac-enrolled, identity)
	MachineIDs []string   // the other machines concerned (shared-uuid, mac-enrolled)
	Detail     string     // one line for the operator
}

var _ error = (*MatchError)(nil)

func (e *MatchError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "discovery: %s", e.Reason)
	if e.Detail != "" {
		b.WriteString(": ")
		b.WriteString(e.Detail)
	}
	return b.String()
}

// Unwrap returns the sentinel of the reason (ErrNotSeen, ...), or nil for an unknown one.
func (e *MatchError) Unwrap() error {
	switch e.Reason {
	case ReasonNotSeen:
		return ErrNotSeen
	case ReasonAmbiguous:
		return ErrAmbiguous
	case ReasonSharedUUID:
		return ErrSharedUUID
	case ReasonMACEnrolled:
		return ErrMACEnrolled
	case ReasonIdentityMismatch:
		return ErrIdentityMismatch
	}
	return nil
}

// ReasonOf returns the reason of a [*MatchError] in err's chain ("not-seen", "ambiguous",
// "shared-uuid", "mac-enrolled", "machine-identity-mismatch"), "unusable-uuid" for
// [ErrUnusableUUID], "incomplete-query" for [ErrQuery], and "" for nil or any other error.
func ReasonOf(err error) string {
	if me, ok := errors.AsType[*MatchError](err); ok {
		return string(me.Reason)
	}
	switch {
	case errors.Is(err, ErrUnusableUUID):
		return "unusable-uuid"
	case errors.Is(err, ErrQuery):
		return "incomplete-query"
	}
	return ""
}
