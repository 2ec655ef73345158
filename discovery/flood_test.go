package discovery_test

import (
	"math/rand/v2"
	"net/netip"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/discovery"
	"github.com/bettercompute/siteboot/hwid"
)

// randMAC is a random MAC, zero one time in 16 (a sighting the list must drop).
func randMAC(r *rand.Rand) hwid.MAC {
	var m hwid.MAC
	if r.IntN(16) == 0 {
		return m
	}
	for i := range m {
		m[i] = byte(r.Uint32())
	}
	return m
}

// randUUID is a random UUID, zero (not sent) one time in 3.
func randUUID(r *rand.Rand) hwid.UUID {
	var u hwid.UUID
	if r.IntN(3) == 0 {
		return u
	}
	for i := range u {
		u[i] = byte(r.Uint32())
	}
	return u
}

// TestFlood sends 1,000,000 sightings from random MACs (some zero, some relays with a zone), one per millisecond
// of fake time: the list stays at its bound, its memory stays flat, nothing malformed is
// kept, and ReportWanted is called at most once per 30 s of fake time.
func TestFlood(t *testing.T) {
	sightings := 1_000_000
	if testing.Short() {
		sightings = 100_000
	}
	const step = time.Millisecond
	r := rand.New(rand.NewPCG(2026, 11))
	var (
		mu    sync.Mutex
		calls []time.Time
	)
	// The heap is measured from before the list exists, so the growth includes the list.
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	var clk *fakeClock
	l, clk := newList(t, discovery.Config{ReportWanted: func() {
		mu.Lock()
		calls = append(calls, clk.Now())
		mu.Unlock()
	}})
	archs := []hwid.Arch{hwid.ArchBIOS, hwid.ArchX86_64EFI, hwid.ArchEFIBC, hwid.ArchX86_64EFIHTTP, hwid.ArchARM64EFI, 65535}
	relays := []netip.Addr{{}, netip.MustParseAddr("198.51.100.1"), netip.MustParseAddr("2001:db8::1"), netip.IPv4Unspecified(),
		netip.MustParseAddr("::ffff:192.0.2.1"), netip.MustParseAddr("fe80::1%eth0")}
	var peak uint64
	for i := range sightings {
		s := discovery.Sighting{
			MAC:     randMAC(r),
			UUID:    randUUID(r),
			Arch:    archs[r.IntN(len(archs))],
			HasArch: r.IntN(3) != 0,
			Relay:   relays[r.IntN(len(relays))],
			Via:     discovery.Via(r.IntN(2)),
		}
		l.Seen(s)
		clk.Advance(step)
		if i%100_000 == 99_999 {
			var m runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&m)
			peak = max(peak, m.HeapAlloc)
			if n := l.Len(); n != discovery.DefaultMax {
				t.Fatalf("after %d sightings Len = %d, want %d", i+1, n, discovery.DefaultMax)
			}
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	elapsed := clk.Now().Sub(epoch)

	st := l.Stats()
	runtime.KeepAlive(l)
	grown := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	peakGrown := int64(peak) - int64(before.HeapAlloc)
	t.Logf("flood: %d sightings over %v of fake time: heap %d B before, %+d B after (peak %+d B after GC), %.1f B allocated per sighting",
		sightings, elapsed, before.HeapAlloc, grown, peakGrown, float64(after.TotalAlloc-before.TotalAlloc)/float64(sightings))
	t.Logf("flood: stats %+v", st)
	const heapBound = 1 << 20
	if peakGrown > heapBound || grown > heapBound {
		t.Errorf("heap grew by %d B (peak %d B) over the flood, want at most %d", grown, peakGrown, heapBound)
	}
	if st.Len != discovery.DefaultMax || st.Sightings != uint64(sightings) {
		t.Errorf("Len %d, Sightings %d; want %d, %d", st.Len, st.Sightings, discovery.DefaultMax, sightings)
	}
	if st.DroppedBadMAC == 0 || st.IgnoredRelay == 0 || st.Evicted == 0 {
		t.Errorf("the flood did not exercise every drop: %+v", st)
	}
	for _, e := range l.Snapshot().Entries {
		checkWellFormed(t, e)
	}

	mu.Lock()
	defer mu.Unlock()
	for i := 1; i < len(calls); i++ {
		if gap := calls[i].Sub(calls[i-1]); gap < discovery.DefaultReportEvery {
			t.Fatalf("ReportWanted calls %d and %d only %v apart", i-1, i, gap)
		}
	}
	// New machines arrive all the time, so each interval has exactly one call.
	maxCalls := int(elapsed/discovery.DefaultReportEvery) + 1
	if len(calls) > maxCalls || len(calls) < maxCalls-1 {
		t.Errorf("ReportWanted called %d times over %v, want %d or %d", len(calls), elapsed, maxCalls-1, maxCalls)
	}
	t.Logf("flood: ReportWanted called %d times over %v of fake time (%d delayed new machines)", len(calls), elapsed, st.ReportsDelayed)
}

func checkWellFormed(t *testing.T, e discovery.Entry) {
	t.Helper()
	if e.ProductUUID != "" && !discovery.ValidProductUUID(e.ProductUUID) {
		t.Errorf("%s: stored UUID %q", e.MAC, e.ProductUUID)
	}
	if e.Arch != "" && !discovery.ValidArch(e.Arch) {
		t.Errorf("%s: stored arch %q", e.MAC, e.Arch)
	}
	if e.Relay.IsValid() && !discovery.ValidRelay(e.Relay) {
		t.Errorf("%s: stored relay %v", e.MAC, e.Relay)
	}
	if e.Count == 0 || e.LastSeen.Before(e.FirstSeen) {
		t.Errorf("%s: count %d, first %v, last %v", e.MAC, e.Count, e.FirstSeen, e.LastSeen)
	}
}
