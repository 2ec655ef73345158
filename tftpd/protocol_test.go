package tftpd_test

import (
	"bytes"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/bettercompute/siteboot/clock/clocktest"
	"github.com/bettercompute/siteboot/internal/testlog"

	"github.com/bettercompute/siteboot/tftpd"
	"github.com/google/go-cmp/cmp"
)

// TestOVMFAbortThenRetry replays what EDK2's TFTP client does (seen with OVMF): ask
// "tsize 0 blksize 1468 windowsize 4", take the OACK, abort with error 8, ask again from the
// same port without tsize, and read the file.
func TestOVMFAbortThenRetry(t *testing.T) {
	data := payload(300_001, 3)
	rec := newRecorder()
	srv := &tftpd.Server{FS: fstest.MapFS{"ipxe.efi": {Data: data}}, OnTransfer: rec.hook}
	addr := serve(t, srv, "127.0.0.1")
	c := newRawClient(t, "127.0.0.1")

	c.send(addr, rrq("ipxe.efi", "octet", "tsize", "0", "blksize", "1468", "windowsize", "4"))
	pkt, tid1 := c.recvFrom(5*time.Second, 0)
	if diff := cmp.Diff(map[string]string{"tsize": strconv.Itoa(len(data)), "blksize": "1468", "windowsize": "4"}, oackOptions(t, pkt)); diff != "" {
		t.Fatalf("first OACK (-want +got):\n%s", diff)
	}
	if tid1.Port == addr.Port {
		t.Fatalf("OACK came from the listening port %d, want a transfer port", tid1.Port)
	}
	c.send(tid1, errPkt(8, "User aborted the transfer"))

	c.send(addr, rrq("ipxe.efi", "octet", "blksize", "1468", "windowsize", "4"))
	pkt, tid2 := c.recvFrom(5*time.Second, 0, tid1.Port) // tid1 may answer the abort
	if diff := cmp.Diff(map[string]string{"blksize": "1468", "windowsize": "4"}, oackOptions(t, pkt)); diff != "" {
		t.Fatalf("second OACK (-want +got):\n%s", diff)
	}
	c.send(tid2, ack(0))
	first, _ := c.recvFrom(5*time.Second, tid2.Port)
	got, acks := c.downloadWindow(first, tid2, 1468, 4)
	if !bytes.Equal(got, data) {
		t.Fatalf("got %d bytes, want %d identical", len(got), len(data))
	}
	// 205 blocks, acknowledged a window of 4 at a time: 52 acknowledgements, none lost here.
	if blocks := len(data)/1468 + 1; acks != (blocks+3)/4 {
		t.Errorf("%d acknowledgements for %d blocks in windows of 4", acks, blocks)
	}

	reps := rec.waitN(t, 2)
	outcomes := map[tftpd.Outcome]int{}
	for _, r := range reps {
		outcomes[r.Outcome]++
		if r.Outcome == tftpd.OutcomeAborted && !errors.Is(r.Err, tftpd.ErrAborted) {
			t.Errorf("aborted transfer: Err %v does not wrap ErrAborted", r.Err)
		}
	}
	if diff := cmp.Diff(map[tftpd.Outcome]int{tftpd.OutcomeAborted: 1, tftpd.OutcomeOK: 1}, outcomes); diff != "" {
		t.Errorf("outcomes (-want +got):\n%s", diff)
	}
	if c := srv.Stats(); c.Transfers != 2 || c.Completed != 1 || c.Failed != 1 || c.Active != 0 {
		t.Errorf("counters %+v", c)
	}
}

// TestOptions checks what is granted for the options a client asks.
func TestOptions(t *testing.T) {
	data := payload(10_000, 4)
	srv := &tftpd.Server{FS: fstest.MapFS{"f": {Data: data}}, MaxBlockSize: 8192, MaxWindow: 32}
	addr := serve(t, srv, "127.0.0.1")
	tests := []struct {
		name string
		opts []string
		want map[string]string // nil: no OACK, DATA of 512 bytes first
		blk  int
		win  int
	}{
		{"none", nil, nil, 512, 1},
		{"blksize", []string{"blksize", "1468"}, map[string]string{"blksize": "1468"}, 1468, 1},
		{"upper case names", []string{"BLKSIZE", "1024", "TSize", "0"}, map[string]string{"blksize": "1024", "tsize": "10000"}, 1024, 1},
		{"clamped to MaxBlockSize", []string{"blksize", "65464"}, map[string]string{"blksize": "8192"}, 8192, 1},
		{"over 65464 clamped", []string{"blksize", "99999"}, map[string]string{"blksize": "8192"}, 8192, 1},
		{"under 512 ignored", []string{"blksize", "256"}, nil, 512, 1},
		{"not a number ignored", []string{"blksize", "+1468"}, nil, 512, 1},
		{"only windowsize", []string{"windowsize", "16"}, map[string]string{"windowsize": "16"}, 512, 16},
		{"windowsize clamped to MaxWindow", []string{"windowsize", "500", "blksize", "1024"}, map[string]string{"windowsize": "32", "blksize": "1024"}, 1024, 32},
		{"windowsize clamped to MaxWindowBytes", []string{"blksize", "8192", "windowsize", "64"}, map[string]string{"windowsize": "32", "blksize": "8192"}, 8192, 32},
		{"windowsize 0 ignored", []string{"windowsize", "0"}, nil, 512, 1},
		{"windowsize over 65535 ignored", []string{"windowsize", "65536"}, nil, 512, 1},
		{"windowsize 1", []string{"windowsize", "1"}, map[string]string{"windowsize": "1"}, 512, 1},
		{"timeout ignored", []string{"timeout", "1", "tsize", "0"}, map[string]string{"tsize": "10000"}, 512, 1},
		{"duplicate: first wins", []string{"blksize", "1024", "blksize", "2048"}, map[string]string{"blksize": "1024"}, 1024, 1},
		{"unterminated trailing option", []string{"blksize", "1024", "tsize"}, map[string]string{"blksize": "1024"}, 1024, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newRawClient(t, "127.0.0.1")
			req := rrq("f", "OCTET", tt.opts...)
			if tt.name == "unterminated trailing option" {
				req = req[:len(req)-1]
			}
			c.send(addr, req)
			pkt, tid := c.recvFrom(5*time.Second, 0)
			if tt.want != nil {
				if diff := cmp.Diff(tt.want, oackOptions(t, pkt)); diff != "" {
					t.Fatalf("OACK (-want +got):\n%s", diff)
				}
				c.send(tid, ack(0))
				pkt, _ = c.recvFrom(5*time.Second, tid.Port)
			}
			if opcode(pkt) != 3 || len(pkt)-4 != tt.blk {
				t.Fatalf("first packet: opcode %d, %d data bytes; want DATA of %d", opcode(pkt), len(pkt)-4, tt.blk)
			}
			if got, _ := c.downloadWindow(pkt, tid, tt.blk, tt.win); !bytes.Equal(got, data) {
				t.Fatalf("got %d bytes, want %d identical", len(got), len(data))
			}
		})
	}
}

// TestRefusals checks the answers to what is not served: generic text on the wire, the
// proper code, the detail in the log and the hook, and no transfer.
func TestRefusals(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string][]byte{"f": []byte("x"), "sub/g": []byte("y")})
	var logBuf testlog.Buffer
	rec := newRecorder()
	srv := &tftpd.Server{Dir: dir, OnTransfer: rec.hook, Logger: slog.New(slog.NewTextHandler(&logBuf, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	addr := serve(t, srv, "127.0.0.1")

	tests := []struct {
		name     string
		req      []byte
		code     uint16
		msg      string
		outcome  tftpd.Outcome
		sentinel error
	}{
		{"write request", append([]byte{0, 2}, "f\x00octet\x00"...), 2, "read-only server", tftpd.OutcomeRefused, tftpd.ErrWriteRefused},
		{"netascii", rrq("f", "netascii"), 0, "octet mode only", tftpd.OutcomeRefused, tftpd.ErrMode},
		{"mail", rrq("f", "mail"), 0, "octet mode only", tftpd.OutcomeRefused, tftpd.ErrMode},
		{"missing", rrq("nope.efi", "octet"), 1, "file not found", tftpd.OutcomeNotFound, tftpd.ErrNotFound},
		{"directory", rrq("sub", "octet"), 2, "access violation", tftpd.OutcomeDenied, tftpd.ErrDenied},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(rec.all())
			c := newRawClient(t, "127.0.0.1")
			c.send(addr, tt.req)
			pkt, from := c.recvFrom(5*time.Second, 0)
			if from.Port != addr.Port {
				t.Errorf("refusal came from port %d, want the listening port %d (no transfer socket)", from.Port, addr.Port)
			}
			code, msg := errorOf(t, pkt)
			if code != tt.code || msg != tt.msg {
				t.Errorf("got error %d %q, want %d %q", code, msg, tt.code, tt.msg)
			}
			r := rec.waitN(t, before+1)[before]
			if r.Outcome != tt.outcome || !errors.Is(r.Err, tt.sentinel) {
				t.Errorf("report: outcome %q err %v; want %q wrapping %v", r.Outcome, r.Err, tt.outcome, tt.sentinel)
			}
		})
	}
	if c := srv.Stats(); c.Transfers != 0 || c.Active != 0 {
		t.Errorf("refusals started transfers: %+v", c)
	}
	if c := srv.Stats(); c.RefusedWrite != 1 || c.RefusedMode != 2 || c.NotFound != 1 {
		t.Errorf("counters %+v", c)
	}
	// The detail is in the log: the missing name and the reason.
	log := logBuf.String()
	for _, want := range []string{"nope.efi", "not a regular file"} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
}

// TestMalformedDropped sends datagrams that are not requests: nothing is answered.
func TestMalformedDropped(t *testing.T) {
	srv := &tftpd.Server{FS: fstest.MapFS{"f": {Data: []byte("x")}}}
	addr := serve(t, srv, "127.0.0.1")
	c := newRawClient(t, "127.0.0.1")
	bad := [][]byte{
		{}, {0}, {0, 1}, {0, 1, 'f'}, {0, 1, 'f', 0}, {0, 1, 0, 'o', 0}, rrq("f", "")[:5],
		ack(1), errPkt(0, "x"), {0, 3, 0, 1, 'd'}, {0, 6, 'a', 0, 'b', 0}, {0, 9, 0}, {0xff, 0xff},
	}
	for _, b := range bad {
		c.send(addr, b)
	}
	c.send(addr, rrq("f", "octet")) // a good one last: its answer must be the first thing seen
	pkt, tid := c.recvFrom(5*time.Second, 0)
	if opcode(pkt) != 3 {
		t.Fatalf("first answer has opcode %d, want the DATA of the good request", opcode(pkt))
	}
	c.download(pkt, tid, 512)
	waitFor(t, "the good request's transfer", func() bool { return srv.Stats().Requests == uint64(len(bad)+1) })
	if got := srv.Stats().DroppedMalformed; got != uint64(len(bad)) {
		t.Errorf("DroppedMalformed %d, want %d", got, len(bad))
	}
}

// TestTraversal sends names that try to leave the root. Nothing outside it is read: every
// answer is an error, and none carries a byte of the file outside.
func TestTraversal(t *testing.T) {
	base := t.TempDir()
	root := filepath.Join(base, "root")
	outside := filepath.Join(base, "outside")
	const secret = "SECRET-OUTSIDE-THE-ROOT"
	writeFiles(t, root, map[string][]byte{"ok.txt": []byte("inside"), "sub/inner.txt": []byte("inner")})
	writeFiles(t, outside, map[string][]byte{"secret": []byte(secret)})
	for link, target := range map[string]string{
		"escape":          "../outside/secret",
		"escape-abs":      filepath.Join(outside, "secret"),
		"escape-dir":      "../outside",
		"sub/escape-deep": "../../outside/secret",
	} {
		if err := os.Symlink(target, filepath.Join(root, link)); err != nil {
			t.Fatal(err)
		}
	}
	long := strings.Repeat("a/", 600) + "x"
	corpus := []string{
		"../outside/secret", "..", "../", "./..", "a/../../outside/secret", "sub/../../outside/secret",
		"/etc/passwd", "//etc/passwd", "/../outside/secret", `..\outside\secret`, `sub\..\..\outside\secret`,
		filepath.Join(outside, "secret"), "escape", "escape-abs", "escape-dir/secret", "sub/escape-deep",
		"sub/./inner.txt", "sub//inner.txt", "sub/", ".", "ok.txt/..", "ok.txt\x01", "\x7f", long,
		strings.Repeat("A", 1500), "ok.txt\x00../outside/secret",
	}
	check := func(t *testing.T, srv *tftpd.Server, rootFDs int) {
		sock0, fd0 := fdCount(t)
		addr := serve(t, srv, "127.0.0.1")
		c := newRawClient(t, "127.0.0.1")
		for _, name := range corpus {
			c.send(addr, rrq(name, "octet"))
			pkt, _ := c.recvFrom(5*time.Second, 0)
			if opcode(pkt) != 5 {
				t.Errorf("%q: answered opcode %d (%q), want an error", name, opcode(pkt), pkt)
				continue
			}
			if bytes.Contains(pkt, []byte(secret)) || bytes.Contains(pkt, []byte(base)) {
				t.Errorf("%q: the answer leaks: %q", name, pkt)
			}
		}
		if got := srv.Stats(); got.Transfers != 0 || got.Bytes != 0 {
			t.Errorf("counters %+v: a transfer ran", got)
		}
		sock1, fd1 := fdCount(t)
		if sock1 != sock0+2 || fd1 != fd0+rootFDs { // the server's socket and the client's; the root
			t.Errorf("descriptors: sockets %d -> %d (want +2), others %d -> %d (want +%d)", sock0, sock1, fd0, fd1, rootFDs)
		}
	}
	t.Run("Dir", func(t *testing.T) { check(t, &tftpd.Server{Dir: root}, 1) })
	t.Run("FS", func(t *testing.T) {
		// Every name the server hands to the FS must be a valid fs path; the FS here would
		// serve anything it is asked.
		fsys := &recordingFS{FS: fstest.MapFS{"ok.txt": {Data: []byte("inside")}}}
		check(t, &tftpd.Server{FS: fsys}, 0)
		for _, name := range fsys.names() {
			if !fs.ValidPath(name) || strings.Contains(name, "..") {
				t.Errorf("the FS was asked for %q", name)
			}
		}
	})
	t.Run("inside", func(t *testing.T) {
		addr := serve(t, &tftpd.Server{Dir: root}, "127.0.0.1")
		for name, want := range map[string]string{"/ok.txt": "inside", `sub\inner.txt`: "inner", "/sub/inner.txt": "inner"} {
			c := newRawClient(t, "127.0.0.1")
			c.send(addr, rrq(name, "octet"))
			pkt, tid := c.recvFrom(5*time.Second, 0)
			if got := c.download(pkt, tid, 512); string(got) != want {
				t.Errorf("%q: got %q, want %q", name, got, want)
			}
		}
	})
}

type recordingFS struct {
	fs.FS
	mu    sync.Mutex
	asked []string
}

func (r *recordingFS) Open(name string) (fs.File, error) {
	r.mu.Lock()
	r.asked = append(r.asked, name)
	r.mu.Unlock()
	return r.FS.Open(name)
}

func (r *recordingFS) names() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.asked...)
}

// deniedFS refuses every open with a permission error whose text names a private path.
type deniedFS struct{}

func (deniedFS) Open(name string) (fs.File, error) {
	return nil, &fs.PathError{Op: "open", Path: "/private/site/" + name, Err: fs.ErrPermission}
}

// TestPermissionDenied: a permission error answers error 2 with a generic message; the
// path the error names stays in the report.
func TestPermissionDenied(t *testing.T) {
	rec := newRecorder()
	srv := &tftpd.Server{FS: deniedFS{}, OnTransfer: rec.hook}
	addr := serve(t, srv, "127.0.0.1")
	c := newRawClient(t, "127.0.0.1")
	c.send(addr, rrq("ipxe.efi", "octet"))
	pkt, _ := c.recvFrom(5*time.Second, 0)
	if code, msg := errorOf(t, pkt); code != 2 || msg != "access violation" {
		t.Errorf("got error %d %q, want 2 \"access violation\"", code, msg)
	}
	r := rec.waitN(t, 1)[0]
	if !errors.Is(r.Err, tftpd.ErrDenied) || !errors.Is(r.Err, fs.ErrPermission) || !strings.Contains(r.Err.Error(), "/private/site/ipxe.efi") {
		t.Errorf("report error %v: want ErrDenied and fs.ErrPermission with the path", r.Err)
	}
	var op *tftpd.OpError
	if !errors.As(r.Err, &op) || op.Op != "open" || op.Name != "ipxe.efi" {
		t.Errorf("report error %#v: want an *OpError for open of ipxe.efi", r.Err)
	}
	if c := srv.Stats(); c.Denied != 1 || c.Active != 0 {
		t.Errorf("counters %+v", c)
	}
}

// TestInjectedClock: Start and Duration come from Server.Clock, read when the request
// arrives and when the last block is acknowledged.
func TestInjectedClock(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	clk := clocktest.New(t0)
	rec := newRecorder()
	srv := &tftpd.Server{FS: fstest.MapFS{"f": {Data: payload(3000, 10)}}, Clock: clk, OnTransfer: rec.hook}
	addr := serve(t, srv, "127.0.0.1")
	c := newRawClient(t, "127.0.0.1")
	c.send(addr, rrq("f", "octet"))
	pkt, tid := c.recvFrom(5*time.Second, 0)
	clk.Advance(90 * time.Second) // the transfer started; it ends after this
	c.download(pkt, tid, 512)
	r := rec.waitN(t, 1)[0]
	if !r.Start.Equal(t0) || r.Duration != 90*time.Second {
		t.Errorf("Start %v Duration %v; want %v and 1m30s from the injected clock", r.Start, r.Duration, t0)
	}
}

// TestClockIsUsed: Server.Clock, when set, is the clock of the report, not the process's:
// a clock years in the past that does not move gives that Start and no Duration.
func TestClockIsUsed(t *testing.T) {
	t0 := time.Date(2001, 1, 2, 3, 4, 5, 0, time.UTC)
	rec := newRecorder()
	srv := &tftpd.Server{FS: fstest.MapFS{"f": {Data: payload(3000, 10)}}, Clock: clocktest.New(t0), OnTransfer: rec.hook}
	addr := serve(t, srv, "127.0.0.1")
	c := newRawClient(t, "127.0.0.1")
	c.send(addr, rrq("f", "octet"))
	pkt, tid := c.recvFrom(5*time.Second, 0)
	c.download(pkt, tid, 512)
	r := rec.waitN(t, 1)[0]
	if !r.Start.Equal(t0) || r.Duration != 0 {
		t.Errorf("Start %v Duration %v; want %v and 0 from a clock that did not move", r.Start, r.Duration, t0)
	}
}
