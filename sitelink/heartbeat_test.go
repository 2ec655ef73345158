package sitelink_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/clock/clocktest"
	"github.com/bettercompute/siteboot/sitelink"
)

// TestHeartbeat runs a heartbeat on fake time through a broken link and its return: one
// beat at once, one per Every, one sooner on Wake; the counters and the log follow.
func TestHeartbeat(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	clk := clocktest.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	errDown := errors.New("down")
	script := []error{nil, errDown, errDown, nil}
	beats := make(chan int)
	n := 0
	var logs bytes.Buffer
	h := &sitelink.Heartbeat{
		Every:  time.Second,
		Clock:  clk,
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Beat: func(context.Context) error {
			beats <- n
			err := script[n%len(script)]
			n++
			return err
		},
	}
	done := make(chan error, 1)
	go func() { done <- h.Run(ctx) }()

	// next waits for beat i, then for the timer of the one after it (armed once beat i is
	// counted), and checks the counters.
	next := func(i int, want sitelink.HeartbeatStats) {
		t.Helper()
		if got := <-beats; got != i {
			t.Fatalf("beat %d, want %d", got, i)
		}
		if err := clk.BlockUntilTimer(ctx, time.Second); err != nil {
			t.Fatal(err)
		}
		if got := h.Stats(); got != want {
			t.Fatalf("after beat %d: Stats = %+v, want %+v", i, got, want)
		}
	}
	start := clk.Now()
	next(0, sitelink.HeartbeatStats{Last: start})
	clk.Advance(time.Second)
	next(1, sitelink.HeartbeatStats{Last: start, Errors: 1, Failing: 1})
	h.Wake() // no time passes
	next(2, sitelink.HeartbeatStats{Last: start, Errors: 2, Failing: 2})
	clk.Advance(time.Second)
	next(3, sitelink.HeartbeatStats{Last: start.Add(2 * time.Second), Errors: 2})

	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
	out := logs.String()
	for _, want := range []string{
		"level=WARN msg=\"control plane unreachable",
		"level=DEBUG msg=\"control plane unreachable",
		"level=INFO msg=\"control plane reachable again\" failed_heartbeats=2",
	} {
		if c := strings.Count(out, want); c != 1 {
			t.Errorf("log has %q %d times, want once:\n%s", want, c, out)
		}
	}
}
