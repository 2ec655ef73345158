//go:build unix && !linux

package proxydhcp

import "syscall"

func setBroadcast(fd uintptr) {
	syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_BROADCAST, 1)
}
