package discovery_test

import (
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/discovery"
)

// junk holds field values no list may keep, next to some it may.
var junk = []string{
	"", " ", "\x00", "\n", "%s%n", "../../etc/passwd", "'; DROP TABLE", "x86 64", "\u212a", "é",
	strings.Repeat("a", 33), strings.Repeat("A", 4096), strings.Repeat("f", 65536),
	"4c4c4544003135108052b4c04f4e4b32", "{4c4c4544-0031-3510-8052-b4c04f4e4b32}",
	"4c4c4544-0031-3510-8052-b4c04f4e4b3g", "4c4c4544-0031-3510-8052-b4c04f4e4b32\n",
	"fe80::1%" + strings.Repeat("z", 1000), "fe80::1%eth0", "198.51.100.1:67", "300.1.1.1", "0x7f.1",
	"3c:ec:ef:12:34", "3c:ec:ef:12:34:56:78", "3c:ec:ef:12:34:5g", "3c-ec:ef-12:34-56", "3cecef123456",
}

const hexDigits = "0123456789abcdefABCDEF"

func randMAC(r *rand.Rand, b []byte) string {
	sep := byte(':')
	if r.IntN(2) == 0 {
		sep = '-'
	}
	for i := range 6 {
		if i > 0 {
			b[3*i-1] = sep
		}
		b[3*i], b[3*i+1] = hexDigits[r.IntN(len(hexDigits))], hexDigits[r.IntN(len(hexDigits))]
	}
	return string(b[:17])
}

func randUUID(r *rand.Rand, b []byte) string {
	for i := range 36 {
		if i == 8 || i == 13 || i == 18 || i == 23 {
			b[i] = '-'
		} else {
			b[i] = hexDigits[r.IntN(len(hexDigits))]
		}
	}
	return string(b[:36])
}

func pick(r *rand.Rand, good func() string) string {
	if r.IntN(3) == 0 {
		return junk[r.IntN(len(junk))]
	}
	return good()
}

// TestFlood sends 1,000,000 sightings from random MACs with junk fields, one per millisecond
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
	archs := []string{"7", "16", "x86_64_efi", "bios", "arm64-efi", "X86_64_EFI"}
	relays := []string{"198.51.100.1", "203.0.113.254", "2001:db8::1", "0.0.0.0", "::ffff:192.0.2.1"}
	buf := make([]byte, 36)
	var peak uint64
	for i := range sightings {
		s := discovery.Sighting{
			MAC:         pick(r, func() string { return randMAC(r, buf) }),
			ProductUUID: pick(r, func() string { return randUUID(r, buf) }),
			Arch:        pick(r, func() string { return archs[r.IntN(len(archs))] }),
			Relay:       pick(r, func() string { return relays[r.IntN(len(relays))] }),
			Via:         discovery.Via(r.IntN(2)),
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
	if st.DroppedBadMAC == 0 || st.IgnoredUUID == 0 || st.IgnoredArch == 0 || st.IgnoredRelay == 0 || st.Evicted == 0 {
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
