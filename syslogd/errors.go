package syslogd

import (
	"errors"
	"fmt"

	"github.com/bettercompute/siteboot/internal/errname"
)

// Sentinel errors. Match them with errors.Is.
var (
	// ErrServerClosed is returned by Serve and ListenAndServe after Shutdown or Close.
	ErrServerClosed = errors.New("syslogd: server closed")
	// ErrMalformed is wrapped by every *ParseError.
	ErrMalformed = errors.New("syslogd: malformed message")
	// ErrNoSink is returned by Serve when the Server has no Sink.
	ErrNoSink = errors.New("syslogd: no Sink")
)

// ParseError tells which part of a message made Parse refuse it.
type ParseError struct {
	Field string // "pri", "header", "structured-data"
	Err   error  // wraps ErrMalformed
}

var _ error = &ParseError{}

func (e *ParseError) Error() string { return "syslogd: parse " + e.Field + ": " + e.Err.Error() }

// Unwrap returns the underlying error.
func (e *ParseError) Unwrap() error { return e.Err }

func malformed(field, why string) error {
	return &ParseError{Field: field, Err: fmt.Errorf("%w: %s", ErrMalformed, why)}
}

// ReasonOf returns the short name of the first error of this package in err's chain, for
// logs and metric labels: "server-closed", "malformed", "no-sink"; "" for nil and for an
// error it does not recognise.
func ReasonOf(err error) string { return errReasons.Of(err) }

var errReasons = errname.Table{
	{Err: ErrServerClosed, Name: "server-closed"}, {Err: ErrMalformed, Name: "malformed"}, {Err: ErrNoSink, Name: "no-sink"},
}
