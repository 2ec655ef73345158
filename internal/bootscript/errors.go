package bootscript

import "errors"

// sentinel is a renderer's sentinel error, which knows its package's name.
type sentinel struct{ pkg, text string }

func (s *sentinel) Error() string { return s.pkg + ": " + s.text }

// NewSentinel returns a renderer's sentinel error (its ErrUnsafe or ErrInvalid), whose text
// is "PKG: TEXT". Each call returns a distinct error, compared by identity like errors.New's.
// A [ValueError] that wraps it names PKG.
func NewSentinel(pkg, text string) error { return &sentinel{pkg: pkg, text: text} }

// ValueError is a value a renderer refused. Field names the value ("kernel", "initrds[1]",
// "params[bc.token]", "cmdline[2]", "retry.attempts"); Reason says what is wrong with it
// without echoing it.
type ValueError struct {
	Field  string
	Reason string
	Err    error // the renderer's ErrUnsafe or ErrInvalid
}

var _ error = (*ValueError)(nil)

// Error returns "PKG: FIELD: REASON", PKG being the package of the sentinel it wraps.
func (e *ValueError) Error() string {
	pkg := "bootscript"
	var s *sentinel
	if errors.As(e.Err, &s) {
		pkg = s.pkg
	}
	return pkg + ": " + e.Field + ": " + e.Reason
}

// Unwrap returns the renderer's ErrUnsafe or ErrInvalid.
func (e *ValueError) Unwrap() error { return e.Err }
