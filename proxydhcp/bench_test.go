package proxydhcp_test

import (
	"context"
	"net/netip"
	"testing"

	"github.com/bettercompute/siteboot/hwid"
	"github.com/bettercompute/siteboot/proxydhcp"
)

// BenchmarkRespond is one full decision and reply without a socket: parse, a host handler
// that looks the MAC up in a map, the table lookup and the marshalled reply.
func BenchmarkRespond(b *testing.B) {
	bios, _ := capture(b)
	entries := map[hwid.MAC]bool{}
	for _, s := range []string{"d0:50:99:4e:05:57", "52:54:00:00:00:02", "52:54:00:00:00:04"} {
		m, _ := hwid.ParseMAC(s)
		entries[m] = true
	}
	srv := &proxydhcp.Server{Handler: proxydhcp.HandlerFunc(func(_ context.Context, r *proxydhcp.Request) proxydhcp.Decision {
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
	} {
		b.Run(bc.name, func(b *testing.B) {
			p := proxydhcp.Packet{Data: bc.pkt, Port: bc.port, Source: netip.MustParseAddrPort("192.0.2.100:4011"), Local: netip.MustParseAddr(serverIP)}
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
