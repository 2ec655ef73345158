package agent

import (
	"context"
	"fmt"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// listenUDP binds a UDP socket for proxy DHCP: broadcast allowed, and tied to one interface
// when iface is set, so the agent answers only the segment it serves.
func listenUDP(addr, iface string) (net.PacketConn, error) {
	lc := net.ListenConfig{Control: func(network, address string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_BROADCAST, 1)
			if serr == nil && iface != "" {
				serr = unix.BindToDevice(int(fd), iface)
			}
		})
		if err != nil {
			return err
		}
		return serr
	}}
	c, err := lc.ListenPacket(context.Background(), "udp4", addr)
	if err != nil {
		return nil, fmt.Errorf("agent: proxy dhcp %s: %w", addr, err)
	}
	return c, nil
}
