package grubcfg

import (
	"github.com/bettercompute/siteboot/internal/bootscript"
	"github.com/bettercompute/siteboot/internal/errname"
)

// Sentinel errors; a [ValueError] unwraps to one of them.
var (
	// ErrUnsafe means a value holds something GRUB or the Linux kernel would read as syntax
	// (a single quote, a control byte, white space in a kernel parameter, ...). It is
	// refused, never escaped or trimmed.
	ErrUnsafe = bootscript.NewSentinel("grubcfg", "value cannot be expressed safely in a GRUB configuration")

	// ErrInvalid means a value is well-formed text but not a valid setting (a scheme GRUB
	// cannot fetch, a port GRUB cannot name, a duration that is not whole seconds).
	ErrInvalid = bootscript.NewSentinel("grubcfg", "invalid value")
)

// ValueError is a value the renderer refused. Field names it ("kernel", "initrds[1]",
// "params[bc.token]", "cmdline[2]", "retry.attempts"); Reason says what is wrong without
// echoing the value; Err is ErrUnsafe or ErrInvalid, which it unwraps to. Its text is
// "grubcfg: FIELD: REASON". It is the type package ipxe refuses with too.
type ValueError = bootscript.ValueError

func unsafeErr(field, reason string) error { return lang.Unsafe(field, reason) }

func invalidErr(field, reason string) error { return lang.Invalid(field, reason) }

// ReasonOf names the first of the package's errors in err's chain in a word a host can count:
// "unsafe", "invalid"; "" for nil or an error of another package.
func ReasonOf(err error) string { return reasons.Of(err) }

var reasons = errname.Table{
	{Err: ErrUnsafe, Name: "unsafe"},
	{Err: ErrInvalid, Name: "invalid"},
}
