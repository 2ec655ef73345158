package lease

import (
	"errors"
	"fmt"

	"github.com/bettercompute/siteboot/internal/errname"
)

// Sentinel errors, matched with errors.Is.
var (
	// ErrConflict: a compare-and-swap found another version than the one it was given.
	ErrConflict = errors.New("lease: version conflict")
	// ErrStaleEpoch: an epoch that is not the lease's current one (or zero).
	ErrStaleEpoch = errors.New("lease: epoch is not the current one")
	// ErrNotHolder: the agent does not hold the lease.
	ErrNotHolder = errors.New("lease: agent does not hold the lease")
	// ErrLapsed: the lease is past its expiry.
	ErrLapsed = errors.New("lease: lease has lapsed")
	// ErrNoAgent: no site agent of the site is connected.
	ErrNoAgent = errors.New("lease: no site agent connected")
	// ErrBadRecord: a stored record that does not parse or is not valid.
	ErrBadRecord = errors.New("lease: bad record")
)

// OpError is an error of one operation on one site's lease.
type OpError struct {
	Op   string // "get", "cas", "connected", "sites", "tick"
	Site string
	Err  error
}

var _ error = &OpError{}

func (e *OpError) Error() string {
	if e.Site == "" {
		return fmt.Sprintf("lease: %s: %v", e.Op, e.Err)
	}
	return fmt.Sprintf("lease: %s %s: %v", e.Op, Name(e.Site), e.Err)
}

func (e *OpError) Unwrap() error { return e.Err }

// CheckError is the control plane's refusal of an agent's epoch (see [Record.Check]). Err is
// one of ErrStaleEpoch, ErrNotHolder, ErrLapsed.
type CheckError struct {
	Site    string
	Node    string // the asking agent
	Epoch   uint64 // the epoch it asserted
	Current uint64 // the lease's current epoch
	Holder  string // the lease's holder, "" when none
	Err     error
}

var _ error = &CheckError{}

func (e *CheckError) Error() string {
	return fmt.Sprintf("%v: %s: agent %q at epoch %d; lease held by %q at epoch %d",
		e.Err, Name(e.Site), e.Node, e.Epoch, e.Holder, e.Current)
}

func (e *CheckError) Unwrap() error { return e.Err }

// NoAgentError says no agent of Site is connected; it matches ErrNoAgent.
type NoAgentError struct{ Site string }

var _ error = &NoAgentError{}

func (e *NoAgentError) Error() string { return fmt.Sprintf("%v for site %q", ErrNoAgent, e.Site) }

func (e *NoAgentError) Unwrap() error { return ErrNoAgent }

// ReasonOf names the first of the package's errors in err's chain in a word a host can count:
// "conflict", "stale-epoch", "not-holder", "lapsed", "no-agent", "bad-record"; "" for nil or
// an error of another package.
func ReasonOf(err error) string { return reasons.Of(err) }

var reasons = errname.Table{
	{Err: ErrConflict, Name: "conflict"},
	{Err: ErrStaleEpoch, Name: "stale-epoch"},
	{Err: ErrNotHolder, Name: "not-holder"},
	{Err: ErrLapsed, Name: "lapsed"},
	{Err: ErrNoAgent, Name: "no-agent"},
	{Err: ErrBadRecord, Name: "bad-record"},
}
