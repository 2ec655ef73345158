package tftpd

import (
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// gsoMaxSegments is the most datagrams the kernel cuts from one UDP GSO send
// (UDP_MAX_SEGMENTS); gsoMaxBytes bounds the payload of one such send.
const (
	gsoMaxSegments = 64
	gsoMaxBytes    = 65000
)

// batcher sends a window of datagrams to one peer in as few system calls as the kernel
// allows: with UDP generic segmentation offload (UDP_SEGMENT), one sendmsg carries every
// datagram of the window when they are of one size (a DATA block is, but the last of a
// file) and fit in 64 KiB together; else one sendmmsg carries them all. A path that refuses
// GSO (a datagram over the route's MTU, a device without checksum offload) turns it off
// for the transfer.
type batcher struct {
	rc    fdWriter
	raw   bool // rc's socket does not block: its sends need not tell the scheduler (sysMaybeWait)
	peer  rawSockaddr
	gso   bool
	hdrs  []unix.Mmsghdr
	iovs  []unix.Iovec
	cmsg  []byte
	calls int // system calls made, for tests

	// The state of the call in progress, and the functions RawConn.Write runs (made once:
	// a closure made per call would be allocated per call).
	msg           unix.Msghdr
	count         int
	sent          uintptr
	errno         syscall.Errno
	gsoFn, mmsgFn func(fd uintptr) bool
}

// fdWriter runs a send on a socket's descriptor, again while it returns false (the socket
// was not ready): a syscall.RawConn's Write, or a blocking socket's.
type fdWriter interface {
	Write(f func(fd uintptr) bool) error
}

// newBatcher prepares the batched sends of a transfer's socket to peer, for windows of up
// to n datagrams. It returns nil when the socket cannot be used so (the sender then sends
// one datagram per call).
func newBatcher(conn *net.UDPConn, peer netip.AddrPort, n int) *batcher {
	rc, err := conn.SyscallConn()
	if err != nil {
		return nil
	}
	domain := -1
	rc.Control(func(fd uintptr) {
		if d, err := unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_DOMAIN); err == nil {
			domain = d
		}
	})
	return newFDBatcher(rc, domain, peer, n)
}

// newFDBatcher is newBatcher for a socket of domain (AF_INET, AF_INET6) written through rc.
func newFDBatcher(rc fdWriter, domain int, peer netip.AddrPort, n int) *batcher {
	n = max(n, 1)
	// Two vectors per datagram: a block from a mapping is its header and its bytes.
	_, blocking := rc.(blockingFD) // else a net.UDPConn's, which does not block
	b := &batcher{rc: rc, raw: !blocking, gso: true, hdrs: make([]unix.Mmsghdr, n), iovs: make([]unix.Iovec, 2*n),
		cmsg: make([]byte, unix.CmsgSpace(2))}
	var ok bool
	if b.peer, ok = makeSockaddr(domain, peer); !ok {
		return nil
	}
	h := (*unix.Cmsghdr)(unsafe.Pointer(&b.cmsg[0]))
	h.Level, h.Type = unix.SOL_UDP, unix.UDP_SEGMENT
	h.SetLen(unix.CmsgLen(2))
	b.gsoFn = func(fd uintptr) bool {
		b.calls++
		_, _, b.errno = sysMaybeWait(b.raw, unix.SYS_SENDMSG, fd, uintptr(unsafe.Pointer(&b.msg)), 0, 0, 0, 0)
		return b.errno != unix.EAGAIN
	}
	b.mmsgFn = func(fd uintptr) bool {
		b.calls++
		b.sent, _, b.errno = sysMaybeWait(b.raw, unix.SYS_SENDMMSG, fd, uintptr(unsafe.Pointer(&b.hdrs[0])), uintptr(b.count), 0, 0, 0)
		return b.errno != unix.EAGAIN
	}
	return b
}

// send sends pkts, in order; with bodies, datagram i is pkts[i] followed by bodies[i].
func (b *batcher) send(pkts, bodies [][]byte) error {
	for len(pkts) > 0 {
		if b.gso {
			k := b.gsoRun(pkts, bodies)
			if k > 1 {
				head, tail := splitBodies(bodies, k)
				err := b.sendGSO(pkts[:k], head)
				if err == nil {
					pkts, bodies = pkts[k:], tail
					continue
				}
				if !gsoRefused(err) {
					return err
				}
				b.gso = false
			}
		}
		k, err := b.sendmmsg(pkts, bodies)
		if err != nil {
			return err
		}
		_, tail := splitBodies(bodies, k)
		pkts, bodies = pkts[k:], tail
	}
	return nil
}

// splitBodies cuts bodies, which may be nil, where the datagrams are cut at k.
func splitBodies(bodies [][]byte, k int) (head, tail [][]byte) {
	if bodies == nil {
		return nil, nil
	}
	return bodies[:k], bodies[k:]
}

// datagramLen is the length of datagram i.
func datagramLen(pkts, bodies [][]byte, i int) int {
	if bodies == nil {
		return len(pkts[i])
	}
	return len(pkts[i]) + len(bodies[i])
}

// vectors points b.iovs[j:] at datagram i and returns how many it took.
func (b *batcher) vectors(j int, pkts, bodies [][]byte, i int) int {
	b.iovs[j] = unix.Iovec{Base: unsafe.SliceData(pkts[i])}
	b.iovs[j].SetLen(len(pkts[i]))
	if bodies == nil || len(bodies[i]) == 0 {
		return 1
	}
	b.iovs[j+1] = unix.Iovec{Base: unsafe.SliceData(bodies[i])}
	b.iovs[j+1].SetLen(len(bodies[i]))
	return 2
}

// gsoRun returns how many datagrams from the start of pkts one GSO send can carry: of the
// size of the first, the last of them possibly shorter.
func (b *batcher) gsoRun(pkts, bodies [][]byte) int {
	first := datagramLen(pkts, bodies, 0)
	limit := min(len(pkts), len(b.hdrs), gsoMaxSegments, gsoMaxBytes/max(first, 1))
	k := 0
	for k < limit {
		n := datagramLen(pkts, bodies, k)
		k++
		if n != first {
			if n > first {
				k--
			}
			break
		}
	}
	return k
}

func gsoRefused(err error) bool {
	return errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EIO) || errors.Is(err, unix.ENOPROTOOPT) ||
		errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EMSGSIZE)
}

func (b *batcher) sendGSO(pkts, bodies [][]byte) error {
	j := 0
	for i := range pkts {
		j += b.vectors(j, pkts, bodies, i)
	}
	binary.NativeEndian.PutUint16(b.cmsg[unix.CmsgLen(0):], uint16(datagramLen(pkts, bodies, 0)))
	b.msg = unix.Msghdr{Name: (*byte)(b.peer.ptr()), Namelen: b.peer.len, Iov: &b.iovs[0], Control: &b.cmsg[0]}
	b.msg.SetIovlen(j)
	b.msg.SetControllen(len(b.cmsg))
	if err := b.rc.Write(b.gsoFn); err != nil {
		return err
	}
	if b.errno != 0 {
		return b.errno
	}
	return nil
}

// sendmmsg sends as many of pkts as one sendmmsg takes, and reports how many.
func (b *batcher) sendmmsg(pkts, bodies [][]byte) (int, error) {
	pkts = pkts[:min(len(pkts), len(b.hdrs))]
	j := 0
	for i := range pkts {
		k := b.vectors(j, pkts, bodies, i)
		b.hdrs[i] = unix.Mmsghdr{Hdr: unix.Msghdr{Name: (*byte)(b.peer.ptr()), Namelen: b.peer.len, Iov: &b.iovs[j]}}
		b.hdrs[i].Hdr.SetIovlen(k)
		j += k
	}
	b.count = len(pkts)
	if err := b.rc.Write(b.mmsgFn); err != nil {
		return 0, err
	}
	if b.errno != 0 {
		return 0, b.errno
	}
	if b.sent == 0 {
		return 0, unix.EIO
	}
	return int(b.sent), nil
}
