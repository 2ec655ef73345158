package tftpd

import (
	"errors"
	"fmt"

	"github.com/bettercompute/siteboot/internal/errname"
)

// Errors returned by Serve, Validate and reported in Transfer.Err.
var (
	// ErrServerClosed is returned by Serve and ListenAndServe after Shutdown or Close.
	ErrServerClosed = errors.New("tftpd: server closed")
	// ErrNotFound: the requested file does not exist under the root.
	ErrNotFound = errors.New("tftpd: file not found")
	// ErrDenied: the name is not acceptable (outside the root, not a valid path), the file is
	// not a regular file, or the root refused to open it.
	ErrDenied = errors.New("tftpd: access denied")
	// ErrMalformed: a datagram on the listening socket is not a well-formed request.
	ErrMalformed = errors.New("tftpd: malformed request")
	// ErrWriteRefused: a write request (the server is read-only).
	ErrWriteRefused = errors.New("tftpd: write requests are refused")
	// ErrMode: a transfer mode other than octet.
	ErrMode = errors.New("tftpd: only octet mode is served")
	// ErrTimeout: the client stopped acknowledging.
	ErrTimeout = errors.New("tftpd: client timed out")
	// ErrAborted: the client ended the transfer with an error packet, or the socket failed.
	ErrAborted = errors.New("tftpd: transfer aborted")
	// ErrShutdown: the server was closed during the transfer.
	ErrShutdown = errors.New("tftpd: server shut down during the transfer")
	// ErrEvicted: the transfer gave its slot to a new request while every slot was taken,
	// before the client acknowledged anything.
	ErrEvicted = errors.New("tftpd: evicted before the first acknowledgement")
	// ErrConfig: a Server field is out of range (see Validate).
	ErrConfig = errors.New("tftpd: invalid configuration")
	// ErrFenced: a read request while Server.Fence says this agent is not the active boot
	// server; answered "access violation".
	ErrFenced = errors.New("tftpd: boot server inactive")
)

// ReasonOf names the first of the package's sentinel errors in err's chain in a word a
// host can count: "server-closed", "not-found", "denied", "fenced", "malformed",
// "write-refused", "mode", "timeout", "aborted", "shutdown", "evicted", "config"; "" for
// nil or an error of another package.
func ReasonOf(err error) string { return reasons.Of(err) }

var reasons = errname.Table{
	{Err: ErrServerClosed, Name: "server-closed"}, {Err: ErrNotFound, Name: "not-found"}, {Err: ErrFenced, Name: "fenced"},
	{Err: ErrDenied, Name: "denied"}, {Err: ErrMalformed, Name: "malformed"}, {Err: ErrWriteRefused, Name: "write-refused"},
	{Err: ErrMode, Name: "mode"}, {Err: ErrTimeout, Name: "timeout"}, {Err: ErrAborted, Name: "aborted"},
	{Err: ErrShutdown, Name: "shutdown"}, {Err: ErrEvicted, Name: "evicted"}, {Err: ErrConfig, Name: "config"},
}

// OpError is an error of one operation of the server (opening the root, reading the
// listening socket, serving a file), with the cause in Err.
type OpError struct {
	Op   string // "open root", "read", "open", "stat", "read file", "transfer"
	Name string // the file concerned, if any
	Err  error
}

var _ error = &OpError{}

func (e *OpError) Error() string {
	if e.Name != "" {
		return fmt.Sprintf("tftpd: %s %q: %v", e.Op, e.Name, e.Err)
	}
	return fmt.Sprintf("tftpd: %s: %v", e.Op, e.Err)
}

func (e *OpError) Unwrap() error { return e.Err }
