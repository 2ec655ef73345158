package ipxebin

import "errors"

var (
	// ErrNoTrustArea: the binary holds no placeholder root to replace.
	ErrNoTrustArea = errors.New("ipxebin: binary has no replaceable trust anchor")
	// ErrManyTrustAreas: the placeholder occurs more than once, so which to replace is unclear.
	ErrManyTrustAreas = errors.New("ipxebin: binary has more than one placeholder trust anchor")
	// ErrNoCA: WithTrust was given no certificate.
	ErrNoCA = errors.New("ipxebin: no CA certificate")
)

// Error is an operation on one build that failed.
type Error struct {
	Op   string // "read" or "trust"
	Name string // build name
	Err  error
}

var _ error = &Error{}

func (e *Error) Error() string { return "ipxebin: " + e.Op + " " + e.Name + ": " + e.Err.Error() }

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }
