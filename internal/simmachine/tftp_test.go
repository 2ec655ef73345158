package simmachine

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"hash"
	"hash/crc32"
	"math/rand/v2"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/bettercompute/siteboot/tftpd"
)

func testData(n int) []byte {
	r := rand.New(rand.NewPCG(1, uint64(n)))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// TestTFTPAgainstServer: a read from tftpd is the two requests OVMF makes: the size
// request aborted after its option acknowledgement, then the read at blksize 1468 and
// windowsize 4; the file arrives whole.
func TestTFTPAgainstServer(t *testing.T) {
	data := testData(300_001)
	var mu sync.Mutex
	var reps []tftpd.Transfer
	srv := &tftpd.Server{FS: fstest.MapFS{"ipxe.efi": {Data: data}}, OnTransfer: func(tr tftpd.Transfer) {
		mu.Lock()
		reps = append(reps, tr)
		mu.Unlock()
	}}
	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(conn)
	defer srv.Close()
	addr := conn.LocalAddr().(*net.UDPAddr).AddrPort()
	m := &Machine{Name: "m", IP: netip.MustParseAddr("127.0.0.7"), TFTPAddr: func(netip.Addr) netip.AddrPort { return addr }}
	got, err := m.tftpGet(context.Background(), addr.Addr(), "ipxe.efi")
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("%x", sha256.Sum256(data)); got.SHA256 != want || got.Sum != "" || got.Bytes != int64(len(data)) {
		t.Errorf("got %d bytes %s (sum %q), want %d bytes %s", got.Bytes, got.SHA256, got.Sum, len(data), want)
	}
	// With a Digest of its own the machine sums the file with it, and only with it.
	castagnoli := crc32.MakeTable(crc32.Castagnoli)
	m.Digest = func() hash.Hash { return crc32.New(castagnoli) }
	got, err = m.tftpGet(context.Background(), addr.Addr(), "ipxe.efi")
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("%08x", crc32.Checksum(data, castagnoli)); got.Sum != want || got.SHA256 != "" || got.Bytes != int64(len(data)) {
		t.Errorf("with Digest: got %d bytes, sum %q, SHA256 %q; want %d bytes, sum %s and no SHA256", got.Bytes, got.Sum, got.SHA256, len(data), want)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		n := len(reps)
		mu.Unlock()
		if n >= 4 || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	type rep struct {
		Outcome   tftpd.Outcome
		BlockSize int
		Window    int
		Peer      string
	}
	var have []rep
	for _, r := range reps {
		have = append(have, rep{r.Outcome, r.BlockSize, r.Window, r.Peer.Addr().String()})
	}
	// Per read, the size request aborted and the read done; in any order across the two
	// reads: the server reports a read when the last acknowledgement comes, which may be
	// after the next read's size request was aborted.
	slices.SortFunc(have, func(a, b rep) int { return strings.Compare(string(a.Outcome), string(b.Outcome)) })
	want := []rep{{tftpd.OutcomeAborted, 1468, 4, "127.0.0.7"}, {tftpd.OutcomeAborted, 1468, 4, "127.0.0.7"},
		{tftpd.OutcomeOK, 1468, 4, "127.0.0.7"}, {tftpd.OutcomeOK, 1468, 4, "127.0.0.7"}}
	if fmt.Sprint(have) != fmt.Sprint(want) {
		t.Errorf("transfers %v, want %v", have, want)
	}
}

// TestDescribe: the events name what is sent again.
func TestDescribe(t *testing.T) {
	for _, tt := range []struct {
		pkt  []byte
		want string
	}{
		{rrqPacket("ipxe.efi", "tsize", "0", "blksize", "1468"), "the size request"},
		{rrqPacket("ipxe.efi", "blksize", "1468", "windowsize", "4"), "the read request"},
		{rrqPacket("tsize"), "the read request"}, // a file named tsize, no option
		{ackPacket(0), "ACK 0"},
		{ackPacket(517), "ACK 517"},
	} {
		if got := describe(tt.pkt); got != tt.want {
			t.Errorf("describe(%q) = %q, want %q", tt.pkt, got, tt.want)
		}
	}
}

// TestTFTPLikeEDK2 plays a scripted server and checks what EDK2's client does: the exact
// requests, both from one port; error 8 after the size request's OACK; the first request
// sent again after TFTPTimeout when unanswered; an acknowledgement only at the end of each
// window of 4; a block out of order answered at once with the acknowledgement of the block
// before the gap; the last acknowledgement sent again after a timeout.
func TestTFTPLikeEDK2(t *testing.T) {
	const timeout = 200 * time.Millisecond
	srvConn, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer srvConn.Close()
	tid, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer tid.Close()
	addr := srvConn.LocalAddr().(*net.UDPAddr).AddrPort()
	var events []string // written by tftpGet's goroutine, read after done
	m := &Machine{Name: "m", IP: netip.MustParseAddr("127.0.0.8"), TFTPTimeout: timeout, TFTPRetries: 3,
		TFTPAddr: func(netip.Addr) netip.AddrPort { return addr },
		OnEvent:  func(_ *Machine, msg string) { events = append(events, msg) }}
	data := testData(10*1468 + 5) // 11 blocks
	block := func(n int) []byte {
		p := binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(nil, tftpDATA), uint16(n))
		return append(p, data[(n-1)*1468:min(len(data), n*1468)]...)
	}
	type result struct {
		f   Fetched
		err error
	}
	done := make(chan result, 1)
	go func() {
		f, err := m.tftpGet(context.Background(), addr.Addr(), "ipxe.efi")
		done <- result{f, err}
	}()
	buf := make([]byte, 2048)
	read := func(c *net.UDPConn) ([]byte, netip.AddrPort, time.Time) {
		t.Helper()
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, from, err := c.ReadFromUDPAddrPort(buf)
		if err != nil {
			t.Fatalf("waiting for the client: %v", err)
		}
		return append([]byte(nil), buf[:n]...), from, time.Now()
	}
	quiet := func(c *net.UDPConn, d time.Duration) {
		t.Helper()
		c.SetReadDeadline(time.Now().Add(d))
		if n, _, err := c.ReadFromUDPAddrPort(buf); err == nil {
			t.Fatalf("unexpected %q", buf[:n])
		}
	}
	sizeReq := rrqPacket("ipxe.efi", "tsize", "0", "blksize", "1468", "windowsize", "4")
	r1, client, at1 := read(srvConn)
	if !bytes.Equal(r1, sizeReq) {
		t.Fatalf("first request %q, want %q", r1, sizeReq)
	}
	// Unanswered: the same request again after the timeout.
	r2, from, at2 := read(srvConn)
	if !bytes.Equal(r2, sizeReq) || from != client || at2.Sub(at1) < timeout*9/10 {
		t.Fatalf("second datagram %q from %v after %v, want the request again from %v after %v", r2, from, at2.Sub(at1), client, timeout)
	}
	oack := append(binary.BigEndian.AppendUint16(nil, tftpOACK), fmt.Sprintf("tsize\x00%d\x00blksize\x001468\x00windowsize\x004\x00", len(data))...)
	tid.WriteToUDPAddrPort(oack, client)
	if e, _, _ := read(tid); !bytes.Equal(e[:4], []byte{0, 5, 0, 8}) {
		t.Fatalf("after the size OACK: %q, want error 8", e)
	}
	readReq := rrqPacket("ipxe.efi", "blksize", "1468", "windowsize", "4")
	if r, from, _ := read(srvConn); !bytes.Equal(r, readReq) || from != client {
		t.Fatalf("read request %q from %v, want %q from %v", r, from, readReq, client)
	}
	// A late OACK of the aborted size request's transfer is no answer to the read: the read's
	// OACK comes from a new transfer port.
	tid.WriteToUDPAddrPort(oack, client)
	tid1 := tid
	tid, err = net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer tid.Close()
	quiet(tid1, timeout/2)
	tid.WriteToUDPAddrPort(append(binary.BigEndian.AppendUint16(nil, tftpOACK), "blksize\x001468\x00windowsize\x004\x00"...), client)
	ackOf := func(n int) []byte { return ackPacket(uint16(n)) }
	if a, _, _ := read(tid); !bytes.Equal(a, ackOf(0)) {
		t.Fatalf("after the OACK: %q, want ACK 0", a)
	}
	// An error from another port of the server (another transfer's socket, answering a
	// stray datagram with error 5) is not the read's: the client waits on for block 1.
	stranger, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer stranger.Close()
	stranger.WriteToUDPAddrPort(append(binary.BigEndian.AppendUint16(nil, tftpERROR), 0, 5, 'u', 0), client)
	for n := 1; n <= 3; n++ {
		tid.WriteToUDPAddrPort(block(n), client)
	}
	quiet(tid, timeout/2) // no acknowledgement inside a window
	tid.WriteToUDPAddrPort(block(4), client)
	if a, _, _ := read(tid); !bytes.Equal(a, ackOf(4)) {
		t.Fatalf("at the end of the window: %q, want ACK 4", a)
	}
	tid.WriteToUDPAddrPort(block(5), client)
	tid.WriteToUDPAddrPort(block(7), client) // 6 lost
	if a, _, _ := read(tid); !bytes.Equal(a, ackOf(5)) {
		t.Fatalf("after a gap: %q, want ACK 5 at once", a)
	}
	// Silence: the last acknowledgement again after the timeout.
	if a, _, _ := read(tid); !bytes.Equal(a, ackOf(5)) {
		t.Fatalf("after a timeout: %q, want ACK 5 again", a)
	}
	for n := 6; n <= 9; n++ {
		tid.WriteToUDPAddrPort(block(n), client)
	}
	if a, _, _ := read(tid); !bytes.Equal(a, ackOf(9)) {
		t.Fatalf("window 6..9: %q, want ACK 9", a)
	}
	tid.WriteToUDPAddrPort(block(10), client)
	tid.WriteToUDPAddrPort(block(11), client) // the last, short
	if a, _, _ := read(tid); !bytes.Equal(a, ackOf(11)) {
		t.Fatalf("at the last block: %q, want ACK 11", a)
	}
	res := <-done
	if res.err != nil {
		t.Fatal(res.err)
	}
	if len(events) == 0 || !strings.HasPrefix(events[0], "tftp: no answer to the size request within 200ms, sending it again (1 of 3)") {
		t.Errorf("events %q, want the size request's resend named first", events)
	}
	if want := fmt.Sprintf("%x", sha256.Sum256(data)); res.f.SHA256 != want {
		t.Errorf("sha256 %s, want %s", res.f.SHA256, want)
	}
}
