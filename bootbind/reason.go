package bootbind

import (
	"errors"
	"strconv"

	"github.com/bettercompute/siteboot/internal/errname"
)

// Reason says why a request is not bound to its machine's DHCP answer, or Bound when it is.
type Reason uint8

// Reasons. Each refusal is counted apart ([Nonces.Refused]).
const (
	Bound        Reason = iota // the request is the machine's
	NoNonce                    // "no-nonce": the request names no nonce (a MAC-only request)
	UnknownNonce               // "unknown-nonce": a nonce never handed out, forgotten, or of another kind
	Lapsed                     // "nonce-lapsed": handed out a window or more ago
	OtherMAC                   // "nonce-other-mac": the nonce was handed to another MAC
	OtherAddress               // "nonce-other-address": the nonce belongs to another address
	OffSegment                 // "off-segment": the requester is not on a provisioning segment
	NoPass                     // "no-pass": no IPv6 boot pass of the MAC holds for this address
	numReasons
)

var reasonNames = [numReasons]string{
	"bound", "no-nonce", "unknown-nonce", "nonce-lapsed", "nonce-other-mac",
	"nonce-other-address", "off-segment", "no-pass",
}

// String returns the reason's name, as listed with the constants.
func (r Reason) String() string {
	if r < numReasons {
		return reasonNames[r]
	}
	return "reason(" + strconv.Itoa(int(r)) + ")"
}

// Refusals lists every reason but Bound, in order, for hosts exporting counters.
func Refusals() []Reason {
	rs := make([]Reason, 0, numReasons-1)
	for r := NoNonce; r < numReasons; r++ {
		rs = append(rs, r)
	}
	return rs
}

// ErrUnbound is what every [RefusedError] wraps.
var ErrUnbound = errors.New("bootbind: request is not bound to the machine's DHCP answer")

// RefusedError is a refusal with its reason. It wraps ErrUnbound.
type RefusedError struct {
	Reason Reason
}

var _ error = &RefusedError{}

func (e *RefusedError) Error() string { return ErrUnbound.Error() + ": " + e.Reason.String() }

// Unwrap returns ErrUnbound.
func (e *RefusedError) Unwrap() error { return ErrUnbound }

// Err returns nil for Bound, else a *RefusedError for r.
func (r Reason) Err() error {
	if r == Bound {
		return nil
	}
	return &RefusedError{Reason: r}
}

// ReasonOf names the first of the package's errors in err's chain in a word a host can
// count: a refusal's reason ("no-nonce", "nonce-other-address", ...), "unbound",
// "key-in-flight", "damaged", "too-large"; "" for nil or an error of another package.
func ReasonOf(err error) string {
	var re *RefusedError
	if errors.As(err, &re) && re.Reason != Bound {
		return re.Reason.String()
	}
	return errReasons.Of(err)
}

var errReasons = errname.Table{
	{Err: ErrUnbound, Name: "unbound"},
	{Err: ErrKeyInFlight, Name: "key-in-flight"},
	{Err: ErrDamaged, Name: "damaged"},
	{Err: ErrTooLarge, Name: "too-large"},
}
