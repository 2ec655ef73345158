package main

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"
)

func small() Config {
	return Config{N: 100, Rate: 50, MinLatency: 20 * time.Millisecond, MaxLatency: 200 * time.Millisecond,
		Transient: 0.02, MaxSessions: 4, RevertEvery: 25, InFlight: 64, Seed: 7}
}

// TestSmallSite runs the transition over 100 simulated BMCs and asserts the checks but
// the time bound, which fixed costs (logins, the last confirming reads) dominate at this
// size: BenchmarkTransition and the 1,000-BMC run measure it.
func TestSmallSite(t *testing.T) {
	c := small()
	r := Transition(t.Context(), c)
	for _, b := range Check(c, r) {
		if !strings.HasPrefix(b, "took") {
			t.Error(b)
		}
	}
	if r.Reverts != 4 || r.Statuses["failed"] != 4 || r.Statuses["done"] != 96 {
		t.Errorf("report %v, want the 4 reverting BMCs failed and the 96 others done", r)
	}
	if r.PeakSentSec == 0 || r.PeakSentSec > int(c.Rate) {
		t.Errorf("%d power-ons sent in one second, ramp %v/s", r.PeakSentSec, c.Rate)
	}
	// Carried out each request's latency later: those of any second were sent within
	// 1 s plus the spread of the latencies.
	spread := (c.MaxLatency - c.MinLatency).Seconds()
	if lim := int(math.Ceil(c.Rate * (1 + spread))); r.PeakPerSec > lim {
		t.Errorf("%d power-ons carried out in one second, at most %d for a ramp of %v/s and latencies %v-%v", r.PeakPerSec, lim, c.Rate, c.MinLatency, c.MaxLatency)
	}
}

func BenchmarkTransition(b *testing.B) { benchmark(b, Transition) }

func BenchmarkLoop(b *testing.B) { benchmark(b, Loop) }

func benchmark(b *testing.B, run func(context.Context, Config) Report) {
	c := small()
	for b.Loop() {
		r := run(b.Context(), c)
		b.ReportMetric(r.Took.Seconds(), "s/transition")
		b.ReportMetric(float64(r.PeakSentSec), "peak-power-ons-sent/s")
		b.ReportMetric(float64(r.PeakPerSec), "peak-power-ons/s")
	}
}
