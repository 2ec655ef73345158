package imagecache

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"
)

// maxRedirects bounds the redirects a pull follows (net/http's own default).
const maxRedirects = 10

// sourcePolicy decides which addresses image sources may be on: loopback, link-local,
// unspecified, multicast and broadcast addresses, the host's own addresses and the
// management networks are refused unless an allowed network holds the address.
type sourcePolicy struct {
	allow      []netip.Prefix
	management []netip.Prefix
	// own lists the host's addresses; nil: the addresses of its interfaces, read at each
	// check (a dial is rare next to the cost of reading them).
	own func() []netip.Addr
}

func inAny(ps []netip.Prefix, a netip.Addr) bool {
	for _, p := range ps {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

var (
	thisNetwork = netip.MustParsePrefix("0.0.0.0/8")
	broadcast   = netip.MustParseAddr("255.255.255.255")
)

// IPv6 prefixes whose addresses carry an IPv4 address in their last 32 bits (or, for
// 6to4, in bits 16 to 48), by which a dial may reach that IPv4 address: the kernel, a
// NAT64 gateway or a translator of the site does the rest.
var (
	ipv4Compatible = netip.MustParsePrefix("::/96")           // ::a.b.c.d (RFC 4291, deprecated)
	ipv4Translated = netip.MustParsePrefix("::ffff:0:0:0/96") // ::ffff:0:a.b.c.d (SIIT, RFC 2765)
	nat64WellKnown = netip.MustParsePrefix("64:ff9b::/96")    // RFC 6052
	nat64Local     = netip.MustParsePrefix("64:ff9b:1::/48")  // RFC 8215, /96 assumed
	sixToFour      = netip.MustParsePrefix("2002::/16")       // RFC 3056
)

// embeddedV4 returns the IPv4 address an IPv6 address a embeds in one of the spellings
// above, if any. :: and ::1 are not read as IPv4-compatible (they are the unspecified and
// loopback addresses themselves).
func embeddedV4(a netip.Addr) (netip.Addr, bool) {
	if !a.Is6() || a.Is4In6() {
		return netip.Addr{}, false
	}
	b := a.As16()
	switch {
	case ipv4Compatible.Contains(a):
		if a.IsUnspecified() || a.IsLoopback() {
			return netip.Addr{}, false
		}
		return netip.AddrFrom4([4]byte(b[12:])), true
	case ipv4Translated.Contains(a), nat64WellKnown.Contains(a), nat64Local.Contains(a):
		return netip.AddrFrom4([4]byte(b[12:])), true
	case sixToFour.Contains(a):
		return netip.AddrFrom4([4]byte(b[2:6])), true
	}
	return netip.Addr{}, false
}

// checkAddr returns a *SourceError when a is not an address image sources may be on. An
// IPv6 address that embeds an IPv4 address (IPv4-mapped, IPv4-compatible, translated,
// NAT64, 6to4) is refused when either is: [::127.0.0.1] is loopback.
func (p *sourcePolicy) checkAddr(a netip.Addr) error {
	a = a.Unmap().WithZone("")
	if v4, ok := embeddedV4(a); ok && !inAny(p.allow, a) {
		if err := p.checkOne(v4); err != nil {
			err.(*SourceError).Addr = a
			return err
		}
	}
	return p.checkOne(a)
}

// checkOne is checkAddr for an address already unmapped, without its embedded address.
func (p *sourcePolicy) checkOne(a netip.Addr) error {
	if inAny(p.allow, a) {
		return nil
	}
	reason := ""
	switch {
	case !a.IsValid():
		reason = "unspecified"
	case inAny(p.management, a):
		reason = "management-network"
	case a.IsLoopback():
		reason = "loopback"
	case a.IsLinkLocalUnicast():
		reason = "link-local"
	case a.IsUnspecified(), thisNetwork.Contains(a):
		reason = "unspecified"
	case a.IsMulticast(), a.IsLinkLocalMulticast(), a.IsInterfaceLocalMulticast(), a == broadcast:
		reason = "multicast"
	case p.isOwn(a):
		reason = "own-address"
	default:
		return nil
	}
	return &SourceError{Addr: a, Reason: reason}
}

func (p *sourcePolicy) isOwn(a netip.Addr) bool {
	var own []netip.Addr
	if p.own != nil {
		own = p.own()
	} else {
		own = interfaceAddrs()
	}
	for _, o := range own {
		if o.Unmap().WithZone("") == a {
			return true
		}
	}
	return false
}

func interfaceAddrs() []netip.Addr {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	out := make([]netip.Addr, 0, len(addrs))
	for _, a := range addrs {
		if pfx, err := netip.ParsePrefix(a.String()); err == nil {
			out = append(out, pfx.Addr())
		}
	}
	return out
}

// checkURL refuses a URL that is not http or https, has no host, or names a refused
// address literally. Names are checked when dialled, on the address they resolved to.
func (p *sourcePolicy) checkURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrBadImage, err)
	}
	return p.checkParsed(u)
}

func (p *sourcePolicy) checkParsed(u *url.URL) error {
	if s := strings.ToLower(u.Scheme); s != "http" && s != "https" {
		return &SourceError{URL: redact(u), Reason: "scheme"}
	}
	if u.Hostname() == "" {
		return fmt.Errorf("%w: url %q has no host", ErrBadImage, redact(u))
	}
	if a, err := netip.ParseAddr(u.Hostname()); err == nil {
		return p.checkAddr(a)
	}
	return nil
}

// redact drops a URL's user information (a credential) before it goes into an error.
func redact(u *url.URL) string {
	if u.User == nil {
		return u.String()
	}
	c := *u
	c.User = nil
	return c.String()
}

// control is a net.Dialer.Control: it runs after the name was resolved and before the
// connection is made, so neither DNS answers nor redirects reach a refused address.
func (p *sourcePolicy) control(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return &SourceError{URL: address, Reason: "unspecified"}
	}
	return p.checkAddr(ap.Addr())
}

// checkRedirect refuses a redirect to another scheme or a literal refused address, and
// more than maxRedirects; next is the host's own CheckRedirect, if any.
func (p *sourcePolicy) checkRedirect(next func(*http.Request, []*http.Request) error) func(*http.Request, []*http.Request) error {
	return func(req *http.Request, via []*http.Request) error {
		if len(via) >= maxRedirects {
			return &SourceError{URL: redact(req.URL), Reason: "too-many-redirects"}
		}
		if err := p.checkParsed(req.URL); err != nil {
			return err
		}
		if next != nil {
			return next(req, via)
		}
		return nil
	}
}

// guardClient returns a client whose every connection is checked by the policy. A nil
// client gets a transport of its own (no proxy: the address checked must be the origin's).
// A host's client keeps its transport's settings; its dialer is wrapped: when the
// transport dials with its own DialContext, the peer's address is checked once connected,
// before anything is sent. A transport that is not an *http.Transport cannot be guarded at
// dial time: only its URLs (and redirects) are checked.
func (p *sourcePolicy) guardClient(c *http.Client) *http.Client {
	var out http.Client
	if c != nil {
		out = *c
	}
	out.CheckRedirect = p.checkRedirect(out.CheckRedirect)
	var tr *http.Transport
	hostTransport := false
	switch rt := out.Transport.(type) {
	case nil:
		tr = http.DefaultTransport.(*http.Transport).Clone()
		if c == nil {
			tr.Proxy = nil
		}
	case *http.Transport:
		tr, hostTransport = rt.Clone(), true
	default:
		return &out
	}
	if dial := tr.DialContext; hostTransport && dial != nil {
		tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			conn, err := dial(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			if err := p.checkConn(conn); err != nil {
				conn.Close()
				return nil, err
			}
			return conn, nil
		}
	} else {
		d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second, Control: p.control}
		tr.DialContext = d.DialContext
	}
	if dialTLS := tr.DialTLSContext; dialTLS != nil {
		tr.DialTLSContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			conn, err := dialTLS(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			if err := p.checkConn(conn); err != nil {
				conn.Close()
				return nil, err
			}
			return conn, nil
		}
	}
	out.Transport = tr
	return &out
}

func (p *sourcePolicy) checkConn(conn net.Conn) error {
	ap, err := netip.ParseAddrPort(conn.RemoteAddr().String())
	if err != nil {
		return &SourceError{URL: conn.RemoteAddr().String(), Reason: "unspecified"}
	}
	return p.checkAddr(ap.Addr())
}
