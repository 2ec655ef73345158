package tftpd

import (
	"fmt"
	"time"
)

// Bounds of [Limits.Validate]: the widest limits a site's configuration may set. They are
// tighter than what [Server.Validate] accepts, so that a typo in a configuration file
// (a window of 70000, a wait of an hour) is refused at start rather than served.
const (
	MaxLimitTransfers    = 4096        // MaxTransfers and MaxPerSource
	MaxLimitFirstRetries = 16          // FirstRetries
	MinLimitFirstWait    = time.Second // FirstWait, when set
	MaxLimitFirstWait    = time.Minute // FirstWait
	MinLimitEvictAfter   = 10 * time.Millisecond
	MaxLimitEvictAfter   = 5 * time.Second
	MaxLimitQueued       = 65536 // MaxQueued
	MinLimitQueueWait    = 100 * time.Millisecond
	MaxLimitQueueWait    = time.Minute
)

// Limits are the transfer limits of a [Server] as a host's configuration carries them,
// each the Server field of the same name. A zero field means the Server's default.
// [Limits.Apply] sets them on a Server.
type Limits struct {
	// MaxTransfers and MaxPerSource bound the transfers at once, in all and per source
	// address, 0 to MaxLimitTransfers. Zero: DefaultMaxTransfers and DefaultMaxPerSource.
	MaxTransfers int
	MaxPerSource int
	// MaxWindow is the largest RFC 7440 windowsize granted, 0 to 65535; 1 turns windows off.
	// Zero: DefaultMaxWindow.
	MaxWindow int
	// FirstRetries is how often the first datagram of a transfer is sent again to an
	// address that never acknowledged one (a spoofed request gets at most this many
	// more), 0 to MaxLimitFirstRetries. Zero: DefaultFirstRetries.
	FirstRetries int
	// FirstWait is how long a transfer waits for the first acknowledgement of an address
	// that never acknowledged one, 0 or MinLimitFirstWait to MaxLimitFirstWait. Zero: the
	// Server's default (DefaultFirstWaitTimeouts Timeouts).
	FirstWait time.Duration
	// EvictAfter is how long a transfer's first datagram must go unacknowledged before a
	// new request may take its slot, 0 or MinLimitEvictAfter to MaxLimitEvictAfter. Zero:
	// DefaultEvictAfter.
	EvictAfter time.Duration
	// MaxQueued bounds the requests that wait for a slot while every one is taken, -1 (none
	// held) to MaxLimitQueued. Zero: DefaultMaxQueued.
	MaxQueued int
	// QueueWait is how long a held request waits after it was last received, 0 or
	// MinLimitQueueWait to MaxLimitQueueWait. Zero: DefaultQueueWait.
	QueueWait time.Duration
}

// LimitError is a [Limits] field out of its bounds. It wraps [ErrConfig].
type LimitError struct {
	Field string // the Limits field: "MaxTransfers", "QueueWait", ...
	Want  string // the values accepted
	Got   string // the value given
}

var _ error = &LimitError{}

func (e *LimitError) Error() string {
	return fmt.Sprintf("tftpd: limits: %s: want %s, got %s", e.Field, e.Want, e.Got)
}

// Unwrap returns ErrConfig.
func (e *LimitError) Unwrap() error { return ErrConfig }

// Validate reports the first field out of its bounds as a *LimitError. MaxPerSource
// above MaxTransfers is left to [Server.Validate], which sees the defaults.
func (l Limits) Validate() error {
	ints := []struct {
		field    string
		v        int
		min, max int
		want     string
	}{
		{"MaxTransfers", l.MaxTransfers, 0, MaxLimitTransfers, fmt.Sprintf("0 (default) to %d", MaxLimitTransfers)},
		{"MaxPerSource", l.MaxPerSource, 0, MaxLimitTransfers, fmt.Sprintf("0 (default) to %d", MaxLimitTransfers)},
		{"MaxWindow", l.MaxWindow, 0, 65535, "0 (default) to 65535"},
		{"FirstRetries", l.FirstRetries, 0, MaxLimitFirstRetries, fmt.Sprintf("0 (default) to %d", MaxLimitFirstRetries)},
	}
	for _, f := range ints {
		if f.v < f.min || f.v > f.max {
			return &LimitError{Field: f.field, Want: f.want, Got: fmt.Sprint(f.v)}
		}
	}
	durations := []struct {
		field    string
		v        time.Duration
		min, max time.Duration
	}{
		{"FirstWait", l.FirstWait, MinLimitFirstWait, MaxLimitFirstWait},
		{"EvictAfter", l.EvictAfter, MinLimitEvictAfter, MaxLimitEvictAfter},
	}
	for _, f := range durations {
		if f.v != 0 && (f.v < f.min || f.v > f.max) {
			return &LimitError{Field: f.field, Want: fmt.Sprintf("0 (default) or %v to %v", f.min, f.max), Got: f.v.String()}
		}
	}
	if l.MaxQueued < -1 || l.MaxQueued > MaxLimitQueued {
		return &LimitError{Field: "MaxQueued", Want: fmt.Sprintf("-1 (none), 0 (default) or up to %d", MaxLimitQueued), Got: fmt.Sprint(l.MaxQueued)}
	}
	if w := l.QueueWait; w != 0 && (w < MinLimitQueueWait || w > MaxLimitQueueWait) {
		return &LimitError{Field: "QueueWait", Want: fmt.Sprintf("0 (default) or %v to %v", MinLimitQueueWait, MaxLimitQueueWait), Got: w.String()}
	}
	return nil
}

// Apply sets s's limit fields to l's. It must be called before s serves.
func (l Limits) Apply(s *Server) {
	s.MaxTransfers, s.MaxPerSource, s.MaxWindow = l.MaxTransfers, l.MaxPerSource, l.MaxWindow
	s.FirstRetries, s.FirstWait, s.EvictAfter = l.FirstRetries, l.FirstWait, l.EvictAfter
	s.MaxQueued, s.QueueWait = l.MaxQueued, l.QueueWait
}
