package tftpd

import (
	"errors"
	"net"
	"net/netip"
	"time"
)

// tconn is a transfer's socket: the transfer identifier of RFC 1350 and its client.
type tconn interface {
	// recv reads one datagram into b, waiting until deadline; errWait when none came.
	recv(b []byte, deadline time.Time) (int, netip.AddrPort, error)
	// sendRecv runs send, then waits for a datagram to arrive and reads the first one queued
	// into b, as recv does. One already waiting before send does not end the wait by itself.
	sendRecv(send func() error, b []byte, deadline time.Time) (int, netip.AddrPort, error)
	// sendTo sends one datagram.
	sendTo(b []byte, to netip.AddrPort) error
	// sendWindow sends datagrams to the client, in order, in as few system calls as it can;
	// with bodies (as long as pkts), each datagram is pkts[i] followed by bodies[i].
	sendWindow(pkts, bodies [][]byte) error
	// evict, from any goroutine, makes a recv under way (and every later one) return at
	// once with an error; the transfer then ends without sending anything more.
	evict()
	// close releases the socket; only the transfer's goroutine calls it, once.
	close()
}

// errWait: no datagram came before the deadline.
var errWait = errors.New("no datagram before the deadline")

// netConn is a transfer socket of the net package: Go's network poller waits for it.
type netConn struct {
	c        *net.UDPConn
	peer     netip.AddrPort
	batch    *batcher // nil: one system call per datagram
	deadline time.Time
	wait     pollWait // sendRecv's state (netconn_linux.go)
}

func newNetConn(c *net.UDPConn, peer netip.AddrPort, window int) *netConn {
	x := &netConn{c: c, peer: peer}
	if window > 1 {
		x.batch = newBatcher(c, peer, window)
	}
	x.wait.init(x)
	return x
}

// deadlineSlack is how much earlier than asked a netConn's read deadline may be set.
const deadlineSlack = 50 * time.Millisecond

func (x *netConn) recv(b []byte, deadline time.Time) (int, netip.AddrPort, error) {
	for {
		if err := x.setDeadline(deadline); err != nil {
			return 0, netip.AddrPort{}, err
		}
		n, from, err := x.c.ReadFromUDPAddrPort(b)
		if err != nil && timedOut(err) {
			if !x.deadline.Before(deadline) {
				return 0, from, errWait
			}
			x.deadline = time.Time{} // ended early: set the one asked
			continue
		}
		return n, from, err
	}
}

// setDeadline moves the socket's read deadline only when it would end after the one asked
// or more than deadlineSlack before it; one that ends early is moved then. A transfer's
// waits are each Timeout from its last send, so the poller's timer is reset about once per
// deadlineSlack rather than once per window.
func (x *netConn) setDeadline(deadline time.Time) error {
	if x.deadline.After(deadline) || deadline.Sub(x.deadline) > deadlineSlack {
		if err := x.c.SetReadDeadline(deadline); err != nil {
			return err
		}
		x.deadline = deadline
	}
	return nil
}

// timedOut says that a read ended at the socket's deadline.
func timedOut(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// sendThenRecv is sendRecv for a socket whose read may simply follow the send: one that
// waits in the kernel (an own-thread transfer's), or where net's read is the only one.
func sendThenRecv(c tconn, send func() error, b []byte, deadline time.Time) (int, netip.AddrPort, error) {
	if err := send(); err != nil {
		return 0, netip.AddrPort{}, err
	}
	return c.recv(b, deadline)
}

func (x *netConn) sendTo(b []byte, to netip.AddrPort) error {
	_, err := x.c.WriteToUDPAddrPort(b, to)
	return err
}

func (x *netConn) sendWindow(pkts, bodies [][]byte) error {
	if x.batch == nil && bodies != nil {
		// A window of one block from a mapping: its header and bytes go in one call.
		x.batch = newBatcher(x.c, x.peer, len(pkts))
	}
	if x.batch != nil {
		return x.batch.send(pkts, bodies)
	}
	return sendEach(x, x.peer, pkts, bodies)
}

// sendEach sends a window one datagram per system call, where a socket has no batcher.
// Blocks with bodies lie in a mapping the process must not read (fileMaps): the transfer
// fails; no file is mapped where sockets have no batcher.
func sendEach(c tconn, peer netip.AddrPort, pkts, bodies [][]byte) error {
	if bodies != nil {
		return errNoGather
	}
	for _, p := range pkts {
		if err := c.sendTo(p, peer); err != nil {
			return err
		}
	}
	return nil
}

// errNoGather: a socket without a batcher was asked to send blocks from a mapping.
var errNoGather = errors.New("no gathered send for blocks of a mapped file")

func (x *netConn) evict() { x.c.Close() }
func (x *netConn) close() { x.c.Close() }
