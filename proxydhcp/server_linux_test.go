package proxydhcp_test

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/dhcpv4/nclient4"
	"github.com/insomniacslk/dhcp/iana"

	"github.com/bettercompute/siteboot/proxydhcp"
)

// A real DHCP client (insomniacslk's nclient4) gets a proxy offer over loopback sockets. The
// client has an address (ciaddr), so the offer is unicast to it; broadcasts to clients
// without one are tested in the namespace test.
func TestLoopbackNclient4(t *testing.T) {
	var seen []string
	var mu sync.Mutex
	srv := &proxydhcp.Server{Handler: proxydhcp.HandlerFunc(func(_ context.Context, r *proxydhcp.Request) proxydhcp.Decision {
		mu.Lock()
		seen = append(seen, r.MAC.String()+" "+r.Arch.String()+" "+r.Server.String())
		mu.Unlock()
		return proxydhcp.Answer()
	})}
	client := listenClient(t)
	srv.ClientPort = client.LocalAddr().(*net.UDPAddr).Port
	addr := startServer(t, srv, proxydhcp.PortDHCP)

	hw := mustMAC(t, "52:54:00:12:34:56")
	c, err := nclient4.NewWithConn(client, hw, nclient4.WithServerAddr(addr), nclient4.WithTimeout(2*time.Second), nclient4.WithRetry(3))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	offer, err := c.DiscoverOffer(ctx,
		dhcpv4.WithClientIP(net.IPv4(127, 0, 0, 1)),
		dhcpv4.WithOption(dhcpv4.OptClassIdentifier("PXEClient:Arch:00007:UNDI:003000")),
		dhcpv4.WithOption(dhcpv4.OptClientArch(iana.EFI_X86_64)),
	)
	if err != nil {
		t.Fatalf("DiscoverOffer: %v", err)
	}
	got := []string{offer.MessageType().String(), offer.YourIPAddr.String(), offer.ServerIdentifier().String(),
		offer.ServerIPAddr.String(), offer.ClassIdentifier(), offer.BootFileName}
	want := []string{"OFFER", "0.0.0.0", "127.0.0.1", "127.0.0.1", "PXEClient", "ipxe.efi"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("offer (-want +got):\n%s", diff)
	}
	mu.Lock()
	if diff := cmp.Diff([]string{"52:54:00:12:34:56 x86_64-efi 127.0.0.1"}, seen); diff != "" {
		t.Errorf("handler saw (-want +got):\n%s", diff)
	}
	mu.Unlock()
	// The reply is counted once the socket took it, which may be just after it arrived.
	st := waitStats(srv, func(st proxydhcp.Stats) bool { return st.DHCP.Answered == 1 }).DHCP
	if st.Received != 1 || st.Answered != 1 {
		t.Errorf("stats %+v, want 1 received 1 answered", st)
	}
}
