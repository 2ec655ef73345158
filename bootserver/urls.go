package bootserver

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// Reachable reports whether machines can reach ip: not unspecified, multicast, the IPv4
// broadcast address, nor with a zone.
func Reachable(ip netip.Addr) bool {
	return !ip.IsUnspecified() && !ip.IsMulticast() && ip != netip.AddrFrom4([4]byte{255, 255, 255, 255}) && ip.Zone() == ""
}

// CheckBaseURL checks a base URL machines use for /boot/ and /cache/ (Config.BaseURL,
// BaseURL6): http(s)://HOST[:PORT] with no path beyond "/" and no query, and a HOST that
// is an address machines can reach ([Reachable]) when it is an address.
func CheckBaseURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
		return fmt.Errorf("want http://HOST[:PORT], got %q", s)
	}
	return checkHost(u)
}

// CheckCacheURL checks the URL machines reach the image cache at (Config.CacheURL): an
// http(s) URL with a host, which machines can reach when it is an address.
func CheckCacheURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("want an http(s) URL, got %q", s)
	}
	return checkHost(u)
}

func checkHost(u *url.URL) error {
	if ip, err := netip.ParseAddr(u.Hostname()); err == nil && !Reachable(ip) {
		return fmt.Errorf("host %v is not an address machines can reach", ip)
	}
	return nil
}

// BaseURL is the base URL machines use for /boot/ and /cache/ (Config.BaseURL, BaseURL6)
// once the HTTP listener is bound on port: set, with a port of 0 replaced by port (a host
// that asked for any port); or, when set is "", http://IP[:PORT] from ip and port, the
// port left out when it is 80; "" when ip is unset too.
func BaseURL(set string, ip netip.Addr, port uint16) string {
	return joinBaseURL("http", 80, set, ip, port)
}

// BaseURLTLS is [BaseURL] for the HTTPS listener: https://IP[:PORT], the port left out
// when it is 443.
func BaseURLTLS(set string, ip netip.Addr, port uint16) string {
	return joinBaseURL("https", 443, set, ip, port)
}

func joinBaseURL(scheme string, defaultPort uint16, set string, ip netip.Addr, port uint16) string {
	if set != "" {
		if u, err := url.Parse(set); err == nil && u.Port() == "0" {
			u.Host = net.JoinHostPort(u.Hostname(), strconv.Itoa(int(port)))
			return u.String()
		}
		return set
	}
	if !ip.IsValid() {
		return ""
	}
	host := ip.String()
	if ip.Is6() {
		host = "[" + host + "]"
	}
	if port != defaultPort {
		host += ":" + strconv.Itoa(int(port))
	}
	return scheme + "://" + host
}

// Bases are the base URLs a boot server hands machines and the ports proxy DHCP names,
// once its listeners are bound ([Listeners.Bases]).
type Bases struct {
	// URL is Config.BaseURL; URL6 is Config.BaseURL6, "" without an IPv6 address.
	URL, URL6 string
	// HTTPPort and HTTPSPort are proxydhcp.Server's: the ports machines reach the boot
	// server on over plain HTTP and over HTTPS (0 without an HTTPS listener).
	HTTPPort, HTTPSPort int
}

// Bases derives the base URLs from the ports l's HTTP and HTTPS listeners are bound to, so
// that a host that asked for port 0 hands machines the real one: set and set6 are the
// host's own base URLs ([BaseURL]; "" derives them from ip and ip6, and a port of 0 is
// replaced). With an HTTPS listener every URL is on the HTTPS side ([BaseURLTLS]) and
// HTTPPort is the plain listener's port (UEFI HTTP boot's build); without, HTTPPort is the
// base URL's port.
func (l Listeners) Bases(set, set6 string, ip, ip6 netip.Addr) Bases {
	plain := portOf(l.HTTP)
	var b Bases
	base := BaseURL
	port := plain
	if l.HTTPS != nil {
		base, port = BaseURLTLS, portOf(l.HTTPS)
	}
	b.URL = base(set, ip, port)
	if ip6.IsValid() {
		b.URL6 = strings.TrimSuffix(base(set6, ip6, port), "/")
	}
	if l.HTTPS != nil {
		b.HTTPPort, b.HTTPSPort = int(plain), urlPort(b.URL, 443)
	} else {
		b.HTTPPort = urlPort(b.URL, 80)
	}
	return b
}

// portOf is the port ln is bound to; 0 when its address has none.
func portOf(ln net.Listener) uint16 {
	if ln == nil {
		return 0
	}
	if tcp, ok := ln.Addr().(*net.TCPAddr); ok {
		return uint16(tcp.Port)
	}
	ap, _ := netip.ParseAddrPort(ln.Addr().String())
	return ap.Port()
}

// urlPort is the port of URL s, def when it names none.
func urlPort(s string, def int) int {
	u, err := url.Parse(s)
	if err != nil || u.Port() == "" {
		return def
	}
	p, _ := strconv.Atoi(u.Port())
	return p
}
