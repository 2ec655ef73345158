//go:build !linux

package tftpd

import (
	"net/netip"
	"time"
)

// pollWait: elsewhere a netConn sends, then reads as net does.
type pollWait struct{}

func (w *pollWait) init(x *netConn) {}

func (x *netConn) sendRecv(send func() error, b []byte, deadline time.Time) (int, netip.AddrPort, error) {
	return sendThenRecv(x, send, b, deadline)
}
