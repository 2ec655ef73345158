package tftpd_test

import (
	"fmt"
	"net"
	"os"
	"os/user"
	"testing"
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
// times (3 by default) and the time-out error; tftpd-hpa sends it 6 times (its retransmit
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
		// Ready once it holds its port.
		ReadyFunc: func() error {
			c, err := net.ListenUDP("udp", hpaAddr)
			if err != nil {
				return nil
			}
			c.Close()
			return fmt.Errorf("port %d not bound yet", port)
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
	if want := tftpd.DefaultFirstRetries + 2; our.datagrams != want { // the block FirstRetries+1 times, and the error
		t.Errorf("%d datagrams back, want %d", our.datagrams, want)
	}
}
