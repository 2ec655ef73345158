package bootserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/bettercompute/siteboot/proxydhcp"
	"github.com/bettercompute/siteboot/udpbind"
)

// Addrs are the addresses [Listen] binds a boot server's sockets to. A zero address is
// not bound (that part is not served, or the host hands in its own socket).
type Addrs struct {
	// DHCP and PXE are proxy DHCP's IPv4 ports (0.0.0.0:67 and 0.0.0.0:4011), bound to
	// Interface with udpbind so that proxy DHCP hears and answers only its segment.
	DHCP, PXE netip.AddrPort
	// Interface names the boot segment's interface; "" means every one.
	Interface string
	// DHCPv6 (UDP 547) joins ff02::1:2 on Interface, or on every multicast interface when
	// it is "" (proxydhcp.ListenDHCPv6); PXE6 is DHCPv6's boot server port ([::]:4011).
	DHCPv6, PXE6 netip.AddrPort
	// TFTP and HTTP are the TFTP server's and the boot HTTP server's addresses.
	TFTP, HTTP netip.AddrPort
	// HTTPS is the boot HTTP server's HTTPS side (Listeners.HTTPS), bound as HTTP is.
	HTTPS netip.AddrPort
	// DualStack makes a wildcard TFTP or HTTP address one socket bound to [::] on the
	// family-less network (IPV6_V6ONLY off), serving IPv4 and IPv6 at once; without it
	// they are bound as given (udp4 for TFTP).
	DualStack bool
}

// AddrError is [Addrs.Validate]'s report of an address its part cannot be served on.
type AddrError struct {
	Part string // "tftp", "http", "dhcpv6" or "pxe6"
	Err  error
}

func (e *AddrError) Error() string { return "bootserver: " + e.Part + " address: " + e.Err.Error() }
func (e *AddrError) Unwrap() error { return e.Err }

var _ error = &AddrError{}

// Validate reports, as an *AddrError, an address [Listeners.Listen] would bind where its
// part could not serve what a has it serve: with DualStack, a TFTP or HTTP address that is
// not a wildcard (only a socket on the wildcard serves IPv4 and IPv6 at once); a DHCPv6 or
// PXE6 address that is not IPv6.
func (a Addrs) Validate() error {
	for _, p := range []struct {
		part string
		ap   netip.AddrPort
	}{{"tftp", a.TFTP}, {"http", a.HTTP}} {
		if a.DualStack && p.ap.IsValid() && !p.ap.Addr().IsUnspecified() {
			return &AddrError{Part: p.part, Err: fmt.Errorf("want a wildcard address (0.0.0.0:PORT or [::]:PORT) that serves IPv4 and IPv6 at once, got %v", p.ap)}
		}
	}
	for _, p := range []struct {
		part string
		ap   netip.AddrPort
	}{{"dhcpv6", a.DHCPv6}, {"pxe6", a.PXE6}} {
		if p.ap.IsValid() && !p.ap.Addr().Is6() {
			return &AddrError{Part: p.part, Err: fmt.Errorf("want [IPv6]:port, got %v", p.ap)}
		}
	}
	return nil
}

// ListenNetwork is the network and address to bind ap on for proto ("udp" or "tcp"), as
// [Listen] binds TFTP and HTTP: with dualStack a wildcard becomes [::]:PORT on the
// family-less network; else "udp4" for UDP and ap as it is.
func ListenNetwork(proto string, ap netip.AddrPort, dualStack bool) (network, address string) {
	if dualStack && ap.Addr().IsUnspecified() {
		return proto, netip.AddrPortFrom(netip.IPv6Unspecified(), ap.Port()).String()
	}
	if proto == "udp" {
		return "udp4", ap.String()
	}
	return proto, ap.String()
}

// Listen binds every socket of a that l does not hold already (sockets the host bound
// itself and hands in are kept as they are) and returns l with them; it binds nothing
// for addresses a.Validate refuses. On an error it
// closes the sockets it bound, not those handed in, and the error names the part.
func (l Listeners) Listen(ctx context.Context, a Addrs) (Listeners, error) {
	if err := a.Validate(); err != nil {
		return l, err
	}
	in := l
	var errs []error
	bind := func(part string, c *net.PacketConn, ap netip.AddrPort, listen func() (net.PacketConn, error)) {
		if *c != nil || !ap.IsValid() || len(errs) > 0 {
			return
		}
		var err error
		if *c, err = listen(); err != nil {
			errs = append(errs, fmt.Errorf("bootserver: %s %v: %w", part, ap, err))
		}
	}
	bind("dhcp", &l.DHCP, a.DHCP, func() (net.PacketConn, error) {
		return udpbind.ListenPacket(ctx, "udp4", a.DHCP.String(), a.Interface)
	})
	bind("pxe", &l.PXE, a.PXE, func() (net.PacketConn, error) {
		return udpbind.ListenPacket(ctx, "udp4", a.PXE.String(), a.Interface)
	})
	bind("dhcpv6", &l.DHCPv6, a.DHCPv6, func() (net.PacketConn, error) {
		var ifaces []string
		if a.Interface != "" {
			ifaces = []string{a.Interface}
		}
		return proxydhcp.ListenDHCPv6(a.DHCPv6.String(), ifaces...)
	})
	bind("pxe6", &l.PXE6, a.PXE6, func() (net.PacketConn, error) { return net.ListenPacket("udp6", a.PXE6.String()) })
	bind("tftp", &l.TFTP, a.TFTP, func() (net.PacketConn, error) {
		return net.ListenPacket(ListenNetwork("udp", a.TFTP, a.DualStack))
	})
	if l.HTTP == nil && a.HTTP.IsValid() && len(errs) == 0 {
		var err error
		if l.HTTP, err = net.Listen(ListenNetwork("tcp", a.HTTP, a.DualStack)); err != nil {
			errs = append(errs, fmt.Errorf("bootserver: http %v: %w", a.HTTP, err))
		}
	}
	if l.HTTPS == nil && a.HTTPS.IsValid() && len(errs) == 0 {
		var err error
		if l.HTTPS, err = net.Listen(ListenNetwork("tcp", a.HTTPS, a.DualStack)); err != nil {
			errs = append(errs, fmt.Errorf("bootserver: https %v: %w", a.HTTPS, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		l.closeExcept(in)
		return in, err
	}
	return l, nil
}

// Close closes every socket l holds.
func (l Listeners) Close() { l.closeExcept(Listeners{}) }

// closeExcept closes the sockets of l that keep does not hold.
func (l Listeners) closeExcept(keep Listeners) {
	for _, c := range [][2]net.PacketConn{{l.DHCP, keep.DHCP}, {l.PXE, keep.PXE}, {l.DHCPv6, keep.DHCPv6}, {l.PXE6, keep.PXE6}, {l.TFTP, keep.TFTP}} {
		if c[0] != nil && c[0] != c[1] {
			c[0].Close()
		}
	}
	for _, c := range [][2]net.Listener{{l.HTTP, keep.HTTP}, {l.HTTPS, keep.HTTPS}} {
		if c[0] != nil && c[0] != c[1] {
			c[0].Close()
		}
	}
}

// Addrs returns the local address of each socket l holds, by part (dhcp, pxe, dhcpv6,
// pxe6, tftp, http, https): a host that bound port 0 reads its ports here.
func (l Listeners) Addrs() map[string]string {
	m := map[string]string{}
	for _, p := range []struct {
		name string
		c    net.PacketConn
	}{{"dhcp", l.DHCP}, {"pxe", l.PXE}, {"dhcpv6", l.DHCPv6}, {"pxe6", l.PXE6}, {"tftp", l.TFTP}} {
		if p.c != nil {
			m[p.name] = p.c.LocalAddr().String()
		}
	}
	if l.HTTP != nil {
		m["http"] = l.HTTP.Addr().String()
	}
	if l.HTTPS != nil {
		m["https"] = l.HTTPS.Addr().String()
	}
	return m
}
