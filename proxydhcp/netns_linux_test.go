package proxydhcp_test

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/internal/testpeer"
	"github.com/bettercompute/siteboot/proxydhcp"
	"github.com/google/go-cmp/cmp"
	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/dhcpv4/nclient4"
	"github.com/insomniacslk/dhcp/iana"
)

// TestNetnsRealClientBroadcast runs the server on UDP 67 and 4011 of one host of an isolated
// Ethernet segment and insomniacslk's nclient4 on a raw packet socket of another host whose
// interface has no address, as firmware in the INIT state. The offer must come back as a
// broadcast out of the right interface, naming the address of that interface (read per
// packet); then the client, given an address, asks on 4011 from port 4011 as OVMF does and
// gets the ACK on that port. Needs root (namespaces).
func TestNetnsRealClientBroadcast(t *testing.T) {
	seg := testpeer.NewSegment(t, 2)
	server, client := seg.Hosts[0], seg.Hosts[1]
	client.Run(t, "ip", "addr", "flush", "dev", client.Iface)

	var mu sync.Mutex
	var discovered []string
	known := "52:54:00:aa:00:01"
	srv := &proxydhcp.Server{
		Handler: proxydhcp.HandlerFunc(func(_ context.Context, r *proxydhcp.Request) proxydhcp.Decision {
			if r.MAC.String() != known {
				return proxydhcp.Silence(proxydhcp.ReasonUnknown)
			}
			return proxydhcp.Answer()
		}),
		Discoverer: proxydhcp.DiscovererFunc(func(_ context.Context, r *proxydhcp.Request) {
			mu.Lock()
			discovered = append(discovered, r.MAC.String()+" "+r.Arch.String()+" "+r.UUID.String())
			mu.Unlock()
		}),
	}
	wait := serveInNetns(t, server.Netns, srv)
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		wait()
	}()

	discover := func(mac string, tries int) (*dhcpv4.DHCPv4, error) {
		var c *nclient4.Client
		if err := client.Do(func() error {
			var err error
			c, err = nclient4.New(client.Iface, nclient4.WithHWAddr(mustMAC(t, mac)), nclient4.WithTimeout(time.Second), nclient4.WithRetry(tries))
			return err
		}); err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return c.DiscoverOffer(ctx,
			dhcpv4.WithOption(dhcpv4.OptClassIdentifier("PXEClient:Arch:00007:UNDI:003000")),
			dhcpv4.WithOption(dhcpv4.OptClientArch(iana.EFI_X86_64)),
			uuidOpt(t, ovmfUUID),
		)
	}

	offer, err := discover(known, 3)
	if err != nil {
		t.Fatalf("DiscoverOffer: %v (server stats %+v)", err, srv.Stats())
	}
	got := []string{offer.MessageType().String(), offer.YourIPAddr.String(), offer.ServerIdentifier().String(),
		offer.ServerIPAddr.String(), offer.ClassIdentifier(), offer.BootFileName, offer.ClientHWAddr.String()}
	want := []string{"OFFER", "0.0.0.0", server.IP.String(), server.IP.String(), "PXEClient", "ipxe.efi", known}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("offer (-want +got):\n%s", diff)
	}

	// An unknown machine gets nothing and is reported.
	if _, err := discover("52:54:00:aa:00:02", 1); err == nil {
		t.Error("an unknown MAC got an offer")
	}
	mu.Lock()
	if diff := cmp.Diff([]string{"52:54:00:aa:00:02 x86_64-efi " + ovmfUUID}, discovered); diff != "" {
		t.Errorf("discovered (-want +got):\n%s", diff)
	}
	mu.Unlock()

	// OVMF's boot-server request: from port 4011, with its new address as ciaddr.
	client.Run(t, "ip", "addr", "add", client.IP.String()+"/24", "dev", client.Iface)
	var uc net.PacketConn
	if err := client.Do(func() error {
		var err error
		uc, err = net.ListenPacket("udp4", client.IP.String()+":4011")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer uc.Close()
	req := build(t, dhcpv4.MessageTypeRequest, known, 0x4011abcd, arch(iana.EFI_X86_64), undi(3, 0),
		vendorClass("PXEClient:Arch:00007:UNDI:003000"), uuidOpt(t, ovmfUUID), dhcpv4.WithClientIP(client.IP.AsSlice()))
	buf := make([]byte, 1500)
	var ack *dhcpv4.DHCPv4
	for try := 0; try < 3 && ack == nil; try++ { // the first datagram may wait for ARP
		if _, err := uc.WriteTo(req, &net.UDPAddr{IP: server.IP.AsSlice(), Port: 4011}); err != nil {
			t.Fatal(err)
		}
		uc.SetReadDeadline(time.Now().Add(2 * time.Second))
		n, from, err := uc.ReadFrom(buf)
		if err != nil {
			continue
		}
		if from.String() != server.IP.String()+":4011" {
			t.Errorf("ACK from %v", from)
		}
		if ack, err = dhcpv4.FromBytes(buf[:n]); err != nil {
			t.Fatal(err)
		}
	}
	if ack == nil {
		t.Fatal("no ACK on port 4011")
	}
	got = []string{ack.MessageType().String(), ack.ServerIdentifier().String(), ack.BootFileName, ack.ClientIPAddr.String()}
	want = []string{"ACK", server.IP.String(), "ipxe.efi", client.IP.String()}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ACK (-want +got):\n%s", diff)
	}
	st := waitStats(srv, func(st proxydhcp.Stats) bool { return st.Boot.Answered >= 1 })
	if st.DHCP.Answered < 1 || st.DHCP.Silent.Of(proxydhcp.ReasonUnknown) < 1 || st.Boot.Answered < 1 {
		t.Errorf("stats %+v", st)
	}
}

// serveInNetns binds wildcard sockets on 67 and 4011 inside ns and serves srv on them; the
// returned wait blocks until both Serve calls have returned (after Shutdown or Close).
func serveInNetns(t *testing.T, ns *testpeer.Netns, srv *proxydhcp.Server) (wait func()) {
	t.Helper()
	var c67, c4011 net.PacketConn
	if err := ns.Do(func() (err error) {
		if c67, err = net.ListenPacket("udp4", "0.0.0.0:67"); err != nil {
			return err
		}
		c4011, err = net.ListenPacket("udp4", "0.0.0.0:4011")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() { checkClosed(t, srv.Serve(c67)) })
	wg.Go(func() { checkClosed(t, srv.ServeBoot(c4011)) })
	return wg.Wait
}

func checkClosed(t *testing.T, err error) {
	if !errors.Is(err, proxydhcp.ErrServerClosed) {
		t.Errorf("Serve returned %v, want ErrServerClosed", err)
	}
}

// TestNetnsTwoSegments serves one wildcard socket for a host on two segments: a broadcast
// DISCOVER from each segment is answered out of that segment's interface, naming that
// interface's address (read per packet). Needs root (namespaces).
func TestNetnsTwoSegments(t *testing.T) {
	seg := testpeer.NewSegment(t, 2)
	server, client1 := seg.Hosts[0], seg.Hosts[1]
	client1.Run(t, "ip", "addr", "flush", "dev", client1.Iface)
	client2 := testpeer.NewNetns(t)
	server.Run(t, "ip", "link", "add", "eth1", "type", "veth", "peer", "name", "eth0", "netns", client2.Name())
	server.Run(t, "ip", "addr", "add", "198.51.100.1/24", "dev", "eth1")
	server.Run(t, "ip", "link", "set", "eth1", "up")
	client2.Run(t, "ip", "link", "set", "eth0", "up")

	srv := &proxydhcp.Server{Handler: proxydhcp.HandlerFunc(answerAll)}
	var c67 net.PacketConn
	if err := server.Do(func() (err error) { c67, err = net.ListenPacket("udp4", "0.0.0.0:67"); return err }); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); checkClosed(t, srv.Serve(c67)) }()
	defer func() {
		srv.Close()
		<-done
	}()

	for _, tc := range []struct {
		ns   *testpeer.Netns
		mac  string
		want string
	}{
		{client1.Netns, "52:54:00:bb:00:01", server.IP.String()},
		{client2, "52:54:00:bb:00:02", "198.51.100.1"},
	} {
		var c *nclient4.Client
		if err := tc.ns.Do(func() (err error) {
			c, err = nclient4.New("eth0", nclient4.WithHWAddr(mustMAC(t, tc.mac)), nclient4.WithTimeout(time.Second), nclient4.WithRetry(3))
			return err
		}); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		offer, err := c.DiscoverOffer(ctx,
			dhcpv4.WithOption(dhcpv4.OptClassIdentifier("HTTPClient:Arch:00016:UNDI:003000")),
			dhcpv4.WithOption(dhcpv4.OptClientArch(iana.EFI_X86_64_HTTP)))
		cancel()
		c.Close()
		if err != nil {
			t.Fatalf("%s: DiscoverOffer: %v", tc.mac, err)
		}
		got := []string{offer.ServerIdentifier().String(), offer.ServerIPAddr.String(), offer.BootFileName, offer.ClassIdentifier()}
		want := []string{tc.want, tc.want, "http://" + tc.want + "/boot/files/ipxe.efi", "HTTPClient"}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.mac, diff)
		}
	}
}
