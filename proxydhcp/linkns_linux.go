//go:build linux

package proxydhcp

import (
	"net"
	"net/netip"
	"runtime"

	"golang.org/x/sys/unix"
)

// socketNetns returns a descriptor of the network namespace of uc's socket (SIOCGSKNS), or -1
// when it cannot be read: interfaces are then looked up in the process's own.
func socketNetns(uc *net.UDPConn) int {
	if uc == nil {
		return -1
	}
	rc, err := uc.SyscallConn()
	if err != nil {
		return -1
	}
	ns := -1
	rc.Control(func(fd uintptr) {
		ns, err = unix.IoctlRetInt(int(fd), unix.SIOCGSKNS)
		if err != nil {
			ns = -1
		}
	})
	if ns < 0 {
		return -1
	}
	unix.CloseOnExec(ns)
	return ns
}

// prefixesIn reads interface ifIdx's subnets inside the namespace ns (from socketNetns): on
// a thread of its own that enters ns and is never given back to the scheduler.
func prefixesIn(ns, ifIdx int) []netip.Prefix {
	if ns < 0 {
		return interfacePrefixes(ifIdx)
	}
	out := make(chan []netip.Prefix, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread leaves with this goroutine
		if unix.Setns(ns, unix.CLONE_NEWNET) != nil {
			out <- nil
			return
		}
		out <- interfacePrefixes(ifIdx)
	}()
	return <-out
}

func closeNetns(ns int) {
	if ns >= 0 {
		unix.Close(ns)
	}
}
