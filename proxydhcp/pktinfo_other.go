//go:build !linux

package proxydhcp

import (
	"net"
	"net/netip"

	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
)

func setSockopts(conn *net.UDPConn) {
	rc, err := conn.SyscallConn()
	if err != nil {
		return
	}
	rc.Control(func(fd uintptr) {
		setBroadcast(fd)
	})
}

func parsePktInfo(oob []byte) pktInfo {
	var cm ipv4.ControlMessage
	if cm.Parse(oob) != nil {
		return pktInfo{}
	}
	info := pktInfo{ifIndex: cm.IfIndex}
	if a, ok := netip.AddrFromSlice(cm.Dst); ok {
		info.dst = a.Unmap()
	}
	return info
}

func (sc *serveConn) writeFrom(b []byte, dst netip.AddrPort, ifIdx int, src netip.Addr) error {
	cm := &ipv4.ControlMessage{IfIndex: ifIdx}
	if src.IsValid() {
		a := src.As4()
		cm.Src = net.IP(a[:])
	}
	_, err := sc.pc.WriteTo(b, cm, net.UDPAddrFromAddrPort(dst))
	return err
}

// isInet6 reports whether conn is bound to an IPv6 address (elsewhere than Linux a wildcard
// socket's family is read from its address).
func isInet6(conn *net.UDPConn) bool {
	ua, ok := conn.LocalAddr().(*net.UDPAddr)
	return ok && ua.IP.To4() == nil
}

func setSockopts6(conn *net.UDPConn) {}

func parsePktInfo6(oob []byte) pktInfo {
	var cm ipv6.ControlMessage
	if cm.Parse(oob) != nil {
		return pktInfo{}
	}
	info := pktInfo{ifIndex: cm.IfIndex}
	if a, ok := netip.AddrFromSlice(cm.Dst); ok {
		info.dst = a
	}
	return info
}

func (sc *serveConn) writeFrom6(b []byte, dst netip.AddrPort, ifIdx int, src netip.Addr) error {
	cm := &ipv6.ControlMessage{IfIndex: ifIdx}
	if src.Is6() {
		cm.Src = src.WithZone("").AsSlice()
	}
	_, err := sc.pc6.WriteTo(b, cm, net.UDPAddrFromAddrPort(netip.AddrPortFrom(dst.Addr().WithZone(""), dst.Port())))
	return err
}
