package assertion

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// DefaultMaxReplayEntries is MemoryReplayCache.MaxEntries when zero: about 1,100 admissions a
// second sustained over the 15-minute window, in about 44 MB when full.
const DefaultMaxReplayEntries = 1 << 20

// DefaultSweepInterval is MemoryReplayCache.SweepInterval when zero.
const DefaultSweepInterval = time.Minute

// MemoryReplayCache is an in-memory [ReplayCache] with bounded memory. Entries are kept until
// their expiry and removed by a sweep that runs inside Use at most once per SweepInterval,
// or at once when the cache is full. When every one of MaxEntries entries is still live,
// Use fails with ErrReplayCacheFull (the Verifier then refuses as ReasonUnavailable) rather
// than forget an entry early, which would let that assertion be used twice.
//
// Its zero value is ready to use. An entry is a 16-byte id and a 4-byte expiry in a Go map,
// which takes between about 24 and 48 bytes per entry as its table fills and doubles (44.6
// bytes measured at 1e6 entries; see TestMemoryReplayCacheMemory). A sweep walks the whole
// map under the lock: at a million entries it took about 20 to 45 ms on a shared 2-core machine,
// once per SweepInterval, and at most once a second while the cache is full.
type MemoryReplayCache struct {
	// MaxEntries bounds the number of entries. Zero means DefaultMaxReplayEntries.
	MaxEntries int
	// SweepInterval is how often Use removes expired entries. Zero means
	// DefaultSweepInterval.
	SweepInterval time.Duration

	mu        sync.Mutex
	entries   map[ReplayID]uint32 // expiry, in seconds after base (rounded up)
	base      int64               // Unix seconds
	nextSweep time.Time
	fullUntil time.Time // no sweep for a full cache before this
}

var _ ReplayCache = (*MemoryReplayCache)(nil)

// Use records id until expires and reports whether it was not recorded already. Expiry is
// kept in whole seconds, rounded up, so an entry may outlive expires by up to two seconds
// but never dies before it.
func (c *MemoryReplayCache) Use(_ context.Context, id ReplayID, now, expires time.Time) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil {
		c.entries = make(map[ReplayID]uint32)
		c.base = now.Unix() - 1
	}
	nowRel := c.rel(now)
	if exp, ok := c.entries[id]; ok && exp >= nowRel {
		return false, nil
	}
	swept := false
	if !now.Before(c.nextSweep) {
		c.sweep(now, nowRel)
		swept = true
	}
	max := c.MaxEntries
	if max <= 0 {
		max = DefaultMaxReplayEntries
	}
	if _, ok := c.entries[id]; !ok && len(c.entries) >= max {
		// Sweep a full cache at most once a second: while it stays full of live entries,
		// a walk of the whole map per call would cost every caller that much.
		if !swept && !now.Before(c.fullUntil) {
			c.sweep(now, nowRel)
			swept = true
		}
		if len(c.entries) >= max {
			if swept {
				c.fullUntil = now.Add(time.Second)
			}
			return false, fmt.Errorf("%w: %d live entries", ErrReplayCacheFull, len(c.entries))
		}
	}
	exp := c.rel(expires)
	if expires.After(time.Unix(expires.Unix(), 0)) {
		exp++ // round up: never forget an entry before its expiry
	}
	c.entries[id] = exp
	return true, nil
}

// Len returns the number of entries held, expired ones not yet swept included.
func (c *MemoryReplayCache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}

// rel converts t to seconds after base, clamped to uint32.
func (c *MemoryReplayCache) rel(t time.Time) uint32 {
	d := t.Unix() - c.base
	switch {
	case d < 0:
		return 0
	case d > 1<<32-1:
		return 1<<32 - 1
	}
	return uint32(d)
}

// sweep deletes the entries that expired before now. Called with mu held.
func (c *MemoryReplayCache) sweep(now time.Time, nowRel uint32) {
	for id, exp := range c.entries {
		if exp < nowRel {
			delete(c.entries, id)
		}
	}
	iv := c.SweepInterval
	if iv <= 0 {
		iv = DefaultSweepInterval
	}
	c.nextSweep = now.Add(iv)
}
