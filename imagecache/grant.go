package imagecache

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"io"
	"sync"
	"time"
)

// GrantKind says what a grant serves and under which rule.
type GrantKind int

// Kinds of grants.
const (
	// GrantBoot serves any cached image (the ramdisk's bc.cache), or one ISO (a sanboot
	// URL), until its not-after, and only while the Fence is active (otherwise 503).
	GrantBoot GrantKind = iota + 1
	// GrantFirmware serves one digest (the URL a BMC fetches a firmware image from) for
	// FirmwareGrantTTL, fence or not.
	GrantFirmware
)

func (k GrantKind) String() string {
	switch k {
	case GrantBoot:
		return "boot"
	case GrantFirmware:
		return "firmware"
	}
	return fmt.Sprintf("GrantKind(%d)", int(k))
}

// TokenLen is the length of a grant token: 128 random bits as 32 lower-case hex digits.
const TokenLen = 32

// Grant is a capability to fetch from the cache over HTTP.
type Grant struct {
	Token    string // 32 lower-case hex digits; a secret: put it only in URLs for its holder
	Kind     GrantKind
	Digest   Digest // the one image it serves; zero for a boot grant of any cached image
	NotAfter time.Time
}

// Path returns the URL path serving image d under this grant: /cache/t/TOKEN/SHA256.
// With the zero digest it names the grant's own Digest.
func (g Grant) Path(d Digest) string {
	if d.IsZero() {
		d = g.Digest
	}
	return "/cache/t/" + g.Token + "/" + d.String()
}

// Fence says whether this agent is the active boot server right now. [lease.Fence]
// implements it; the cache uses only active.
//
// [lease.Fence]: https://pkg.go.dev/github.com/bettercompute/siteboot/lease#Fence
type Fence interface {
	// Active reports the lease epoch and whether this agent holds the lease now.
	Active() (epoch uint64, active bool)
}

// FenceFunc adapts a function to [Fence].
type FenceFunc func() (uint64, bool)

// Active calls f.
func (f FenceFunc) Active() (uint64, bool) { return f() }

type grantRec struct {
	key      string // the host's key for reuse, or ""
	token    [TokenLen / 2]byte
	kind     GrantKind
	digest   Digest
	notAfter time.Time
}

// grantTable holds live grants keyed by the SHA-256 of their token, so a lookup's timing
// depends only on a hash of what the client sent; the token itself is then compared in
// constant time.
type grantTable struct {
	mu        sync.Mutex
	m         map[[32]byte]*grantRec
	keys      map[string][32]byte // host key -> live grant
	lastSweep time.Time
}

func (t *grantTable) init() {
	t.m = map[[32]byte]*grantRec{}
	t.keys = map[string][32]byte{}
}

// deleteLocked forgets one grant and its key.
func (t *grantTable) deleteLocked(k [32]byte) {
	if g := t.m[k]; g != nil && g.key != "" && t.keys[g.key] == k {
		delete(t.keys, g.key)
	}
	delete(t.m, k)
}

const sweepEvery = time.Minute

// sweepLocked forgets expired grants.
func (t *grantTable) sweepLocked(now time.Time) {
	for k, g := range t.m {
		if !now.Before(g.notAfter) {
			t.deleteLocked(k)
		}
	}
	t.lastSweep = now
}

// BootGrant issues a boot grant for any cached image, valid until notAfter (zero:
// BootGrantTTL from now) and only while the Fence is active.
func (c *Cache) BootGrant(notAfter time.Time) (Grant, error) {
	return c.issue("", GrantBoot, Digest{}, notAfter)
}

// BootGrantFor is BootGrant for a host key such as a boot entry's MAC and workflow: while
// the grant issued for key lives, serves any image and has this not-after (or notAfter is
// zero), it is returned again instead of a new one. A host that renders a script on every
// request thus holds one grant per entry, however often a client asks. When the scope or
// not-after changes, a new grant takes the key and the old one stays valid until it expires.
func (c *Cache) BootGrantFor(key string, notAfter time.Time) (Grant, error) {
	return c.issue(key, GrantBoot, Digest{}, notAfter)
}

// SanbootGrantFor is SanbootGrant with reuse by key, as BootGrantFor.
func (c *Cache) SanbootGrantFor(key string, iso Digest, notAfter time.Time) (Grant, error) {
	if iso.IsZero() {
		return Grant{}, fmt.Errorf("%w: no digest", ErrBadGrant)
	}
	return c.issue(key, GrantBoot, iso, notAfter)
}

// SanbootGrant issues a boot grant for the one image iso, valid until notAfter (zero:
// BootGrantTTL from now) and only while the Fence is active.
func (c *Cache) SanbootGrant(iso Digest, notAfter time.Time) (Grant, error) {
	if iso.IsZero() {
		return Grant{}, fmt.Errorf("%w: no digest", ErrBadGrant)
	}
	return c.issue("", GrantBoot, iso, notAfter)
}

// FirmwareGrant issues a grant for the one image d, valid for FirmwareGrantTTL.
func (c *Cache) FirmwareGrant(d Digest) (Grant, error) {
	if d.IsZero() {
		return Grant{}, fmt.Errorf("%w: no digest", ErrBadGrant)
	}
	return c.issue("", GrantFirmware, d, c.now().Add(c.cfg.FirmwareGrantTTL))
}

func (c *Cache) issue(key string, kind GrantKind, d Digest, notAfter time.Time) (Grant, error) {
	now := c.now()
	anyNotAfter := notAfter.IsZero()
	if anyNotAfter {
		notAfter = now.Add(c.cfg.BootGrantTTL)
	}
	if !now.Before(notAfter) {
		return Grant{}, fmt.Errorf("%w: not-after %v is not after now %v", ErrBadGrant, notAfter, now)
	}
	rec := &grantRec{key: key, kind: kind, digest: d, notAfter: notAfter}
	t := &c.grants
	t.mu.Lock()
	defer t.mu.Unlock()
	if key != "" {
		if k, ok := t.keys[key]; ok {
			g := t.m[k]
			if g != nil && now.Before(g.notAfter) && g.kind == kind && g.digest == d &&
				(anyNotAfter || g.notAfter.Equal(notAfter)) {
				return g.grant(), nil
			}
			// Another scope or not-after: a new grant takes the key; the old one stays
			// valid until its own not-after (a client may be reading under it).
		}
	}
	if len(t.m) >= c.cfg.MaxGrants || now.Sub(t.lastSweep) >= sweepEvery {
		t.sweepLocked(now)
	}
	if len(t.m) >= c.cfg.MaxGrants {
		return Grant{}, ErrGrantLimit
	}
	if _, err := io.ReadFull(c.rand, rec.token[:]); err != nil {
		return Grant{}, fmt.Errorf("imagecache: grant token: %w", err)
	}
	k := sha256.Sum256(rec.token[:])
	if _, dup := t.m[k]; dup {
		return Grant{}, fmt.Errorf("imagecache: grant token: the random source repeated itself")
	}
	t.m[k] = rec
	if key != "" {
		t.keys[key] = k
	}
	c.stats.grantsIssued.Add(1)
	return rec.grant(), nil
}

func (g *grantRec) grant() Grant {
	return Grant{Token: hex.EncodeToString(g.token[:]), Kind: g.kind, Digest: g.digest, NotAfter: g.notAfter}
}

// Revoke forgets a grant at once. Unknown tokens are ignored.
func (c *Cache) Revoke(token string) {
	var tok [TokenLen / 2]byte
	if !parseLowerHex(tok[:], token) {
		return
	}
	k := sha256.Sum256(tok[:])
	c.grants.mu.Lock()
	c.grants.deleteLocked(k)
	c.grants.mu.Unlock()
}

// RevokeKey forgets the grant issued for a host key (see BootGrantFor), for example when
// its boot entry is removed.
func (c *Cache) RevokeKey(key string) {
	c.grants.mu.Lock()
	defer c.grants.mu.Unlock()
	if k, ok := c.grants.keys[key]; ok {
		c.grants.deleteLocked(k)
	}
}

// GrantCount returns how many grants are held (expired ones until the next sweep).
func (c *Cache) GrantCount() int {
	c.grants.mu.Lock()
	defer c.grants.mu.Unlock()
	return len(c.grants.m)
}

// verdict is the handler's decision on a grant.
type verdict int

const (
	verdictOK verdict = iota
	verdictUnknown
	verdictExpired
	verdictOtherDigest
	verdictFenced
)

func (c *Cache) checkGrant(tok *[TokenLen / 2]byte, d Digest) verdict {
	key := sha256.Sum256(tok[:])
	now := c.now()
	t := &c.grants
	t.mu.Lock()
	g := t.m[key]
	if g == nil || subtle.ConstantTimeCompare(g.token[:], tok[:]) != 1 {
		t.mu.Unlock()
		return verdictUnknown
	}
	if !now.Before(g.notAfter) {
		t.deleteLocked(key)
		t.mu.Unlock()
		return verdictExpired
	}
	kind, digest := g.kind, g.digest
	t.mu.Unlock()
	if !digest.IsZero() && subtle.ConstantTimeCompare(digest[:], d[:]) != 1 {
		return verdictOtherDigest
	}
	if kind == GrantBoot && (c.cfg.Fence == nil || !fenceActive(c.cfg.Fence)) {
		return verdictFenced
	}
	return verdictOK
}

func fenceActive(f Fence) bool {
	_, active := f.Active()
	return active
}
