package ipmi_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/bmc"
	"github.com/bettercompute/siteboot/bmc/ipmi"
	"github.com/bettercompute/siteboot/bmc/ipmi/ipmitest"
)

// BenchmarkPeers: each operation against each IPMI BMC nobody here wrote (ipmi_sim,
// pyghmi's BMC, virtualbmc over a QEMU domain), on loopback with cipher suite 3. An
// operation the BMC answers only in part (inspection) or not at all is reported with the
// kind of its error as a metric of 1 in "partial" or "refused".
func BenchmarkPeers(b *testing.B) {
	type peer struct {
		name   string
		target func(b *testing.B) bmc.Target
	}
	peers := []peer{
		{"ipmi_sim", func(b *testing.B) bmc.Target { return startSim(b).target() }},
		{"pyghmi", func(b *testing.B) bmc.Target { return ipmitest.StartPyghmi(b).Target() }},
		{"virtualbmc", func(b *testing.B) bmc.Target { return ipmitest.StartVirtualBMC(b).Target() }},
	}
	cfg := ipmi.Config{CipherSuites: []int{3}}
	for _, p := range peers {
		b.Run(p.name, func(b *testing.B) {
			tg := p.target(b)
			d := ipmitest.Dial(b, tg)
			ctx := context.Background()
			if err := d.SetPower(ctx, bmc.PowerActionOn); err != nil {
				b.Fatal(err)
			}
			ops := []struct {
				name string
				fn   func() error
			}{
				{"open+close", func() error {
					c, cancel := context.WithTimeout(ctx, 10*time.Second)
					defer cancel()
					d2, err := ipmi.Dial(c, cfg, tg)
					if err != nil {
						return err
					}
					return d2.Close()
				}},
				{"power-state", func() error { _, err := d.PowerState(ctx); return err }},
				{"set-boot-pxe", func() error { return d.SetBootDevice(ctx, bmc.BootDevice{Target: bmc.BootPXE}) }},
				{"inspect", func() error { _, err := d.Inspect(ctx); return err }},
				{"power-cycle", func() error { return d.SetPower(ctx, bmc.PowerActionCycle) }},
			}
			for _, op := range ops {
				b.Run(op.name, func(b *testing.B) {
					var last error
					for b.Loop() {
						last = op.fn()
					}
					var pe *bmc.PartialError
					switch {
					case errors.As(last, &pe):
						b.ReportMetric(1, "partial")
						b.Logf("%s %s: %v", p.name, op.name, last)
					case last != nil:
						b.ReportMetric(1, "refused")
						b.Logf("%s %s: %v", p.name, op.name, last)
					}
				})
			}
		})
	}
}
