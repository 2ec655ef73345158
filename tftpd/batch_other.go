//go:build !linux

package tftpd

import (
	"net"
	"net/netip"
)

// batcher sends a window with one system call per datagram where the kernel has no batched
// send the package uses.
type batcher struct {
	conn *net.UDPConn
	peer netip.AddrPort
}

func newBatcher(conn *net.UDPConn, peer netip.AddrPort, n int) *batcher {
	return &batcher{conn: conn, peer: peer}
}

func (b *batcher) send(pkts, bodies [][]byte) error {
	if bodies != nil {
		return errNoGather // no file is mapped here
	}
	for _, p := range pkts {
		if _, err := b.conn.WriteToUDPAddrPort(p, b.peer); err != nil {
			return err
		}
	}
	return nil
}
