package ipmi_test

import (
	"context"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/bmc"
	"github.com/bettercompute/siteboot/bmc/ipmi"
)

// Figures against ipmi_sim on loopback (suite 3): one request on an open session, one
// session set up and torn down, and ipmitool's whole run for the same question (which
// opens and closes a session each time).

func BenchmarkPowerState(b *testing.B) {
	s := startSim(b)
	d := dial(b, s)
	ctx := context.Background()
	for b.Loop() {
		if _, err := d.PowerState(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSetBootDevice(b *testing.B) {
	s := startSim(b)
	d := dial(b, s)
	ctx := context.Background()
	for b.Loop() {
		if err := d.SetBootDevice(ctx, bmc.BootDevice{Target: bmc.BootPXE}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDialClose(b *testing.B) {
	s := startSim(b)
	ctx := context.Background()
	for b.Loop() {
		c, cancel := context.WithTimeout(ctx, 10*time.Second)
		d, err := ipmi.Dial(c, ipmi.Config{CipherSuites: []int{3}}, s.target())
		cancel()
		if err != nil {
			b.Fatal(err)
		}
		_ = d.Close()
	}
}

func BenchmarkIpmitoolPowerStatus(b *testing.B) {
	s := startSim(b)
	for b.Loop() {
		s.mustIpmitool(b, "chassis", "power", "status")
	}
}

func BenchmarkBootDeviceRead(b *testing.B) {
	s := startSim(b)
	d := dial(b, s)
	ctx := context.Background()
	for b.Loop() {
		if _, err := d.BootDevice(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
