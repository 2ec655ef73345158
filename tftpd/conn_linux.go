package tftpd

import (
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// rawConn is a transfer socket outside Go's network poller: a blocking socket whose
// transfer waits for its client in recvfrom(2) on its own thread, as a C server waits in
// select(2). A socket in the poller wakes the poller's thread on every change of its state
// (each acknowledgement, and each datagram the client's kernel frees makes it writable), on
// top of the transfer's own wake-up: for a stream of large blocks, one more thread woken
// per block. A thread per transfer costs more than the poller once transfers outnumber the
// Ps, so only a transfer that starts among few gets one (see listenTransfer).
type rawConn struct {
	mu      sync.Mutex // guards fd against evict racing close
	fd      int
	peer    netip.AddrPort
	sa      rawSockaddr // the peer's
	domain  int
	batch   *batcher
	evicted atomic.Bool

	yielded  time.Time
	rcvtimeo time.Duration // the socket's SO_RCVTIMEO; 0: none set
	from     unix.RawSockaddrAny
	flen     uint32
}

// rcvSlack is how much later than asked a rawConn's wait may end.
const rcvSlack = time.Millisecond

// yieldEvery is how often a transfer on a rawConn yields its P to the scheduler.
const yieldEvery = 5 * time.Millisecond

// errEvictedConn: the transfer's socket was evicted under a recv.
var errEvictedConn = errors.New("transfer socket evicted")

// listenRaw opens a rawConn on port 0 of local for peer when both are of one family and
// local is known; ok is false when it does not apply (the caller opens a socket of the net
// package then).
func listenRaw(local netip.Addr, peer netip.AddrPort, window int) (tconn, bool, error) {
	if !local.IsValid() {
		return nil, false, nil
	}
	local = local.Unmap()
	p := peer.Addr().Unmap()
	x := &rawConn{peer: peer}
	var bind unix.Sockaddr
	switch {
	case local.Is4() && p.Is4():
		x.domain = unix.AF_INET
		bind = &unix.SockaddrInet4{Addr: local.As4()}
	case local.Is6() && p.Is6():
		x.domain = unix.AF_INET6
		b6 := &unix.SockaddrInet6{Addr: local.As16()}
		if z := local.Zone(); z != "" {
			ifi, err := net.InterfaceByName(z)
			if err != nil {
				return nil, false, nil
			}
			b6.ZoneId = uint32(ifi.Index)
		}
		bind = b6
	default:
		return nil, false, nil
	}
	var ok bool
	if x.sa, ok = makeSockaddr(x.domain, peer); !ok {
		return nil, false, nil
	}
	fd, err := unix.Socket(x.domain, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, true, os.NewSyscallError("socket", err)
	}
	if x.domain == unix.AF_INET6 {
		unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, 1)
	}
	if err := unix.Bind(fd, bind); err != nil {
		unix.Close(fd)
		return nil, true, os.NewSyscallError("bind", err)
	}
	x.fd = fd
	if window > 1 {
		x.batch = newFDBatcher(blockingFD(fd), x.domain, peer, window)
	}
	return x, true, nil
}

// blockingFD writes on a blocking socket: a send waits in the kernel for buffer space.
type blockingFD int

func (f blockingFD) Write(fn func(fd uintptr) bool) error {
	for !fn(uintptr(f)) {
	}
	return nil
}

func (x *rawConn) recv(b []byte, deadline time.Time) (int, netip.AddrPort, error) {
	now := time.Now()
	// A goroutine that never parks is preempted by the runtime after 10 ms, its P taken
	// from it in the middle of a system call; yielding first is cheaper.
	if now.Sub(x.yielded) > yieldEvery {
		x.yielded = now
		runtime.Gosched()
	}
	for {
		if x.evicted.Load() {
			return 0, netip.AddrPort{}, errEvictedConn
		}
		// The wait is the socket's receive time-out, set only when the one it has would
		// end more than rcvSlack after deadline or at all before it: a transfer's waits
		// are all Timeout long, so once per transfer.
		flags := uintptr(0)
		d := deadline.Sub(now)
		switch {
		case d <= 0:
			flags = unix.MSG_DONTWAIT
		case d < x.rcvtimeo-rcvSlack || d > x.rcvtimeo:
			tv := unix.NsecToTimeval(int64(d + time.Microsecond - 1))
			if err := unix.SetsockoptTimeval(x.fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
				return 0, netip.AddrPort{}, os.NewSyscallError("setsockopt", err)
			}
			x.rcvtimeo = time.Duration(tv.Nano())
		}
		n, e := recvFrom(x.fd, b, flags, &x.from, &x.flen, false)
		switch e {
		case 0:
			if n == 0 && x.evicted.Load() {
				return 0, netip.AddrPort{}, errEvictedConn
			}
			return n, sockaddrPort(&x.from, x.peer, x.sa.sa.Scope_id), nil
		case unix.EAGAIN, unix.EINTR:
			if d <= 0 {
				return 0, netip.AddrPort{}, errWait
			}
		default:
			return 0, netip.AddrPort{}, os.NewSyscallError("recvfrom", e)
		}
		now = time.Now()
	}
}

// recvFrom is recvfrom(2) into b, the source's address into from (flen its length), without
// the allocation of unix.Recvfrom's Sockaddr. noWait says that fd does not block (see
// sysMaybeWait).
func recvFrom(fd int, b []byte, flags uintptr, from *unix.RawSockaddrAny, flen *uint32, noWait bool) (int, syscall.Errno) {
	*flen = unix.SizeofSockaddrAny
	n, _, e := sysMaybeWait(noWait, unix.SYS_RECVFROM, uintptr(fd), uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b)),
		flags, uintptr(unsafe.Pointer(from)), uintptr(unsafe.Pointer(flen)))
	return int(n), e
}

// sysMaybeWait makes a system call on a socket; noWait says that the socket does not block
// (O_NONBLOCK: a transfer's socket in Go's network poller), so the call returns without
// waiting for the network and goes straight to the kernel. A call that may wait (an
// own-thread transfer's blocking socket) tells the scheduler, as unix.Syscall does, so that
// its P runs other goroutines meanwhile. Telling it is not free: the first such call after
// the process was idle wakes Go's sysmon thread, which then polls every 20 µs for a while,
// and on a lightly loaded server that is nearly every window. Made raw, a poller transfer's
// send and read no longer wake it: over a 30 s spread of 1,000 machines, sysmon's wake-ups
// by a system call fell from 26,004 to 7,376 and its sleeps from 127,280 to 87,275
// (bench/results/HISTORY.md). A send from a mapping may still fault the file's pages in from disk
// while it holds its P, as any read of mapped memory may.
func sysMaybeWait(noWait bool, trap, a1, a2, a3, a4, a5, a6 uintptr) (uintptr, uintptr, syscall.Errno) {
	if noWait {
		return unix.RawSyscall6(trap, a1, a2, a3, a4, a5, a6)
	}
	return unix.Syscall6(trap, a1, a2, a3, a4, a5, a6)
}

// sockaddrPort reads an AF_INET or AF_INET6 sockaddr. The kernel names a link-local
// source's link by its interface index, the transfer's peer carries its zone's name: a
// source on the peer's link (scope, that link's index) gets the name, so that the
// transfer knows its client.
func sockaddrPort(sa *unix.RawSockaddrAny, peer netip.AddrPort, scope uint32) netip.AddrPort {
	switch sa.Addr.Family {
	case unix.AF_INET:
		s := (*unix.RawSockaddrInet4)(unsafe.Pointer(sa))
		return netip.AddrPortFrom(netip.AddrFrom4(s.Addr), binary.BigEndian.Uint16((*[2]byte)(unsafe.Pointer(&s.Port))[:]))
	case unix.AF_INET6:
		s := (*unix.RawSockaddrInet6)(unsafe.Pointer(sa))
		a := netip.AddrFrom16(s.Addr).Unmap()
		if s.Scope_id != 0 && s.Scope_id == scope {
			a = a.WithZone(peer.Addr().Zone())
		}
		return netip.AddrPortFrom(a, binary.BigEndian.Uint16((*[2]byte)(unsafe.Pointer(&s.Port))[:]))
	}
	return netip.AddrPort{}
}

func (x *rawConn) sendTo(b []byte, to netip.AddrPort) error {
	if x.evicted.Load() {
		return errEvictedConn
	}
	sa := &x.sa
	if to != x.peer {
		// Another port of the client (error 5): the address a datagram came from, which
		// names no zone; a link-local one is the peer's link.
		other, ok := makeSockaddr(x.domain, to)
		if !ok {
			return unix.EAFNOSUPPORT
		}
		if x.domain == unix.AF_INET6 && to.Addr().Zone() == "" {
			other.sa.Scope_id = x.sa.sa.Scope_id
		}
		sa = &other
	}
	for {
		_, _, e := unix.Syscall6(unix.SYS_SENDTO, uintptr(x.fd), uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b)), 0, uintptr(sa.ptr()), uintptr(sa.len))
		if e == unix.EINTR {
			continue
		}
		if e != 0 {
			return os.NewSyscallError("sendto", e)
		}
		return nil
	}
}

func (x *rawConn) sendWindow(pkts, bodies [][]byte) error {
	if x.evicted.Load() {
		return errEvictedConn
	}
	if x.batch == nil && bodies != nil {
		// A window of one block from a mapping: its header and bytes go in one call.
		x.batch = newFDBatcher(blockingFD(x.fd), x.domain, x.peer, len(pkts))
	}
	if x.batch != nil {
		return x.batch.send(pkts, bodies)
	}
	return sendEach(x, x.peer, pkts, bodies)
}

// evict marks the socket and shuts its receiving side down, which wakes a ppoll under way.
func (x *rawConn) evict() {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.fd < 0 || x.evicted.Swap(true) {
		return
	}
	unix.Shutdown(x.fd, unix.SHUT_RD)
}

func (x *rawConn) close() {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.fd >= 0 {
		unix.Close(x.fd)
		x.fd = -1
	}
}

// sendRecv sends and reads: the read waits in the kernel, so nothing is lost between.
func (x *rawConn) sendRecv(send func() error, b []byte, deadline time.Time) (int, netip.AddrPort, error) {
	return sendThenRecv(x, send, b, deadline)
}
