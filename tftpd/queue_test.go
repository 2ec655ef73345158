package tftpd_test

import (
	"bytes"
	"fmt"
	"net"
	"testing"
	"testing/fstest"
	"time"

	"github.com/bettercompute/siteboot/clock"
	"github.com/bettercompute/siteboot/clock/clocktest"
	"github.com/bettercompute/siteboot/tftpd"
)

// TestQueueServesWhenSlotFrees: with the one slot held by an acknowledged transfer, a
// request waits in the queue (no answer, no socket); sent again twice it keeps its one place;
// when the slot frees it is served at once, without sending it again. The same with a
// Server.Clock of its own (a clock for reports, here one far in the past that does not move):
// how long a request has waited is not read from it.
func TestQueueServesWhenSlotFrees(t *testing.T) {
	past := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	for _, tc := range []struct {
		name  string
		clock clock.Clock
	}{{"clock.Real", nil}, {"own clock", clocktest.New(past)}} {
		t.Run(tc.name, func(t *testing.T) { queueServesWhenSlotFrees(t, tc.clock) })
	}
}

func queueServesWhenSlotFrees(t *testing.T, clk clock.Clock) {
	data := payload(1500, 41)
	srv := &tftpd.Server{FS: fstest.MapFS{"f": {Data: data}}, MaxTransfers: 1, MaxPerSource: 1, Timeout: 30 * time.Second, Clock: clk}
	h := holdSlot(t, srv, "127.0.0.70")
	addr, a, first, second, tid := h.addr, h.client, h.first, h.second, h.tid
	b := newRawClient(t, "127.0.0.71")

	for range 3 { // the request and two retransmissions of it
		b.send(addr, rrq("f", "octet"))
		if pkt, _, ok := b.recv(200 * time.Millisecond); ok {
			t.Fatalf("served %q while the slot is held", pkt[:min(len(pkt), 8)])
		}
	}
	if st := srv.Stats(); st.Waiting != 1 || st.Queued != 1 || st.Transfers != 1 || st.DroppedBusy != 0 {
		t.Fatalf("stats %+v: want one request waiting, queued once, one transfer, no drop", st)
	}
	if got := append(first[4:], a.downloadFrom(second, tid, 512, 2)...); !bytes.Equal(got, data) {
		t.Fatalf("first client: %d bytes, want %d identical", len(got), len(data))
	}
	start := time.Now()
	pkt, tid2 := b.recvFrom(5*time.Second, 0) // nothing sent since the last retransmission
	t.Logf("served %v after the slot freed", time.Since(start))
	if got := b.download(pkt, tid2, 512); !bytes.Equal(got, data) {
		t.Fatalf("queued client: %d bytes, want %d identical", len(got), len(data))
	}
	waitFor(t, "both transfers to end", func() bool { return srv.Stats().Active == 0 })
	if st := srv.Stats(); st.Transfers != 2 || st.Completed != 2 || st.Waiting != 0 || st.DroppedBusy != 0 {
		t.Errorf("stats %+v: want two transfers completed, none waiting or dropped", st)
	}
}

// heldSlot is a server whose one slot a client holds: its transfer of "f", acknowledged
// once (so that it cannot be evicted), and its first two DATA packets.
type heldSlot struct {
	addr          *net.UDPAddr
	client        *rawClient
	first, second []byte
	tid           *net.UDPAddr
}

// holdSlot serves srv and has a client at ip take its slot.
func holdSlot(t *testing.T, srv *tftpd.Server, ip string) heldSlot {
	t.Helper()
	h := heldSlot{addr: serve(t, srv, "127.0.0.1"), client: newRawClient(t, ip)}
	h.client.send(h.addr, rrq("f", "octet"))
	h.first, h.tid = h.client.recvFrom(5*time.Second, 0)
	h.client.send(h.tid, ack(1))
	h.second, _ = h.client.recvFrom(5*time.Second, h.tid.Port)
	return h
}

// TestQueueWaitExpires: a held request not sent again within QueueWait is dropped; the
// slot that frees later starts nothing for it.
func TestQueueWaitExpires(t *testing.T) {
	const wait = 200 * time.Millisecond
	data := payload(1500, 42)
	srv := &tftpd.Server{FS: fstest.MapFS{"f": {Data: data}}, MaxTransfers: 1, MaxPerSource: 1, Timeout: 30 * time.Second, QueueWait: wait}
	h := holdSlot(t, srv, "127.0.0.72")
	addr, a, first, second, tid := h.addr, h.client, h.first, h.second, h.tid
	b := newRawClient(t, "127.0.0.73")
	b.send(addr, rrq("f", "octet"))
	waitFor(t, "the request to wait", func() bool { return srv.Stats().Waiting == 1 })
	// Dropped once QueueWait has passed and the queue is looked at (every EvictAfter).
	waitFor(t, "the request to expire", func() bool { return srv.Stats().Waiting == 0 })
	if st := srv.Stats(); st.DroppedBusy != 1 || st.Queued != 1 {
		t.Fatalf("stats %+v: want the one request queued, then dropped", st)
	}
	if got := append(first[4:], a.downloadFrom(second, tid, 512, 2)...); !bytes.Equal(got, data) {
		t.Fatalf("first client: %d bytes", len(got))
	}
	if pkt, _, ok := b.recv(500 * time.Millisecond); ok {
		t.Fatalf("the expired request was served: %q", pkt[:min(len(pkt), 8)])
	}
	if st := srv.Stats(); st.Transfers != 1 {
		t.Errorf("stats %+v: want one transfer", st)
	}
}

// TestQueueBounds: the queue holds MaxQueued requests (the next is dropped) and at most
// MaxPerSource from one source, counting its running transfers.
func TestQueueBounds(t *testing.T) {
	data := payload(1500, 43)
	// Timeout 1 s: the held transfer outlives the checks (6 s) and every transfer has ended
	// by the server's shutdown.
	srv := &tftpd.Server{FS: fstest.MapFS{"f": {Data: data}}, MaxTransfers: 1, MaxPerSource: 1, MaxQueued: 2, Timeout: time.Second}
	addr := holdSlot(t, srv, "127.0.0.74").addr
	// A second request of the source that runs one: over MaxPerSource, not held.
	a2 := newRawClient(t, "127.0.0.74")
	a2.send(addr, rrq("f", "octet"))
	for i := range 3 {
		newRawClient(t, fmt.Sprintf("127.0.0.%d", 75+i)).send(addr, rrq("f", "octet"))
	}
	waitFor(t, "the requests to be counted", func() bool { return srv.Stats().Requests == 5 })
	if st := srv.Stats(); st.Waiting != 2 || st.Queued != 2 || st.DroppedBusy != 1 || st.DroppedSource != 1 {
		t.Errorf("stats %+v: want 2 waiting, 1 dropped for the full queue, 1 for its source", st)
	}
}

// TestLimitGlobalQueued: TestLimitGlobal with the queue: of 100 requests at once 64 are
// served and 36 wait, with no socket; as the 64 end, the 36 are served without asking again.
func TestLimitGlobalQueued(t *testing.T) {
	data := payload(600, 44)
	srv := &tftpd.Server{FS: fstest.MapFS{"f": {Data: data}}, Timeout: 30 * time.Second}
	addr := serve(t, srv, "127.0.0.1")
	clients := make([]*rawClient, 100)
	for i := range clients {
		clients[i] = newRawClient(t, fmt.Sprintf("127.0.1.%d", 10+i))
	}
	sock0, _ := fdCount(t)
	served, tids, first := holdAll(t, addr, clients, time.Second)
	c := srv.Stats()
	if n := count(served); n != 64 || c.Active != 64 || c.Waiting+c.Evicted != 36 || c.DroppedBusy != 0 {
		t.Fatalf("served %d, counters %+v; want 64 served and active, 36 waiting (or evicted)", n, c)
	}
	if sock, _ := fdCount(t); sock != sock0+64 {
		t.Errorf("while 64 transfers run: sockets %d -> %d, want +64 (none for those waiting)", sock0, sock)
	}
	var rest []*rawClient
	for i, c := range clients {
		if !served[i] {
			rest = append(rest, c)
		}
	}
	done := make(chan struct{})
	var served2 []bool
	var tids2 []*tidAddr
	go func() {
		defer close(done)
		s, t2, f2 := awaitAll(t, rest, 20*time.Second)
		served2 = s
		for i := range s {
			tids2 = append(tids2, &tidAddr{t2[i], f2[i]})
		}
	}()
	finish(t, clients, served, tids, first, data)
	<-done
	if n := count(served2); n+int(c.Evicted) != 36 {
		t.Fatalf("served from the queue: %d, want 36 less those evicted (%d)", n, c.Evicted)
	}
	for i, x := range tids2 {
		if served2[i] {
			finish(t, rest[i:i+1], []bool{true}, []*net.UDPAddr{x.tid}, [][]byte{x.first}, data)
		}
	}
	waitFor(t, "every transfer to end", func() bool { return srv.Stats().Active == 0 })
	if c := srv.Stats(); c.Completed+c.Evicted != 100 || c.DroppedBusy != 0 || c.Waiting != 0 {
		t.Errorf("counters %+v: want 100 completed (or evicted), none dropped or waiting", c)
	}
}

type tidAddr struct {
	tid   *net.UDPAddr
	first []byte
}

// TestQueueResentRequestEvicts: a request held in the queue (every slot taken by a transfer
// too young to evict) and sent again as a client retransmits, once that transfer has waited
// EvictAfter without an acknowledgement, takes its slot as a new request would, instead of
// only keeping its place until the transfer times out. A repeat sent at once (as a flood
// sends them) only keeps its place.
func TestQueueResentRequestEvicts(t *testing.T) {
	data := payload(1500, 43)
	const evictAfter = 150 * time.Millisecond
	srv := &tftpd.Server{FS: fstest.MapFS{"f": {Data: data}}, MaxTransfers: 1, MaxPerSource: 1,
		Timeout: 2 * time.Second, EvictAfter: evictAfter}
	addr := serve(t, srv, "127.0.0.1")
	silent := newRawClient(t, "127.0.0.72") // never acknowledges, as a spoofed source
	silent.send(addr, rrq("f", "octet"))
	silent.recvFrom(5*time.Second, 0)

	b := newRawClient(t, "127.0.0.73")
	b.send(addr, rrq("f", "octet"))
	if pkt, _, ok := b.recv(evictAfter / 3); ok {
		t.Fatalf("served %q while the slot's transfer is younger than EvictAfter", pkt[:min(len(pkt), 8)])
	}
	waitFor(t, "the request to wait in the queue", func() bool { return srv.Stats().Waiting == 1 })
	b.send(addr, rrq("f", "octet")) // a repeat too soon to be a retransmission keeps its place
	if pkt, _, ok := b.recv(evictAfter / 3); ok {
		t.Fatalf("served %q for a repeat sent at once", pkt[:min(len(pkt), 8)])
	}
	time.Sleep(300 * time.Millisecond) // past EvictAfter, and as long as a client waits to retransmit
	b.send(addr, rrq("f", "octet"))    // the client's retransmission
	pkt, tid, ok := b.recv(time.Second)
	if !ok {
		t.Fatalf("the request sent again got nothing within 1 s; stats %+v", srv.Stats())
	}
	if got := b.download(pkt, tid, 512); !bytes.Equal(got, data) {
		t.Fatalf("got %d bytes, want %d identical", len(got), len(data))
	}
	if st := srv.Stats(); st.Evicted != 1 || st.Waiting != 0 {
		t.Errorf("stats %+v: want one eviction, none waiting", st)
	}
}
