package tftpd_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
	"testing/fstest"
	"time"

	"github.com/bettercompute/siteboot/tftpd"
)

func TestValidate(t *testing.T) {
	fsys := fstest.MapFS{}
	tests := []struct {
		name string
		srv  *tftpd.Server
		ok   bool
	}{
		{"dir", &tftpd.Server{Dir: "/srv"}, true},
		{"fs", &tftpd.Server{FS: fsys}, true},
		{"neither", &tftpd.Server{}, false},
		{"both", &tftpd.Server{Dir: "/srv", FS: fsys}, false},
		{"negative transfers", &tftpd.Server{FS: fsys, MaxTransfers: -1}, false},
		{"negative per source", &tftpd.Server{FS: fsys, MaxPerSource: -1}, false},
		{"per source over total", &tftpd.Server{FS: fsys, MaxTransfers: 2, MaxPerSource: 3}, false},
		{"per source default over total", &tftpd.Server{FS: fsys, MaxTransfers: 2}, false},
		{"per source equal total", &tftpd.Server{FS: fsys, MaxTransfers: 2, MaxPerSource: 2}, true},
		{"block 511", &tftpd.Server{FS: fsys, MaxBlockSize: 511}, false},
		{"block 512", &tftpd.Server{FS: fsys, MaxBlockSize: 512}, true},
		{"block 65464", &tftpd.Server{FS: fsys, MaxBlockSize: 65464}, true},
		{"block 65465", &tftpd.Server{FS: fsys, MaxBlockSize: 65465}, false},
		{"negative name", &tftpd.Server{FS: fsys, MaxNameLen: -1}, false},
		{"negative timeout", &tftpd.Server{FS: fsys, Timeout: -time.Second}, false},
		{"negative retries", &tftpd.Server{FS: fsys, Retries: -1}, false},
		{"negative first retries", &tftpd.Server{FS: fsys, FirstRetries: -1}, false},
		{"first retries", &tftpd.Server{FS: fsys, FirstRetries: 1}, true},
		{"negative first wait", &tftpd.Server{FS: fsys, FirstWait: -time.Second}, false},
		{"first wait", &tftpd.Server{FS: fsys, FirstWait: 10 * time.Second}, true},
		{"negative window", &tftpd.Server{FS: fsys, MaxWindow: -1}, false},
		{"negative evict after", &tftpd.Server{FS: fsys, EvictAfter: -time.Second}, false},
		{"window 65535", &tftpd.Server{FS: fsys, MaxWindow: 65535}, true},
		{"window 65536", &tftpd.Server{FS: fsys, MaxWindow: 65536}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.srv.Validate()
			if (err == nil) != tt.ok || (err != nil && !errors.Is(err, tftpd.ErrConfig)) {
				t.Fatalf("Validate() = %v, want ok=%v (or ErrConfig)", err, tt.ok)
			}
			if tt.ok {
				return
			}
			// Serve refuses the same configuration and closes the socket it was given.
			conn, err := net.ListenPacket("udp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			if err := tt.srv.Serve(conn); !errors.Is(err, tftpd.ErrConfig) {
				t.Errorf("Serve = %v, want ErrConfig", err)
			}
			if _, err := conn.WriteTo([]byte{0}, conn.LocalAddr()); !errors.Is(err, net.ErrClosed) {
				t.Errorf("the socket is still open after Serve refused: %v", err)
			}
		})
	}
}

func TestServeMissingDir(t *testing.T) {
	srv := &tftpd.Server{Dir: filepath.Join(t.TempDir(), "missing")}
	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	err = srv.Serve(conn)
	var op *tftpd.OpError
	if !errors.As(err, &op) || op.Op != "open root" || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Serve = %v, want an *OpError open root wrapping ErrNotExist", err)
	}
}

func TestServeAfterShutdown(t *testing.T) {
	srv := &tftpd.Server{FS: fstest.MapFS{}}
	if err := srv.Shutdown(context.Background()); err != nil {
		t.Fatalf("Shutdown of a server never served: %v", err)
	}
	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Serve(conn); !errors.Is(err, tftpd.ErrServerClosed) {
		t.Fatalf("Serve after Shutdown = %v, want ErrServerClosed", err)
	}
	srv.Addr = "127.0.0.1:0"
	if err := srv.ListenAndServe(); !errors.Is(err, tftpd.ErrServerClosed) {
		t.Fatalf("ListenAndServe after Shutdown = %v, want ErrServerClosed", err)
	}
}

// start serves srv on a fresh loopback socket and returns its address and Serve's result.
func start(t *testing.T, srv *tftpd.Server) (*net.UDPAddr, <-chan error) {
	t.Helper()
	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(conn) }()
	return conn.LocalAddr().(*net.UDPAddr), served
}

// TestShutdownGraceful: Shutdown waits for a running transfer, which completes; the
// listening socket is closed at once.
func TestShutdownGraceful(t *testing.T) {
	data := payload(2000, 8)
	rec := newRecorder()
	srv := &tftpd.Server{FS: fstest.MapFS{"f": {Data: data}}, Timeout: 30 * time.Second, OnTransfer: rec.hook}
	addr, served := start(t, srv)
	c := newRawClient(t, "127.0.0.1")
	c.send(addr, rrq("f", "octet"))
	first, tid := c.recvFrom(5*time.Second, 0)

	done := make(chan error, 1)
	go func() { done <- srv.Shutdown(context.Background()) }()
	if err := <-served; !errors.Is(err, tftpd.ErrServerClosed) {
		t.Fatalf("Serve = %v, want ErrServerClosed", err)
	}
	select {
	case err := <-done:
		t.Fatalf("Shutdown returned %v while a transfer runs", err)
	default:
	}
	if got := c.download(first, tid, 512); len(got) != len(data) {
		t.Fatalf("got %d bytes, want %d", len(got), len(data))
	}
	if err := <-done; err != nil {
		t.Fatalf("Shutdown = %v", err)
	}
	if r := rec.waitN(t, 1)[0]; r.Outcome != tftpd.OutcomeOK {
		t.Errorf("outcome %q, want ok", r.Outcome)
	}
}

// TestShutdownDeadline: when Shutdown's context ends, the running transfer is aborted at its
// next block: the client gets an error with a generic message, Shutdown returns ctx.Err().
func TestShutdownDeadline(t *testing.T) {
	for _, tc := range []struct {
		name  string
		close bool
	}{{"Shutdown", false}, {"Close", true}} {
		t.Run(tc.name, func(t *testing.T) {
			rec := newRecorder()
			srv := &tftpd.Server{FS: fstest.MapFS{"f": {Data: payload(5000, 9)}}, Timeout: 30 * time.Second, OnTransfer: rec.hook}
			addr, served := start(t, srv)
			c := newRawClient(t, "127.0.0.1")
			c.send(addr, rrq("f", "octet"))
			_, tid := c.recvFrom(5*time.Second, 0)

			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() {
				if tc.close {
					done <- srv.Close()
				} else {
					done <- srv.Shutdown(ctx)
				}
			}()
			cancel()
			if err := <-served; !errors.Is(err, tftpd.ErrServerClosed) {
				t.Fatalf("Serve = %v, want ErrServerClosed", err)
			}
			// The transfer waits for the acknowledgement of block 1; once it has it, it stops.
			// Shutdown or Close may not have aborted it yet: acknowledge blocks until it does.
			var pkt []byte
			for block := uint16(1); ; block++ {
				c.send(tid, ack(block))
				pkt, _ = c.recvFrom(5*time.Second, tid.Port)
				if opcode(pkt) != 3 || block > 9 {
					break
				}
			}
			if code, msg := errorOf(t, pkt); code != 1 || msg != "server shutting down" {
				t.Errorf("got error %d %q, want the generic shutdown message", code, msg)
			}
			err := <-done
			if tc.close && err != nil || !tc.close && !errors.Is(err, context.Canceled) {
				t.Errorf("%s = %v", tc.name, err)
			}
			r := rec.waitN(t, 1)[0]
			if r.Outcome != tftpd.OutcomeShutdown || !errors.Is(r.Err, tftpd.ErrShutdown) {
				t.Errorf("report: %q %v, want shutdown", r.Outcome, r.Err)
			}
		})
	}
}

// failingConn fails its reads once fail is closed.
type failingConn struct {
	net.PacketConn
	fail chan struct{}
}

var errBroken = errors.New("interface went away")

func (f *failingConn) ReadFrom(p []byte) (int, net.Addr, error) {
	type result struct {
		n    int
		addr net.Addr
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		n, a, err := f.PacketConn.ReadFrom(p)
		ch <- result{n, a, err}
	}()
	select {
	case r := <-ch:
		return r.n, r.addr, r.err
	case <-f.fail:
		f.PacketConn.Close()
		<-ch
		return 0, nil, errBroken
	}
}

// TestListenerFailure: when reading the socket fails, Serve returns that error wrapped.
func TestListenerFailure(t *testing.T) {
	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fc := &failingConn{PacketConn: conn, fail: make(chan struct{})}
	srv := &tftpd.Server{FS: fstest.MapFS{"f": {Data: []byte("x")}}}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(fc) }()
	// Serve a request first, so the server is known to be reading.
	c := newRawClient(t, "127.0.0.1")
	c.send(conn.LocalAddr().(*net.UDPAddr), rrq("f", "octet"))
	pkt, tid := c.recvFrom(5*time.Second, 0)
	c.download(pkt, tid, 512)
	close(fc.fail)
	err = <-served
	var op *tftpd.OpError
	if !errors.Is(err, errBroken) || !errors.As(err, &op) || op.Op != "read" {
		t.Fatalf("Serve = %v, want an *OpError read wrapping the socket's error", err)
	}
	if err := srv.Shutdown(context.Background()); err != nil {
		t.Fatalf("Shutdown = %v", err)
	}
}

// TestLimitsAcrossSockets: one Server on two sockets keeps one transfer limit (the queue
// off: the request beyond it is dropped).
func TestLimitsAcrossSockets(t *testing.T) {
	data := payload(600, 8)
	srv := &tftpd.Server{FS: fstest.MapFS{"f": {Data: data}}, MaxTransfers: 1, MaxPerSource: 1, Timeout: 30 * time.Second, MaxQueued: -1}
	a1 := serve(t, srv, "127.0.0.1")
	a2 := serve(t, srv, "127.0.0.1")
	c1 := newRawClient(t, "127.0.0.5")
	c1.send(a1, rrq("f", "octet"))
	_, tid := c1.recvFrom(5*time.Second, 0)
	c1.send(tid, ack(1)) // acknowledged: it keeps its slot
	second, _ := c1.recvFrom(5*time.Second, tid.Port)
	c2 := newRawClient(t, "127.0.0.6")
	c2.send(a2, rrq("f", "octet"))
	if _, _, ok := c2.recv(500 * time.Millisecond); ok {
		t.Fatalf("the second socket started a transfer beyond MaxTransfers 1")
	}
	c1.downloadFrom(second, tid, 512, 2)
	waitFor(t, "the transfer to end", func() bool { return srv.Stats().Active == 0 })
	c2.send(a2, rrq("f", "octet"))
	pkt, tid2 := c2.recvFrom(5*time.Second, 0)
	if got := c2.download(pkt, tid2, 512); !bytes.Equal(got, data) {
		t.Fatalf("retry on the second socket: got %q", got)
	}
	if c := srv.Stats(); c.DroppedBusy != 1 {
		t.Errorf("counters %+v, want one drop", c)
	}
}

// TestIPv6: a server on ::1 serves, and counts a source by its address.
func TestIPv6(t *testing.T) {
	if c, err := net.ListenPacket("udp6", "[::1]:0"); err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	} else {
		c.Close()
	}
	rec := newRecorder()
	srv := &tftpd.Server{FS: fstest.MapFS{"f": {Data: payload(5000, 12)}}, OnTransfer: rec.hook}
	addr := serve(t, srv, "::1")
	c := newRawClient(t, "::1")
	c.send(addr, rrq("f", "octet", "blksize", "1468"))
	pkt, tid := c.recvFrom(5*time.Second, 0)
	oackOptions(t, pkt)
	c.send(tid, ack(0))
	first, _ := c.recvFrom(5*time.Second, tid.Port)
	if got := c.download(first, tid, 1468); len(got) != 5000 {
		t.Fatalf("got %d bytes", len(got))
	}
	if r := rec.waitN(t, 1)[0]; r.Peer.Addr().String() != "::1" || r.Outcome != tftpd.OutcomeOK {
		t.Errorf("report peer %v outcome %q", r.Peer, r.Outcome)
	}
}

// TestSilentClient: a client that stops acknowledging holds its slot until Timeout and
// Retries run out; then the transfer is reported as timed out and the slot is free. A
// client that never acknowledged gets no time-out message (it may be a spoofed source).
func TestSilentClient(t *testing.T) {
	rec := newRecorder()
	srv := &tftpd.Server{FS: fstest.MapFS{"boot/host-7.efi": {Data: payload(5000, 13)}}, Timeout: 50 * time.Millisecond, Retries: 2,
		MaxTransfers: 1, MaxPerSource: 1, OnTransfer: rec.hook}
	addr := serve(t, srv, "127.0.0.1")

	never := newRawClient(t, "127.0.0.1")
	never.send(addr, rrq("boot/host-7.efi", "octet"))
	never.recvFrom(5*time.Second, 0)
	if b, _, ok := never.recv(500 * time.Millisecond); ok {
		t.Errorf("a client that never acknowledged got %d bytes more (opcode %d)", len(b), opcode(b))
	}
	if r := rec.waitN(t, 1)[0]; r.Outcome != tftpd.OutcomeTimeout || r.Bytes != 512 {
		t.Errorf("report of the client that never acknowledged: %q, %d bytes; want a time-out after one block", r.Outcome, r.Bytes)
	}

	c := newRawClient(t, "127.0.0.1")
	c.send(addr, rrq("boot/host-7.efi", "octet"))
	_, tid := c.recvFrom(5*time.Second, 0)
	c.send(tid, ack(1))
	// Say nothing more: the second block is sent again, then the transfer gives up.
	var last []byte
	for {
		b, from, ok := c.recv(5 * time.Second)
		if !ok {
			t.Fatal("the transfer neither repeated its block nor ended")
		}
		if from.Port != tid.Port {
			continue
		}
		last = b
		if opcode(b) == 5 {
			break
		}
	}
	// The server sends a generic time-out message: no file,
	// no path of the host.
	if _, msg := errorOf(t, last); bytes.Contains([]byte(msg), []byte("host-7")) || bytes.Contains([]byte(msg), []byte("boot/")) {
		t.Errorf("time-out message %q names the file", msg)
	}
	r := rec.waitN(t, 2)[1]
	if r.Outcome != tftpd.OutcomeTimeout || !errors.Is(r.Err, tftpd.ErrTimeout) || r.Bytes != 1024 {
		t.Errorf("report: %q %v, %d bytes; want a time-out after two blocks", r.Outcome, r.Err, r.Bytes)
	}
	if c := srv.Stats(); c.Failed != 2 || c.Active != 0 {
		t.Errorf("counters %+v", c)
	}
	// The slot is free again.
	c2 := newRawClient(t, "127.0.0.1")
	c2.send(addr, rrq("boot/host-7.efi", "octet"))
	pkt, tid2 := c2.recvFrom(5*time.Second, 0)
	if got := c2.download(pkt, tid2, 512); len(got) != 5000 {
		t.Fatalf("after the time-out: got %d bytes", len(got))
	}
}

// TestListenAndServeAddr: ListenAndServe binds the Addr field, serves on it, and returns
// ErrServerClosed after Shutdown; an Addr it cannot bind comes back as a listen OpError
// naming it.
func TestListenAndServeAddr(t *testing.T) {
	busy, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	taken := &tftpd.Server{FS: fstest.MapFS{}, Addr: busy.LocalAddr().String()}
	var op *tftpd.OpError
	if err := taken.ListenAndServe(); !errors.As(err, &op) || op.Op != "listen" || op.Name != taken.Addr {
		t.Fatalf("ListenAndServe on a bound address = %v, want a listen OpError naming %s", err, taken.Addr)
	}

	free, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := free.LocalAddr().(*net.UDPAddr)
	free.Close()
	srv := &tftpd.Server{FS: fstest.MapFS{"f": {Data: []byte("hello")}}, Addr: addr.String()}
	done := make(chan error, 1)
	go func() { done <- srv.ListenAndServe() }()
	c := newRawClient(t, "127.0.0.1")
	for {
		c.send(addr, rrq("f", "octet"))
		if b, _, ok := c.recv(100 * time.Millisecond); ok {
			if len(b) < 4 || b[1] != 3 || string(b[4:]) != "hello" {
				t.Fatalf("answer %q, want DATA 1 \"hello\"", b)
			}
			break
		}
		select {
		case err := <-done:
			t.Fatalf("ListenAndServe = %v before serving", err)
		default:
		}
	}
	if err := srv.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, tftpd.ErrServerClosed) {
		t.Fatalf("ListenAndServe after Shutdown = %v, want ErrServerClosed", err)
	}
}
