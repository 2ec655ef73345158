package bootevents

import (
	"context"
	"log/slog"
)

// LogSink returns a Sink that writes each event as one record to l at level (refusals
// and failures one step above it, at most slog.LevelWarn), with the attributes "mac",
// "boot_id", "stage", "outcome", "reason", "peer", "bytes", "duration" and "detail" where
// the event has them: the ids a trace of the same boot carries. Nil when l is nil. It
// builds nothing for a level l does not enable.
func LogSink(l *slog.Logger, level slog.Level) Sink {
	if l == nil {
		return nil
	}
	return logSink{l: l, level: level}
}

type logSink struct {
	l     *slog.Logger
	level slog.Level
}

func (s logSink) Emit(e Event) {
	level := s.level
	if e.Outcome == OutcomeRefused || e.Outcome == OutcomeFailed {
		level = min(level+4, slog.LevelWarn)
	}
	ctx := context.Background()
	if !s.l.Enabled(ctx, level) {
		return
	}
	attrs := make([]slog.Attr, 0, 10)
	attrs = append(attrs, slog.String("stage", e.Stage.String()), slog.String("outcome", e.Outcome.String()))
	if !e.MAC.IsZero() {
		attrs = append(attrs, slog.String("mac", e.MAC.String()))
	}
	if !e.BootID.IsZero() {
		attrs = append(attrs, slog.String("boot_id", e.BootID.String()))
	}
	if e.Reason != "" {
		attrs = append(attrs, slog.String("reason", e.Reason))
	}
	if e.Peer.IsValid() {
		attrs = append(attrs, slog.String("peer", e.Peer.String()))
	}
	if e.Bytes > 0 {
		attrs = append(attrs, slog.Uint64("bytes", e.Bytes))
	}
	if e.Duration > 0 {
		attrs = append(attrs, slog.Duration("duration", e.Duration))
	}
	if e.Detail != "" {
		attrs = append(attrs, slog.String("detail", Printable(e.Detail, MaxLine)))
	}
	s.l.LogAttrs(ctx, level, "boot event", attrs...)
}
