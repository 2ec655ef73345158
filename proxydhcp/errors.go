package proxydhcp

import (
	"errors"
	"fmt"

	"github.com/bettercompute/siteboot/internal/errname"
)

// Sentinel errors. Match them with errors.Is.
var (
	// ErrServerClosed is returned by Serve, ServeBoot and ListenAndServe after Shutdown or Close.
	ErrServerClosed = errors.New("proxydhcp: server closed")
	// ErrMalformed is wrapped by every error for a packet that is not a well-formed DHCP request.
	ErrMalformed = errors.New("proxydhcp: malformed packet")
	// ErrNotPXE is returned by Parse for a well-formed request whose option 60 does not start
	// with PXEClient or HTTPClient.
	ErrNotPXE = errors.New("proxydhcp: not a PXE or HTTP boot client")
	// ErrNoMAC is returned by Parse6 for a DHCPv6 boot client whose MAC cannot be known: no
	// option 79 from a relay, a DUID of another type than LL or LLT (EDK2 sends a DUID-UUID
	// when the machine has an SMBIOS UUID), and a link-local address that is not EUI-64.
	ErrNoMAC = errors.New("proxydhcp: no MAC in the DHCPv6 request")
	// ErrNoHandler is returned by Serve when the Server has no Handler.
	ErrNoHandler = errors.New("proxydhcp: no Handler")
)

// ParseError tells which part of a packet made Parse refuse it.
type ParseError struct {
	Field string // "header", "option 53", "option 93", ...
	Err   error  // ErrMalformed or ErrNotPXE, possibly wrapping the decoder's error
}

func (e *ParseError) Error() string { return "proxydhcp: parse " + e.Field + ": " + e.Err.Error() }

// Unwrap returns the underlying error.
func (e *ParseError) Unwrap() error { return e.Err }

// OpError is an error of a socket operation of the server ("read", "write", "listen").
type OpError struct {
	Op   string
	Addr string // local address of the socket, when known
	Err  error
}

func (e *OpError) Error() string {
	if e.Addr != "" {
		return fmt.Sprintf("proxydhcp: %s %s: %v", e.Op, e.Addr, e.Err)
	}
	return fmt.Sprintf("proxydhcp: %s: %v", e.Op, e.Err)
}

// Unwrap returns the underlying error.
func (e *OpError) Unwrap() error { return e.Err }

var (
	_ error = &ParseError{}
	_ error = &OpError{}
)

func malformed(field string, format string, args ...any) error {
	return &ParseError{Field: field, Err: fmt.Errorf("%w: "+format, append([]any{ErrMalformed}, args...)...)}
}

// ReasonOf returns the short name of the first error of this package in err's chain, for
// logs and metric labels: "server-closed", "malformed" (every *ParseError), "not-pxe",
// "no-mac", "no-handler"; "" for nil and for an error it does not recognise. Why a request
// got silence rather than an error is a Decision's Reason, named by Reason.String.
func ReasonOf(err error) string { return errReasons.Of(err) }

var errReasons = errname.Table{
	{Err: ErrServerClosed, Name: "server-closed"}, {Err: ErrMalformed, Name: "malformed"}, {Err: ErrNotPXE, Name: "not-pxe"},
	{Err: ErrNoMAC, Name: "no-mac"}, {Err: ErrNoHandler, Name: "no-handler"},
}
