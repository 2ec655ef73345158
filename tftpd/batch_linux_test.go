package tftpd

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/internal/testpeer"
)

// TestBatcherCalls: a window goes out in as few system calls as the kernel allows and
// arrives as separate datagrams, in order, byte for byte: blocks of one size with a shorter
// last one in one GSO send while they fit 64 KiB and 64 segments, larger ones in one
// sendmmsg; the same whether each datagram is one buffer or a header and a body apart (a
// block from a mapping), an empty last body included.
func TestBatcherCalls(t *testing.T) {
	tests := []struct {
		blksize, n, last int // the last datagram's block is last bytes
		calls            int
	}{
		{1468, 4, 1468, 1},
		{1468, 4, 100, 1},
		{1468, 3, 0, 1},
		{512, 64, 512, 1},
		{1468, 64, 1468, 2}, // 44 segments fit 64 KiB, then 20
		{8192, 7, 8192, 1},
		{65464, 4, 65464, 1}, // too large for GSO: sendmmsg
		{65464, 3, 10, 1},
		{1468, 1, 1468, 1},
	}
	for _, split := range []bool{false, true} {
		for _, tt := range tests {
			t.Run(fmt.Sprintf("%dx%d/last%d/split=%v", tt.n, tt.blksize, tt.last, split), func(t *testing.T) {
				rx, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
				if err != nil {
					t.Fatal(err)
				}
				defer rx.Close()
				rx.SetReadBuffer(8 << 20)
				tx, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
				if err != nil {
					t.Fatal(err)
				}
				defer tx.Close()
				b := newBatcher(tx, rx.LocalAddr().(*net.UDPAddr).AddrPort(), tt.n)
				if b == nil {
					t.Fatal("no batcher for a UDP socket on Linux")
				}
				var want, pkts, bodies [][]byte
				for i := range tt.n {
					size := tt.blksize
					if i == tt.n-1 {
						size = tt.last
					}
					p := make([]byte, 4+size)
					binary.BigEndian.PutUint16(p, opDATA)
					binary.BigEndian.PutUint16(p[2:], uint16(i+1))
					for j := 4; j < len(p); j++ {
						p[j] = byte(i*7 + j)
					}
					want = append(want, p)
					if split {
						pkts, bodies = append(pkts, p[:4:4]), append(bodies, p[4:])
					} else {
						pkts = append(pkts, p)
					}
				}
				if err := b.send(pkts, bodies); err != nil {
					t.Fatal(err)
				}
				if b.calls != tt.calls {
					t.Errorf("%d system calls, want %d (gso %v)", b.calls, tt.calls, b.gso)
				}
				expectDatagrams(t, rx, want)
			})
		}
	}
}

// TestBatcherMTUNetns sends windows across a veth of MTU 1500 between two namespaces (root):
// blocks of 1468 bytes (datagrams of 1500 bytes with their headers) go out by GSO in one
// call; blocks of 8192 bytes, which the path refuses to segment, turn GSO off after one
// refused call and go out in one sendmmsg, fragmented by IP; every datagram arrives whole.
func TestBatcherMTUNetns(t *testing.T) {
	seg := testpeer.NewSegment(t, 1)
	host := seg.Hosts[0]
	for _, tt := range []struct {
		blksize, n, calls int
		gso               bool
	}{
		{1468, 16, 1, true},
		{8192, 8, 2, false},
	} {
		t.Run(fmt.Sprint(tt.blksize), func(t *testing.T) {
			var rx, tx *net.UDPConn
			if err := seg.Bridge.Do(func() (err error) {
				rx, err = net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(192, 0, 2, 1)})
				return err
			}); err != nil {
				t.Fatal(err)
			}
			defer rx.Close()
			rx.SetReadBuffer(4 << 20)
			if err := host.Do(func() (err error) {
				tx, err = net.ListenUDP("udp4", &net.UDPAddr{IP: host.IP.AsSlice()})
				return err
			}); err != nil {
				t.Fatal(err)
			}
			defer tx.Close()
			b := newBatcher(tx, rx.LocalAddr().(*net.UDPAddr).AddrPort(), tt.n)
			var pkts [][]byte
			for i := range tt.n {
				p := make([]byte, 4+tt.blksize)
				binary.BigEndian.PutUint16(p, opDATA)
				binary.BigEndian.PutUint16(p[2:], uint16(i+1))
				for j := 4; j < len(p); j++ {
					p[j] = byte(i + j)
				}
				pkts = append(pkts, p)
			}
			if err := b.send(pkts, nil); err != nil {
				t.Fatal(err)
			}
			if b.calls != tt.calls || b.gso != tt.gso {
				t.Errorf("%d calls, gso %v; want %d, %v", b.calls, b.gso, tt.calls, tt.gso)
			}
			expectDatagrams(t, rx, pkts)
		})
	}
}

// expectDatagrams reads the datagrams want from rx, in order, byte for byte.
func expectDatagrams(t *testing.T, rx *net.UDPConn, want [][]byte) {
	t.Helper()
	buf := make([]byte, 70000)
	for i, want := range want {
		rx.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, _, err := rx.ReadFromUDP(buf)
		if err != nil {
			t.Fatalf("datagram %d: %v", i, err)
		}
		if !bytes.Equal(buf[:n], want) {
			t.Fatalf("datagram %d: %d bytes, block %d; want %d bytes of block %d", i, n, binary.BigEndian.Uint16(buf[2:]), len(want), i+1)
		}
	}
}
