package tftpd_test

import (
	"bytes"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/tftpd"
)

// TestMappedFiles: files of the root up to MaxMapped are sent from one mapping per file,
// shared by the transfers that send it at once and given back after the last; a larger
// file is read as before. Every transfer gets its file byte for byte, in lock step and in
// windows, a file of whole blocks ending with an empty one, on the poller's path and on a
// thread of its own.
func TestMappedFiles(t *testing.T) {
	onBothPaths(t, func(t *testing.T, poller bool) {
		dir := t.TempDir()
		files := map[string][]byte{
			"ipxe.efi": payload(300_000, 1),
			"whole":    payload(4*1468, 2),
			"big":      payload(tftpd.MaxMapped+1, 3),
		}
		writeFiles(t, dir, files)
		rec := newRecorder()
		srv := &tftpd.Server{Dir: dir, OnTransfer: rec.hook}
		if poller {
			tftpd.PollerOnly(srv)
		}
		addr := serve(t, srv, "127.0.0.1")

		// Three transfers held after their first block: two of one file share its
		// mapping, the large file has none.
		type held struct {
			c     *rawClient
			file  string
			win   int
			first []byte
			tid   int
		}
		var hs []held
		for _, h := range []struct {
			file string
			win  int
		}{{"ipxe.efi", 4}, {"ipxe.efi", 1}, {"big", 1}} {
			c := newRawClient(t, "127.0.0.1")
			first, from := c.openOACK(addr, h.file, h.win)
			hs = append(hs, held{c, h.file, h.win, first, from.Port})
		}
		if n := tftpd.Mapped(srv); n != 1 {
			t.Errorf("%d files mapped while two transfers of one small file and one of a large file run, want 1", n)
		}
		for _, h := range hs {
			tid := *addr
			tid.Port = h.tid
			var got []byte
			if h.win > 1 {
				got, _ = h.c.downloadWindow(h.first, &tid, 1468, h.win)
			} else {
				got = h.c.download(h.first, &tid, 1468)
			}
			if !bytes.Equal(got, files[h.file]) {
				t.Errorf("%s at windowsize %d: %d bytes, want the file's %d", h.file, h.win, len(got), len(files[h.file]))
			}
		}
		// A file of whole blocks, mapped: its last block is empty.
		c := newRawClient(t, "127.0.0.1")
		first, from := c.openOACK(addr, "whole", 4)
		got, acks := c.downloadWindow(first, from, 1468, 4)
		if !bytes.Equal(got, files["whole"]) || acks != 2 {
			t.Errorf("whole: %d bytes in %d acknowledgements, want %d in 2 (four full blocks, then an empty one)", len(got), acks, len(files["whole"]))
		}
		for _, r := range rec.waitN(t, 4) {
			if r.Outcome != tftpd.OutcomeOK || r.Bytes != int64(len(files[r.File])) {
				t.Errorf("report %s: %s, %d bytes (%v), want ok, %d", r.File, r.Outcome, r.Bytes, r.Err, len(files[r.File]))
			}
		}
		if n := tftpd.Mapped(srv); n != 0 {
			t.Errorf("%d files mapped after every transfer ended, want 0", n)
		}
	})
}

// TestMappedFileCutShort: a file cut short while a transfer sends it from its mapping ends
// that transfer, failed, with error 0 to the client and the cause in the report; the
// blocks sent before are the file's, and the server goes on serving.
func TestMappedFileCutShort(t *testing.T) {
	dir := t.TempDir()
	data := payload(1<<20, 4)
	writeFiles(t, dir, map[string][]byte{"ipxe.efi": data, "other": payload(5000, 5)})
	rec := newRecorder()
	srv := &tftpd.Server{Dir: dir, OnTransfer: rec.hook}
	addr := serve(t, srv, "127.0.0.1")

	c := newRawClient(t, "127.0.0.1")
	pkt, from := c.openOACK(addr, "ipxe.efi", 4)
	var got []byte
	for block := uint16(1); ; block++ {
		if opcode(pkt) != 3 {
			t.Fatalf("block %d: opcode %d, want DATA", block, opcode(pkt))
		}
		got = append(got, pkt[4:]...)
		if block == 4 {
			break
		}
		pkt, _ = c.recvFrom(5*time.Second, from.Port)
	}
	if !bytes.Equal(got, data[:len(got)]) {
		t.Fatal("the first window is not the file's first bytes")
	}
	if err := os.Truncate(filepath.Join(dir, "ipxe.efi"), 0); err != nil {
		t.Fatal(err)
	}
	c.send(from, ack(4))
	pkt, _ = c.recvFrom(5*time.Second, from.Port)
	if code, msg := errorOf(t, pkt); code != 0 || msg != "read error" {
		t.Errorf("after the file was cut short: error %d %q, want 0 \"read error\"", code, msg)
	}
	r := rec.waitN(t, 1)[0]
	var op *tftpd.OpError
	if r.Outcome != tftpd.OutcomeFailed || !errors.As(r.Err, &op) || op.Op != "read file" || !strings.Contains(r.Err.Error(), "cut short") {
		t.Errorf("report: %s, %v; want failed, a read file error saying the file was cut short", r.Outcome, r.Err)
	}

	c2 := newRawClient(t, "127.0.0.1")
	c2.send(addr, rrq("other", "octet"))
	first, from2 := c2.recvFrom(5*time.Second, 0)
	if got := c2.download(first, from2, 512); !bytes.Equal(got, payload(5000, 5)) {
		t.Errorf("the next transfer: %d bytes, want the file's 5000", len(got))
	}
	waitFor(t, "mappings given back", func() bool { return tftpd.Mapped(srv) == 0 })
}

// TestMappedFileReplaced: a file renamed over the one being sent, of the same size, is
// mapped anew: a transfer that starts after gets the new bytes, the one under way goes on
// with the old.
func TestMappedFileReplaced(t *testing.T) {
	dir := t.TempDir()
	old, repl := payload(100_000, 6), payload(100_000, 7)
	writeFiles(t, dir, map[string][]byte{"ipxe.efi": old, "next": repl})
	rec := newRecorder()
	srv := &tftpd.Server{Dir: dir, OnTransfer: rec.hook}
	addr := serve(t, srv, "127.0.0.1")

	c1 := newRawClient(t, "127.0.0.1")
	c1.send(addr, rrq("ipxe.efi", "octet"))
	first1, from1 := c1.recvFrom(5*time.Second, 0)
	if err := os.Rename(filepath.Join(dir, "next"), filepath.Join(dir, "ipxe.efi")); err != nil {
		t.Fatal(err)
	}
	c2 := newRawClient(t, "127.0.0.1")
	c2.send(addr, rrq("ipxe.efi", "octet"))
	first2, from2 := c2.recvFrom(5*time.Second, 0)
	if n := tftpd.Mapped(srv); n != 2 {
		t.Errorf("%d files mapped while the old and the new file are sent, want 2", n)
	}
	if got := c2.download(first2, from2, 512); !bytes.Equal(got, repl) {
		t.Error("the transfer that started after the rename did not get the new file")
	}
	if got := c1.download(first1, from1, 512); !bytes.Equal(got, old) {
		t.Error("the transfer under way did not go on with the old file")
	}
	rec.waitN(t, 2)
	waitFor(t, "mappings given back", func() bool { return tftpd.Mapped(srv) == 0 })
}

// openOACK asks for name at blksize 1468 (and windowsize win above 1), acknowledges the
// OACK and returns the first DATA block and the transfer's address.
func (c *rawClient) openOACK(addr *net.UDPAddr, name string, win int) ([]byte, *net.UDPAddr) {
	c.t.Helper()
	opts := []string{"blksize", "1468"}
	if win > 1 {
		opts = append(opts, "windowsize", strconv.Itoa(win))
	}
	c.send(addr, rrq(name, "octet", opts...))
	oack, from := c.recvFrom(5*time.Second, 0)
	if opcode(oack) != 6 {
		c.t.Fatalf("%s: opcode %d, want OACK", name, opcode(oack))
	}
	c.send(from, ack(0))
	first, _ := c.recvFrom(5*time.Second, from.Port)
	return first, from
}
