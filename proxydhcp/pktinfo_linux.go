package proxydhcp

import (
	"encoding/binary"
	"net"
	"net/netip"

	"golang.org/x/sys/unix"
)

// setSockopts allows replies to 255.255.255.255 (SO_BROADCAST) and asks the kernel to report
// how many datagrams it dropped for a full buffer with each one read (SO_RXQ_OVFL).
func setSockopts(conn *net.UDPConn) {
	rc, err := conn.SyscallConn()
	if err != nil {
		return
	}
	rc.Control(func(fd uintptr) {
		unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_BROADCAST, 1)
		unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RXQ_OVFL, 1)
	})
}

// cmsgs walks the control messages in oob without allocating.
func cmsgs(oob []byte, f func(level, typ int32, data []byte)) {
	for len(oob) >= unix.SizeofCmsghdr {
		var l int
		if unix.SizeofCmsghdr == 16 {
			l = int(binary.NativeEndian.Uint64(oob[0:8]))
		} else {
			l = int(binary.NativeEndian.Uint32(oob[0:4]))
		}
		if l < unix.CmsgLen(0) || l > len(oob) {
			return
		}
		off := unix.SizeofCmsghdr - 8
		level := int32(binary.NativeEndian.Uint32(oob[off : off+4]))
		typ := int32(binary.NativeEndian.Uint32(oob[off+4 : off+8]))
		f(level, typ, oob[unix.CmsgLen(0):l])
		next := unix.CmsgSpace(l - unix.CmsgLen(0))
		if next >= len(oob) {
			return
		}
		oob = oob[next:]
	}
}

// parsePktInfo reads IP_PKTINFO: ipi_ifindex, ipi_spec_dst (the local address routing would
// answer from: for a broadcast, the receiving interface's address) and ipi_addr; and the
// SO_RXQ_OVFL drop count. Unlike an interface lookup by index, ipi_spec_dst needs no netlink
// call and holds in any network namespace.
func parsePktInfo(oob []byte) pktInfo {
	var info pktInfo
	cmsgs(oob, func(level, typ int32, d []byte) {
		switch {
		case level == unix.IPPROTO_IP && typ == unix.IP_PKTINFO && len(d) >= unix.SizeofInet4Pktinfo:
			info.ifIndex = int(int32(binary.NativeEndian.Uint32(d[0:4])))
			info.specDst = netip.AddrFrom4([4]byte(d[4:8]))
			info.dst = netip.AddrFrom4([4]byte(d[8:12]))
		case level == unix.SOL_SOCKET && typ == unix.SO_RXQ_OVFL && len(d) >= 4:
			info.drops, info.hasDrops = binary.NativeEndian.Uint32(d[0:4]), true
		}
	})
	return info
}

// appendPktInfo appends an IP_PKTINFO control message that sends out of interface ifIdx,
// from src when valid.
func appendPktInfo(oob []byte, ifIdx int, src netip.Addr) []byte {
	start := len(oob)
	oob = append(oob, make([]byte, unix.CmsgSpace(unix.SizeofInet4Pktinfo))...)
	h := oob[start:]
	l := unix.CmsgLen(unix.SizeofInet4Pktinfo)
	if unix.SizeofCmsghdr == 16 {
		binary.NativeEndian.PutUint64(h[0:8], uint64(l))
	} else {
		binary.NativeEndian.PutUint32(h[0:4], uint32(l))
	}
	off := unix.SizeofCmsghdr - 8
	binary.NativeEndian.PutUint32(h[off:off+4], uint32(unix.IPPROTO_IP))
	binary.NativeEndian.PutUint32(h[off+4:off+8], uint32(unix.IP_PKTINFO))
	d := h[unix.CmsgLen(0):]
	binary.NativeEndian.PutUint32(d[0:4], uint32(ifIdx))
	if src.IsValid() {
		a := src.As4()
		copy(d[4:8], a[:])
	}
	return oob
}

// writeFrom sends b to dst out of interface ifIdx (from src when valid).
func (sc *serveConn) writeFrom(b []byte, dst netip.AddrPort, ifIdx int, src netip.Addr) error {
	var buf [64]byte
	oob := appendPktInfo(buf[:0], ifIdx, src)
	_, _, err := sc.uc.WriteMsgUDPAddrPort(b, oob, dst)
	return err
}

// isInet6 reports whether conn is an IPv6 socket (it has an IPV6_V6ONLY option).
func isInet6(conn *net.UDPConn) bool {
	rc, err := conn.SyscallConn()
	if err != nil {
		return false
	}
	v6 := false
	rc.Control(func(fd uintptr) {
		_, err := unix.GetsockoptInt(int(fd), unix.IPPROTO_IPV6, unix.IPV6_V6ONLY)
		v6 = err == nil
	})
	return v6
}

// setSockopts6 asks the kernel for the drop count with each datagram (SO_RXQ_OVFL).
func setSockopts6(conn *net.UDPConn) {
	rc, err := conn.SyscallConn()
	if err != nil {
		return
	}
	rc.Control(func(fd uintptr) {
		unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RXQ_OVFL, 1)
	})
}

// parsePktInfo6 reads IPV6_PKTINFO (ipi6_addr, the address the datagram was sent to, and
// ipi6_ifindex) and the SO_RXQ_OVFL drop count.
func parsePktInfo6(oob []byte) pktInfo {
	var info pktInfo
	cmsgs(oob, func(level, typ int32, d []byte) {
		switch {
		case level == unix.IPPROTO_IPV6 && typ == unix.IPV6_PKTINFO && len(d) >= unix.SizeofInet6Pktinfo:
			info.dst = netip.AddrFrom16([16]byte(d[0:16]))
			info.ifIndex = int(int32(binary.NativeEndian.Uint32(d[16:20])))
		case level == unix.SOL_SOCKET && typ == unix.SO_RXQ_OVFL && len(d) >= 4:
			info.drops, info.hasDrops = binary.NativeEndian.Uint32(d[0:4]), true
		}
	})
	return info
}

// writeFrom6 sends b to dst out of interface ifIdx, from src when valid (IPV6_PKTINFO).
func (sc *serveConn) writeFrom6(b []byte, dst netip.AddrPort, ifIdx int, src netip.Addr) error {
	var buf [64]byte
	oob := buf[:unix.CmsgSpace(unix.SizeofInet6Pktinfo)]
	clear(oob)
	l := unix.CmsgLen(unix.SizeofInet6Pktinfo)
	if unix.SizeofCmsghdr == 16 {
		binary.NativeEndian.PutUint64(oob[0:8], uint64(l))
	} else {
		binary.NativeEndian.PutUint32(oob[0:4], uint32(l))
	}
	off := unix.SizeofCmsghdr - 8
	binary.NativeEndian.PutUint32(oob[off:off+4], uint32(unix.IPPROTO_IPV6))
	binary.NativeEndian.PutUint32(oob[off+4:off+8], uint32(unix.IPV6_PKTINFO))
	d := oob[unix.CmsgLen(0):]
	if src.Is6() {
		a := src.WithZone("").As16()
		copy(d[0:16], a[:])
	}
	binary.NativeEndian.PutUint32(d[16:20], uint32(ifIdx))
	_, _, err := sc.uc.WriteMsgUDPAddrPort(b, oob, netip.AddrPortFrom(dst.Addr().WithZone(""), dst.Port()))
	return err
}
