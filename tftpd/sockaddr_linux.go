package tftpd

import (
	"encoding/binary"
	"net"
	"net/netip"
	"unsafe"

	"golang.org/x/sys/unix"
)

// rawSockaddr is an address as the kernel reads it in sendto(2) and sendmsg(2): a
// sockaddr_in (in the first bytes) or a sockaddr_in6, and its length.
type rawSockaddr struct {
	sa  unix.RawSockaddrInet6 // large enough for either
	len uint32
}

// makeSockaddr spells to for a socket of domain (AF_INET, AF_INET6); ok is false when to
// is not of the domain (an AF_INET socket takes IPv4 only; an AF_INET6 one takes both, as
// IPv4-mapped addresses) or names a zone no interface has.
func makeSockaddr(domain int, to netip.AddrPort) (r rawSockaddr, ok bool) {
	a := to.Addr()
	port := (*[2]byte)(unsafe.Pointer(&r.sa.Port))[:] // at the same offset in both forms
	switch {
	case domain == unix.AF_INET && a.Unmap().Is4():
		sa := (*unix.RawSockaddrInet4)(unsafe.Pointer(&r.sa))
		*sa = unix.RawSockaddrInet4{Family: unix.AF_INET, Addr: a.Unmap().As4()}
		r.len = unix.SizeofSockaddrInet4
	case domain == unix.AF_INET6:
		r.sa = unix.RawSockaddrInet6{Family: unix.AF_INET6, Addr: a.As16()}
		if z := a.Zone(); z != "" {
			ifi, err := net.InterfaceByName(z)
			if err != nil {
				return rawSockaddr{}, false
			}
			r.sa.Scope_id = uint32(ifi.Index)
		}
		r.len = unix.SizeofSockaddrInet6
	default:
		return rawSockaddr{}, false
	}
	binary.BigEndian.PutUint16(port, to.Port())
	return r, true
}

// ptr is the sockaddr's address, for a system call.
func (r *rawSockaddr) ptr() unsafe.Pointer { return unsafe.Pointer(&r.sa) }
