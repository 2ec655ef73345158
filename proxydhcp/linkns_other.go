//go:build !linux

package proxydhcp

import (
	"net"
	"net/netip"
)

func socketNetns(uc *net.UDPConn) int         { return -1 }
func prefixesIn(ns, ifIdx int) []netip.Prefix { return interfacePrefixes(ifIdx) }
func closeNetns(ns int)                       {}
