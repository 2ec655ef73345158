package redfish_test

import (
	"context"
	"testing"

	"github.com/bettercompute/siteboot/bmc"
	"github.com/bettercompute/siteboot/bmc/bmctest"
	"github.com/bettercompute/siteboot/bmc/redfish"
)

// Figures against bmctest on loopback (plain HTTP, one session): what one operation costs
// in the driver, gofish and the HTTP round trips, without a real BMC's own latency.

func benchDriver(b *testing.B) (*bmctest.Server, *redfish.Driver) {
	srv := bmctest.NewServer(bmctest.Options{})
	b.Cleanup(srv.Close)
	d, err := redfish.Dial(context.Background(), redfish.Config{SettleTime: -1}, target(srv))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = d.Close() })
	return srv, d
}

func BenchmarkPowerState(b *testing.B) {
	_, d := benchDriver(b)
	for b.Loop() {
		if _, err := d.PowerState(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSetBootDevice(b *testing.B) {
	srv, d := benchDriver(b)
	for b.Loop() {
		if err := d.SetBootDevice(context.Background(), bmc.BootDevice{Target: bmc.BootPXE}); err != nil {
			b.Fatal(err)
		}
		srv.ResetRequests()
	}
}

func BenchmarkInspect(b *testing.B) {
	srv, d := benchDriver(b)
	for b.Loop() {
		if _, err := d.Inspect(context.Background()); err != nil {
			b.Fatal(err)
		}
		srv.ResetRequests()
	}
}

func BenchmarkDialClose(b *testing.B) {
	srv := bmctest.NewServer(bmctest.Options{})
	b.Cleanup(srv.Close)
	for b.Loop() {
		d, err := redfish.Dial(context.Background(), redfish.Config{SettleTime: -1}, target(srv))
		if err != nil {
			b.Fatal(err)
		}
		_ = d.Close()
		srv.ResetRequests()
	}
}
