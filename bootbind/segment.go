package bootbind

import (
	"net"
	"net/netip"
)

// OnLink returns a [Passes] Segment for the boot interface named iface: it reports whether
// an IPv6 address is link-local, inside one of segments (the provisioning segments behind
// relays, say), or inside an on-link IPv6 prefix of iface's addresses (of every
// interface's when iface is ""), read from the system on each call so that a prefix added
// or removed is seen at once. An interface that cannot be read has no prefixes.
func OnLink(iface string, segments []netip.Prefix) func(netip.Addr) bool {
	return func(addr netip.Addr) bool {
		if addr.IsLinkLocalUnicast() {
			return true
		}
		for _, p := range segments {
			if p.Contains(addr) {
				return true
			}
		}
		var addrs []net.Addr
		var err error
		if iface != "" {
			var ifi *net.Interface
			if ifi, err = net.InterfaceByName(iface); err == nil {
				addrs, err = ifi.Addrs()
			}
		} else {
			addrs, err = net.InterfaceAddrs()
		}
		if err != nil {
			return false
		}
		for _, x := range addrs {
			if n, ok := x.(*net.IPNet); ok && n.IP.To4() == nil && n.Contains(addr.AsSlice()) {
				return true
			}
		}
		return false
	}
}
