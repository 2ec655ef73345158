package tftpd

import (
	"encoding/binary"
	"net"
	"net/netip"

	"golang.org/x/sys/unix"
)

// enablePktinfo asks the kernel for the destination address of every datagram read on a
// socket bound to the wildcard address (IP_PKTINFO, IPV6_RECVPKTINFO; a dual-stack socket
// takes both). It reports whether either was set.
func enablePktinfo(c *net.UDPConn) bool {
	rc, err := c.SyscallConn()
	if err != nil {
		return false
	}
	ok := false
	rc.Control(func(fd uintptr) {
		if unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_PKTINFO, 1) == nil {
			ok = true
		}
		if unix.SetsockoptInt(int(fd), unix.IPPROTO_IPV6, unix.IPV6_RECVPKTINFO, 1) == nil {
			ok = true
		}
	})
	return ok
}

// pktinfoDst reads the destination address of a datagram from its control messages, or
// returns the zero Addr. An IPv6 link-local address carries its interface as zone.
func pktinfoDst(oob []byte) netip.Addr {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return netip.Addr{}
	}
	for _, m := range msgs {
		switch {
		case m.Header.Level == unix.IPPROTO_IP && m.Header.Type == unix.IP_PKTINFO && len(m.Data) >= unix.SizeofInet4Pktinfo:
			// struct in_pktinfo: ifindex (4), spec_dst (4), addr (4). spec_dst is the local
			// address to answer from: the header's destination for a unicast datagram, the
			// interface's address for a broadcast one.
			return netip.AddrFrom4([4]byte(m.Data[4:8]))
		case m.Header.Level == unix.IPPROTO_IPV6 && m.Header.Type == unix.IPV6_PKTINFO && len(m.Data) >= unix.SizeofInet6Pktinfo:
			// struct in6_pktinfo: addr (16), ifindex (4).
			a := netip.AddrFrom16([16]byte(m.Data[:16])).Unmap()
			if a.IsMulticast() {
				return netip.Addr{}
			}
			if a.Is6() && a.IsLinkLocalUnicast() {
				ifindex := int(binary.NativeEndian.Uint32(m.Data[16:20]))
				if ifi, err := net.InterfaceByIndex(ifindex); err == nil {
					a = a.WithZone(ifi.Name)
				}
			}
			return a
		}
	}
	return netip.Addr{}
}
