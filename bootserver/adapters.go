package bootserver

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"

	"github.com/bettercompute/siteboot/assertion"
	"github.com/bettercompute/siteboot/bootbind"
	"github.com/bettercompute/siteboot/bootevents"
	"github.com/bettercompute/siteboot/hwid"
	"github.com/bettercompute/siteboot/imagecache"
	"github.com/bettercompute/siteboot/ipxe"
)

// GrantKey names the cache grant of one boot entry: its MAC and workflow, as
// "52:54:00:12:34:56/wf-1". Every script of one boot carries the same grant.
func GrantKey(mac hwid.MAC, workflow string) string { return mac.String() + "/" + workflow }

// Cache is an ipxe.Cache over an image cache: it mints the boot grants scripts carry.
type Cache struct {
	// Cache mints and serves the grants. Required.
	Cache *imagecache.Cache
	// BaseURL is the URL machines reach the cache's HTTP handler at, as
	// "http://192.0.2.1:8080/cache" (a trailing slash is dropped). Required.
	BaseURL string
	// BaseURL6, if set, is that URL for a request that came over IPv6 ([ViaIPv6]), as
	// "http://[2001:db8::1]:8080/cache". Empty: BaseURL for every request.
	BaseURL6 string
}

var _ ipxe.Cache = Cache{}

// base is the cache's URL for the request of ctx.
func (c Cache) base(ctx context.Context) (string, error) {
	b := c.BaseURL
	if c.BaseURL6 != "" && ViaIPv6(ctx) {
		b = c.BaseURL6
	}
	if b == "" || c.Cache == nil {
		return "", fmt.Errorf("%w: bootserver.Cache needs a Cache and a BaseURL", ErrInvalid)
	}
	return strings.TrimSuffix(b, "/"), nil
}

// CacheURL returns the bc.cache of e's scripts, BASE/t/GRANT/ (the ramdisk appends a
// digest): the boot grant of [GrantKey](e.MAC, e.Workflow), issued once and returned
// again while it lives, valid until e.NotAfter (imagecache's BootGrantTTL when zero). An
// entry whose NotAfter has passed gets no grant (imagecache.ErrBadGrant).
func (c Cache) CacheURL(ctx context.Context, e ipxe.Entry) (string, error) {
	base, err := c.base(ctx)
	if err != nil {
		return "", err
	}
	// One grant per entry, reused by every script of that boot: a machine asking again
	// cannot fill the grant table.
	g, err := c.Cache.BootGrantFor(GrantKey(e.MAC, e.Workflow), e.NotAfter)
	if err != nil {
		return "", err
	}
	return base + "/t/" + g.Token + "/", nil
}

// ISOReady reports whether the image sha256 is cached, verified, and pinned (named by the
// host in SetPinned) with the format "iso". A malformed digest is not ready.
func (c Cache) ISOReady(ctx context.Context, sha256 string) (bool, error) {
	if c.Cache == nil {
		return false, nil
	}
	d, err := imagecache.ParseDigest(sha256)
	if err != nil {
		return false, nil
	}
	if _, ok := c.Cache.Lookup(d); !ok {
		return false, nil
	}
	return slices.ContainsFunc(c.Cache.Status(), func(s imagecache.Status) bool {
		return s.Image.SHA256 == d && s.Image.Format == "iso" && s.State == imagecache.StateReady
	}), nil
}

// SanbootURL returns the URL of e's ISO under a boot grant for that one image,
// BASE/t/GRANT/SHA256, reused by key as CacheURL's.
func (c Cache) SanbootURL(ctx context.Context, e ipxe.Entry) (string, error) {
	base, err := c.base(ctx)
	if err != nil {
		return "", err
	}
	d, err := imagecache.ParseDigest(e.SanbootSHA256)
	if err != nil {
		return "", err
	}
	g, err := c.Cache.SanbootGrantFor(GrantKey(e.MAC, e.Workflow), d, e.NotAfter)
	if err != nil {
		return "", err
	}
	return base + "/t/" + g.Token + "/" + d.String(), nil
}

// Signer is an ipxe.Signer over an assertion issuer: each script's claims become one
// signed discovery assertion.
type Signer struct {
	Issuer *assertion.Issuer // required
}

var _ ipxe.Signer = Signer{}

// Sign issues the assertion of c.
func (s Signer) Sign(ctx context.Context, c ipxe.Claims) (string, error) {
	if s.Issuer == nil {
		return "", fmt.Errorf("%w: bootserver.Signer has no Issuer", ErrInvalid)
	}
	return s.Issuer.Issue(ctx, assertion.Fields{
		Epoch: c.Epoch, MAC: c.MAC, IP: c.IP, UUID: c.UUID, Workflow: c.Workflow, NotAfter: c.NotAfter,
	})
}

// Claimer binds a request presenting a token from an address to the DHCP answer that
// named the token: *bootbind.Nonces (chain nonces) and *bootbind.Keys (a boot loader's
// key) are Claimers.
type Claimer interface {
	Claim(token string, mac hwid.MAC, from netip.Addr) bootbind.Reason
}

var (
	_ Claimer = (*bootbind.Nonces)(nil)
	_ Claimer = (*bootbind.Keys)(nil)
)

// Bind is an ipxe.Entries that gives the host's entry only to a request bound to the
// DHCP answer it follows. The host's lookup answers first: an unknown machine, a mismatch
// or a failure is returned as the lookup returned it, and no token is claimed. For a known
// machine the request is claimed (q.Nonce from q.Remote); a refusal is an error wrapping
// ipxe.ErrUnbound and bootbind's *RefusedError, with no entry, so the handler answers the
// exit script and counts it as Unbound.
type Bind struct {
	// Entries is the host's own lookup. Required.
	Entries ipxe.Entries
	// Nonces claims a /boot/ipxe request's chain nonce: the store proxy DHCP's Binder
	// issued it from. Required.
	Nonces Claimer
	// Passes, if set, binds an IPv6 request that carries no nonce (DHCPv6 cannot name
	// one) by the MAC's IPv6 boot pass; a request without a pass is then claimed by Nonces
	// as any other.
	Passes *bootbind.Passes
	// Loaders bind the requests of a boot loader other than iPXE, by the name of its
	// ipxe.Loader (q.Loader; a GRUB's boot key with *bootbind.Keys). A loader not listed is
	// refused. Nil: none.
	Loaders map[string]Claimer
	// OnBound, if set, is called with each bound request, before the entry is returned
	// (a host preferring the machine's address for the transfers that follow).
	OnBound func(ipxe.Query)
	// Events, if set, receives a bootevents.StageBind event per claim: "bound", or
	// refused for bootbind's reason ("nonce-other-address", ...), with the boot id of the
	// request's nonce and the address it came from. Nil builds none.
	Events bootevents.Sink
}

var _ ipxe.Entries = Bind{}

// Entry returns the host's entry for a bound request.
func (b Bind) Entry(ctx context.Context, q ipxe.Query) (ipxe.Entry, bool, error) {
	if b.Entries == nil || b.Nonces == nil {
		return ipxe.Entry{}, false, fmt.Errorf("%w: bootserver.Bind needs Entries and Nonces", ErrInvalid)
	}
	e, ok, err := b.Entries.Entry(ctx, q)
	if err != nil || !ok {
		return ipxe.Entry{}, false, err
	}
	err = b.bind(q)
	if b.Events != nil {
		b.Events.Emit(bindEvent(q, err))
	}
	if err != nil {
		return ipxe.Entry{}, false, err
	}
	if b.OnBound != nil {
		b.OnBound(q)
	}
	return e, true, nil
}

// bind claims q's token with the claimer of its path.
func (b Bind) bind(q ipxe.Query) error {
	c := b.Nonces
	if q.Loader != "" {
		if c = b.Loaders[q.Loader]; c == nil {
			return fmt.Errorf("%w: loader %q is not bound here", ipxe.ErrUnbound, q.Loader)
		}
	} else if q.Nonce == "" && b.Passes != nil && b.Passes.Claim(q.MAC, q.Remote) == bootbind.Bound {
		return nil
	}
	if r := c.Claim(q.Nonce, q.MAC, q.Remote); r != bootbind.Bound {
		return fmt.Errorf("%w: %w", ipxe.ErrUnbound, r.Err())
	}
	return nil
}

// bindEvent is the boot event of claiming q's token: err is bind's.
func bindEvent(q ipxe.Query, err error) bootevents.Event {
	e := bootevents.Event{MAC: q.MAC, BootID: bootevents.BootIDOf(q.Nonce), Stage: bootevents.StageBind,
		Outcome: bootevents.OutcomeOK, Reason: bootbind.Bound.String(), Peer: netip.AddrPortFrom(q.Remote, 0), Detail: q.Loader}
	if err != nil {
		e.Outcome, e.Reason = bootevents.OutcomeRefused, bootbind.ReasonOf(err)
		if e.Reason == "" {
			e.Reason = ipxe.ReasonOf(err)
		}
	}
	return e
}

// ViaIPv6 reports whether the HTTP request of ctx came to an IPv6 address of this host
// (not an IPv4-mapped one, as an IPv4 connection to a dual-stack socket shows). It reads
// net/http's LocalAddrContextKey; a context without it (a decision made outside HTTP) is
// IPv4.
func ViaIPv6(ctx context.Context) bool {
	la, ok := ctx.Value(http.LocalAddrContextKey).(net.Addr)
	if !ok {
		return false
	}
	ap, err := netip.ParseAddrPort(la.String())
	return err == nil && ap.Addr().Is6() && !ap.Addr().Is4In6()
}

// ByFamily serves a request that came over IPv6 ([ViaIPv6]) with v6 and any other with v4:
// two boot handlers of one configuration but for their BaseURL, so that a machine that
// came over IPv6 is sent on over IPv6. A nil v6 is v4 alone.
func ByFamily(v4, v6 http.Handler) http.Handler {
	if v6 == nil {
		return v4
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ViaIPv6(r.Context()) {
			v6.ServeHTTP(w, r)
			return
		}
		v4.ServeHTTP(w, r)
	})
}
