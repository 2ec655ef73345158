package agent_test

import (
	"errors"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/iana"

	"github.com/bettercompute/siteboot/imagecache"
)

// TestRelayAllowList: with Boot.Relays set, proxy DHCP answers a relayed request only from a
// listed relay; one naming another giaddr is dropped before the entry is even looked at,
// and counted.
func TestRelayAllowList(t *testing.T) {
	h := newHarness(t)
	cfg := h.config(t.TempDir())
	listed := netip.MustParseAddr("127.0.0.5")
	cfg.Boot.Relays = []netip.Addr{listed}
	a, _ := h.start(t, cfg, h.plane.Link())
	e := entry(6, h.clk.Now().Add(2*time.Hour)) // X86_64_EFI
	h.prepare(t, a, e)
	dhcp := netip.MustParseAddrPort(a.Addrs()["dhcp"])
	conn, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.MustParseAddrPort("127.0.0.1:0")))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	relayed := func(giaddr netip.Addr) {
		t.Helper()
		req, err := dhcpv4.New(
			dhcpv4.WithHwAddr(net.HardwareAddr(e.MAC[:])),
			dhcpv4.WithMessageType(dhcpv4.MessageTypeDiscover),
			dhcpv4.WithGatewayIP(giaddr.AsSlice()),
			dhcpv4.WithOption(dhcpv4.OptClassIdentifier("PXEClient:Arch:00007:UNDI:003000")),
			dhcpv4.WithOption(dhcpv4.OptClientArch(iana.EFI_X86_64)),
		)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conn.WriteToUDPAddrPort(req.ToBytes(), dhcp); err != nil {
			t.Fatal(err)
		}
	}
	relayed(netip.MustParseAddr("127.0.0.9")) // not a listed relay
	waitFor(t, "the unlisted relay's request counted", func() bool { return a.Stats()["proxydhcp_silent_relay-not-allowed_67"] == 1 })
	if n := a.Stats()["proxydhcp_answered_67"]; n != 0 {
		t.Errorf("answered %d requests from an unlisted relay", n)
	}
	relayed(listed) // the answer goes to the relay's port 67 on loopback, where nobody listens
	waitFor(t, "the listed relay's request answered", func() bool { return a.Stats()["proxydhcp_answered_67"] == 1 })
	if n := a.Stats()["proxydhcp_silent_relay-not-allowed_67"]; n != 1 {
		t.Errorf("relay-not-allowed counted %d, want 1", n)
	}
}

// TestManagementNetworksRefused: Boot.ManagementNetworks reaches the cache's source policy:
// the site's kernel, on a network named there (here loopback, which the test's origin is
// on), is refused as "management-network" and never pulled.
func TestManagementNetworksRefused(t *testing.T) {
	h := newHarness(t)
	cfg := h.config(t.TempDir())
	cfg.Boot.AllowedSourceNetworks = nil
	cfg.Boot.ManagementNetworks = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	a, _ := h.start(t, cfg, h.plane.Link())
	waitFor(t, "the kernel refused", func() bool {
		for _, s := range a.Cache().Status() {
			var se *imagecache.SourceError
			if s.Image.SHA256.String() == h.kernel && errors.As(s.Err, &se) {
				return se.Reason == "management-network"
			}
		}
		return false
	})
}
