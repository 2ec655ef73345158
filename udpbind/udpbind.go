package udpbind

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"
)

// ErrNetwork is wrapped when ListenPacket is given a network that is not UDP.
var ErrNetwork = errors.New("udpbind: network is not udp, udp4 or udp6")

// ListenPacket announces on the local address addr of network ("udp", "udp4" or "udp6"),
// like [net.ListenConfig.ListenPacket], with broadcast allowed and, when iface is not "",
// bound to the interface of that name (SO_BINDTODEVICE): the socket then receives only
// what arrives on that interface and sends only through it. On systems other than Linux a
// named interface is refused with an error wrapping [errors.ErrUnsupported] (see the
// package documentation). Errors name the package, the address and the interface and wrap
// the cause.
func ListenPacket(ctx context.Context, network, addr, iface string) (net.PacketConn, error) {
	switch network {
	case "udp", "udp4", "udp6":
	default:
		return nil, fmt.Errorf("%w: %q", ErrNetwork, network)
	}
	if iface != "" && !bindSupported {
		return nil, fmt.Errorf("udpbind: %s on interface %s: binding a socket to an interface: %w", addr, iface, errors.ErrUnsupported)
	}
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) { serr = bind(fd, iface) }); err != nil {
			return err
		}
		return serr
	}}
	c, err := lc.ListenPacket(ctx, network, addr)
	if err != nil {
		if iface != "" {
			return nil, fmt.Errorf("udpbind: %s on interface %s: %w", addr, iface, err)
		}
		return nil, fmt.Errorf("udpbind: %s: %w", addr, err)
	}
	return c, nil
}

// ReasonOf names the package's errors in err's chain in a word a host can count: "network"
// (ErrNetwork), "unsupported" (an interface named where the system cannot bind to one); ""
// for nil or any other error, a system call's included.
func ReasonOf(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, ErrNetwork):
		return "network"
	case errors.Is(err, errors.ErrUnsupported) && strings.HasPrefix(err.Error(), "udpbind: "):
		return "unsupported"
	}
	return ""
}
