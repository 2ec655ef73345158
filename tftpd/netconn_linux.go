package tftpd

import (
	"net/netip"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// pollWait is how a netConn sends a window and waits for its answer with one read: the
// send runs inside RawConn.Read, after the poller has forgotten the socket's earlier
// readiness, so the goroutine parks at once and the first recvfrom(2) finds the answer.
// net's ReadFrom tries the read before it parks, and after a send that read is all but
// always too early: one system call per window that finds nothing.
//
// The send must come after RawConn.Read has cleared the readiness (before its first call
// of the function): whatever arrives after the send then marks the socket ready again. A
// send before RawConn.Read, with a function that parks at once, loses an answer that came
// in between: the readiness it set is cleared.
type pollWait struct {
	rc    syscall.RawConn // nil: send, then recv
	scope uint32          // the peer's link, for a link-local source (sockaddrPort)
	fn    func(fd uintptr) bool

	// The call under way, for fn.
	send    func() error
	b       []byte
	sent    bool
	sendErr error
	n       int
	errno   syscall.Errno
	from    unix.RawSockaddrAny
	flen    uint32

	empty int // reads that found nothing, for tests
}

func (w *pollWait) init(x *netConn) {
	rc, err := x.c.SyscallConn()
	if err != nil {
		return
	}
	sa, ok := makeSockaddr(unix.AF_INET6, x.peer) // takes either family; resolves the zone
	if !ok {
		return
	}
	w.rc, w.scope = rc, sa.sa.Scope_id
	w.fn = w.call
}

// call is the function RawConn.Read runs: the send on its first call, a read after.
func (w *pollWait) call(fd uintptr) bool {
	if !w.sent {
		w.sent = true
		w.sendErr = w.send()
		return w.sendErr != nil // nothing sent yet can have been answered: wait
	}
	for {
		n, e := recvFrom(int(fd), w.b, 0, &w.from, &w.flen, true)
		switch e {
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			w.empty++
			return false
		}
		w.n, w.errno = n, e
		return true
	}
}

func (x *netConn) sendRecv(send func() error, b []byte, deadline time.Time) (int, netip.AddrPort, error) {
	w := &x.wait
	if w.rc == nil {
		return sendThenRecv(x, send, b, deadline)
	}
	if err := x.setDeadline(deadline); err != nil {
		return 0, netip.AddrPort{}, err
	}
	w.send, w.b, w.sent, w.sendErr, w.errno = send, b, false, nil, 0
	err := w.rc.Read(w.fn)
	w.send, w.b = nil, nil
	switch {
	case w.sendErr != nil:
		return 0, netip.AddrPort{}, w.sendErr
	case !w.sent && err != nil && timedOut(err):
		// The socket's deadline, set up to deadlineSlack early, has passed: set the one
		// asked, and send.
		x.deadline = time.Time{}
		return sendThenRecv(x, send, b, deadline)
	case err != nil && timedOut(err):
		if !x.deadline.Before(deadline) {
			return 0, netip.AddrPort{}, errWait
		}
		x.deadline = time.Time{} // ended early: wait out the rest
		return x.recv(b, deadline)
	case err != nil:
		return 0, netip.AddrPort{}, err
	case w.errno != 0:
		return 0, netip.AddrPort{}, os.NewSyscallError("recvfrom", w.errno)
	}
	return w.n, sockaddrPort(&w.from, x.peer, w.scope), nil
}
