package tftpd_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"testing"
	"testing/fstest"
	"time"

	"github.com/bettercompute/siteboot/tftpd"
	"github.com/google/go-cmp/cmp"
)

// blockOf returns the block number of a DATA packet, failing on anything else.
func blockOf(t *testing.T, b []byte) uint16 {
	t.Helper()
	if opcode(b) != 3 {
		t.Fatalf("got %q, want DATA", b[:min(len(b), 8)])
	}
	return binary.BigEndian.Uint16(b[2:])
}

// TestWindowResume follows RFC 7440 on a raw client: a window of 4 is sent without waiting;
// nothing more comes until it is acknowledged (no more in flight than the window); a short
// acknowledgement (block 6 of 5..8) makes the server go on from block 7; silence makes it
// send the window from the oldest unacknowledged block again; and the file arrives whole.
func TestWindowResume(t *testing.T) {
	data := payload(20*512+100, 41) // 21 blocks
	rec := newRecorder()
	srv := &tftpd.Server{FS: fstest.MapFS{"f": {Data: data}}, Timeout: 300 * time.Millisecond, OnTransfer: rec.hook}
	addr := serve(t, srv, "127.0.0.1")
	c := newRawClient(t, "127.0.0.1")
	c.send(addr, rrq("f", "octet", "windowsize", "4"))
	oack, tid := c.recvFrom(5*time.Second, 0)
	if diff := cmp.Diff(map[string]string{"windowsize": "4"}, oackOptions(t, oack)); diff != "" {
		t.Fatalf("OACK (-want +got):\n%s", diff)
	}
	blocks := map[uint16][]byte{}
	// window reads what arrives within d and returns the block numbers in order.
	window := func(d time.Duration) []uint16 {
		var got []uint16
		end := time.Now().Add(d)
		for {
			b, from, ok := c.recv(time.Until(end))
			if !ok {
				return got
			}
			if from.Port != tid.Port {
				continue
			}
			n := blockOf(t, b)
			got = append(got, n)
			blocks[n] = append([]byte(nil), b[4:]...)
		}
	}
	// Under the 300 ms timeout: what arrives is one window, sent once.
	const quiet = 150 * time.Millisecond
	c.send(tid, ack(0))
	if got := window(quiet); fmt.Sprint(got) != "[1 2 3 4]" {
		t.Fatalf("first window %v, want [1 2 3 4] and nothing more before its acknowledgement", got)
	}
	c.send(tid, ack(4))
	if got := window(quiet); fmt.Sprint(got) != "[5 6 7 8]" {
		t.Fatalf("second window %v, want [5 6 7 8]", got)
	}
	c.send(tid, ack(6)) // short: 7 and 8 "lost"
	if got := window(quiet); fmt.Sprint(got) != "[7 8 9 10]" {
		t.Fatalf("after acknowledging 6 of 5..8: %v, want [7 8 9 10]", got)
	}
	c.send(tid, ack(5)) // a late duplicate, outside the window: ignored
	// Silence: after the timeout the window is sent again from block 7.
	if got := window(400 * time.Millisecond); fmt.Sprint(got) != "[7 8 9 10]" {
		t.Fatalf("after a time-out: %v, want the window [7 8 9 10] again", got)
	}
	for next := uint16(10); ; {
		c.send(tid, ack(next))
		got := window(quiet)
		if len(got) == 0 {
			break
		}
		next = got[len(got)-1]
	}
	var out []byte
	for n := uint16(1); n <= 21; n++ {
		out = append(out, blocks[n]...)
	}
	if !bytes.Equal(out, data) {
		t.Fatalf("got %d bytes, want %d identical", len(out), len(data))
	}
	r := rec.waitN(t, 1)[0]
	if r.Outcome != tftpd.OutcomeOK || r.Window != 4 || r.Bytes != int64(len(data)) {
		t.Errorf("report %+v, want ok at window 4 with every byte", r)
	}
	if st := srv.Stats(); st.Windowed != 1 || st.Completed != 1 {
		t.Errorf("stats %+v", st)
	}
}

// TestWindowWrapsAndExactMultiple: a windowed transfer of more than 65535 blocks wraps its
// block numbers within a window, and a file of a whole number of blocks ends with an empty
// block in the last window.
func TestWindowWrapsAndExactMultiple(t *testing.T) {
	if testing.Short() {
		t.Skip("moves 32 MiB in 512-byte blocks")
	}
	data := payload(65540*512, 42)
	srv := &tftpd.Server{FS: fstest.MapFS{"f": {Data: data}}}
	addr := serve(t, srv, "127.0.0.1")
	c := newRawClient(t, "127.0.0.1")
	c.send(addr, rrq("f", "octet", "windowsize", "7"))
	_, tid := c.recvFrom(5*time.Second, 0)
	c.send(tid, ack(0))
	first, _ := c.recvFrom(5*time.Second, tid.Port)
	got, acks := c.downloadWindow(first, tid, 512, 7)
	if !bytes.Equal(got, data) {
		t.Fatalf("got %d bytes, want %d identical", len(got), len(data))
	}
	if blocks := 65541; acks != (blocks+6)/7 {
		t.Errorf("%d acknowledgements for %d blocks in windows of 7", acks, blocks)
	}
}
