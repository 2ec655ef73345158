//go:build linux

package tftpd_test

import (
	"errors"
	"os"
	"syscall"
	"testing"
	"testing/fstest"
	"time"

	"github.com/bettercompute/siteboot/tftpd"
)

// TestTransferSocketFails: when the server cannot open a transfer's socket (here: no file
// descriptor left), the admitted request gives its slot back and is reported aborted; the
// next request, with descriptors again, is served.
func TestTransferSocketFails(t *testing.T) {
	rec := newRecorder()
	srv := &tftpd.Server{FS: fstest.MapFS{"f": {Data: []byte("data")}}, MaxTransfers: 1, MaxPerSource: 1, OnTransfer: rec.hook}
	addr := serve(t, srv, "127.0.0.1")
	c := newRawClient(t, "127.0.0.1")

	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	lowest := f.Fd() // the lowest free descriptor number
	f.Close()
	tight := old
	tight.Cur = uint64(lowest)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &tight); err != nil {
		t.Fatal(err)
	}
	c.send(addr, rrq("f", "octet"))
	r := rec.waitN(t, 1)[0]
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	if r.Outcome != tftpd.OutcomeAborted || !errors.Is(r.Err, tftpd.ErrAborted) || !errors.Is(r.Err, syscall.EMFILE) {
		t.Errorf("report %q %v; want aborted wrapping EMFILE", r.Outcome, r.Err)
	}
	if got := srv.Stats(); got.Active != 0 || got.Failed != 1 || got.Transfers != 0 {
		t.Errorf("counters %+v: want the slot back, one failure, no transfer", got)
	}
	if _, _, ok := c.recv(200 * time.Millisecond); ok {
		t.Errorf("the request that got no socket was answered")
	}
	c.send(addr, rrq("f", "octet"))
	pkt, tid := c.recvFrom(5*time.Second, 0)
	if got := c.download(pkt, tid, 512); string(got) != "data" {
		t.Fatalf("after the limit was lifted: got %q", got)
	}
}
