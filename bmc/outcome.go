package bmc

import "errors"

// Status is how an operation ended, as journals, claim records and results say it.
type Status string

// Statuses.
const (
	// StatusOK: the BMC carried the operation out.
	StatusOK Status = "ok"
	// StatusDiffers: the BMC carried the operation out but kept something else than was
	// asked (Outcome.Kind is "differs"; Message says what it kept). It is done: never sent
	// again on its own.
	StatusDiffers Status = "differs"
	// StatusFailed: the operation was sent and failed; Outcome.Kind says how.
	StatusFailed Status = "failed"
	// StatusUnknown: the operation may have reached the BMC, but nobody recorded how it
	// ended. It is never sent again on its own.
	StatusUnknown Status = "unknown"
	// StatusNotSent: the operation never reached the BMC (its claim was refused or not
	// answered, it waited past its deadline, the journal could not be written).
	StatusNotSent Status = "not-sent"
)

// Outcome is how one operation ended: what an agent reports per command id and a claim
// record keeps. It holds no credentials.
type Outcome struct {
	Status Status
	// Kind is the failure's KindName ("auth", "timeout", ...); empty on success.
	Kind string
	// Code and Message are the BMC's code and what it said, or our explanation.
	Code    string
	Message string
}

// OutcomeOf returns the outcome of an operation that returned err (nil: StatusOK).
// ErrOutcomeUnknown is StatusUnknown; ErrDiffers is StatusDiffers.
func OutcomeOf(err error) Outcome {
	if err == nil {
		return Outcome{Status: StatusOK}
	}
	o := Outcome{Status: StatusFailed, Kind: KindName(err), Message: err.Error()}
	var oe *OpError
	if errors.As(err, &oe) {
		o.Code = oe.Code
	}
	switch o.Kind {
	case KindName(ErrOutcomeUnknown):
		o.Status = StatusUnknown
	case KindName(ErrDiffers):
		o.Status = StatusDiffers
	}
	return o
}

// Err returns nil for StatusOK, and otherwise an *OpError of the outcome's kind (for
// StatusUnknown, ErrOutcomeUnknown; for StatusDiffers, ErrDiffers) carrying its code and
// message.
func (o Outcome) Err() error {
	switch o.Status {
	case StatusOK:
		return nil
	case StatusUnknown:
		return &OpError{Kind: ErrOutcomeUnknown, Code: o.Code, Message: o.Message}
	case StatusDiffers:
		return &OpError{Kind: ErrDiffers, Code: o.Code, Message: o.Message}
	}
	return &OpError{Kind: KindByName(o.Kind), Code: o.Code, Message: o.Message}
}
