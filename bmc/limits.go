package bmc

import (
	"fmt"
	"time"
)

// Bounds of an Executor's limits ([Executor.Validate]).
const (
	MaxMaxConcurrent = 1024      // the most operations an Executor may run at once
	MaxOpTimeout     = time.Hour // the longest deadline of one operation
)

// LimitError is [Executor.Validate]'s report of a field out of its bounds (and that of a
// host's limits built on an Executor's, such as sitelink.BMCLimits).
type LimitError struct {
	Field string // the field's name: "MaxConcurrent", "Timeout", ...
	Err   error
}

func (e *LimitError) Error() string { return "bmc: " + e.Field + ": " + e.Err.Error() }
func (e *LimitError) Unwrap() error { return e.Err }

var _ error = &LimitError{}

// Validate reports MaxConcurrent outside 0 (the default) to MaxMaxConcurrent, or Timeout
// outside 0 (the default) to MaxOpTimeout, as a *LimitError.
func (e *Executor) Validate() error {
	if e.MaxConcurrent < 0 || e.MaxConcurrent > MaxMaxConcurrent {
		return &LimitError{Field: "MaxConcurrent", Err: fmt.Errorf("want 0 (default) to %d, got %d", MaxMaxConcurrent, e.MaxConcurrent)}
	}
	if e.Timeout < 0 || e.Timeout > MaxOpTimeout {
		return &LimitError{Field: "Timeout", Err: fmt.Errorf("want 0 (default) to %v, got %v", MaxOpTimeout, e.Timeout)}
	}
	return nil
}
