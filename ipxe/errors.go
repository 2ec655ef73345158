package ipxe

import (
	"errors"
	"fmt"

	"github.com/bettercompute/siteboot/internal/bootscript"
	"github.com/bettercompute/siteboot/internal/errname"
)

// Sentinel errors. A [ValueError] or [QueryError] unwraps to one of them, so callers choose
// with errors.Is and read the detail with errors.As.
var (
	// ErrUnsafe means a value holds something iPXE or the Linux kernel would read as syntax
	// (white space, a line end, "${", a quote, a backslash, a non-ASCII byte, ...), so it
	// cannot be placed in a script without changing what the script does. It is refused,
	// never escaped or trimmed.
	ErrUnsafe = bootscript.NewSentinel("ipxe", "value cannot be expressed safely in a script")

	// ErrInvalid means a value is well-formed text but not a valid setting (an unsupported
	// URL scheme, a duration that is not whole seconds, a count out of range).
	ErrInvalid = bootscript.NewSentinel("ipxe", "invalid value")

	// ErrBadQuery means a /boot/ipxe query string was refused.
	ErrBadQuery = errors.New("ipxe: bad query")

	// ErrNotReady is returned by a host's [Tokens] or [Cache] when what was asked for is not
	// available yet. The handler then answers a script that waits and asks again; any other
	// error is a server error.
	ErrNotReady = errors.New("ipxe: not ready")

	// ErrMismatch is returned by a host's [Entries] when the machine asking does not match
	// its entry (another architecture, or a UUID that is no spelling of the entry's). The
	// handler answers the exit script, never a script with a secret, and counts it apart.
	ErrMismatch = errors.New("ipxe: machine does not match its boot entry")

	// ErrUnbound is returned by a host's [Entries] when the requester may not have the
	// entry's secrets: it is not the machine the host answered by DHCP (with proxy DHCP, the
	// request carries no boot nonce, or one the host never handed out, that lapsed, that
	// names another MAC, or that another address presented first). The handler answers
	// the exit script, never a script with a secret, counts it as Unbound and logs the
	// host's reason.
	ErrUnbound = errors.New("ipxe: request is not bound to the machine's DHCP answer")
)

// ValueError is a value the renderer refused. Field names the value ("kernel",
// "initrds[1]", "params[bc.token]", "cmdline[2]", "retry.attempts"); Reason says what is
// wrong with it without echoing it; Err is ErrUnsafe or ErrInvalid, which it unwraps to. Its
// text is "ipxe: FIELD: REASON". It is the type package grubcfg refuses with too.
type ValueError = bootscript.ValueError

// QueryError is a /boot/ipxe query the handler refused. Field is "mac", "uuid", "ip" or
// "query" (the query as a whole: too long, malformed, a key repeated).
type QueryError struct {
	Field string
	Err   error // the cause, e.g. hwid.ErrBadMAC
}

var _ error = (*QueryError)(nil)

func (e *QueryError) Error() string {
	return fmt.Sprintf("ipxe: bad query: %s: %v", e.Field, e.Err)
}

// Unwrap returns ErrBadQuery and the cause.
func (e *QueryError) Unwrap() []error { return []error{ErrBadQuery, e.Err} }

func unsafeErr(field, reason string) error { return lang.Unsafe(field, reason) }

func invalidErr(field, reason string) error { return lang.Invalid(field, reason) }

// ReasonOf names the first of the package's errors in err's chain in a word a host can count:
// "bad-query", "not-ready", "mismatch", "unbound", "unsafe", "invalid"; "" for nil or an error
// of another package.
func ReasonOf(err error) string { return reasons.Of(err) }

var reasons = errname.Table{
	{Err: ErrBadQuery, Name: "bad-query"},
	{Err: ErrNotReady, Name: "not-ready"},
	{Err: ErrMismatch, Name: "mismatch"},
	{Err: ErrUnbound, Name: "unbound"},
	{Err: ErrUnsafe, Name: "unsafe"},
	{Err: ErrInvalid, Name: "invalid"},
}
