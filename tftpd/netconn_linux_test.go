package tftpd

import (
	"errors"
	"net"
	"net/netip"
	"testing"
	"time"
)

// netPair opens a netConn on loopback and the client socket it sends to.
func netPair(t *testing.T) (*netConn, *net.UDPConn) {
	t.Helper()
	open := func() *net.UDPConn {
		c, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.MustParseAddrPort("127.0.0.1:0")))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	c, client := open(), open()
	x := newNetConn(c, client.LocalAddr().(*net.UDPAddr).AddrPort(), 4)
	if x.wait.rc == nil {
		t.Fatal("netConn without its RawConn")
	}
	return x, client
}

func (x *netConn) addr() netip.AddrPort { return x.c.LocalAddr().(*net.UDPAddr).AddrPort() }

// TestNetConnSendRecvReadsOnlyAfterAnswers: 300 sends, each answered by the client as soon
// as it reads it, each answer read by the call that sent: none lost (a lost wake-up would
// leave its call waiting 30 s and end it with errWait), and no read tried before its answer
// came. net's ReadFrom, after a send, makes a read that finds nothing in all but a few.
func TestNetConnSendRecvReadsOnlyAfterAnswers(t *testing.T) {
	x, client := netPair(t)
	go func() {
		b := make([]byte, 16)
		for {
			n, from, err := client.ReadFromUDPAddrPort(b)
			if err != nil {
				return
			}
			b[1] = 4 // the DATA comes back as the ACK of its block
			client.WriteToUDPAddrPort(b[:n], from)
		}
	}()
	const rounds = 300
	b := make([]byte, 16)
	for i := range rounds {
		pkt := []byte{0, 3, byte(i >> 8), byte(i)}
		send := func() error { return x.sendTo(pkt, x.peer) }
		n, from, err := x.sendRecv(send, b, time.Now().Add(30*time.Second))
		if err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
		if n != 4 || b[1] != 4 || int(b[2])<<8|int(b[3]) != i || from != x.peer {
			t.Fatalf("round %d: got %x from %v, want the ACK of block %d from %v", i, b[:n], from, i, x.peer)
		}
	}
	if x.wait.empty != 0 {
		t.Errorf("%d of %d reads found nothing, want 0", x.wait.empty, rounds)
	}
}

// TestNetConnSendRecvQueuedFirst: a datagram that waited before the send is not lost: the
// call returns it (the queue is read in order) and the answer is the next read.
func TestNetConnSendRecvQueuedFirst(t *testing.T) {
	x, client := netPair(t)
	if _, err := client.WriteToUDPAddrPort([]byte{0, 4, 0, 1}, x.addr()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond) // let it be queued, and the poller see it
	b := make([]byte, 16)
	send := func() error {
		_, err := client.WriteToUDPAddrPort([]byte{0, 4, 0, 2}, x.addr()) // the answer, at once
		return err
	}
	deadline := time.Now().Add(30 * time.Second)
	n, _, err := x.sendRecv(send, b, deadline)
	if err != nil || n != 4 || b[3] != 1 {
		t.Fatalf("sendRecv: %x, %v; want the queued ACK 1", b[:n], err)
	}
	n, _, err = x.recv(b, deadline)
	if err != nil || n != 4 || b[3] != 2 {
		t.Fatalf("recv: %x, %v; want the answer, ACK 2", b[:n], err)
	}
}

// TestNetConnSendRecvDeadlines: with no answer a call sends once and ends at its deadline,
// never before: also when the socket keeps an earlier deadline (within deadlineSlack), and
// when that one has passed before the call (the send is then made outside the read).
func TestNetConnSendRecvDeadlines(t *testing.T) {
	x, client := netPair(t)
	b := make([]byte, 16)
	sends := 0
	send := func() error {
		sends++
		return x.sendTo([]byte{0, 3, 0, byte(sends)}, x.peer)
	}
	first := time.Now().Add(30 * time.Millisecond)
	waits := []struct {
		name     string
		deadline time.Time
	}{
		{"its own deadline", first},
		// The socket keeps first, which has passed by now: the send comes after RawConn.Read
		// returned at once.
		{"a deadline passed", first.Add(deadlineSlack - 20*time.Millisecond)},
	}
	for i, w := range waits {
		if _, _, err := x.sendRecv(send, b, w.deadline); err != errWait {
			t.Fatalf("%s: %v, want errWait", w.name, err)
		}
		if now := time.Now(); now.Before(w.deadline) {
			t.Errorf("%s: ended %v before the deadline", w.name, w.deadline.Sub(now))
		}
		if sends != i+1 {
			t.Errorf("%s: %d sends, want %d", w.name, sends, i+1)
		}
	}
	// The socket's deadline is now ahead but up to deadlineSlack early: the call waits on.
	x.deadline = time.Time{}
	soon := time.Now().Add(30 * time.Millisecond)
	x.setDeadline(soon)
	later := soon.Add(deadlineSlack / 2)
	if _, _, err := x.sendRecv(send, b, later); err != errWait {
		t.Fatalf("early socket deadline: %v, want errWait", err)
	}
	if now := time.Now(); now.Before(later) {
		t.Errorf("early socket deadline: ended %v before the deadline asked", later.Sub(now))
	}
	// Every send reached the client, once.
	client.SetReadDeadline(time.Now().Add(5 * time.Second))
	for want := 1; want <= 3; want++ {
		n, _, err := client.ReadFromUDPAddrPort(b)
		if err != nil || n != 4 || int(b[3]) != want {
			t.Fatalf("client: %x, %v; want DATA %d", b[:n], err, want)
		}
	}
}

// TestNetConnSendRecvErrors: a send that fails ends the call with its error, without a wait;
// closing the socket (eviction) ends a wait at once.
func TestNetConnSendRecvErrors(t *testing.T) {
	x, _ := netPair(t)
	b := make([]byte, 16)
	boom := errors.New("boom")
	start := time.Now()
	if _, _, err := x.sendRecv(func() error { return boom }, b, start.Add(30*time.Second)); err != boom {
		t.Fatalf("failed send: %v, want its error", err)
	}
	// A call that waited after its failed send would end only at its deadline, 30 s on.
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("failed send: the call took %v, as if it had waited", d)
	}
	done := make(chan error, 1)
	go func() {
		_, _, err := x.sendRecv(func() error { return nil }, b, time.Now().Add(30*time.Second))
		done <- err
	}()
	time.Sleep(20 * time.Millisecond)
	x.evict()
	select {
	case err := <-done:
		if !errors.Is(err, net.ErrClosed) {
			t.Errorf("evicted wait: %v, want net.ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("wait still under way 10 s after evict (its deadline is 30 s away)")
	}
}
