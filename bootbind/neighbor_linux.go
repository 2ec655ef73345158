//go:build linux

package bootbind

import (
	"encoding/binary"
	"net/netip"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/bettercompute/siteboot/hwid"
)

// NeighborMAC resolves an address to the link-layer address the kernel's neighbour cache
// holds for it (ARP for IPv4, NDP for IPv6), in the process's network namespace: the
// address's host answered for it from that MAC. Only reachable, stale, delay, probe and
// permanent entries count.
func NeighborMAC(a netip.Addr) (hwid.MAC, bool) {
	a = a.WithZone("")
	fam := unix.AF_INET6
	if a.Is4() || a.Is4In6() {
		a, fam = a.Unmap(), unix.AF_INET
	}
	rib, err := syscall.NetlinkRIB(unix.RTM_GETNEIGH, fam)
	if err != nil {
		return hwid.MAC{}, false
	}
	msgs, err := syscall.ParseNetlinkMessage(rib)
	if err != nil {
		return hwid.MAC{}, false
	}
	for _, m := range msgs {
		if m.Header.Type != unix.RTM_NEWNEIGH || len(m.Data) < unix.SizeofNdMsg {
			continue
		}
		state := binary.NativeEndian.Uint16(m.Data[8:10])
		if state&(unix.NUD_REACHABLE|unix.NUD_STALE|unix.NUD_DELAY|unix.NUD_PROBE|unix.NUD_PERMANENT) == 0 {
			continue
		}
		var dst netip.Addr
		var ll []byte
		for b := m.Data[unix.SizeofNdMsg:]; len(b) >= 4; {
			l := int(binary.NativeEndian.Uint16(b[0:2]))
			typ := binary.NativeEndian.Uint16(b[2:4])
			if l < 4 || l > len(b) {
				break
			}
			v := b[4:l]
			switch typ {
			case unix.NDA_DST:
				dst, _ = netip.AddrFromSlice(v)
			case unix.NDA_LLADDR:
				ll = v
			}
			b = b[min((l+3)&^3, len(b)):]
		}
		if dst.Unmap() == a && len(ll) == 6 {
			return hwid.MAC(ll), true
		}
	}
	return hwid.MAC{}, false
}
