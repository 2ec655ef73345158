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

// parsePktInfo reads IP_PKTINFO: ipi_ifindex, ipi_spec_dst (the local address routing would
// answer from: for a broadcast, the receiving interface's address) and ipi_addr; and the
// SO_RXQ_OVFL drop count. Unlike an interface lookup by index, ipi_spec_dst needs no netlink
// call and holds in any network namespace.
func parsePktInfo(oob []byte) pktInfo {
	var info pktInfo
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return info
	}
	for _, m := range msgs {
		d := m.Data
		switch {
		case m.Header.Level == unix.IPPROTO_IP && m.Header.Type == unix.IP_PKTINFO && len(d) >= unix.SizeofInet4Pktinfo:
			info.ifIndex = int(int32(binary.NativeEndian.Uint32(d[0:4])))
			info.specDst = netip.AddrFrom4([4]byte(d[4:8]))
			info.dst = netip.AddrFrom4([4]byte(d[8:12]))
		case m.Header.Level == unix.SOL_SOCKET && m.Header.Type == unix.SO_RXQ_OVFL && len(d) >= 4:
			info.drops, info.hasDrops = binary.NativeEndian.Uint32(d[0:4]), true
		}
	}
	return info
}
