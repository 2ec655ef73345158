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

// flood sends read requests that are never acknowledged from sources 127.0.1.1 to
// 127.0.1.N, rate a second, until stop is closed or max requests have gone out. It returns
// how many it sent when it has stopped.
func flood(t *testing.T, addr *net.UDPAddr, sources, rate, max int, stop <-chan struct{}) <-chan int {
	t.Helper()
	conns := make([]*net.UDPConn, sources)
	for i := range conns {
		c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 1, byte(1+i))})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		conns[i] = c
	}
	req := rrq("ipxe.efi", "octet")
	done := make(chan int, 1)
	go func() {
		sent := 0
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		start := time.Now()
		for sent < max {
			select {
			case <-stop:
				done <- sent
				return
			case <-tick.C:
			}
			// As many as the rate asks for by now: a late tick catches up.
			due := min(max, int(time.Since(start).Seconds()*float64(rate)))
			for ; sent < due; sent++ {
				conns[sent%sources].WriteToUDP(req, addr)
			}
		}
		done <- sent
	}()
	return done
}

// TestFloodRealClientGetsSlot: while 1,000 requests a second that are never acknowledged
// arrive from 200 sources, enough to fill the transfer table many times over, a real client
// that retries its request after retry (as firmware does) gets a transfer within one retry
// and reads the whole file: the transfers that never saw an acknowledgement give way to it.
// Without eviction every slot stays held for Timeout*(FirstRetries+1) and the client's
// requests are dropped.
func TestFloodRealClientGetsSlot(t *testing.T) {
	data := payload(300_001, 31)
	rec := newRecorder()
	// EvictAfter 150 ms: the time the client has to acknowledge its first block, chosen for
	// a client that shares a loaded machine (and the race detector) with the server; a
	// firmware client on its own CPU answers in well under the 50 ms default.
	srv := &tftpd.Server{FS: fstest.MapFS{"ipxe.efi": {Data: data}}, Timeout: time.Second,
		EvictAfter: 150 * time.Millisecond, OnTransfer: rec.hook}
	addr := serve(t, srv, "127.0.0.1")
	stop := make(chan struct{})
	var stopOnce sync.Once
	halt := func() { stopOnce.Do(func() { close(stop) }) }
	t.Cleanup(halt)
	const rate = 1000
	floodStart := time.Now()
	sent := flood(t, addr, 200, rate, 10*rate, stop)
	waitFor(t, "the flood to fill the table", func() bool { return srv.Stats().Active == tftpd.DefaultMaxTransfers })
	filled := srv.Stats()
	// A second of flood first: every slot has been taken over and over by then.
	waitFor(t, "a second of flood", func() bool { return srv.Stats().Requests >= rate })

	// The client: a request, then the same request again after retry, as EDK2 does (its
	// timeout is 4 s; 1 s here keeps the test short, and is below Timeout*(FirstRetries+1)).
	const retry = time.Second
	c := newRawClient(t, "127.0.0.2")
	start := time.Now()
	var (
		first    []byte
		tid      *net.UDPAddr
		attempts int
	)
	// As firmware does, a read that stalls (its first acknowledgement came too late on a
	// loaded machine, after EvictAfter, and the flood took the slot) is started again: at
	// most three reads, each asked at most twice.
	var got []byte
	reads := 0
	for reads = 1; reads <= 3 && got == nil; reads++ {
		first = nil
		for attempts = 1; attempts <= 2 && first == nil; attempts++ {
			c.send(addr, rrq("ipxe.efi", "octet"))
			end := time.Now().Add(retry)
			for time.Now().Before(end) {
				b, from, ok := c.recv(time.Until(end))
				if ok && opcode(b) == 3 {
					first, tid = b, from
					break
				}
			}
		}
		if first == nil {
			continue
		}
		got = readAll(c, first, tid, 512, retry)
	}
	toSlot := time.Since(start)
	if got == nil {
		halt()
		t.Fatalf("no whole read in %d reads of two requests %v apart while the flood ran; stats %+v", reads-1, retry, srv.Stats())
	}
	took := time.Since(start)
	var ours *tftpd.Transfer
	waitFor(t, "the client's whole transfer reported ok", func() bool {
		for _, r := range rec.all() {
			if r.Peer.Addr().String() == "127.0.0.2" && r.Outcome == tftpd.OutcomeOK {
				ours = &r
			}
		}
		return ours != nil
	})
	during := srv.Stats()
	halt()
	n := <-sent
	st := srv.Stats()
	if !bytes.Equal(got, data) {
		t.Fatalf("got %d bytes, want %d identical", len(got), len(data))
	}
	if st.Evicted == 0 {
		t.Errorf("stats %+v: the client got a slot, but nothing was evicted for it", st)
	}
	if during.Requests-filled.Requests < rate/2 {
		t.Errorf("only %d flood requests arrived before the client was done", during.Requests-filled.Requests)
	}
	if ours.Outcome != tftpd.OutcomeOK {
		t.Errorf("the client's transfer was reported as %+v, want ok", ours)
	}
	t.Logf("flood: %d requests in %v from 200 sources (table full after %d); the client's whole read at read %d, request %d, after %v; file of %d bytes read in %v; stats %+v",
		n, time.Since(floodStart).Round(time.Millisecond), filled.Requests, reads-1, attempts-1, toSlot.Round(time.Microsecond), len(data), took.Round(time.Millisecond), st)
}

// TestEvictOnlyUnacknowledged: with the table full, a new request takes the slot of the
// oldest transfer that has not been acknowledged, never one that has; the evicted transfer
// sends nothing more and is reported as evicted. (EvictAfter is 1 ns: TestEvictAfter
// checks the wait.)
func TestEvictOnlyUnacknowledged(t *testing.T) {
	data := payload(2000, 32)
	rec := newRecorder()
	srv := &tftpd.Server{FS: fstest.MapFS{"f": {Data: data}}, MaxTransfers: 3, MaxPerSource: 1, Timeout: 30 * time.Second,
		EvictAfter: time.Nanosecond, OnTransfer: rec.hook}
	addr := serve(t, srv, "127.0.0.1")
	var clients []*rawClient
	for i := range 5 {
		clients = append(clients, newRawClient(t, fmt.Sprintf("127.0.0.%d", 20+i)))
	}
	// 0 acknowledges its first block; 1 and 2 stay silent, 1 asked first.
	firsts := make([][]byte, 5)
	tids := make([]*net.UDPAddr, 5)
	for i := range 3 {
		clients[i].send(addr, rrq("f", "octet"))
		firsts[i], tids[i] = clients[i].recvFrom(5*time.Second, 0)
		if i == 0 {
			clients[0].send(tids[0], ack(1))
			firsts[0], _ = clients[0].recvFrom(5*time.Second, tids[0].Port)
		}
	}
	// 3 takes 1's slot (the oldest unacknowledged), 4 takes 2's. Each eviction is awaited
	// before the next request: an evicted transfer reports from its own goroutine.
	for i := 3; i < 5; i++ {
		clients[i].send(addr, rrq("f", "octet"))
		firsts[i], tids[i] = clients[i].recvFrom(5*time.Second, 0)
		r := rec.waitN(t, i-2)[i-3]
		if want := fmt.Sprintf("127.0.0.%d", 20+i-2); r.Outcome != tftpd.OutcomeEvicted || r.Peer.Addr().String() != want {
			t.Errorf("request %d: report %+v, want %s evicted (the silent ones in the order they asked)", i, r, want)
		}
	}
	if st := srv.Stats(); st.Evicted != 2 || st.Active != 3 || st.DroppedBusy != 0 {
		t.Errorf("stats %+v: want 2 evicted, 3 running", st)
	}
	// The evicted ones hear nothing more.
	for _, i := range []int{1, 2} {
		if b, _, ok := clients[i].recv(300 * time.Millisecond); ok {
			t.Errorf("evicted client %d got %q", i, b[:min(len(b), 8)])
		}
	}
	// Every slot now holds a transfer that... 0 is acknowledged; 3 and 4 are not: one more
	// request evicts 3, and none evicts 0.
	late := newRawClient(t, "127.0.0.30")
	late.send(addr, rrq("f", "octet"))
	lfirst, ltid := late.recvFrom(5*time.Second, 0)
	if r := rec.waitN(t, 3)[2]; r.Peer.Addr().String() != "127.0.0.23" || r.Outcome != tftpd.OutcomeEvicted {
		t.Errorf("third eviction: %+v, want 127.0.0.23", r)
	}
	for _, x := range []struct {
		c     *rawClient
		first []byte
		tid   *net.UDPAddr
		from  uint16
	}{{clients[0], firsts[0], tids[0], 2}, {clients[4], firsts[4], tids[4], 1}, {late, lfirst, ltid, 1}} {
		got := x.c.downloadFrom(x.first, x.tid, 512, x.from)
		if want := data[512*int(x.from-1):]; !bytes.Equal(got, want) {
			t.Errorf("got %d bytes, want %d identical", len(got), len(want))
		}
	}
	waitFor(t, "every transfer to end", func() bool { return srv.Stats().Active == 0 })
	if st := srv.Stats(); st.Completed != 3 || st.Evicted != 3 {
		t.Errorf("stats %+v: want 3 completed, 3 evicted", st)
	}
}

// TestEvictSparesAnsweredSource: EDK2's reads, as the storm showed them lost. A machine asks
// the size (tsize 0) and aborts after the OACK, then asks for the file and acknowledges that
// OACK late; a new request from another source meanwhile must not evict the read: the
// source has just answered the first OACK, so it is there. The new request waits for the
// slot, and both are served. A silent source's transfer is still evicted.
func TestEvictSparesAnsweredSource(t *testing.T) {
	data := payload(3000, 36)
	rec := newRecorder()
	srv := &tftpd.Server{FS: fstest.MapFS{"ipxe.efi": {Data: data}}, MaxTransfers: 1, MaxPerSource: 1, Timeout: 5 * time.Second,
		EvictAfter: time.Nanosecond, OnTransfer: rec.hook}
	addr := serve(t, srv, "127.0.0.1")
	m := newRawClient(t, "127.0.0.70")
	m.send(addr, rrq("ipxe.efi", "octet", "tsize", "0", "blksize", "1468"))
	oack, tid := m.recvFrom(5*time.Second, 0)
	if opcode(oack) != 6 {
		t.Fatalf("size request: opcode %d, want OACK", opcode(oack))
	}
	m.send(tid, errPkt(8, "User aborted the transfer"))
	if r := rec.waitN(t, 1)[0]; r.Outcome != tftpd.OutcomeAborted {
		t.Fatalf("size request: %s, want aborted", r.Outcome)
	}
	m.send(addr, rrq("ipxe.efi", "octet", "blksize", "1468"))
	oack, tid = m.recvFrom(5*time.Second, 0)
	if opcode(oack) != 6 {
		t.Fatalf("read: opcode %d, want OACK", opcode(oack))
	}
	// The read's OACK is not acknowledged yet; another source asks.
	other := newRawClient(t, "127.0.0.71")
	other.send(addr, rrq("ipxe.efi", "octet"))
	if b, _, ok := other.recv(200 * time.Millisecond); ok {
		t.Fatalf("a new request was answered (%q) while the slot holds the read of a source that has just answered", b[:min(len(b), 8)])
	}
	if st := srv.Stats(); st.Evicted != 0 || st.Waiting != 1 {
		t.Errorf("stats %+v: want no eviction, one request waiting", st)
	}
	m.send(tid, ack(0))
	first, _ := m.recvFrom(5*time.Second, tid.Port)
	if got := m.download(first, tid, 1468); !bytes.Equal(got, data) {
		t.Errorf("the read: %d bytes, want the file's %d", len(got), len(data))
	}
	first, otid := other.recvFrom(5*time.Second, 0)
	if got := other.download(first, otid, 512); !bytes.Equal(got, data) {
		t.Errorf("the waiting request: %d bytes, want the file's %d", len(got), len(data))
	}
	// A source never heard from is evicted as before.
	silent := newRawClient(t, "127.0.0.72")
	silent.send(addr, rrq("ipxe.efi", "octet"))
	silent.recvFrom(5*time.Second, 0)
	late := newRawClient(t, "127.0.0.73")
	late.send(addr, rrq("ipxe.efi", "octet"))
	first, ltid := late.recvFrom(5*time.Second, 0)
	if got := late.download(first, ltid, 512); !bytes.Equal(got, data) {
		t.Errorf("after the silent source: %d bytes, want the file's %d", len(got), len(data))
	}
	if st := srv.Stats(); st.Evicted != 1 {
		t.Errorf("stats %+v: want the silent source's transfer evicted", st)
	}
}

// TestEvictSpareOnce: a transfer acknowledged to the end earns its source one spare too,
// and one only. The source completes a read, then two more of its requests hold both slots
// unacknowledged; a new request from elsewhere evicts the newer of the two (the older has
// the spare), not the oldest as it would without one.
func TestEvictSpareOnce(t *testing.T) {
	data := payload(1000, 37)
	rec := newRecorder()
	srv := &tftpd.Server{FS: fstest.MapFS{"f": {Data: data}}, MaxTransfers: 2, MaxPerSource: 2, Timeout: 5 * time.Second,
		EvictAfter: time.Nanosecond, OnTransfer: rec.hook}
	addr := serve(t, srv, "127.0.0.1")
	m := newRawClient(t, "127.0.0.80")
	m.send(addr, rrq("f", "octet"))
	first, tid := m.recvFrom(5*time.Second, 0)
	if got := m.download(first, tid, 512); !bytes.Equal(got, data) {
		t.Fatalf("first read: %d bytes, want the file's %d", len(got), len(data))
	}
	if r := rec.waitN(t, 1)[0]; r.Outcome != tftpd.OutcomeOK {
		t.Fatalf("first read: %s, want ok", r.Outcome)
	}
	older, newer := newRawClient(t, "127.0.0.80"), newRawClient(t, "127.0.0.80")
	older.send(addr, rrq("f", "octet"))
	ofirst, otid := older.recvFrom(5*time.Second, 0)
	newer.send(addr, rrq("f", "octet"))
	newer.recvFrom(5*time.Second, 0)
	other := newRawClient(t, "127.0.0.81")
	other.send(addr, rrq("f", "octet"))
	xfirst, xtid := other.recvFrom(5*time.Second, 0)
	r := rec.waitN(t, 2)[1]
	if want := newer.conn.LocalAddr().(*net.UDPAddr).AddrPort(); r.Outcome != tftpd.OutcomeEvicted || r.Peer != want {
		t.Errorf("eviction: %s of %v, want %v (the newer request) evicted", r.Outcome, r.Peer, want)
	}
	if got := older.download(ofirst, otid, 512); !bytes.Equal(got, data) {
		t.Errorf("the older request: %d bytes, want the file's %d", len(got), len(data))
	}
	if got := other.download(xfirst, xtid, 512); !bytes.Equal(got, data) {
		t.Errorf("the request from elsewhere: %d bytes, want the file's %d", len(got), len(data))
	}
	if st := srv.Stats(); st.Evicted != 1 {
		t.Errorf("stats %+v: want one eviction", st)
	}
}

// TestFirstRetriesKnownSource: the first block goes FirstRetries+1 times to a source that
// never acknowledged anything, Retries+1 times to one that acknowledged an earlier transfer.
func TestFirstRetriesKnownSource(t *testing.T) {
	data := payload(1000, 34)
	srv := &tftpd.Server{FS: fstest.MapFS{"f": {Data: data}}, Timeout: 20 * time.Millisecond, Retries: 5, FirstRetries: 1}
	addr := serve(t, srv, "127.0.0.1")
	silent := func(ip string) (blocks int) {
		c := newRawClient(t, ip)
		c.send(addr, rrq("f", "octet"))
		for {
			b, _, ok := c.recv(time.Second)
			if !ok || opcode(b) == 5 {
				return blocks
			}
			blocks++
		}
	}
	if n := silent("127.0.0.50"); n != 2 {
		t.Errorf("a source never seen to acknowledge got block 1 %d times, want FirstRetries+1 = 2", n)
	}
	c := newRawClient(t, "127.0.0.50")
	c.send(addr, rrq("f", "octet"))
	first, tid := c.recvFrom(5*time.Second, 0)
	if got := c.download(first, tid, 512); !bytes.Equal(got, data) {
		t.Fatalf("got %d bytes, want %d identical", len(got), len(data))
	}
	if n := silent("127.0.0.50"); n != 6 {
		t.Errorf("a source that acknowledged before got block 1 %d times, want Retries+1 = 6", n)
	}
	if n := silent("127.0.0.51"); n != 2 {
		t.Errorf("another source got block 1 %d times, want 2", n)
	}
}

// TestEvictAfter: an unacknowledged transfer younger than EvictAfter keeps its slot (the
// request is dropped, with the queue off); once it has waited EvictAfter, a new request
// takes it.
func TestEvictAfter(t *testing.T) {
	const after = 300 * time.Millisecond
	srv := &tftpd.Server{FS: fstest.MapFS{"f": {Data: payload(2000, 35)}}, MaxTransfers: 1, MaxPerSource: 1, Timeout: 2 * time.Second, EvictAfter: after,
		MaxQueued: -1} // dropped, not held, so that the second request shows what the slot did
	addr := serve(t, srv, "127.0.0.1")
	a, b := newRawClient(t, "127.0.0.60"), newRawClient(t, "127.0.0.61")
	a.send(addr, rrq("f", "octet"))
	_, _ = a.recvFrom(5*time.Second, 0)
	start := time.Now()
	b.send(addr, rrq("f", "octet"))
	_, _, ok := b.recv(after / 3)
	if young := time.Since(start) < after; ok && young {
		t.Fatalf("a request took the slot of a transfer younger than EvictAfter")
	}
	if st := srv.Stats(); st.DroppedBusy != 1 || st.Evicted != 0 {
		t.Errorf("stats %+v: want one drop, no eviction", st)
	}
	waitFor(t, "EvictAfter to pass", func() bool { return time.Since(start) > after })
	b.send(addr, rrq("f", "octet"))
	if pkt, _ := b.recvFrom(5*time.Second, 0); opcode(pkt) != 3 {
		t.Fatalf("got %q, want DATA", pkt[:min(len(pkt), 8)])
	}
	if st := srv.Stats(); st.Evicted != 1 {
		t.Errorf("stats %+v: want one eviction", st)
	}
}

// readAll reads a transfer to its end from its first DATA block, acknowledging each block;
// nil when a block does not come within stall.
func readAll(c *rawClient, first []byte, tid *net.UDPAddr, blksize int, stall time.Duration) []byte {
	var out []byte
	want := uint16(1)
	pkt := first
	for {
		if opcode(pkt) != 3 {
			return nil
		}
		block := binary.BigEndian.Uint16(pkt[2:])
		if block == want {
			out = append(out, pkt[4:]...)
			want++
		}
		c.send(tid, ack(block))
		if block == want-1 && len(pkt)-4 < blksize {
			return out
		}
		end := time.Now().Add(stall)
		pkt = nil
		for pkt == nil && time.Now().Before(end) {
			b, from, ok := c.recv(time.Until(end))
			if ok && from.Port == tid.Port {
				pkt = b
			}
		}
		if pkt == nil {
			return nil
		}
	}
}
