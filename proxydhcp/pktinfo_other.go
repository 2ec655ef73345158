//go:build !linux

package proxydhcp

import (
	"net"
	"net/netip"

	"golang.org/x/net/ipv4"
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
