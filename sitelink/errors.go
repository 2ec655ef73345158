package sitelink

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/bettercompute/siteboot/internal/errname"
)

// The errors of the HTTP binding, one per status code a control plane answers besides 200.
// A Server returns them (wrapped or not) to choose the status; a Client returns them,
// inside a *StatusError, for the status it got.
var (
	// ErrBadRequest (400): the body does not decode, is too large or lacks a field.
	ErrBadRequest = errors.New("sitelink: bad request")
	// ErrForbidden (403): no verified identity, a request in another node's or site's
	// name, a node that is not enrolled, or something not routed to the caller.
	ErrForbidden = errors.New("sitelink: forbidden")
	// ErrNotFound (404): the control plane holds nothing under that reference.
	ErrNotFound = errors.New("sitelink: not found")
	// ErrNotReady (409): a discovery token not minted yet; ask again later.
	ErrNotReady = errors.New("sitelink: not ready")
	// ErrUnavailable (503): the control plane cannot answer now; retry.
	ErrUnavailable = errors.New("sitelink: unavailable")
)

// codes maps each error to its status and the code string of its Error body.
var codes = []struct {
	err    error
	status int
	code   string
}{
	{ErrBadRequest, http.StatusBadRequest, "bad-request"},
	{ErrForbidden, http.StatusForbidden, "forbidden"},
	{ErrNotFound, http.StatusNotFound, "not-found"},
	{ErrNotReady, http.StatusConflict, "not-ready"},
	{ErrUnavailable, http.StatusServiceUnavailable, "unavailable"},
}

// statusOf returns the status and code for err; anything not one of the errors above is
// ErrUnavailable.
func statusOf(err error) (int, string) {
	for _, c := range codes {
		if errors.Is(err, c.err) {
			return c.status, c.code
		}
	}
	return http.StatusServiceUnavailable, "unavailable"
}

// errorOf returns the error for a status, nil for one the binding does not define.
func errorOf(status int) error {
	for _, c := range codes {
		if c.status == status {
			return c.err
		}
	}
	return nil
}

// Error is the body of every answer but 200: a code ("bad-request", "forbidden",
// "not-found", "not-ready", "unavailable"). It never carries the cause's text.
type Error struct {
	Code string `json:"code"`
}

// StatusError is a Client call answered with a status other than 200.
type StatusError struct {
	// Path is the operation's path ("/v1/sync"); Status the HTTP status code.
	Path   string
	Status int
	// Err is the binding's error for Status (ErrNotReady for 409, ...), nil for a status the
	// binding does not define.
	Err error
}

var _ error = &StatusError{}

func (e *StatusError) Error() string {
	return fmt.Sprintf("sitelink: %s: %d %s", e.Path, e.Status, http.StatusText(e.Status))
}

// Unwrap returns Err.
func (e *StatusError) Unwrap() error { return e.Err }

// ReasonOf names the first of the package's errors in err's chain in a word a host can
// count: the binding's codes ("bad-request", "forbidden", "not-found", "not-ready",
// "unavailable"), "plain-http", "client-config", "bad-command", "bad-entry"; "" for nil or
// an error of another package.
func ReasonOf(err error) string { return reasons.Of(err) }

var reasons = errname.Table{
	{Err: ErrBadRequest, Name: "bad-request"},
	{Err: ErrForbidden, Name: "forbidden"},
	{Err: ErrNotFound, Name: "not-found"},
	{Err: ErrNotReady, Name: "not-ready"},
	{Err: ErrUnavailable, Name: "unavailable"},
	{Err: ErrPlainHTTP, Name: "plain-http"},
	{Err: ErrClientConfig, Name: "client-config"},
	{Err: ErrBadCommand, Name: "bad-command"},
	{Err: ErrBadEntry, Name: "bad-entry"},
}
