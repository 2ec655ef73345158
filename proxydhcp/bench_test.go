package proxydhcp_test

import (
	"context"
	"net/netip"
	"strings"
	"testing"

	"github.com/bettercompute/siteboot/hwid"
	"github.com/bettercompute/siteboot/proxydhcp"
)

// BenchmarkRespond is one full decision and reply without a socket: parse, a host handler
// that looks the MAC up in a map, the table lookup and the marshalled reply; DHCPv4 and
// DHCPv6 side by side.
func BenchmarkRespond(b *testing.B) {
	bios, _ := capture(b)
	entries := map[hwid.MAC]bool{}
	for _, s := range []string{"d0:50:99:4e:05:57", "52:54:00:00:00:02", "52:54:00:00:00:04"} {
		m, _ := hwid.ParseMAC(s)
		entries[m] = true
	}
	srv := &proxydhcp.Server{ServerDUID: serverDUID, Handler: proxydhcp.HandlerFunc(func(_ context.Context, r *proxydhcp.Request) proxydhcp.Decision {
		if !entries[r.MAC] {
			return proxydhcp.Silence(proxydhcp.ReasonUnknown)
		}
		return proxydhcp.Answer()
	})}
	for _, bc := range []struct {
		name string
		pkt  []byte
		port proxydhcp.Port
	}{
		{"bios-capture", bios, proxydhcp.PortDHCP},
		{"ovmf-pxe", ovmfPXE(b, "52:54:00:00:00:02"), proxydhcp.PortDHCP},
		{"ovmf-http", ovmfHTTP(b, "52:54:00:00:00:04"), proxydhcp.PortDHCP},
		{"ovmf-4011", ovmfBootRequest(b, "52:54:00:00:00:02"), proxydhcp.PortBoot},
		{"unknown-mac", ovmfPXE(b, "52:54:00:00:00:99"), proxydhcp.PortDHCP},
		// DHCPv6: EDK2's SOLICIT (DUID-LLT), its 4011 REQUEST, and a relayed SOLICIT.
		{"v6-edk2-solicit", edk2PXESolicit(duidLLT(b, "52:54:00:00:00:02")), proxydhcp.PortDHCPv6},
		{"v6-edk2-4011", edk2BootRequest(duidLLT(b, "52:54:00:00:00:02"), serverDUID), proxydhcp.PortBoot},
		{"v6-relayed-solicit", relayForw(b, 0, relayLink, edk2LL, "52:54:00:00:00:04", edk2PXESolicit(duidUUID(b, ovmfUUID))), proxydhcp.PortDHCPv6},
	} {
		b.Run(bc.name, func(b *testing.B) {
			p := proxydhcp.Packet{Link: testLink, Data: bc.pkt, Port: bc.port, Source: netip.MustParseAddrPort("192.0.2.100:4011"), Local: netip.MustParseAddr(serverIP)}
			if strings.HasPrefix(bc.name, "v6-") {
				p.Source, p.Local = netip.MustParseAddrPort("["+edk2Addr+"]:4011"), netip.MustParseAddr(server6)
			}
			ctx := context.Background()
			b.ReportAllocs()
			b.SetBytes(int64(len(bc.pkt)))
			for b.Loop() {
				resp := srv.Respond(ctx, p)
				if (resp.Reply == nil) != (bc.name == "unknown-mac") {
					b.Fatalf("reason %v", resp.Reason)
				}
			}
		})
	}
}
