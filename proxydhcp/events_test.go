package proxydhcp_test

import (
	"context"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/bootevents"
	"github.com/bettercompute/siteboot/hwid"
	"github.com/bettercompute/siteboot/proxydhcp"
	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/iana"
)

// The server emits one event per parsed request: iPXE's 4011 request answered with the
// boot id of the nonce its answer names, an unknown MAC refused as "unknown".
func TestEvents(t *testing.T) {
	known := "52:54:00:00:00:51"
	events := make(chan bootevents.Event, 4)
	srv := &proxydhcp.Server{
		Handler: proxydhcp.HandlerFunc(func(ctx context.Context, req *proxydhcp.Request) proxydhcp.Decision {
			if req.MAC.String() != known {
				return proxydhcp.Silence(proxydhcp.ReasonUnknown)
			}
			return proxydhcp.Answer()
		}),
		Binder: proxydhcp.BinderFunc(func(context.Context, hwid.MAC, netip.Addr) (string, error) { return "nonce-1", nil }),
		Events: bootevents.SinkFunc(func(e bootevents.Event) { events <- e }),
	}
	addr := startServer(t, srv, proxydhcp.PortBoot)
	client := listenClient(t)
	for i, mac := range []string{known, "52:54:00:00:00:52"} {
		req := build(t, dhcpv4.MessageTypeRequest, mac, uint32(0x5100+i), arch(iana.EFI_X86_64), undi(3, 10),
			vendorClass("PXEClient:Arch:00007:UNDI:003010"), uuidOpt(t, ovmfUUID),
			dhcpv4.WithGeneric(dhcpv4.OptionUserClassInformation, []byte("iPXE")),
			dhcpv4.WithClientIP(net.IPv4(127, 0, 0, 1)))
		if _, err := client.WriteTo(req, addr); err != nil {
			t.Fatal(err)
		}
	}
	var got []bootevents.Event
	for range 2 {
		select {
		case e := <-events:
			got = append(got, e)
		case <-time.After(time.Minute): // loopback to a serving socket; only stops a hung test
			t.Fatal("no event")
		}
	}
	for _, e := range got {
		switch e.MAC.String() {
		case known:
			if e.Stage != bootevents.StageBoot4011 || e.Outcome != bootevents.OutcomeOK || e.BootID != bootevents.BootIDOf("nonce-1") ||
				!e.IPXE || e.Arch != hwid.ArchX86_64EFI || !e.HasUUID || e.Addr != netip.MustParseAddr("127.0.0.1") || e.Bytes == 0 {
				t.Errorf("answered event = %+v", e)
			}
		default:
			if e.Outcome != bootevents.OutcomeRefused || e.Reason != "unknown" || !e.BootID.IsZero() {
				t.Errorf("refused event = %+v", e)
			}
		}
	}
}
