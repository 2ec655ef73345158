package udpbind_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/udpbind"
)

// roundTrip sends a datagram to c from a new loopback socket and reads it back on c.
func roundTrip(t *testing.T, c net.PacketConn) {
	t.Helper()
	peer, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	if _, err := peer.WriteTo([]byte("hello"), c.LocalAddr()); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 16)
	n, from, err := c.ReadFrom(buf)
	if err != nil || string(buf[:n]) != "hello" || from.String() != peer.LocalAddr().String() {
		t.Fatalf("read %q from %v, %v; want hello from %v", buf[:n], from, err, peer.LocalAddr())
	}
}

// TestListenPacket: with no interface named the socket works on every system; a network
// that is not UDP is refused.
func TestListenPacket(t *testing.T) {
	for _, tc := range []struct {
		network, addr string
		wantErr       error
	}{
		{"udp4", "127.0.0.1:0", nil},
		{"udp", "127.0.0.1:0", nil},
		{"tcp", "127.0.0.1:0", udpbind.ErrNetwork},
		{"ip4:1", "127.0.0.1", udpbind.ErrNetwork},
		{"unixgram", "/tmp/x", udpbind.ErrNetwork},
	} {
		t.Run(tc.network, func(t *testing.T) {
			c, err := udpbind.ListenPacket(context.Background(), tc.network, tc.addr, "")
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("ListenPacket(%s): %v, want %v", tc.network, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			roundTrip(t, c)
		})
	}
}

// TestListenPacketBusy: a bind error names the package and address and keeps the cause.
func TestListenPacketBusy(t *testing.T) {
	c, err := udpbind.ListenPacket(context.Background(), "udp4", "127.0.0.1:0", "")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = udpbind.ListenPacket(context.Background(), "udp4", c.LocalAddr().String(), "")
	var op *net.OpError
	if err == nil || !errors.As(err, &op) {
		t.Fatalf("a second bind of %v: %v, want a *net.OpError", c.LocalAddr(), err)
	}
}
