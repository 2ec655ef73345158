package proxydhcp

import (
	"encoding/binary"
	"net/netip"

	"golang.org/x/sys/unix"
)

// parsePktInfo reads IP_PKTINFO: ipi_ifindex, ipi_spec_dst (the local address routing would
// answer from: for a broadcast, the receiving interface's address) and ipi_addr. Unlike an
// interface lookup by index, it needs no netlink call and holds in any network namespace.
func parsePktInfo(oob []byte) pktInfo {
	var info pktInfo
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return info
	}
	for _, m := range msgs {
		d := m.Data
		if m.Header.Level == unix.IPPROTO_IP && m.Header.Type == unix.IP_PKTINFO && len(d) >= unix.SizeofInet4Pktinfo {
			info.ifIndex = int(int32(binary.NativeEndian.Uint32(d[0:4])))
			info.specDst = netip.AddrFrom4([4]byte(d[4:8]))
			info.dst = netip.AddrFrom4([4]byte(d[8:12]))
		}
	}
	return info
}
