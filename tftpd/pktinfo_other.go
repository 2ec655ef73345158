//go:build !linux

package tftpd

import (
	"net"
	"net/netip"
)

// enablePktinfo is not implemented here: transfer sockets of a wildcard listener are bound
// to the wildcard address.
func enablePktinfo(*net.UDPConn) bool { return false }

func pktinfoDst([]byte) netip.Addr { return netip.Addr{} }
