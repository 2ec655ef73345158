package ipxe

import (
	"context"
	"net/netip"
	"time"

	"github.com/bettercompute/siteboot/hwid"
)

// Entry is a machine's live boot entry, as the host keeps it.
type Entry struct {
	MAC      hwid.MAC
	UUID     hwid.UUID // the SMBIOS product UUID when known; zero otherwise
	Workflow string    // the workflow the entry belongs to; the token is bound to it
	NotAfter time.Time // the entry lapses here; zero means no end of its own
	// SanbootSHA256 is the lower-case hex sha256 of an ISO to sanboot instead of the
	// ramdisk; empty for a ramdisk boot.
	SanbootSHA256 string

	// LocalBoot, when set, answers the machine "boot from the local disk" (AnswerLocal)
	// instead of the ramdisk or the ISO: no token is fetched and nothing is signed.
	LocalBoot bool
	// Ref is the host's own handle on the entry (its record, a token reference), handed
	// back untouched to [Tokens] and [Cache], so they need no second lookup. The handler
	// never reads it.
	Ref any
}

// Entries finds the live boot entry of the machine asking.
type Entries interface {
	// Entry returns the live entry for q.MAC, or ok false when there is none. The host
	// decides whether the machine matches the entry (its arch, q.Arch, and its UUID,
	// q.UUID, when both sides have one): an error wrapping [ErrMismatch] means it does
	// not, and the machine gets the exit script and no secret, counted apart. The host
	// also decides whether this requester may have the entry's secrets at all (q.Nonce,
	// the boot nonce of its DHCP answer, presented from q.Remote): an error wrapping
	// [ErrUnbound] means it may not; the exit script again, counted as Unbound.
	Entry(ctx context.Context, q Query) (e Entry, ok bool, err error)
}

// EntriesFunc adapts a function to [Entries].
type EntriesFunc func(ctx context.Context, q Query) (Entry, bool, error)

// Entry calls f.
func (f EntriesFunc) Entry(ctx context.Context, q Query) (Entry, bool, error) {
	return f(ctx, q)
}

// Fence tells whether this agent is the site's active boot server.
type Fence interface {
	// Active reports the lease epoch and whether this agent holds the lease now. An epoch of
	// zero is never active.
	Active() (epoch uint64, active bool)
}

// FenceFunc adapts a function to [Fence].
type FenceFunc func() (uint64, bool)

// Active calls f.
func (f FenceFunc) Active() (uint64, bool) { return f() }

// Tokens gives the discovery token for an entry. The handler asks once per entry (MAC,
// workflow and not-after) and reuses the answer while the entry lives.
type Tokens interface {
	// Token returns the bearer token for e, or an error wrapping ErrNotReady while the host
	// has not fetched it yet.
	Token(ctx context.Context, e Entry) (string, error)
}

// TokensFunc adapts a function to [Tokens].
type TokensFunc func(ctx context.Context, e Entry) (string, error)

// Token calls f.
func (f TokensFunc) Token(ctx context.Context, e Entry) (string, error) { return f(ctx, e) }

// Claims is what a discovery assertion states. The handler fills it; the host encodes and
// signs it (package assertion, which also stamps issued-at and owns the assertion's
// lifetime) and returns the text to place on the kernel command line.
type Claims struct {
	MAC      hwid.MAC   // the NIC the machine booted from (the query's MAC)
	IP       netip.Addr // the connection's address (a query IP that differs is refused)
	UUID     hwid.UUID  // the entry's when it has one (a query UUID must be a spelling of it), else the query's; zero when neither
	Workflow string
	Epoch    uint64
	NotAfter time.Time // the entry's not-after; zero when it has none
}

// Signer signs discovery assertions.
type Signer interface {
	// Sign returns the signed assertion as one kernel command-line value (base64url).
	Sign(ctx context.Context, c Claims) (string, error)
}

// SignerFunc adapts a function to [Signer].
type SignerFunc func(ctx context.Context, c Claims) (string, error)

// Sign calls f.
func (f SignerFunc) Sign(ctx context.Context, c Claims) (string, error) { return f(ctx, c) }

// Cache is the site's image cache as the handler needs it. The host mints the grants
// (package imagecache); the handler only places the URLs in scripts.
type Cache interface {
	// CacheURL returns the bc.cache value for a ramdisk boot of e (a boot grant's base
	// URL), or "" when the site has no cache.
	CacheURL(ctx context.Context, e Entry) (string, error)
	// ISOReady reports whether the ISO with this digest is pinned as an iso cache image
	// and its verified copy is cached.
	ISOReady(ctx context.Context, sha256 string) (bool, error)
	// SanbootURL returns the boot grant URL of e's ISO (e.SanbootSHA256).
	SanbootURL(ctx context.Context, e Entry) (string, error)
}

// Discovery is a script fetch from a MAC without a live boot entry, made while this agent is
// the active boot server. Its fields come from the query and are well-formed.
type Discovery struct {
	Query // what the machine said: its MAC, and the UUID, IP and arch when sent; Remote is the connection's address
	At    time.Time
}
