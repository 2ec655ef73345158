package udpbind_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/bettercompute/siteboot/udpbind"
)

// sockopts reads the interface a socket is bound to and whether broadcast is allowed.
func sockopts(t *testing.T, c net.PacketConn) (string, int) {
	t.Helper()
	rc, err := c.(*net.UDPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var dev string
	var bcast int
	var derr, berr error
	if err := rc.Control(func(fd uintptr) {
		dev, derr = unix.GetsockoptString(int(fd), unix.SOL_SOCKET, unix.SO_BINDTODEVICE)
		bcast, berr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_BROADCAST)
	}); err != nil {
		t.Fatal(err)
	}
	if derr != nil || berr != nil {
		t.Fatalf("getsockopt: %v, %v", derr, berr)
	}
	return strings.TrimRight(dev, "\x00"), bcast
}

// TestBindToDeviceLinux: a named interface binds the socket to it (SO_BINDTODEVICE reads
// back), broadcast is allowed, and the socket still receives on that interface; no
// interface named leaves the socket unbound. Loopback only.
func TestBindToDeviceLinux(t *testing.T) {
	for _, tc := range []struct {
		network, iface string
	}{
		{"udp4", "lo"},
		{"udp4", ""},
		{"udp", "lo"},
	} {
		t.Run(tc.network+"/"+tc.iface, func(t *testing.T) {
			c, err := udpbind.ListenPacket(context.Background(), tc.network, "127.0.0.1:0", tc.iface)
			if errors.Is(err, syscall.EPERM) {
				t.Skipf("SO_BINDTODEVICE needs CAP_NET_RAW on this kernel: %v", err)
			}
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			dev, bcast := sockopts(t, c)
			if dev != tc.iface || bcast != 1 {
				t.Errorf("bound to %q, SO_BROADCAST %d; want %q and 1", dev, bcast, tc.iface)
			}
			roundTrip(t, c)
		})
	}
}

// TestNoSuchInterfaceLinux: a name that is no interface fails with ENODEV, named in the
// error, and opens nothing.
func TestNoSuchInterfaceLinux(t *testing.T) {
	_, err := udpbind.ListenPacket(context.Background(), "udp4", "127.0.0.1:0", "nosuch0")
	if !errors.Is(err, syscall.ENODEV) || !strings.Contains(err.Error(), "nosuch0") {
		t.Fatalf("ListenPacket on nosuch0: %v, want ENODEV naming the interface", err)
	}
}
