//go:build !unix

package proxydhcp

import "net"

func setBroadcast(*net.UDPConn) {}
