package proxydhcp_test

import (
	"context"
	"fmt"
	"net"
	"net/netip"

	"github.com/bettercompute/siteboot/hwid"
	"github.com/bettercompute/siteboot/proxydhcp"
	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/iana"
)

// A host answers only the machines it prepared, and lists the others.
func Example() {
	known, _ := hwid.ParseMAC("52:54:00:00:00:01")
	srv := &proxydhcp.Server{
		Handler: proxydhcp.HandlerFunc(func(ctx context.Context, req *proxydhcp.Request) proxydhcp.Decision {
			if req.MAC != known {
				return proxydhcp.Silence(proxydhcp.ReasonUnknown)
			}
			return proxydhcp.Answer()
		}),
		Discoverer: proxydhcp.DiscovererFunc(func(ctx context.Context, req *proxydhcp.Request) {
			fmt.Println("discovered", req.MAC, req.Arch)
		}),
	}

	// A UEFI x86-64 PXE DISCOVER, as OVMF sends it.
	discover := func(mac string) []byte {
		hw, _ := net.ParseMAC(mac)
		m, _ := dhcpv4.NewDiscovery(hw,
			dhcpv4.WithOption(dhcpv4.OptClassIdentifier("PXEClient:Arch:00007:UNDI:003000")),
			dhcpv4.WithOption(dhcpv4.OptClientArch(iana.EFI_X86_64)),
		)
		return m.ToBytes()
	}
	server := netip.MustParseAddr("192.0.2.2")
	for _, mac := range []string{"52:54:00:00:00:01", "52:54:00:00:00:99"} {
		resp := srv.Respond(context.Background(), proxydhcp.Packet{
			Data:   discover(mac),
			Port:   proxydhcp.PortDHCP,
			Source: netip.MustParseAddrPort("0.0.0.0:68"),
			Local:  server,
		})
		if resp.Reply == nil {
			fmt.Println(mac, "silent:", resp.Reason)
			continue
		}
		offer, _ := dhcpv4.FromBytes(resp.Reply)
		fmt.Println(mac, offer.MessageType(), "file", offer.BootFileName, "from", offer.ServerIdentifier(), "to", resp.Dest, "yiaddr", offer.YourIPAddr)
	}
	// Output:
	// 52:54:00:00:00:01 OFFER file ipxe.efi from 192.0.2.2 to 255.255.255.255:68 yiaddr 0.0.0.0
	// discovered 52:54:00:00:00:99 x86_64-efi
	// 52:54:00:00:00:99 silent: unknown
}
