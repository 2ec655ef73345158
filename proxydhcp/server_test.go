package proxydhcp_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/internal/testpeer"
	"github.com/bettercompute/siteboot/proxydhcp"
	"github.com/google/go-cmp/cmp"
	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/iana"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// testpeer forks every peer from one thread that lives as long as the test binary.
	goleak.VerifyTestMain(m, testpeer.IgnoreForker)
}

// startServer serves port role p on a loopback socket and returns its address.
func startServer(t *testing.T, srv *proxydhcp.Server, p proxydhcp.Port) *net.UDPAddr {
	t.Helper()
	conn, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		if p == proxydhcp.PortBoot {
			errc <- srv.ServeBoot(conn)
		} else {
			errc <- srv.Serve(conn)
		}
	}()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		if err := <-errc; !errors.Is(err, proxydhcp.ErrServerClosed) {
			t.Errorf("Serve returned %v, want ErrServerClosed", err)
		}
	})
	return conn.LocalAddr().(*net.UDPAddr)
}

// waitStats polls the counters until cond holds or 5 s pass, and returns the last snapshot.
func waitStats(srv *proxydhcp.Server, cond func(proxydhcp.Stats) bool) proxydhcp.Stats {
	deadline := time.Now().Add(5 * time.Second)
	for {
		st := srv.Stats()
		if cond(st) || time.Now().After(deadline) {
			return st
		}
		time.Sleep(time.Millisecond)
	}
}

func listenClient(t *testing.T) *net.UDPConn {
	t.Helper()
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// Port-4011 requests are answered to their source port: OVMF sends from 4011, iPXE from 68,
// and anything else is honoured too.
func TestBootPortRepliesToSourcePort(t *testing.T) {
	srv := &proxydhcp.Server{Handler: proxydhcp.HandlerFunc(answerAll)}
	addr := startServer(t, srv, proxydhcp.PortBoot)
	for i, mac := range []string{"52:54:00:00:00:41", "52:54:00:00:00:42"} {
		client := listenClient(t)
		req := build(t, dhcpv4.MessageTypeRequest, mac, uint32(0x4011_0000+i),
			arch(iana.EFI_X86_64), vendorClass("PXEClient:Arch:00007:UNDI:003000"),
			uuidOpt(t, ovmfUUID), dhcpv4.WithClientIP(net.IPv4(127, 0, 0, 1)))
		if _, err := client.WriteTo(req, addr); err != nil {
			t.Fatal(err)
		}
		client.SetReadDeadline(time.Now().Add(5 * time.Second))
		buf := make([]byte, 1500)
		n, from, err := client.ReadFrom(buf)
		if err != nil {
			t.Fatalf("no reply on the source port %v: %v", client.LocalAddr(), err)
		}
		if from.String() != addr.String() {
			t.Errorf("reply from %v, want %v", from, addr)
		}
		m, err := dhcpv4.FromBytes(buf[:n])
		if err != nil {
			t.Fatal(err)
		}
		got := []string{m.MessageType().String(), m.ClientHWAddr.String(), m.BootFileName, m.ServerIdentifier().String(), m.ClientIPAddr.String()}
		want := []string{"ACK", mac, "ipxe.efi", "127.0.0.1", "127.0.0.1"}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("ACK (-want +got):\n%s", diff)
		}
	}
	if st := waitStats(srv, func(st proxydhcp.Stats) bool { return st.Boot.Answered == 2 }).Boot; st.Answered != 2 {
		t.Errorf("port 4011 answered %d, want 2 (%+v)", st.Answered, st)
	}
}

// Shutdown lets the request in the handler be answered, then Serve returns ErrServerClosed
// and no goroutine is left (TestMain checks leaks).
func TestShutdownDrains(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	srv := &proxydhcp.Server{Workers: 1, Handler: proxydhcp.HandlerFunc(func(ctx context.Context, r *proxydhcp.Request) proxydhcp.Decision {
		entered <- struct{}{}
		<-release
		return proxydhcp.Answer()
	})}
	conn, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.ServeBoot(conn) }()
	client := listenClient(t)
	req := build(t, dhcpv4.MessageTypeRequest, "52:54:00:00:00:51", 1, arch(iana.EFI_X86_64), vendorClass("PXEClient"),
		dhcpv4.WithClientIP(net.IPv4(127, 0, 0, 1)))
	client.WriteTo(req, conn.LocalAddr())
	<-entered

	shut := make(chan error, 1)
	go func() { shut <- srv.Shutdown(context.Background()) }()
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned %v while a request was in the handler", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	if err := <-shut; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if err := <-errc; !errors.Is(err, proxydhcp.ErrServerClosed) {
		t.Fatalf("ServeBoot: %v", err)
	}
	client.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 1500)
	if _, _, err := client.ReadFrom(buf); err != nil {
		t.Errorf("the request in the handler at Shutdown was not answered: %v", err)
	}
	if err := srv.Serve(listenClient(t)); !errors.Is(err, proxydhcp.ErrServerClosed) {
		t.Errorf("Serve after Shutdown = %v, want ErrServerClosed", err)
	}
}

func TestShutdownDeadline(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	entered := make(chan struct{}, 1)
	srv := &proxydhcp.Server{Workers: 1, HandlerTimeout: time.Minute, Handler: proxydhcp.HandlerFunc(func(ctx context.Context, r *proxydhcp.Request) proxydhcp.Decision {
		entered <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done(): // Close cancels handlers
		}
		return proxydhcp.Answer()
	})}
	addr := func() net.Addr {
		conn, err := net.ListenPacket("udp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		go srv.ServeBoot(conn)
		return conn.LocalAddr()
	}()
	client := listenClient(t)
	client.WriteTo(build(t, dhcpv4.MessageTypeRequest, "52:54:00:00:00:52", 1, vendorClass("PXEClient"),
		dhcpv4.WithClientIP(net.IPv4(127, 0, 0, 1))), addr)
	<-entered
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := srv.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown = %v, want DeadlineExceeded", err)
	}
}

// While every worker is busy, datagrams wait in the socket buffer; those that do not fit are
// dropped by the kernel and counted as overload (SO_RXQ_OVFL), and the server goes on.
func TestOverload(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	entered := make(chan struct{})
	srv := &proxydhcp.Server{Workers: 1, ReadBuffer: 4096, Handler: proxydhcp.HandlerFunc(func(ctx context.Context, r *proxydhcp.Request) proxydhcp.Decision {
		once.Do(func() {
			close(entered)
			<-release
		})
		return proxydhcp.Silence(proxydhcp.ReasonFenced)
	})}
	addr := startServer(t, srv, proxydhcp.PortDHCP)
	client := listenClient(t)
	pkt := ovmfPXE(t, "52:54:00:00:00:61")
	client.WriteTo(pkt, addr)
	<-entered
	const extra = 200
	for range extra {
		client.WriteTo(pkt, addr)
	}
	close(release)
	// The kernel reports drops with the next datagram queued after them.
	waitFor := func(cond func(proxydhcp.PortStats) bool) proxydhcp.PortStats {
		deadline := time.Now().Add(5 * time.Second)
		for {
			st := srv.Stats().DHCP
			if cond(st) || time.Now().After(deadline) {
				return st
			}
			time.Sleep(time.Millisecond)
		}
	}
	// Drained: the socket's receive queue is empty and every datagram read was answered.
	// (Equal counts alone are not enough: between two reads of a slow worker they are equal
	// while datagrams still wait in the queue.)
	quiet := waitFor(func(st proxydhcp.PortStats) bool {
		return rxQueue(t, addr) == 0 && st.Silent.Of(proxydhcp.ReasonFenced) == st.Received && st.Received > 1
	})
	client.WriteTo(pkt, addr)
	st := waitFor(func(st proxydhcp.PortStats) bool {
		return st.Received == quiet.Received+1 && st.Silent.Of(proxydhcp.ReasonFenced) == st.Received
	})
	over := st.Silent.Of(proxydhcp.ReasonOverload)
	if over == 0 || over >= extra {
		t.Errorf("overload = %d, want some but not all of %d (%+v)", over, extra, st)
	}
	if got := st.Received + over; got != extra+2 {
		t.Errorf("received %d + dropped %d = %d, want %d", st.Received, over, got, extra+2)
	}
}

// Close stops a server that never served, and one that serves two sockets.
func TestCloseAndListenAndServe(t *testing.T) {
	if err := (&proxydhcp.Server{Handler: proxydhcp.HandlerFunc(answerAll)}).Close(); err != nil {
		t.Errorf("Close of an idle server: %v", err)
	}
	srv := &proxydhcp.Server{Handler: proxydhcp.HandlerFunc(answerAll), Addr: "127.0.0.1:0", BootAddr: "127.0.0.1:0"}
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	deadline := time.Now().Add(5 * time.Second)
	// Close as soon as ListenAndServe runs (Close before it would make it return at once too).
	for time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
		if err := srv.Close(); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-errc:
			if !errors.Is(err, proxydhcp.ErrServerClosed) {
				t.Fatalf("ListenAndServe = %v, want ErrServerClosed", err)
			}
			return
		default:
		}
	}
	t.Fatal("ListenAndServe did not return after Close")
}

func TestServeWithoutHandler(t *testing.T) {
	if err := (&proxydhcp.Server{}).Serve(listenClient(t)); !errors.Is(err, proxydhcp.ErrNoHandler) {
		t.Errorf("Serve = %v, want ErrNoHandler", err)
	}
}

// The interface address is read per packet: a server on 127.0.0.2 answers as 127.0.0.2.
func TestServerAddressPerPacket(t *testing.T) {
	srv := &proxydhcp.Server{Handler: proxydhcp.HandlerFunc(answerAll)}
	conn, err := net.ListenPacket("udp4", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.ServeBoot(conn) }()
	defer func() {
		srv.Close()
		<-errc
	}()
	port := conn.LocalAddr().(*net.UDPAddr).Port
	for _, dst := range []string{"127.0.0.1", "127.0.0.2"} {
		client := listenClient(t)
		req := build(t, dhcpv4.MessageTypeRequest, "52:54:00:00:00:71", 7, arch(iana.EFI_X86_64), vendorClass("PXEClient"),
			dhcpv4.WithClientIP(net.IPv4(127, 0, 0, 1)))
		client.WriteTo(req, net.UDPAddrFromAddrPort(netip.AddrPortFrom(netip.MustParseAddr(dst), uint16(port))))
		client.SetReadDeadline(time.Now().Add(5 * time.Second))
		buf := make([]byte, 1500)
		n, _, err := client.ReadFrom(buf)
		if err != nil {
			t.Fatalf("%s: %v", dst, err)
		}
		m, err := dhcpv4.FromBytes(buf[:n])
		if err != nil {
			t.Fatal(err)
		}
		if got := m.ServerIdentifier().String(); got != dst {
			t.Errorf("sent to %s, option 54 = %s", dst, got)
		}
	}
}

func TestListenAndServeBindError(t *testing.T) {
	busy := listenClient(t)
	srv := &proxydhcp.Server{Handler: proxydhcp.HandlerFunc(answerAll), Addr: "127.0.0.1:0", BootAddr: busy.LocalAddr().String()}
	err := srv.ListenAndServe()
	var oe *proxydhcp.OpError
	if !errors.As(err, &oe) || oe.Op != "listen" || oe.Addr != busy.LocalAddr().String() {
		t.Fatalf("ListenAndServe = %v, want a listen OpError for %v", err, busy.LocalAddr())
	}
	srv.Close()
}

// wrappedConn hides the *net.UDPConn, as a host's own PacketConn would: no control messages.
type wrappedConn struct{ net.PacketConn }

// A PacketConn that is not a *net.UDPConn is served too; the server address is the socket's.
func TestServeWrappedConn(t *testing.T) {
	srv := &proxydhcp.Server{Handler: proxydhcp.HandlerFunc(answerAll)}
	inner, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.ServeBoot(wrappedConn{inner}) }()
	defer func() {
		srv.Close()
		if err := <-errc; !errors.Is(err, proxydhcp.ErrServerClosed) {
			t.Errorf("ServeBoot = %v", err)
		}
	}()
	client := listenClient(t)
	client.WriteTo(ovmfBootRequest(t, "52:54:00:00:00:81"), inner.LocalAddr())
	client.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 1500)
	n, _, err := client.ReadFrom(buf)
	if err != nil {
		t.Fatal(err)
	}
	m, err := dhcpv4.FromBytes(buf[:n])
	if err != nil {
		t.Fatal(err)
	}
	if got := []string{m.MessageType().String(), m.ServerIdentifier().String(), m.BootFileName}; !cmp.Equal(got, []string{"ACK", "127.0.0.1", "ipxe.efi"}) {
		t.Errorf("reply %v", got)
	}
}

// rxQueue is the bytes waiting in the receive queue of the IPv4 UDP socket bound to addr, as
// Linux's /proc/net/udp reports it. It reads this thread's view: other tests of the package
// run threads in namespaces of their own, and /proc/net is the main thread's.
func rxQueue(t *testing.T, addr *net.UDPAddr) int64 {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b, err := os.ReadFile("/proc/thread-self/net/udp")
	if err != nil {
		t.Fatalf("the socket's receive queue: %v", err)
	}
	local := fmt.Sprintf(":%04X", addr.Port)
	for _, line := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 5 || !strings.HasSuffix(f[1], local) {
			continue
		}
		_, rx, _ := strings.Cut(f[4], ":") // tx_queue:rx_queue, in hex
		n, err := strconv.ParseInt(rx, 16, 64)
		if err != nil {
			t.Fatalf("/proc/net/udp: %q: %v", line, err)
		}
		return n
	}
	t.Fatalf("no socket on port %d in /proc/net/udp", addr.Port)
	return 0
}
