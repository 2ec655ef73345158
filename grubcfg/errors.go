package grubcfg

import (
	"errors"
	"fmt"

	"github.com/bettercompute/siteboot/internal/bootparam"
)

// Sentinel errors; a [ValueError] unwraps to one of them.
var (
	// ErrUnsafe means a value holds something GRUB or the Linux kernel would read as syntax
	// (a single quote, a control byte, white space in a kernel parameter, ...). It is
	// refused, never escaped or trimmed.
	ErrUnsafe = errors.New("grubcfg: value cannot be expressed safely in a GRUB configuration")

	// ErrInvalid means a value is well-formed text but not a valid setting (a scheme GRUB
	// cannot fetch, a port GRUB cannot name, a duration that is not whole seconds).
	ErrInvalid = errors.New("grubcfg: invalid value")
)

// ValueError is a value the renderer refused. Field names it ("kernel", "initrds[1]",
// "params[bc.token]", "cmdline[2]", "retry.attempts"); Reason says what is wrong without
// echoing the value.
type ValueError struct {
	Field  string
	Reason string
	Err    error // ErrUnsafe or ErrInvalid
}

var _ error = (*ValueError)(nil)

func (e *ValueError) Error() string { return fmt.Sprintf("grubcfg: %s: %s", e.Field, e.Reason) }

// Unwrap returns ErrUnsafe or ErrInvalid.
func (e *ValueError) Unwrap() error { return e.Err }

func unsafeErr(field, reason string) error {
	return &ValueError{Field: field, Reason: reason, Err: ErrUnsafe}
}

func invalidErr(field, reason string) error {
	return &ValueError{Field: field, Reason: reason, Err: ErrInvalid}
}

// problemErr is a [bootparam.Problem] as this package's [*ValueError]; nil for none.
func problemErr(p *bootparam.Problem) error {
	switch {
	case p == nil:
		return nil
	case p.Unsafe:
		return unsafeErr(p.Field, p.Reason)
	}
	return invalidErr(p.Field, p.Reason)
}
