package tftpd_test

import (
	"encoding/binary"
	"net"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/tftpd"
)

// BenchmarkWindowedTransfer fetches a 1 MiB iPXE-sized file as OVMF does (blksize 1468,
// windowsize 4) from a directory, each transfer's socket in the network poller as when
// many run at once: the storm's transfer, one at a time. cpu-ns/op is the CPU time of the
// whole process (server and client) per transfer, the figure the storm compares.
func BenchmarkWindowedTransfer(b *testing.B) {
	dir := b.TempDir()
	data := payload(1<<20, 12)
	writeFiles(b, dir, map[string][]byte{"ipxe.efi": data})
	srv := &tftpd.Server{Dir: dir}
	tftpd.PollerOnly(srv)
	addr := serve(b, srv, "127.0.0.1").AddrPort()
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	req := rrq("ipxe.efi", "octet", "blksize", "1468", "windowsize", "4")
	buf := make([]byte, 2048)
	read := func() (int, netip.AddrPort) {
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, from, err := c.ReadFromUDPAddrPort(buf)
		if err != nil {
			b.Fatal(err)
		}
		return n, from
	}
	b.SetBytes(int64(len(data)))
	cpu0 := cpuTime(b)
	for b.Loop() {
		c.WriteToUDPAddrPort(req, addr)
		if n, tid := read(); opcode(buf[:n]) != 6 {
			b.Fatalf("opcode %d, want OACK", opcode(buf[:n]))
		} else {
			c.WriteToUDPAddrPort(ack(0), tid)
		}
		var got int
		for want := uint16(1); ; {
			n, tid := read()
			if opcode(buf[:n]) != 3 || binary.BigEndian.Uint16(buf[2:]) != want {
				continue
			}
			got += n - 4
			last := n-4 < 1468
			if want%4 == 0 || last {
				c.WriteToUDPAddrPort(ack(want), tid)
			}
			want++
			if last {
				break
			}
		}
		if got != len(data) {
			b.Fatalf("got %d bytes, want %d", got, len(data))
		}
	}
	b.ReportMetric(float64(cpuTime(b)-cpu0)/float64(b.N), "cpu-ns/op")
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
