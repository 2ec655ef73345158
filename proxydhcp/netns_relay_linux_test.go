package proxydhcp_test

import (
	"context"
	"net/netip"
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

// TestNetnsDnsmasqRelayIPXE puts a client segment (198.51.100.0/24) behind dnsmasq's
// dhcp-relay and the server on another segment (192.0.2.0/24), and sends an iPXE-like
// DISCOVER (user class iPXE, no broadcast flag, no address) from a raw socket on the client
// segment. The relayed offer must reach the client: the reply sets the broadcast flag, so the
// relay broadcasts it there. Needs root (namespaces) and dnsmasq.
func TestNetnsDnsmasqRelayIPXE(t *testing.T) {
	dnsmasq := testpeer.LookPath(t, "dnsmasq", "dnsmasq")
	server, relay, client := testpeer.NewNetns(t), testpeer.NewNetns(t), testpeer.NewNetns(t)
	const (
		serverAddr  = "192.0.2.10"
		relayServer = "192.0.2.20"   // the relay's address toward the server
		relayClient = "198.51.100.1" // the relay's address on the client segment (giaddr)
	)
	relay.Run(t, "ip", "link", "add", "eth0", "type", "veth", "peer", "name", "eth0", "netns", server.Name())
	relay.Run(t, "ip", "link", "add", "eth1", "type", "veth", "peer", "name", "eth0", "netns", client.Name())
	relay.Run(t, "ip", "addr", "add", relayServer+"/24", "dev", "eth0")
	relay.Run(t, "ip", "addr", "add", relayClient+"/24", "dev", "eth1")
	server.Run(t, "ip", "addr", "add", serverAddr+"/24", "dev", "eth0")
	for _, ns := range []*testpeer.Netns{server, relay, client} {
		ns.Run(t, "ip", "link", "set", "eth0", "up")
	}
	relay.Run(t, "ip", "link", "set", "eth1", "up")
	server.Run(t, "ip", "route", "add", "198.51.100.0/24", "via", relayServer)

	testpeer.Start(t, testpeer.Cmd{
		Path: dnsmasq, Netns: relay,
		Args: []string{"--keep-in-foreground", "--conf-file=/dev/null", "--port=0", "--log-facility=-", "--log-dhcp",
			"--interface=eth1", "--dhcp-relay=" + relayClient + "," + serverAddr,
			"--dhcp-leasefile=" + t.TempDir() + "/leases", "--pid-file=" + t.TempDir() + "/pid", "--user=root"},
		ReadyLog: "relay",
	})

	var mu sync.Mutex
	var seen []proxydhcp.Request
	srv := &proxydhcp.Server{
		Relays: []netip.Addr{netip.MustParseAddr(relayClient)},
		Handler: proxydhcp.HandlerFunc(func(_ context.Context, r *proxydhcp.Request) proxydhcp.Decision {
			mu.Lock()
			seen = append(seen, *r)
			mu.Unlock()
			return proxydhcp.Answer()
		}),
	}
	wait := serveInNetns(t, server, srv)
	defer func() {
		srv.Close()
		wait()
	}()

	const mac = "52:54:00:cc:00:01"
	var c *nclient4.Client
	if err := client.Do(func() (err error) {
		c, err = nclient4.New("eth0", nclient4.WithHWAddr(mustMAC(t, mac)), nclient4.WithTimeout(2*time.Second), nclient4.WithRetry(3))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	offer, err := c.DiscoverOffer(ctx,
		dhcpv4.WithOption(dhcpv4.OptClassIdentifier("PXEClient:Arch:00007:UNDI:003010")),
		dhcpv4.WithOption(dhcpv4.OptClientArch(iana.EFI_X86_64)),
		dhcpv4.WithGeneric(dhcpv4.OptionUserClassInformation, []byte("iPXE")),
		dhcpv4.WithBroadcast(false))
	if err != nil {
		t.Fatalf("no offer through the relay: %v (server stats %+v)", err, srv.Stats().DHCP)
	}
	got := []string{offer.MessageType().String(), offer.YourIPAddr.String(), offer.ServerIdentifier().String(),
		offer.BootFileName, offer.ClientHWAddr.String()}
	want := []string{"OFFER", "0.0.0.0", serverAddr, "http://" + serverAddr + "/boot/chain.ipxe", mac}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("offer through the relay (-want +got):\n%s", diff)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) == 0 || seen[0].Relay.String() != relayClient || seen[0].Broadcast {
		t.Errorf("the server saw %+v: want a relayed request from %s without the broadcast flag", seen, relayClient)
	}
}
