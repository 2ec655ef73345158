package assertion_test

import (
	"context"
	"encoding/binary"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/assertion"
)

func rid(i uint64) assertion.ReplayID {
	var id assertion.ReplayID
	binary.BigEndian.PutUint64(id[:], i)
	binary.BigEndian.PutUint64(id[8:], ^i)
	return id
}

func TestMemoryReplayCache(t *testing.T) {
	ctx := context.Background()
	var c assertion.MemoryReplayCache // the zero value is ready
	exp := t0.Add(10*time.Minute + 300*time.Millisecond)
	steps := []struct {
		name string
		id   uint64
		now  time.Time
		want bool
	}{
		{"first-use", 1, t0, true},
		{"second-use", 1, t0.Add(time.Minute), false},
		{"other-id", 2, t0.Add(time.Minute), true},
		{"at-expiry", 1, exp, false},
		{"within-the-second-after-expiry", 1, exp.Add(600 * time.Millisecond), false},
		{"a-second-after-expiry-rounded-up", 1, exp.Add(time.Second), false},
		{"after-expiry", 1, exp.Add(2 * time.Second), true},
	}
	for _, st := range steps {
		first, err := c.Use(ctx, rid(st.id), st.now, exp)
		if err != nil || first != st.want {
			t.Errorf("%s: Use = %v, %v; want %v", st.name, first, err, st.want)
		}
	}
}

func TestMemoryReplayCacheSweepAndBound(t *testing.T) {
	ctx := context.Background()
	c := &assertion.MemoryReplayCache{MaxEntries: 3, SweepInterval: time.Hour}
	for i := range uint64(3) {
		if first, err := c.Use(ctx, rid(i), t0, t0.Add(time.Duration(i+1)*time.Minute)); !first || err != nil {
			t.Fatalf("Use(%d) = %v, %v", i, first, err)
		}
	}
	// Full of live entries: refuse rather than forget one early.
	if first, err := c.Use(ctx, rid(9), t0.Add(30*time.Second), t0.Add(time.Hour)); first || !errors.Is(err, assertion.ErrReplayCacheFull) {
		t.Fatalf("Use on a full cache = %v, %v; want ErrReplayCacheFull", first, err)
	}
	// A known id is still answered as a replay when full.
	if first, err := c.Use(ctx, rid(2), t0.Add(30*time.Second), t0.Add(time.Hour)); first || err != nil {
		t.Fatalf("replay on a full cache = %v, %v", first, err)
	}
	if c.Len() != 3 {
		t.Fatalf("Len = %d", c.Len())
	}
	// A full cache sweeps at most once a second: refused at 60.5 s (entry 0, kept to 60 s,
	// is still live), refused again at 61.2 s without a sweep though entry 0 has expired by
	// then, and given room at 62 s.
	for _, at := range []time.Duration{60500 * time.Millisecond, 61200 * time.Millisecond} {
		if first, err := c.Use(ctx, rid(9), t0.Add(at), t0.Add(time.Hour)); first || !errors.Is(err, assertion.ErrReplayCacheFull) {
			t.Fatalf("Use at %v = %v, %v; want ErrReplayCacheFull", at, first, err)
		}
	}
	now := t0.Add(time.Minute + 2*time.Second)
	if first, err := c.Use(ctx, rid(9), now, now.Add(time.Minute)); !first || err != nil {
		t.Fatalf("Use after an expiry = %v, %v", first, err)
	}
	if c.Len() != 3 {
		t.Errorf("Len = %d, want 3 (one swept, one added)", c.Len())
	}
	// The periodic sweep removes every expired entry.
	c2 := &assertion.MemoryReplayCache{SweepInterval: time.Minute}
	for i := range uint64(100) {
		c2.Use(ctx, rid(i), t0, t0.Add(time.Duration(i)*time.Second))
	}
	// At t0+50s the first sweep has not come due yet (the first Use swept at t0).
	c2.Use(ctx, rid(1000), t0.Add(50*time.Second), t0.Add(time.Hour))
	if c2.Len() != 101 {
		t.Errorf("Len before the sweep is due = %d, want 101", c2.Len())
	}
	c2.Use(ctx, rid(1001), t0.Add(70*time.Second), t0.Add(time.Hour))
	// Entries 0..69 expired before t0+70s (kept to the second, so 69 expires at 69 s).
	if got, want := c2.Len(), 100-70+2; got != want {
		t.Errorf("Len after the sweep = %d, want %d", got, want)
	}
}

func TestMemoryReplayCacheConcurrent(t *testing.T) {
	var c assertion.MemoryReplayCache
	var wg sync.WaitGroup
	var mu sync.Mutex
	firsts := map[uint64]int{}
	for g := range 8 {
		wg.Go(func() {
			for i := range uint64(500) {
				first, err := c.Use(context.Background(), rid(i), t0.Add(time.Duration(g)*time.Millisecond), t0.Add(time.Minute))
				if err != nil {
					t.Error(err)
					return
				}
				if first {
					mu.Lock()
					firsts[i]++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	for i := range uint64(500) {
		if firsts[i] != 1 {
			t.Errorf("id %d first %d times", i, firsts[i])
		}
	}
}

// TestMemoryReplayCacheMemory measures the heap a million live entries take.
func TestMemoryReplayCacheMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates a million entries; skipped with -short")
	}
	perEntry, c := replayMemory(t, 1_000_000)
	t.Logf("MemoryReplayCache: %.1f bytes per entry at 1e6 entries", perEntry)
	if perEntry > 80 {
		t.Errorf("%.1f bytes per entry, want at most 80", perEntry)
	}
	// The cache is full of live entries: Use sweeps (walking the whole map once, finding
	// nothing expired) and refuses the new entry.
	start := time.Now()
	first, err := c.Use(context.Background(), rid(1<<40), t0.Add(2*time.Minute), t0.Add(15*time.Minute))
	t.Logf("Use with a sweep of 1e6 live entries: %v", time.Since(start))
	if first || !errors.Is(err, assertion.ErrReplayCacheFull) || c.Len() != 1_000_000 {
		t.Errorf("Use on a full cache = %v, %v; Len %d", first, err, c.Len())
	}
}

func replayMemory(t testing.TB, n int) (float64, *assertion.MemoryReplayCache) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	c := &assertion.MemoryReplayCache{MaxEntries: n}
	ctx := context.Background()
	for i := range uint64(n) {
		if first, err := c.Use(ctx, rid(i), t0, t0.Add(15*time.Minute)); !first || err != nil {
			t.Fatalf("Use(%d) = %v, %v", i, first, err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if c.Len() != n {
		t.Fatalf("Len = %d", c.Len())
	}
	return float64(after.HeapAlloc-before.HeapAlloc) / float64(n), c
}

// TestMemoryReplayCacheClockJumps: a clock that jumps back, or times far out, never make the
// cache forget a live entry.
func TestMemoryReplayCacheClockJumps(t *testing.T) {
	ctx := context.Background()
	var c assertion.MemoryReplayCache
	steps := []struct {
		name     string
		id       uint64
		now, exp time.Time
		want     bool
	}{
		{"first", 1, t0, t0.Add(15 * time.Minute), true},
		{"clock-back-an-hour", 1, t0.Add(-time.Hour), t0.Add(15 * time.Minute), false},
		{"entry-before-the-first", 2, t0.Add(-time.Hour), t0.Add(-45 * time.Minute), true},
		{"entry-before-the-first-again", 2, t0.Add(-50 * time.Minute), t0.Add(-45 * time.Minute), false},
		{"far-future-expiry", 3, t0, t0.AddDate(200, 0, 0), true},
		{"far-future-replay", 3, t0.AddDate(150, 0, 0), t0.AddDate(200, 0, 0), false},
		{"expired-after-the-jump-forward", 1, t0.Add(16 * time.Minute), t0.Add(30 * time.Minute), true},
	}
	for _, st := range steps {
		first, err := c.Use(ctx, rid(st.id), st.now, st.exp)
		if err != nil || first != st.want {
			t.Errorf("%s: Use = %v, %v; want %v", st.name, first, err, st.want)
		}
	}
}
