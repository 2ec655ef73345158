package bmc

import (
	"context"
	"errors"
	"strconv"
	"strings"
)

// Error kinds. An *OpError's Kind is one of these; match them with errors.Is.
var (
	// ErrAuth: the BMC rejected the credentials (or the account lacks the privilege).
	// Check the username and password held for this machine.
	ErrAuth = errors.New("bmc: authentication failed")
	// ErrUnreachable: nothing answered at the address (refused, no route, DNS).
	// Check the address and the network path to the BMC.
	ErrUnreachable = errors.New("bmc: unreachable")
	// ErrTimeout: the BMC did not answer in time, or the operation's deadline passed.
	// The operation may or may not have taken effect.
	ErrTimeout = errors.New("bmc: timed out")
	// ErrTLS: the BMC's certificate was not trusted. Pin it (Target.CertSHA256) or add its
	// CA; Target.Insecure skips the check.
	ErrTLS = errors.New("bmc: TLS certificate not trusted")
	// ErrScheme: the address's scheme does not match what the BMC's port speaks (http://
	// to a TLS port, https:// to a plain-HTTP one). OpError.Message says which to use.
	// Nothing was sent.
	ErrScheme = errors.New("bmc: http:// or https:// does not match the BMC's port")
	// ErrRefused: the BMC answered and said no. OpError.Message holds what it said.
	ErrRefused = errors.New("bmc: refused by the BMC")
	// ErrDiffers: the BMC took the operation but what it kept, read back, differs from
	// what was asked (sushy-emulator keeps a one-time boot override as Continuous;
	// virtualbmc keeps the old boot device). OpError.Message says what it kept. The
	// operation took effect as far as the BMC let it: it is recorded as done and never
	// sent again on its own, since sending it again would change nothing.
	ErrDiffers = errors.New("bmc: took effect differently")
	// ErrUnsupported: this driver or this BMC cannot do the operation.
	ErrUnsupported = errors.New("bmc: unsupported")
	// ErrUnsupportedDriver: no driver is registered under the target's driver name.
	ErrUnsupportedDriver = errors.New("bmc: unsupported-driver")
	// ErrInvalid: the request itself is malformed (an unknown action, an empty URL).
	ErrInvalid = errors.New("bmc: invalid request")
	// ErrInProgress: an operation with the same id is still running.
	ErrInProgress = errors.New("bmc: operation in progress")
	// ErrClosed: the driver was closed.
	ErrClosed = errors.New("bmc: driver closed")
	// ErrNoSession: the BMC has no free session slot (BMCs cap sessions; ipmi_sim has a
	// handful). Nothing was sent; retry once other sessions are closed or have expired.
	ErrNoSession = errors.New("bmc: no free session")
	// ErrOutcomeUnknown: the operation was claimed and may have reached the BMC, but its
	// outcome was never recorded (the agent that sent it died or lost the answer). It is
	// never sent again on its own; the host decides (a query is always safe).
	ErrOutcomeUnknown = errors.New("bmc: outcome unknown")
	// ErrJournalDamaged: the operation's journal was found damaged (a FileJournal whose
	// file did not parse) and refuses claims until an operator clears it: a destructive
	// operation is not sent, since at-most-once cannot be promised. Nothing was sent.
	ErrJournalDamaged = errors.New("bmc: journal damaged")
)

// kinds lists the kinds in the order KindOf checks them.
var kinds = []error{ErrAuth, ErrUnreachable, ErrTimeout, ErrTLS, ErrScheme, ErrRefused, ErrDiffers,
	ErrUnsupported, ErrUnsupportedDriver, ErrInvalid, ErrInProgress, ErrClosed, ErrNoSession, ErrOutcomeUnknown, ErrJournalDamaged}

// kindNames are the kinds' short names, as journals, claim records and reports spell them.
var kindNames = map[error]string{
	ErrAuth: "auth", ErrUnreachable: "unreachable", ErrTimeout: "timeout", ErrTLS: "tls",
	ErrScheme: "scheme", ErrRefused: "refused", ErrDiffers: "differs", ErrUnsupported: "unsupported", ErrUnsupportedDriver: "unsupported-driver",
	ErrInvalid: "invalid", ErrInProgress: "in-progress", ErrClosed: "closed",
	ErrNoSession: "no-session", ErrOutcomeUnknown: "outcome-unknown", ErrPartial: "partial",
	ErrJournalDamaged: "journal-damaged",
}

// KindName returns the short name of err's kind ("auth", "unreachable", "timeout", "tls",
// "scheme", "refused", "differs", "unsupported", "no-session", "outcome-unknown", ...), or "" when err is nil
// or of no known kind. It is how a kind is stored and reported.
func KindName(err error) string {
	k := KindOf(err)
	if k == nil {
		return ""
	}
	if n, ok := kindNames[k]; ok {
		return n
	}
	return k.Error()
}

// KindByName returns the kind a KindName names, or nil for "" and names it does not know.
func KindByName(name string) error {
	if name == "" {
		return nil
	}
	for k, n := range kindNames {
		if n == name {
			return k
		}
	}
	for _, k := range append(kinds, ErrPartial) {
		if k.Error() == name {
			return k
		}
	}
	return nil
}

// OpError is a failed BMC operation.
type OpError struct {
	// Driver is the driver's name ("redfish", "ipmi"); Op the operation ("power",
	// "set-boot", "inspect", ...); Addr the BMC's address.
	Driver string
	Op     string
	Addr   string
	// Kind is one of the Err* kinds above.
	Kind error
	// Code is the BMC's own code when it gave one: an HTTP status and Redfish MessageId
	// ("400 Base.1.8.PropertyValueNotInList"), an IPMI completion code ("0xcc").
	Code string
	// Message is what the BMC said, or a short explanation of ours.
	Message string
	// Err is the underlying error, if any.
	Err error
}

var _ error = &OpError{}

// Error describes the failure without credentials.
func (e *OpError) Error() string {
	var b strings.Builder
	kind := "bmc: error"
	if e.Kind != nil {
		kind = e.Kind.Error()
	}
	b.WriteString(kind)
	if e.Op != "" || e.Driver != "" {
		b.WriteString(" (")
		b.WriteString(strings.TrimPrefix(e.Driver+" "+e.Op, " "))
		if e.Addr != "" {
			b.WriteString(" " + e.Addr)
		}
		b.WriteString(")")
	}
	if e.Code != "" {
		b.WriteString(": " + e.Code)
	}
	if e.Message != "" {
		b.WriteString(": " + e.Message)
	}
	if e.Err != nil && e.Message == "" {
		b.WriteString(": " + e.Err.Error())
	}
	return b.String()
}

// Unwrap returns the kind and the underlying error, so errors.Is matches both.
func (e *OpError) Unwrap() []error {
	out := make([]error, 0, 2)
	if e.Kind != nil {
		out = append(out, e.Kind)
	}
	if e.Err != nil {
		out = append(out, e.Err)
	}
	return out
}

// KindOf returns the kind of err (one of the Err* values), or nil when err is nil or of
// no known kind. A context deadline counts as ErrTimeout.
func KindOf(err error) error {
	if err == nil {
		return nil
	}
	var pe *PartialError
	if errors.As(err, &pe) {
		return ErrPartial
	}
	for _, k := range kinds {
		if errors.Is(err, k) {
			return k
		}
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return ErrTimeout
	}
	return nil
}

func quote(s string) string {
	if len(s) > 64 {
		s = s[:64] + "..."
	}
	return strconv.Quote(s)
}

// ErrPartial is matched by a *PartialError: an operation that read some of what it looks
// for. The value returned beside the error holds what was read.
var ErrPartial = errors.New("bmc: partial result")

// PartError is one part of an operation that failed (an inspection's "system-guid").
type PartError struct {
	Part string
	Err  error
}

// PartialError reports an operation that read some parts and failed others, naming each
// failed part with its error (an *OpError). errors.Is matches ErrPartial and each part's
// kind; KindOf returns ErrPartial.
type PartialError struct {
	Driver string
	Op     string
	Addr   string
	Parts  []PartError
}

var _ error = &PartialError{}

// Error names the operation and each failed part.
func (e *PartialError) Error() string {
	var b strings.Builder
	b.WriteString(ErrPartial.Error())
	b.WriteString(" (")
	b.WriteString(strings.TrimPrefix(e.Driver+" "+e.Op, " "))
	if e.Addr != "" {
		b.WriteString(" " + e.Addr)
	}
	b.WriteString(")")
	for i, p := range e.Parts {
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString("; ")
		}
		b.WriteString(p.Part + " failed: " + p.Err.Error())
	}
	return b.String()
}

// Unwrap returns ErrPartial and each part's error.
func (e *PartialError) Unwrap() []error {
	out := []error{ErrPartial}
	for _, p := range e.Parts {
		out = append(out, p.Err)
	}
	return out
}

// Failed returns the names of the parts that failed.
func (e *PartialError) Failed() []string {
	out := make([]string, len(e.Parts))
	for i, p := range e.Parts {
		out[i] = p.Part
	}
	return out
}

// ReasonOf is the classification every siteboot package offers (the root package's
// conventions): the short name of err's kind, as KindName gives it, "" for nil and for an
// error of no known kind.
func ReasonOf(err error) string { return KindName(err) }
