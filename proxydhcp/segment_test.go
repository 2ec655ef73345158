package proxydhcp_test

import (
	"context"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/clock/clocktest"
	"github.com/bettercompute/siteboot/hwid"
	"github.com/bettercompute/siteboot/proxydhcp"
	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/iana"
)

// ipxeRequest4011 is iPXE's ProxyDHCP REQUEST to port 4011 from its new address (dhcp.c
// dhcp_proxy_tx): ciaddr set, user class iPXE, arch 7, no UUID.
func ipxeRequest4011(t testing.TB, mac string, ciaddr net.IP) []byte {
	return build(t, dhcpv4.MessageTypeRequest, mac, 0x0badcaff,
		arch(iana.EFI_X86_64), vendorClass("PXEClient:Arch:00007:UNDI:003010"),
		dhcpv4.WithGeneric(dhcpv4.OptionUserClassInformation, []byte("iPXE")),
		dhcpv4.WithClientIP(ciaddr),
		dhcpv4.WithOption(dhcpv4.OptServerIdentifier(net.ParseIP(serverIP))))
}

// TestOffSegmentRefused performs the first attack on the boot binding (S1): a host on
// another network sends the requests whose answers go unicast to it (iPXE's 4011 REQUEST, a port-67 REQUEST
// naming its own ciaddr, a DHCPv6 INFORMATION-REQUEST) for a MAC the host answers; none is
// answered, none reaches the Handler, each is counted as off-segment. The same requests from
// the receiving interface's subnet, from a configured segment, or from the subnet behind the
// relay the MAC's own DISCOVER came through, are answered.
func TestOffSegmentRefused(t *testing.T) {
	asked := 0
	clk := clocktest.New(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	newSrv := func(segments ...netip.Prefix) *proxydhcp.Server {
		return &proxydhcp.Server{
			Segments: segments,
			Clock:    clk,
			Handler: proxydhcp.HandlerFunc(func(context.Context, *proxydhcp.Request) proxydhcp.Decision {
				asked++
				return proxydhcp.Answer()
			}),
		}
	}
	local := netip.MustParseAddr(serverIP)
	attacker := netip.MustParseAddr("198.51.100.77")
	v4 := func(srv *proxydhcp.Server, port proxydhcp.Port, pkt []byte, src netip.Addr) proxydhcp.Response {
		return srv.Respond(context.Background(), proxydhcp.Packet{Data: pkt, Port: port, Source: netip.AddrPortFrom(src, 68), Local: local, Link: testLink})
	}
	mac := "52:54:00:00:00:61"
	cases := []struct {
		name string
		run  func(*proxydhcp.Server) proxydhcp.Response
	}{
		{"4011 REQUEST from another network", func(s *proxydhcp.Server) proxydhcp.Response {
			return v4(s, proxydhcp.PortBoot, ipxeRequest4011(t, mac, net.IP(attacker.AsSlice())), attacker)
		}},
		{"port-67 REQUEST with the requester's ciaddr", func(s *proxydhcp.Server) proxydhcp.Response {
			pkt := build(t, dhcpv4.MessageTypeRequest, mac, 7, arch(iana.EFI_X86_64), vendorClass("PXEClient:Arch:00007:UNDI:003000"),
				dhcpv4.WithClientIP(net.IP(attacker.AsSlice())), dhcpv4.WithOption(dhcpv4.OptServerIdentifier(net.ParseIP(serverIP))))
			return v4(s, proxydhcp.PortDHCP, pkt, attacker)
		}},
		{"unicast DHCPv6 INFORMATION-REQUEST", func(s *proxydhcp.Server) proxydhcp.Response {
			return s.Respond(context.Background(), proxydhcp.Packet{Data: ipxeInfoRequest(t, mac), Port: proxydhcp.PortDHCPv6,
				Source: netip.MustParseAddrPort("[2001:db8:1::77]:546"), Local: netip.MustParseAddr(server6), Link: testLink})
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			asked = 0
			srv := newSrv()
			if resp := tc.run(srv); resp.Reply != nil || resp.Reason != proxydhcp.ReasonOffSegment || asked != 0 {
				t.Errorf("answered %v, reason %v, handler asked %d times; want silence for off-segment", resp.Reply != nil, resp.Reason, asked)
			}
			allowed := newSrv(netip.MustParsePrefix("198.51.100.0/24"), netip.MustParsePrefix("2001:db8:1::/64"))
			if resp := tc.run(allowed); resp.Reply == nil {
				t.Errorf("from a configured segment: silent for %v", resp.Reason)
			}
		})
	}

	// The subnet behind the relay a MAC's own relayed DISCOVER came through is learned for
	// that MAC, for LearnedRelayTTL.
	srv := newSrv()
	relayed := build(t, dhcpv4.MessageTypeDiscover, mac, 9, arch(iana.EFI_X86_64), vendorClass("PXEClient:Arch:00007:UNDI:003010"),
		dhcpv4.WithGeneric(dhcpv4.OptionUserClassInformation, []byte("iPXE")), dhcpv4.WithGatewayIP(net.IPv4(198, 51, 100, 1)))
	if resp := srv.Respond(context.Background(), proxydhcp.Packet{Data: relayed, Port: proxydhcp.PortDHCP,
		Source: netip.MustParseAddrPort("198.51.100.1:67"), Local: local, Link: testLink}); resp.Reply == nil {
		t.Fatalf("relayed DISCOVER: silent for %v", resp.Reason)
	}
	machine := netip.MustParseAddr("198.51.100.150")
	if resp := v4(srv, proxydhcp.PortBoot, ipxeRequest4011(t, mac, net.IP(machine.AsSlice())), machine); resp.Reply == nil {
		t.Errorf("4011 REQUEST from behind the MAC's relay: silent for %v", resp.Reason)
	}
	if resp := v4(srv, proxydhcp.PortBoot, ipxeRequest4011(t, "52:54:00:00:00:62", net.IP(machine.AsSlice())), machine); resp.Reason != proxydhcp.ReasonOffSegment {
		t.Errorf("another MAC's 4011 REQUEST from there: %v, want off-segment", resp.Reason)
	}
	clk.Advance(proxydhcp.LearnedRelayTTL)
	if resp := v4(srv, proxydhcp.PortBoot, ipxeRequest4011(t, mac, net.IP(machine.AsSlice())), machine); resp.Reason != proxydhcp.ReasonOffSegment {
		t.Errorf("after LearnedRelayTTL: %v, want off-segment", resp.Reason)
	}
	if st := srv.Stats().Boot; st.Silent.Of(proxydhcp.ReasonOffSegment) != 2 {
		t.Errorf("off-segment on 4011 counted %d times, want 2", st.Silent.Of(proxydhcp.ReasonOffSegment))
	}
}

// TestBinderNoTokenInBroadcast performs the premise of the bystander attack on the boot
// binding (S1): with a Binder, the broadcast offer to iPXE names no boot file (so a bystander reading broadcasts learns
// nothing, and iPXE asks on port 4011), and the unicast 4011 answer names the chain URL with
// the Binder's token, bound to the address the answer goes to.
func TestBinderNoTokenInBroadcast(t *testing.T) {
	type call struct {
		mac hwid.MAC
		to  netip.Addr
	}
	var calls []call
	srv := &proxydhcp.Server{
		Handler: proxydhcp.HandlerFunc(answerAll),
		Binder: proxydhcp.BinderFunc(func(_ context.Context, mac hwid.MAC, to netip.Addr) (string, error) {
			calls = append(calls, call{mac, to})
			return "0123456789abcdef0123456789abcdef", nil
		}),
	}
	local := netip.MustParseAddr(serverIP)
	offer := srv.Respond(context.Background(), proxydhcp.Packet{Data: ipxeEFI(t, "52:54:00:00:00:63"), Port: proxydhcp.PortDHCP,
		Source: netip.MustParseAddrPort("0.0.0.0:68"), Local: local, Link: testLink})
	f := fieldsOf(t, offer)
	if offer.Reply == nil || f.Dest != "255.255.255.255:68" || f.File != "" || f.Opt67 != "" || f.SIAddr != serverIP || f.Opt60 != "PXEClient" {
		t.Errorf("broadcast offer to iPXE: %+v; want no boot file, siaddr and option 60 (iPXE then asks on 4011)", f)
	}
	if strings.Contains(string(offer.Reply), "n=") || len(calls) != 0 {
		t.Errorf("the broadcast offer carries a token (Binder called %d times)", len(calls))
	}
	machine := netip.MustParseAddr("192.0.2.150")
	ack := srv.Respond(context.Background(), proxydhcp.Packet{Data: ipxeRequest4011(t, "52:54:00:00:00:63", net.IP(machine.AsSlice())),
		Port: proxydhcp.PortBoot, Source: netip.AddrPortFrom(machine, 68), Local: local, Link: testLink})
	f = fieldsOf(t, ack)
	want := "http://" + serverIP + "/boot/chain.ipxe?n=0123456789abcdef0123456789abcdef"
	if ack.Reply == nil || f.Type != "ACK" || f.File != want || f.Dest != machine.String()+":68" {
		t.Errorf("4011 answer to iPXE: %+v; want an ACK to %v naming %s", f, machine, want)
	}
	if len(calls) != 1 || calls[0].to != machine || calls[0].mac.String() != "52:54:00:00:00:63" {
		t.Errorf("Binder calls %+v, want one for the machine's MAC to %v", calls, machine)
	}
}

// TestRelayLearned6: EDK2 behind a DHCPv6 relay sends its port-4011 REQUEST straight from
// its address on the relay's link: answered once the MAC's relayed SOLICIT named that link,
// off-segment before.
func TestRelayLearned6(t *testing.T) {
	sid := []byte{0, 4, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	srv := &proxydhcp.Server{Handler: proxydhcp.HandlerFunc(answerAll), ServerDUID: sid}
	local := netip.MustParseAddr(server6)
	boot := func() proxydhcp.Response {
		return srv.Respond(context.Background(), proxydhcp.Packet{Data: edk2BootRequest(duidLLT(t, edk2MAC), sid), Port: proxydhcp.PortBoot,
			Source: netip.MustParseAddrPort("[2001:db8:1::150]:4011"), Local: local, Link: testLink})
	}
	if resp := boot(); resp.Reason != proxydhcp.ReasonOffSegment {
		t.Errorf("4011 REQUEST from the relay's link before any relayed SOLICIT: %v, want off-segment", resp.Reason)
	}
	sol := relayForw(t, 0, relayLink, edk2LL, edk2MAC, edk2PXESolicit(duidLLT(t, edk2MAC)))
	if resp := srv.Respond(context.Background(), proxydhcp.Packet{Data: sol, Port: proxydhcp.PortDHCPv6,
		Source: netip.MustParseAddrPort("[2001:db8:fffe::3]:547"), Local: local, Link: testLink}); resp.Reply == nil {
		t.Fatalf("relayed SOLICIT: silent for %v (%v)", resp.Reason, resp.Err)
	}
	if resp := boot(); resp.Reply == nil {
		t.Errorf("4011 REQUEST from the relay's link after the relayed SOLICIT: silent for %v (%v)", resp.Reason, resp.Err)
	}
}
