package agent

import (
	"encoding/hex"
	"io"
	"time"

	"github.com/bettercompute/siteboot/hwid"
)

// macTokens is the store behind the boot nonces and the boot keys: random tokens, each
// handed to one MAC, live for a window from when they were issued, bounded in all
// (MaxNonces: the lapsed, else the oldest, give way) and listed per MAC oldest first so a
// store can bound each MAC's share by a rule of its own. S is what a store keeps of each
// token beside its MAC and age. Its owner holds the lock.
type macTokens[S any] struct {
	window time.Duration
	m      map[string]*macToken[S]
	byMAC  map[hwid.MAC][]string // oldest first
	// onDrop, when set, is called for every token dropped, lapsed or pushed out.
	onDrop func(k string, mac hwid.MAC)
}

type macToken[S any] struct {
	mac    hwid.MAC
	issued time.Time
	state  S
}

func newMACTokens[S any](window time.Duration) macTokens[S] {
	return macTokens[S]{window: window, m: map[string]*macToken[S]{}, byMAC: map[hwid.MAC][]string{}}
}

// mintToken reads 128 random bits, in hex: a token nobody can guess, so a map lookup's
// timing tells a guesser nothing useful.
func mintToken(rand io.Reader) (string, error) {
	var b [16]byte
	if _, err := io.ReadFull(rand, b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}

// add keeps token k for mac, issued now, making room first when the store is full.
func (t *macTokens[S]) add(k string, mac hwid.MAC, now time.Time, state S) {
	if len(t.m) >= MaxNonces {
		t.evict(now)
	}
	t.m[k] = &macToken[S]{mac: mac, issued: now, state: state}
	t.byMAC[mac] = append(t.byMAC[mac], k)
}

// find returns token k when the store holds it, want accepts its state and it has not
// lapsed (a lapsed one is dropped); else why not: unboundUnknown or unboundLapsed.
func (t *macTokens[S]) find(k string, now time.Time, want func(S) bool) (*macToken[S], unbound) {
	tok, ok := t.m[k]
	switch {
	case !ok || !want(tok.state):
		return nil, unboundUnknown
	case t.lapsed(tok, now):
		t.drop(k)
		return nil, unboundLapsed
	}
	return tok, bound
}

// lapsed reports whether tok was issued a window or more before now.
func (t *macTokens[S]) lapsed(tok *macToken[S], now time.Time) bool {
	return now.Sub(tok.issued) >= t.window
}

// evict drops every lapsed token and, when none had lapsed, the oldest one.
func (t *macTokens[S]) evict(now time.Time) {
	var oldest string
	var oldestAt time.Time
	for k, tok := range t.m {
		if t.lapsed(tok, now) {
			t.drop(k)
			continue
		}
		if oldest == "" || tok.issued.Before(oldestAt) {
			oldest, oldestAt = k, tok.issued
		}
	}
	if len(t.m) >= MaxNonces && oldest != "" {
		t.drop(oldest)
	}
}

// drop forgets token k (a token it does not hold is a no-op).
func (t *macTokens[S]) drop(k string) {
	tok, ok := t.m[k]
	if !ok {
		return
	}
	delete(t.m, k)
	list := t.byMAC[tok.mac]
	for i, x := range list {
		if x == k {
			list = append(list[:i:i], list[i+1:]...)
			break
		}
	}
	if len(list) == 0 {
		delete(t.byMAC, tok.mac)
	} else {
		t.byMAC[tok.mac] = list
	}
	if t.onDrop != nil {
		t.onDrop(k, tok.mac)
	}
}
