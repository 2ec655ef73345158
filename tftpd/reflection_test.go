package tftpd_test

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/user"
	"testing"
	"testing/fstest"
	"time"

	"github.com/bettercompute/siteboot/internal/testpeer"
	"github.com/bettercompute/siteboot/tftpd"
)

// reflected sends req once to addr from a fresh socket on ip, never acknowledges, and
// returns the UDP payload bytes that come back until quiet passes without a datagram.
func reflected(t *testing.T, ip string, addr *net.UDPAddr, req []byte, quiet time.Duration) (bytes, datagrams int) {
	t.Helper()
	c := newRawClient(t, ip)
	c.send(addr, req)
	for {
		b, _, ok := c.recv(quiet)
		if !ok {
			return bytes, datagrams
		}
		bytes += len(b)
		datagrams++
	}
}

// TestReflectionBesideTFTPDHPA measures, in one run, what one read request without options
// that is never acknowledged (as a request with a spoofed source is) gets back from this
// server and from tftpd-hpa: bytes sent over bytes received, UDP payloads and with the IPv4
// and UDP headers. A source that never acknowledged gets its first datagram FirstRetries+1
// times (once by default) and no time-out error; tftpd-hpa sends it 6 times (its retransmit
// timeout doubles from -T up to 63 times -T). Both run with a 10 ms retransmit time instead
// of 1 s, which changes neither count.
func TestReflectionBesideTFTPDHPA(t *testing.T) {
	tftpdHPA := testpeer.LookPath(t, "in.tftpd", "tftpd-hpa")
	testpeer.RequireRoot(t) // tftpd-hpa chroots into its directory (--secure) and changes user
	dir := t.TempDir()
	writeFiles(t, dir, map[string][]byte{"ipxe.efi": payload(100_000, 33)})
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	u, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	port := testpeer.FreePort(t, "udp")
	hpaAddr := &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port}
	testpeer.Start(t, testpeer.Cmd{
		Path: tftpdHPA,
		Args: []string{"--foreground", "--listen", "--address", hpaAddr.String(), "--secure",
			"--user", u.Username, "--retransmit", "10000", dir},
		// Ready once it answers a read request (for a file that is not there). Probing by
		// binding the port ourselves could hold it at the moment tftpd-hpa binds it, which
		// then exits (71).
		ReadyFunc: func() error {
			// Unconnected: the answer comes from the transfer's own port (its TID).
			c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
			if err != nil {
				return err
			}
			defer c.Close()
			if _, err := c.WriteTo(rrq("ready-probe", "octet"), hpaAddr); err != nil {
				return err
			}
			c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
			if _, _, err := c.ReadFrom(make([]byte, 516)); err != nil {
				return fmt.Errorf("port %d: no answer yet: %w", port, err)
			}
			return nil
		},
	})

	srv := &tftpd.Server{Dir: dir, Timeout: 10 * time.Millisecond}
	ours := serve(t, srv, "127.0.0.1")

	req := rrq("ipxe.efi", "octet")
	const udpIP = 28 // IPv4 and UDP headers
	type result struct{ bytes, datagrams int }
	res := map[string]result{}
	done := make(chan struct{}, 2)
	var hpa, our result
	go func() {
		hpa.bytes, hpa.datagrams = reflected(t, "127.0.0.41", hpaAddr, req, 2*time.Second)
		done <- struct{}{}
	}()
	go func() {
		our.bytes, our.datagrams = reflected(t, "127.0.0.42", ours, req, 2*time.Second)
		done <- struct{}{}
	}()
	<-done
	<-done
	res["tftpd-hpa"], res["siteboot"] = hpa, our
	factor := func(r result, hdr int) float64 { return float64(r.bytes+hdr*r.datagrams) / float64(len(req)+hdr) }
	for _, name := range []string{"siteboot", "tftpd-hpa"} {
		r := res[name]
		t.Logf("%-9s request of %d bytes (%d with headers): %d datagrams, %d bytes back (%d with headers): factor %.1fx (%.1fx with headers)",
			name, len(req), len(req)+udpIP, r.datagrams, r.bytes, r.bytes+udpIP*r.datagrams, factor(r, 0), factor(r, udpIP))
	}
	if hpa.datagrams == 0 {
		t.Fatalf("tftpd-hpa sent nothing: the comparison has no reference")
	}
	if factor(our, 0) >= factor(hpa, 0) || factor(our, udpIP) >= factor(hpa, udpIP) {
		t.Errorf("reflection factor %.1fx (%.1fx with headers), tftpd-hpa's %.1fx (%.1fx): want below",
			factor(our, 0), factor(our, udpIP), factor(hpa, 0), factor(hpa, udpIP))
	}
	if want := tftpd.DefaultFirstRetries + 1; our.datagrams != want { // the block FirstRetries+1 times, no error
		t.Errorf("%d datagrams back, want %d", our.datagrams, want)
	}
}

// TestReflectionUnproven performs the reflection attack: read requests that are never
// acknowledged, as requests with a spoofed source are. Each gets its first datagram once
// (DATA block 1 without options, the OACK alone with them) and nothing more: no resend, no
// time-out error. The reflection factor is so bounded by one datagram over the request.
func TestReflectionUnproven(t *testing.T) {
	srv := &tftpd.Server{FS: fstest.MapFS{"ipxe.efi": {Data: payload(100_000, 36)}}, Timeout: 20 * time.Millisecond}
	addr := serve(t, srv, "127.0.0.1")
	for i, tt := range []struct {
		name  string
		req   []byte
		first uint16 // opcode of the one datagram back
	}{
		{"no options", rrq("ipxe.efi", "octet"), 3},
		{"blksize and windowsize", rrq("ipxe.efi", "octet", "blksize", "65464", "windowsize", "64"), 6},
		{"tsize as EDK2 asks", rrq("ipxe.efi", "octet", "tsize", "0", "blksize", "1468", "windowsize", "4"), 6},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := newRawClient(t, fmt.Sprintf("127.0.0.%d", 60+i))
			c.send(addr, tt.req)
			var got []int
			var ops []uint16
			for {
				// Quiet for well past FirstWait (3 Timeouts): the transfer has given up.
				b, _, ok := c.recv(500 * time.Millisecond)
				if !ok {
					break
				}
				got, ops = append(got, len(b)), append(ops, opcode(b))
			}
			if len(got) != 1 || ops[0] != tt.first {
				t.Fatalf("datagrams back %v (opcodes %v), want one of opcode %d", got, ops, tt.first)
			}
			if max := 4 + 512; got[0] > max {
				t.Errorf("%d bytes back, more than a block of 512", got[0])
			}
			t.Logf("request %d bytes, back %d bytes: factor %.1fx", len(tt.req), got[0], float64(got[0])/float64(len(tt.req)))
		})
	}
}

// TestUnprovenClientRecovers: with the first datagram sent once, a real client still gets
// its file when that datagram is lost (it sends its request again, which is answered anew)
// and when its first acknowledgement is lost (it sends it again within FirstWait).
func TestUnprovenClientRecovers(t *testing.T) {
	data := payload(5000, 37)
	srv := &tftpd.Server{FS: fstest.MapFS{"f": {Data: data}}, Timeout: 50 * time.Millisecond}
	addr := serve(t, srv, "127.0.0.1")

	t.Run("first block lost", func(t *testing.T) {
		c := newRawClient(t, "127.0.0.70")
		c.send(addr, rrq("f", "octet"))
		lost, _ := c.recvFrom(5*time.Second, 0) // dropped: never acknowledged
		if opcode(lost) != 3 {
			t.Fatalf("opcode %d, want DATA", opcode(lost))
		}
		c.send(addr, rrq("f", "octet")) // the client's retransmission
		first, tid := c.recvFrom(5*time.Second, 0)
		if got := c.download(first, tid, 512); !bytes.Equal(got, data) {
			t.Fatalf("got %d bytes, want %d identical", len(got), len(data))
		}
	})
	t.Run("FirstWait", func(t *testing.T) {
		// A late first acknowledgement goes on within FirstWait, and finds the transfer
		// gone after it.
		for _, tt := range []struct {
			firstWait time.Duration
			ok        bool
		}{{0, false}, {time.Second, true}} {
			srv := &tftpd.Server{FS: fstest.MapFS{"f": {Data: data}}, Timeout: 50 * time.Millisecond, FirstWait: tt.firstWait}
			addr := serve(t, srv, "127.0.0.1")
			c := newRawClient(t, "127.0.0.72")
			c.send(addr, rrq("f", "octet"))
			_, tid := c.recvFrom(5*time.Second, 0)
			time.Sleep(400 * time.Millisecond) // past 3 Timeouts, within 1 s
			c.send(tid, ack(1))
			b, _, ok := c.recv(time.Second)
			if got := ok && opcode(b) == 3; got != tt.ok {
				t.Errorf("FirstWait %v: block 2 after an acknowledgement 400 ms late: %v, want %v", tt.firstWait, got, tt.ok)
			}
		}
	})
	t.Run("first acknowledgement lost", func(t *testing.T) {
		c := newRawClient(t, "127.0.0.71")
		c.send(addr, rrq("f", "octet"))
		first, tid := c.recvFrom(5*time.Second, 0)
		// The acknowledgement is lost; the client times out (longer than the server's
		// Timeout, within FirstWait) and sends it again.
		time.Sleep(80 * time.Millisecond)
		if got := c.download(first, tid, 512); !bytes.Equal(got, data) {
			t.Fatalf("got %d bytes, want %d identical", len(got), len(data))
		}
	})
}
