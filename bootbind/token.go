package bootbind

import (
	"encoding/hex"
	"fmt"
	"io"
	"time"

	"github.com/bettercompute/siteboot/hwid"
)

// TokenLen is the length of a nonce or key in text: 128 random bits in lowercase hex.
const TokenLen = 32

// ParseToken checks that s is a token as this package mints them (TokenLen lowercase hex
// digits) and returns it; anything else is refused, so no other text reaches a lookup, a
// log or a path.
func ParseToken(s string) (string, error) {
	if len(s) != TokenLen {
		return "", fmt.Errorf("bootbind: token of %d bytes, want %d", len(s), TokenLen)
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return "", fmt.Errorf("bootbind: token byte %d is not a lowercase hex digit", i)
		}
	}
	return s, nil
}

// mint reads 128 random bits, in hex: a token nobody can guess, so a map lookup's timing
// tells a guesser nothing useful.
func mint(rand io.Reader) (string, error) {
	var b [16]byte
	if _, err := io.ReadFull(rand, b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}

// tokens is the store behind the nonces and the keys: random tokens, each handed to one MAC,
// live for a window from when they were issued, bounded in all (max: the lapsed, else the
// oldest, give way) and listed per MAC oldest first so a store can bound each MAC's share by
// a rule of its own. S is what a store keeps of each token beside its MAC and age. Its owner
// holds the lock.
type tokens[S any] struct {
	window time.Duration
	max    int
	m      map[string]*token[S]
	byMAC  map[hwid.MAC][]string // oldest first
	// onDrop, when set, is called for every token dropped, lapsed or pushed out.
	onDrop func(k string, mac hwid.MAC)
}

type token[S any] struct {
	mac    hwid.MAC
	issued time.Time
	state  S
}

func newTokens[S any](window time.Duration, max int) tokens[S] {
	return tokens[S]{window: window, max: max, m: map[string]*token[S]{}, byMAC: map[hwid.MAC][]string{}}
}

// add keeps token k for mac, issued at, making room first when the store is full.
func (t *tokens[S]) add(k string, mac hwid.MAC, at, now time.Time, state S) {
	if len(t.m) >= t.max {
		t.evict(now)
	}
	t.m[k] = &token[S]{mac: mac, issued: at, state: state}
	t.byMAC[mac] = append(t.byMAC[mac], k)
}

// find returns token k when the store holds it, want accepts its state and it has not
// lapsed (a lapsed one is dropped); else why not: UnknownNonce or Lapsed.
func (t *tokens[S]) find(k string, now time.Time, want func(S) bool) (*token[S], Reason) {
	tok, ok := t.m[k]
	switch {
	case !ok || !want(tok.state):
		return nil, UnknownNonce
	case t.lapsed(tok, now):
		t.drop(k)
		return nil, Lapsed
	}
	return tok, Bound
}

// lapsed reports whether tok was issued a window or more before now (or after now: a clock
// stepped back never stretches a window).
func (t *tokens[S]) lapsed(tok *token[S], now time.Time) bool {
	age := now.Sub(tok.issued)
	return age >= t.window || age < -t.window
}

// evict drops every lapsed token and, when none had lapsed, the oldest one.
func (t *tokens[S]) evict(now time.Time) {
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
	if len(t.m) >= t.max && oldest != "" {
		t.drop(oldest)
	}
}

// drop forgets token k (a token it does not hold is a no-op).
func (t *tokens[S]) drop(k string) {
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
