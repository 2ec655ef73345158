package tftpd_test

import (
	"context"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/internal/testpeer"
	"github.com/bettercompute/siteboot/tftpd"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	serveChild()
	// testpeer forks every peer from one goroutine locked to its thread for the life of the
	// binary (so that a peer dies with it).
	goleak.VerifyTestMain(m, testpeer.IgnoreForker)
}

// payload returns n deterministic pseudo-random bytes.
func payload(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, n64(n)))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func n64(n int) uint64 { return uint64(n) }

// writeFiles writes name -> content under dir.
func writeFiles(t testing.TB, dir string, files map[string][]byte) {
	t.Helper()
	for name, data := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// recorder collects what OnTransfer reports.
type recorder struct {
	mu  sync.Mutex
	got []tftpd.Transfer
	ch  chan struct{}
}

func newRecorder() *recorder { return &recorder{ch: make(chan struct{}, 1)} }

func (r *recorder) hook(t tftpd.Transfer) {
	r.mu.Lock()
	r.got = append(r.got, t)
	r.mu.Unlock()
	select {
	case r.ch <- struct{}{}:
	default:
	}
}

func (r *recorder) all() []tftpd.Transfer {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]tftpd.Transfer(nil), r.got...)
}

// waitN waits until n reports arrived.
func (r *recorder) waitN(t testing.TB, n int) []tftpd.Transfer {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		if got := r.all(); len(got) >= n {
			return got
		}
		select {
		case <-r.ch:
		case <-deadline:
			t.Fatalf("waited for %d transfer reports, have %d: %+v", n, len(r.all()), r.all())
		}
	}
}

// serve runs srv on a fresh socket at ip:0 and shuts it down at cleanup, checking that
// Serve returned ErrServerClosed.
func serve(t testing.TB, srv *tftpd.Server, ip string) *net.UDPAddr {
	t.Helper()
	conn, err := net.ListenPacket("udp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(conn) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		if err := <-served; !errors.Is(err, tftpd.ErrServerClosed) {
			t.Errorf("Serve returned %v, want ErrServerClosed", err)
		}
	})
	return conn.LocalAddr().(*net.UDPAddr)
}

// onBothPaths runs f as "alone", where a transfer that runs alone waits on a thread of its
// own (on Linux), and as "poller", where f's server is to be PollerOnly and every transfer
// waits in the network poller, as when many run at once.
func onBothPaths(t *testing.T, f func(t *testing.T, poller bool)) {
	for _, poller := range []bool{false, true} {
		t.Run(map[bool]string{false: "alone", true: "poller"}[poller], func(t *testing.T) { f(t, poller) })
	}
}

// waitFor polls cond (a state of the server, not a time-out) until it holds.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// rawClient speaks TFTP from one UDP socket, packet by packet.
type rawClient struct {
	t    testing.TB
	conn *net.UDPConn
}

func newRawClient(t testing.TB, ip string) *rawClient {
	t.Helper()
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.ParseIP(ip)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawClient{t: t, conn: c}
}

func (c *rawClient) send(to *net.UDPAddr, b []byte) {
	c.t.Helper()
	if _, err := c.conn.WriteToUDP(b, to); err != nil {
		c.t.Fatal(err)
	}
}

// recv returns the next datagram within d, or ok false.
func (c *rawClient) recv(d time.Duration) (b []byte, from *net.UDPAddr, ok bool) {
	buf := make([]byte, 65536)
	c.conn.SetReadDeadline(time.Now().Add(d))
	n, from, err := c.conn.ReadFromUDP(buf)
	if err != nil {
		return nil, nil, false
	}
	return buf[:n], from, true
}

// recvFrom returns the next datagram from port (others are skipped); port 0 takes any but
// the ones in skip.
func (c *rawClient) recvFrom(d time.Duration, port int, skip ...int) ([]byte, *net.UDPAddr) {
	c.t.Helper()
	end := time.Now().Add(d)
	for {
		left := time.Until(end)
		if left <= 0 {
			c.t.Fatalf("no datagram from port %d within %v", port, d)
		}
		b, from, ok := c.recv(left)
		if !ok {
			continue
		}
		if port != 0 && from.Port != port {
			continue
		}
		skipped := false
		for _, s := range skip {
			skipped = skipped || from.Port == s
		}
		if !skipped {
			return b, from
		}
	}
}

func rrq(name, mode string, opts ...string) []byte {
	b := binary.BigEndian.AppendUint16(nil, 1)
	b = append(append(b, name...), 0)
	b = append(append(b, mode...), 0)
	for _, o := range opts {
		b = append(append(b, o...), 0)
	}
	return b
}

func ack(block uint16) []byte {
	return binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(nil, 4), block)
}

func errPkt(code uint16, msg string) []byte {
	b := binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(nil, 5), code)
	return append(append(b, msg...), 0)
}

func opcode(b []byte) uint16 {
	if len(b) < 2 {
		return 0
	}
	return binary.BigEndian.Uint16(b)
}

// oackOptions decodes an OACK into name -> value.
func oackOptions(t testing.TB, b []byte) map[string]string {
	t.Helper()
	if opcode(b) != 6 {
		t.Fatalf("got opcode %d (%q), want OACK", opcode(b), b)
	}
	parts := strings.Split(string(b[2:]), "\x00")
	m := map[string]string{}
	for i := 0; i+1 < len(parts); i += 2 {
		m[parts[i]] = parts[i+1]
	}
	return m
}

// errorOf decodes an ERROR packet.
func errorOf(t testing.TB, b []byte) (uint16, string) {
	t.Helper()
	if opcode(b) != 5 || len(b) < 5 {
		t.Fatalf("got %q, want an ERROR packet", b)
	}
	return binary.BigEndian.Uint16(b[2:]), strings.TrimSuffix(string(b[4:]), "\x00")
}

// download acks a transfer to its end from the first DATA block on, and returns the bytes.
func (c *rawClient) download(first []byte, tid *net.UDPAddr, blksize int) []byte {
	c.t.Helper()
	return c.downloadFrom(first, tid, blksize, 1)
}

// downloadFrom is download from DATA block want (first) on.
func (c *rawClient) downloadFrom(first []byte, tid *net.UDPAddr, blksize int, want uint16) []byte {
	c.t.Helper()
	var out []byte
	pkt := first
	for {
		if opcode(pkt) != 3 {
			c.t.Fatalf("got opcode %d, want DATA", opcode(pkt))
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
		pkt, _ = c.recvFrom(5*time.Second, tid.Port)
	}
}

// socketCount counts this process's open sockets and other descriptors.
func fdCount(t testing.TB) (sockets, others int) {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	for _, e := range ents {
		l, err := os.Readlink("/proc/self/fd/" + e.Name())
		if err != nil {
			continue
		}
		if strings.HasPrefix(l, "socket:") {
			sockets++
		} else {
			others++
		}
	}
	return sockets, others
}

// downloadWindow reads a transfer of windowsize window (RFC 7440) from its first DATA block
// on, acknowledging the last block of each window and the last block of the file, and
// returns the bytes and the acknowledgements it sent.
func (c *rawClient) downloadWindow(first []byte, tid *net.UDPAddr, blksize, window int) (data []byte, acks int) {
	c.t.Helper()
	pkt := first
	want := uint16(1)
	inWindow := 0
	for {
		if opcode(pkt) != 3 {
			c.t.Fatalf("got opcode %d, want DATA", opcode(pkt))
		}
		block := binary.BigEndian.Uint16(pkt[2:])
		if block == want {
			data = append(data, pkt[4:]...)
			want++
			inWindow++
			last := len(pkt)-4 < blksize
			if inWindow == window || last {
				c.send(tid, ack(block))
				acks++
				inWindow = 0
				if last {
					return data, acks
				}
			}
		}
		pkt, _ = c.recvFrom(5*time.Second, tid.Port)
	}
}
