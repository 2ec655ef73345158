package tftpd_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/bettercompute/siteboot/tftpd"
)

// holdAll sends one request from each client and reports which got a first DATA block
// within wait. Each served client acknowledges block 1 and holds its transfer at block 2
// (first holds that datagram): an acknowledged transfer keeps its slot when the table is
// full.
func holdAll(t *testing.T, addr *net.UDPAddr, clients []*rawClient, wait time.Duration) (served []bool, tids []*net.UDPAddr, first [][]byte) {
	t.Helper()
	for _, c := range clients {
		c.send(addr, rrq("f", "octet"))
	}
	return awaitAll(t, clients, wait)
}

// awaitAll is holdAll for requests sent before: it sends nothing but acknowledgements.
func awaitAll(t *testing.T, clients []*rawClient, wait time.Duration) (served []bool, tids []*net.UDPAddr, first [][]byte) {
	t.Helper()
	served = make([]bool, len(clients))
	tids = make([]*net.UDPAddr, len(clients))
	first = make([][]byte, len(clients))
	var wg sync.WaitGroup
	for i, c := range clients {
		wg.Go(func() {
			b, from, ok := c.recv(wait)
			if !ok {
				return
			}
			if opcode(b) != 3 || binary.BigEndian.Uint16(b[2:]) != 1 {
				t.Errorf("client %d: got %q, want DATA block 1", i, b[:min(len(b), 8)])
				return
			}
			c.conn.WriteToUDP(ack(1), from)
			b2, from2, ok := c.recv(2 * time.Second)
			if !ok || from2.Port != from.Port {
				return // evicted before its acknowledgement came: not served
			}
			served[i], tids[i], first[i] = true, from, append(append([]byte(nil), b...), b2...)
		})
	}
	wg.Wait()
	return served, tids, first
}

func count(b []bool) (n int) {
	for _, v := range b {
		if v {
			n++
		}
	}
	return n
}

// finish acknowledges the held transfers of served clients to their end.
func finish(t *testing.T, clients []*rawClient, served []bool, tids []*net.UDPAddr, first [][]byte, data []byte) {
	t.Helper()
	for i, c := range clients {
		if !served[i] {
			continue
		}
		b1, b2 := first[i][:4+512], first[i][4+512:]
		got := append(append([]byte(nil), b1[4:]...), c.downloadFrom(b2, tids[i], 512, 2)...)
		if !bytes.Equal(got, data) {
			t.Fatalf("client %d: got %d bytes, want %d identical", i, len(got), len(data))
		}
	}
}

// TestLimitGlobal: 100 requests from 100 source addresses at once, each client acknowledging
// its first block at once, with the queue off. 64 are served, 36 are dropped without an
// answer and without a socket (or evicted an unacknowledged transfer that the test's client
// then acknowledged too late: counted, the client then dropped), and each of those is
// served when it asks again after slots free up. No descriptor is left behind.
func TestLimitGlobal(t *testing.T) {
	data := payload(600, 5)
	srv := &tftpd.Server{FS: fstest.MapFS{"f": {Data: data}}, Timeout: 30 * time.Second, MaxQueued: -1}
	addr := serve(t, srv, "127.0.0.1")
	clients := make([]*rawClient, 100)
	for i := range clients {
		clients[i] = newRawClient(t, fmt.Sprintf("127.0.0.%d", 10+i))
	}
	sock0, other0 := fdCount(t)

	served, tids, first := holdAll(t, addr, clients, time.Second)
	c := srv.Stats()
	if n := count(served); n != 64 || c.Active != 64 || c.DroppedBusy+c.Evicted != 36 || c.DroppedSource != 0 {
		t.Fatalf("served %d, counters %+v; want 64 served and active, 36 dropped for the transfer limit or evicted", n, c)
	}
	if sock, other := fdCount(t); sock != sock0+64 || other != other0 {
		t.Errorf("while 64 transfers run: sockets %d -> %d (want +64: none for the dropped), others %d -> %d", sock0, sock, other0, other)
	}
	finish(t, clients, served, tids, first, data)
	waitFor(t, "the 64 transfers to end", func() bool { return srv.Stats().Active == 0 })

	// The dropped ones retry, as firmware does: now they are served.
	var retry []*rawClient
	for i, c := range clients {
		if !served[i] {
			retry = append(retry, c)
		}
	}
	served2, tids2, first2 := holdAll(t, addr, retry, 5*time.Second)
	if n := count(served2); n != 36 {
		t.Fatalf("retries served: %d, want 36", n)
	}
	finish(t, retry, served2, tids2, first2, data)
	waitFor(t, "every transfer to end", func() bool { return srv.Stats().Active == 0 })
	if c := srv.Stats(); c.Completed != 100 || c.Transfers != 100+c.Evicted || c.DroppedBusy+c.Evicted != 36 {
		t.Errorf("counters %+v: want 100 transfers completed, 36 drops or evictions", c)
	}
	if sock, other := fdCount(t); sock != sock0 || other != other0 {
		t.Errorf("after: sockets %d -> %d, others %d -> %d: descriptors leaked", sock0, sock, other0, other)
	}
}

// TestLimitPerSource: 10 requests from one address: 4 at once; the rest are served on
// retries, 4 at a time.
func TestLimitPerSource(t *testing.T) {
	data := payload(700, 6) // two blocks
	srv := &tftpd.Server{FS: fstest.MapFS{"f": {Data: data}}, Timeout: 30 * time.Second}
	addr := serve(t, srv, "127.0.0.1")
	waiting := make([]*rawClient, 10)
	for i := range waiting {
		waiting[i] = newRawClient(t, "127.0.0.1")
	}
	sock0, other0 := fdCount(t)
	var rounds []int
	for round := 0; len(waiting) > 0 && round < 5; round++ {
		served, tids, first := holdAll(t, addr, waiting, time.Second)
		rounds = append(rounds, count(served))
		if sock, _ := fdCount(t); sock != sock0+count(served) {
			t.Errorf("round %d: %d sockets more, want %d", round, sock-sock0, count(served))
		}
		finish(t, waiting, served, tids, first, data)
		waitFor(t, "the transfers to end", func() bool { return srv.Stats().Active == 0 })
		var next []*rawClient
		for i, c := range waiting {
			if !served[i] {
				next = append(next, c)
			}
		}
		waiting = next
	}
	if fmt.Sprint(rounds) != "[4 4 2]" {
		t.Errorf("served per round: %v, want [4 4 2]", rounds)
	}
	if c := srv.Stats(); c.DroppedSource != 6+2 || c.DroppedBusy != 0 || c.Completed != 10 {
		t.Errorf("counters %+v: want 8 per-source drops, 10 completed", c)
	}
	if sock, other := fdCount(t); sock != sock0 || other != other0 {
		t.Errorf("after: sockets %d -> %d, others %d -> %d: descriptors leaked", sock0, sock, other0, other)
	}
}

// TestLimitsSettable: MaxTransfers 3 and MaxPerSource 2 over three sources of two requests
// (the queue off).
func TestLimitsSettable(t *testing.T) {
	data := payload(600, 7)
	srv := &tftpd.Server{FS: fstest.MapFS{"f": {Data: data}}, MaxTransfers: 3, MaxPerSource: 2, Timeout: 30 * time.Second, MaxQueued: -1}
	addr := serve(t, srv, "127.0.0.1")
	var clients []*rawClient
	for _, ip := range []string{"127.0.0.2", "127.0.0.2", "127.0.0.2", "127.0.0.3"} {
		clients = append(clients, newRawClient(t, ip))
	}
	// Sent in order: two from .2 served, the third from .2 dropped (per source), .3 served.
	served, tids, first := holdAll(t, addr, clients, time.Second)
	if fmt.Sprint(served) != "[true true false true]" {
		t.Errorf("served %v, want [true true false true]", served)
	}
	late := newRawClient(t, "127.0.0.4")
	s2, _, _ := holdAll(t, addr, []*rawClient{late}, 500*time.Millisecond)
	if s2[0] {
		t.Errorf("a fourth transfer started with MaxTransfers 3")
	}
	finish(t, clients, served, tids, first, data)
	waitFor(t, "the transfers to end", func() bool { return srv.Stats().Active == 0 })
	if c := srv.Stats(); c.DroppedSource != 1 || c.DroppedBusy != 1 {
		t.Errorf("counters %+v: want one drop of each kind", c)
	}
}
