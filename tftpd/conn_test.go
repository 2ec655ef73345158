package tftpd

import (
	"net"
	"net/netip"
	"testing"
	"time"
)

// TestNetConnWaitsAsAsked: a netConn keeps its read deadline while a later wait asks for
// one at most deadlineSlack after it, and a wait that ends on that earlier deadline is not
// reported as over before the deadline it asked for. A datagram that comes during the
// wait ends it at once.
func TestNetConnWaitsAsAsked(t *testing.T) {
	c, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.MustParseAddrPort("127.0.0.1:0")))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	peer, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.MustParseAddrPort("127.0.0.1:0")))
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	x := newNetConn(c, peer.LocalAddr().(*net.UDPAddr).AddrPort(), 1)
	buf := make([]byte, 16)

	first := time.Now().Add(20 * time.Millisecond)
	if _, _, err := x.recv(buf, first); err != errWait {
		t.Fatalf("first wait: %v, want errWait", err)
	}
	if now := time.Now(); now.Before(first) {
		t.Fatalf("first wait ended %v before its deadline", first.Sub(now))
	}
	// Within the slack: the socket keeps the first deadline (now past) and must wait on.
	second := first.Add(deadlineSlack - 10*time.Millisecond)
	if _, _, err := x.recv(buf, second); err != errWait {
		t.Fatalf("second wait: %v, want errWait", err)
	}
	if now := time.Now(); now.Before(second) {
		t.Fatalf("second wait ended %v before its deadline", second.Sub(now))
	}

	// A datagram during a long wait ends it.
	go func() {
		time.Sleep(20 * time.Millisecond)
		peer.WriteToUDPAddrPort([]byte("ack"), c.LocalAddr().(*net.UDPAddr).AddrPort())
	}()
	start := time.Now()
	n, _, err := x.recv(buf, start.Add(time.Minute))
	if err != nil || string(buf[:n]) != "ack" {
		t.Fatalf("long wait: %q, %v", buf[:n], err)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Fatalf("the datagram ended the wait only after %v", d)
	}
}
