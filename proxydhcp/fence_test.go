package proxydhcp_test

import (
	"context"
	"net"
	"net/netip"
	"sync/atomic"
	"testing"

	"github.com/bettercompute/siteboot/lease"
	"github.com/bettercompute/siteboot/proxydhcp"
)

// The lease's fence is a proxydhcp.Fence as it is.
var _ proxydhcp.Fence = (*lease.Fence)(nil)

// A fenced server is silent for ReasonFenced without asking its Handler or telling its
// Discoverer, and answers again once the fence is active.
func TestFenceSilences(t *testing.T) {
	var active atomic.Bool
	var asked, discovered atomic.Int32
	srv := &proxydhcp.Server{
		Fence: proxydhcp.FenceFunc(func() (uint64, bool) { return 3, active.Load() }),
		Handler: proxydhcp.HandlerFunc(func(context.Context, *proxydhcp.Request) proxydhcp.Decision {
			asked.Add(1)
			return proxydhcp.Silence(proxydhcp.ReasonUnknown)
		}),
		Discoverer: proxydhcp.DiscovererFunc(func(context.Context, *proxydhcp.Request) { discovered.Add(1) }),
	}
	local := netip.MustParseAddr(serverIP)
	mac := "52:54:00:00:00:71"
	respond := func() proxydhcp.Response {
		return srv.Respond(context.Background(), proxydhcp.Packet{Data: ipxeRequest4011(t, mac, net.IP(netip.MustParseAddr("192.0.2.20").AsSlice())), Port: proxydhcp.PortBoot,
			Source: netip.AddrPortFrom(netip.MustParseAddr("192.0.2.20"), 68), Local: local, Link: testLink})
	}
	if resp := respond(); resp.Reply != nil || resp.Reason != proxydhcp.ReasonFenced || asked.Load() != 0 || discovered.Load() != 0 {
		t.Fatalf("fenced: reply %v, reason %v, handler asked %d, discoverer told %d; want silence (fenced), nobody asked",
			resp.Reply != nil, resp.Reason, asked.Load(), discovered.Load())
	}
	active.Store(true)
	if resp := respond(); resp.Reason != proxydhcp.ReasonUnknown || asked.Load() != 1 || discovered.Load() != 1 {
		t.Fatalf("active: reason %v, handler asked %d, discoverer told %d; want the handler's unknown, each once",
			resp.Reason, asked.Load(), discovered.Load())
	}
}
