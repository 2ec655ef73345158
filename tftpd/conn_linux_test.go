package tftpd

import (
	"errors"
	"net"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestListenTransferKinds: a transfer that starts among few waits on a thread of its own
// (rawConn) where its local address is known; otherwise, and always when many run, its
// socket is in the network poller.
func TestListenTransferKinds(t *testing.T) {
	peer := netip.MustParseAddrPort("127.0.0.1:9")
	tests := []struct {
		name  string
		local netip.Addr
		peer  netip.AddrPort
		few   bool
		raw   bool
	}{
		{"alone", netip.MustParseAddr("127.0.0.1"), peer, true, true},
		{"many", netip.MustParseAddr("127.0.0.1"), peer, false, false},
		{"local unknown", netip.Addr{}, peer, true, false},
		{"ipv6 alone", netip.IPv6Loopback(), netip.MustParseAddrPort("[::1]:9"), true, true},
		{"families differ", netip.IPv6Loopback(), peer, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := listenTransfer(tt.local, tt.peer, 4, tt.few)
			if err != nil {
				t.Skipf("no socket for %v here: %v", tt.local, err)
			}
			defer c.close()
			if _, raw := c.(*rawConn); raw != tt.raw {
				t.Errorf("got %T, want rawConn %v", c, tt.raw)
			}
		})
	}
}

// rawPair opens a rawConn on loopback and the client socket it sends to.
func rawPair(t *testing.T) (*rawConn, *net.UDPConn) {
	t.Helper()
	client, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	c, ok, err := listenRaw(netip.MustParseAddr("127.0.0.1"), client.LocalAddr().(*net.UDPAddr).AddrPort(), 1)
	if !ok || err != nil {
		t.Fatalf("listenRaw: %v %v", ok, err)
	}
	t.Cleanup(c.(*rawConn).close)
	return c.(*rawConn), client
}

// TestRawConnEvictWakesRecv: evicting a transfer whose thread waits for its client ends the
// wait at once (its deadline is 30 s away), and nothing is sent after.
func TestRawConnEvictWakesRecv(t *testing.T) {
	c, _ := rawPair(t)
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		var b [516]byte
		_, _, err := c.recv(b[:], time.Now().Add(30*time.Second))
		done <- err
	}()
	time.Sleep(50 * time.Millisecond) // let it block; an evict before the wait ends it too
	c.evict()
	select {
	case err := <-done:
		if !errors.Is(err, errEvictedConn) {
			t.Errorf("recv: %v, want errEvictedConn", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("recv still waiting 10 s after evict")
	}
	t.Logf("recv ended %v after it began", time.Since(start))
	if err := c.sendTo([]byte{0, 3, 0, 1}, c.peer); !errors.Is(err, errEvictedConn) {
		t.Errorf("sendTo after evict: %v, want errEvictedConn", err)
	}
}

// TestRawConnDeadlines: a wait ends at its deadline, also when it is shorter than the one
// before (the socket's time-out is set again), and a datagram that came is read at once.
func TestRawConnDeadlines(t *testing.T) {
	c, client := rawPair(t)
	var b [516]byte
	for _, d := range []time.Duration{300 * time.Millisecond, 50 * time.Millisecond} {
		start := time.Now()
		if _, _, err := c.recv(b[:], start.Add(d)); err != errWait {
			t.Fatalf("recv: %v, want errWait", err)
		}
		// The lower bound is exact; the upper one leaves room for a loaded machine but is
		// far below the 300 ms of the previous wait.
		if got := time.Since(start); got < d || (d < 100*time.Millisecond && got >= 250*time.Millisecond) {
			t.Errorf("wait of %v ended after %v", d, got)
		}
	}
	srv := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), localPort(t, c))
	if _, err := client.WriteToUDPAddrPort([]byte{0, 4, 0, 7}, srv); err != nil {
		t.Fatal(err)
	}
	n, from, err := c.recv(b[:], time.Now().Add(5*time.Second))
	if err != nil || n != 4 || b[3] != 7 || from != client.LocalAddr().(*net.UDPAddr).AddrPort() {
		t.Errorf("recv: %d bytes %x from %v, %v; want the ACK of block 7 from %v", n, b[:n], from, err, client.LocalAddr())
	}
}

func localPort(t *testing.T, c *rawConn) uint16 {
	t.Helper()
	sa, err := unix.Getsockname(c.fd)
	if err != nil {
		t.Fatal(err)
	}
	return uint16(sa.(*unix.SockaddrInet4).Port)
}
