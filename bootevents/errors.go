package bootevents

import (
	"errors"

	"github.com/bettercompute/siteboot/internal/errname"
)

// Sentinel errors. Match them with errors.Is.
var (
	// ErrBadName is wrapped by a *NameError for a stage or outcome name that is not one.
	ErrBadName = errors.New("bootevents: unknown name")
	// ErrBadBootID is wrapped by a *NameError for text that is not a boot id.
	ErrBadBootID = errors.New("bootevents: malformed boot id")
	// ErrInvalid is wrapped by Config.Validate's errors.
	ErrInvalid = errors.New("bootevents: invalid configuration")
)

// NameError is a name or boot id that did not parse.
type NameError struct {
	Kind string // "stage", "outcome", "boot id"
	Name string // the text, clipped
	Err  error  // ErrBadName or ErrBadBootID; nil reads as ErrBadName
}

var _ error = &NameError{}

func (e *NameError) Error() string {
	return e.Unwrap().Error() + ": " + e.Kind + " " + quote(e.Name)
}

// Unwrap returns ErrBadName or ErrBadBootID.
func (e *NameError) Unwrap() error {
	if e.Err == nil {
		return ErrBadName
	}
	return e.Err
}

func quote(s string) string { return "\"" + Printable(s, 80) + "\"" }

// ReasonOf returns the short name of the first error of this package in err's chain, for
// logs and metric labels: "bad-name", "bad-boot-id", "invalid"; "" for nil and for an
// error it does not recognise.
func ReasonOf(err error) string { return errReasons.Of(err) }

var errReasons = errname.Table{
	{Err: ErrBadName, Name: "bad-name"}, {Err: ErrBadBootID, Name: "bad-boot-id"}, {Err: ErrInvalid, Name: "invalid"},
}
