package tftpd_test

import (
	"bytes"
	"errors"
	"net"
	"strconv"
	"testing"
	"testing/fstest"
	"time"

	"github.com/bettercompute/siteboot/tftpd"
	"github.com/pin/tftp/v3"
)

// TestReplyFromAskedAddress: every transfer answers from the address its request was sent
// to, on a host with several addresses: a listener bound to 127.0.0.2 (the kernel would route
// replies from 127.0.0.1), and wildcard listeners (IPv4, and IPv6 dual-stack) asked at
// 127.0.0.2, 127.0.0.3 and ::1. pin/tftp's client, like EDK2, drops data from any other
// address.
func TestReplyFromAskedAddress(t *testing.T) {
	data := payload(70_000, 21)
	fsys := fstest.MapFS{"ipxe.efi": {Data: data}}

	fixed := &tftpd.Server{FS: fsys}
	fixedAddr := serve(t, fixed, "127.0.0.2")
	wild4 := &tftpd.Server{FS: fsys}
	wild4Addr := serve(t, wild4, "0.0.0.0")
	wild6 := &tftpd.Server{FS: fsys}
	wild6Addr := serve(t, wild6, "::")

	tests := []struct {
		name, ask string
		port      int
	}{
		{"bound 127.0.0.2", "127.0.0.2", fixedAddr.Port},
		{"wildcard asked 127.0.0.2", "127.0.0.2", wild4Addr.Port},
		{"wildcard asked 127.0.0.3", "127.0.0.3", wild4Addr.Port},
		{"dual-stack asked 127.0.0.3", "127.0.0.3", wild6Addr.Port},
		{"dual-stack asked ::1", "::1", wild6Addr.Port},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			target := net.JoinHostPort(tt.ask, strconv.Itoa(tt.port))

			// pin/tftp's client, which checks where the data comes from.
			c, err := tftp.NewClient(target)
			if err != nil {
				t.Fatal(err)
			}
			c.SetTimeout(500 * time.Millisecond)
			c.SetRetries(2)
			c.SetBlockSize(1468)
			c.RequestTSize(true)
			wt, err := c.Receive("ipxe.efi", "octet")
			if err != nil {
				t.Fatalf("pin/tftp client asking %s: %v", target, err)
			}
			var got bytes.Buffer
			if _, err := wt.WriteTo(&got); err != nil {
				t.Fatalf("pin/tftp client asking %s: %v", target, err)
			}
			if !bytes.Equal(got.Bytes(), data) {
				t.Fatalf("got %d bytes, want %d identical", got.Len(), len(data))
			}

			// A raw client sees the source of every datagram of the transfer.
			local := "127.0.0.1"
			if tt.ask == "::1" {
				local = "::1"
			}
			rc := newRawClient(t, local)
			to := &net.UDPAddr{IP: net.ParseIP(tt.ask), Port: tt.port}
			rc.send(to, rrq("ipxe.efi", "octet"))
			pkt, tid := rc.recvFrom(5*time.Second, 0)
			if !tid.IP.Equal(to.IP) || tid.Port == tt.port {
				t.Fatalf("first DATA from %v, want %s on a port of its own", tid, tt.ask)
			}
			if got := rc.download(pkt, tid, 512); !bytes.Equal(got, data) {
				t.Fatalf("raw client got %d bytes", len(got))
			}
		})
	}
	// The last acknowledgement may still be on its way to the server: wait for no transfer
	// to be running, then look at how they ended.
	for name, srv := range map[string]*tftpd.Server{"bound": fixed, "wildcard": wild4, "dual-stack": wild6} {
		waitFor(t, name+" transfers to end", func() bool { return srv.Stats().Active == 0 })
		if c := srv.Stats(); c.Failed != 0 || c.Completed != c.Transfers || c.Transfers == 0 {
			t.Errorf("%s counters %+v: want every transfer completed", name, c)
		}
	}
}

// TestUnknownTransferID: a datagram to a transfer's socket from another port is answered
// with error 5 and does not disturb the transfer.
func TestUnknownTransferID(t *testing.T) {
	data := payload(3000, 22)
	rec := newRecorder()
	srv := &tftpd.Server{FS: fstest.MapFS{"f": {Data: data}}, OnTransfer: rec.hook}
	addr := serve(t, srv, "127.0.0.1")
	c := newRawClient(t, "127.0.0.1")
	c.send(addr, rrq("f", "octet"))
	first, tid := c.recvFrom(5*time.Second, 0)

	intruder := newRawClient(t, "127.0.0.1")
	intruder.send(tid, ack(1))
	pkt, from := intruder.recvFrom(5*time.Second, tid.Port)
	if code, msg := errorOf(t, pkt); code != 5 || msg != "unknown transfer id" || from.Port != tid.Port {
		t.Errorf("intruder got error %d %q from %v", code, msg, from)
	}
	if got := c.download(first, tid, 512); !bytes.Equal(got, data) {
		t.Fatalf("got %d bytes, want %d identical", len(got), len(data))
	}
	if r := rec.waitN(t, 1)[0]; r.Outcome != tftpd.OutcomeOK || r.Bytes != int64(len(data)) {
		t.Errorf("report %q %d bytes", r.Outcome, r.Bytes)
	}
}

// TestDuplicateAckAndExactMultiple: a duplicate acknowledgement does not make the server
// send a block again (no Sorcerer's Apprentice), and a file of a whole number of blocks ends
// with an empty block.
func TestDuplicateAckAndExactMultiple(t *testing.T) {
	data := payload(2*512, 23)
	srv := &tftpd.Server{FS: fstest.MapFS{"f": {Data: data}}, Timeout: 30 * time.Second}
	addr := serve(t, srv, "127.0.0.1")
	c := newRawClient(t, "127.0.0.1")
	c.send(addr, rrq("f", "octet"))
	b1, tid := c.recvFrom(5*time.Second, 0)
	c.send(tid, ack(1))
	b2, _ := c.recvFrom(5*time.Second, tid.Port)
	c.send(tid, ack(1)) // duplicate
	if pkt, _, ok := c.recv(200 * time.Millisecond); ok {
		t.Fatalf("a duplicate acknowledgement was answered with %q", pkt[:min(len(pkt), 8)])
	}
	c.send(tid, ack(2))
	b3, _ := c.recvFrom(5*time.Second, tid.Port)
	if opcode(b3) != 3 || len(b3) != 4 || b3[3] != 3 {
		t.Fatalf("third packet %q, want an empty DATA block 3", b3)
	}
	c.send(tid, ack(3))
	if got := append(append([]byte(nil), b1[4:]...), b2[4:]...); !bytes.Equal(got, data) {
		t.Fatalf("blocks differ from the file")
	}
	waitFor(t, "the transfer to complete", func() bool { return srv.Stats().Completed == 1 })
}

// TestErrorAfterOACK: an error 8 from the client after the OACK (as EDK2 sends) ends the
// transfer as aborted, with the client's code in the detail.
func TestErrorAfterOACK(t *testing.T) {
	rec := newRecorder()
	srv := &tftpd.Server{FS: fstest.MapFS{"f": {Data: payload(4000, 24)}}, OnTransfer: rec.hook}
	addr := serve(t, srv, "127.0.0.1")
	c := newRawClient(t, "127.0.0.1")
	c.send(addr, rrq("f", "octet", "tsize", "0", "blksize", "1468"))
	pkt, tid := c.recvFrom(5*time.Second, 0)
	if diff := oackOptions(t, pkt); diff["tsize"] != "4000" || diff["blksize"] != "1468" {
		t.Fatalf("OACK %v", diff)
	}
	c.send(tid, errPkt(8, "user aborted"))
	r := rec.waitN(t, 1)[0]
	if r.Outcome != tftpd.OutcomeAborted || !errors.Is(r.Err, tftpd.ErrAborted) || r.Bytes != 0 {
		t.Errorf("report %q %v %d bytes; want aborted before any data", r.Outcome, r.Err, r.Bytes)
	}
	if _, _, ok := c.recv(200 * time.Millisecond); ok {
		t.Errorf("the server went on after the client's error")
	}
}
