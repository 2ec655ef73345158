package secureboot

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/bettercompute/siteboot/internal/errname"
	"github.com/bettercompute/siteboot/ipxe"
)

// Sentinel errors. Test for them with errors.Is. The refusals of a TFTP name (ErrNotServed,
// ErrUnbound, ErrBusy) also read as [fs.ErrNotExist], so that tftpd answers them "file not
// found" and nothing more.
var (
	// ErrInvalid: a Config that cannot work (see [Config.Validate]).
	ErrInvalid = errors.New("secureboot: invalid configuration")
	// ErrUnavailable: shim or GRUB cannot be read (a missing package, a path that is not a
	// regular file), or the RAM disk cannot be built from them.
	ErrUnavailable = errors.New("secureboot: the signed chain's files cannot be served")
	// ErrNotServed: a name or path the chain does not serve: an unknown file, shim under a
	// nonce never handed out or lapsed, a key file for a MAC whose shim nobody fetched, a
	// name that does not parse.
	ErrNotServed = fmt.Errorf("secureboot: not served: %w", fs.ErrNotExist)
	// ErrUnbound: a request for a machine's configuration that does not present the
	// machine's boot key from the address the key was delivered to. A [*bootbind.RefusedError]
	// with the reason is in the same chain.
	ErrUnbound = fmt.Errorf("secureboot: not bound to the machine's boot key: %w", fs.ErrNotExist)
	// ErrBusy: MaxRenders configurations are being made or wait for their machine.
	ErrBusy = fmt.Errorf("secureboot: too many configurations in the making: %w", fs.ErrNotExist)
	// ErrNotCache: a URL of a boot answer is not under one of the image cache's URLs, so it
	// has no TFTP name ([TFTPCacheURL]).
	ErrNotCache = errors.New("secureboot: not a URL of the image cache under a grant")
	// ErrUnsupported: a decision GRUB cannot carry out (a sanboot, which iPXE alone does).
	ErrUnsupported = errors.New("secureboot: the decision cannot be spelled for GRUB")
	// ErrClosed: the chain was closed; no configuration is made any more.
	ErrClosed = fmt.Errorf("secureboot: closed: %w", fs.ErrNotExist)
)

// ReasonOf names the first of the package's errors in err's chain in a word a host can
// count: "invalid", "unavailable", "not-served", "unbound", "busy", "not-cache",
// "unsupported", "closed"; a grubcfg error (a value GRUB cannot be given) is "render". It
// returns "" for nil and for an error of another package. The reason a request was
// unbound is bootbind's: read it with errors.As and [*bootbind.RefusedError].
func ReasonOf(err error) string {
	if r := reasons.Of(err); r != "" {
		return r
	}
	if grubcfgReason(err) != "" {
		return "render"
	}
	return ""
}

var reasons = errname.Table{
	{Err: ErrInvalid, Name: "invalid"},
	{Err: ErrUnavailable, Name: "unavailable"},
	{Err: ErrUnbound, Name: "unbound"},
	{Err: ErrBusy, Name: "busy"},
	{Err: ErrClosed, Name: "closed"},
	{Err: ErrNotServed, Name: "not-served"},
	{Err: ErrNotCache, Name: "not-cache"},
	{Err: ErrUnsupported, Name: "unsupported"},
}

// SpellError is a decision [Chain.Spell] could not spell for GRUB: the answer's kind, and
// the cause (ErrNotCache, ErrUnsupported, or a grubcfg.ValueError for a value GRUB cannot
// be given), which it unwraps to.
type SpellError struct {
	Kind ipxe.AnswerKind
	Err  error
}

var _ error = &SpellError{}

func (e *SpellError) Error() string {
	return "secureboot: a " + e.Kind.String() + " answer: " + strings.TrimPrefix(e.Err.Error(), "secureboot: ")
}

// Unwrap returns the cause.
func (e *SpellError) Unwrap() error { return e.Err }
