package proxydhcp_test

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/bettercompute/siteboot/hwid"
	"github.com/bettercompute/siteboot/proxydhcp"
	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/dhcpv6"
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

// Serving sockets the host bound: here the boot-server port on loopback, answered from the
// request's source port as OVMF expects.
func ExampleServer_ServeBoot() {
	srv := &proxydhcp.Server{
		Handler: proxydhcp.HandlerFunc(func(ctx context.Context, req *proxydhcp.Request) proxydhcp.Decision {
			return proxydhcp.Answer()
		}),
	}
	conn, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		fmt.Println(err)
		return
	}
	done := make(chan error, 1)
	go func() { done <- srv.ServeBoot(conn) }()

	// A PXE client with an address asks the boot server.
	client, _ := net.ListenPacket("udp4", "127.0.0.1:0")
	defer client.Close()
	hw, _ := net.ParseMAC("52:54:00:00:00:01")
	req, _ := dhcpv4.New(dhcpv4.WithHwAddr(hw), dhcpv4.WithMessageType(dhcpv4.MessageTypeRequest),
		dhcpv4.WithClientIP(net.IPv4(127, 0, 0, 1)),
		dhcpv4.WithOption(dhcpv4.OptClassIdentifier("PXEClient:Arch:00011:UNDI:003000")),
		dhcpv4.WithOption(dhcpv4.OptClientArch(iana.EFI_ARM64)))
	client.WriteTo(req.ToBytes(), conn.LocalAddr())
	client.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 1500)
	if n, _, err := client.ReadFrom(buf); err == nil {
		ack, _ := dhcpv4.FromBytes(buf[:n])
		fmt.Println(ack.MessageType(), ack.BootFileName, ack.ServerIdentifier())
	}

	srv.Shutdown(context.Background())
	fmt.Println(<-done)
	// Output:
	// ACK ipxe-arm64.efi 127.0.0.1
	// proxydhcp: server closed
}

// DHCPv6 on a socket the host bound: here loopback, where iPXE's stateless
// INFORMATION-REQUEST gets the chain URL. On a real link, ListenDHCPv6 binds [::]:547 and
// joins ff02::1:2; ServerIP6 names the address for URLs (loopback would not do).
func ExampleServer_ServeDHCPv6() {
	srv := &proxydhcp.Server{
		ServerIP6: netip.MustParseAddr("2001:db8::2"),
		Handler: proxydhcp.HandlerFunc(func(ctx context.Context, req *proxydhcp.Request) proxydhcp.Decision {
			fmt.Println("asked by", req.MAC, "from", req.MACSource, "iPXE", req.IPXE)
			return proxydhcp.Answer()
		}),
	}
	conn, err := net.ListenPacket("udp6", "[::1]:0")
	if err != nil {
		fmt.Println(err)
		return
	}
	done := make(chan error, 1)
	go func() { done <- srv.ServeDHCPv6(conn) }()

	client, _ := net.ListenPacket("udp6", "[::1]:0")
	defer client.Close()
	hw, _ := net.ParseMAC("52:54:00:00:00:01")
	req, _ := dhcpv6.NewMessage()
	req.MessageType = dhcpv6.MessageTypeInformationRequest
	req.AddOption(dhcpv6.OptClientID(&dhcpv6.DUIDLL{HWType: iana.HWTypeEthernet, LinkLayerAddr: hw}))
	req.AddOption(&dhcpv6.OptUserClass{UserClasses: [][]byte{[]byte("iPXE")}})
	client.WriteTo(req.ToBytes(), conn.LocalAddr())
	client.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 1500)
	if n, _, err := client.ReadFrom(buf); err == nil {
		reply, _ := dhcpv6.MessageFromBytes(buf[:n])
		fmt.Println(reply.MessageType, reply.Options.BootFileURL(), "address given:", reply.Options.OneIANA() != nil)
	}

	srv.Shutdown(context.Background())
	fmt.Println(<-done)
	// Output:
	// asked by 52:54:00:00:00:01 from duid-ll iPXE true
	// REPLY http://[2001:db8::2]/boot/chain.ipxe address given: false
	// proxydhcp: server closed
}
