//go:build unix

package proxydhcp

import (
	"net"
	"syscall"
)

// setBroadcast allows replies to 255.255.255.255 on conn (SO_BROADCAST).
func setBroadcast(conn *net.UDPConn) {
	rc, err := conn.SyscallConn()
	if err != nil {
		return
	}
	rc.Control(func(fd uintptr) {
		syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_BROADCAST, 1)
	})
}
