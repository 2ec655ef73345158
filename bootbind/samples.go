package bootbind

import "github.com/bettercompute/siteboot/metric"

var famPasses = metric.Family{Name: "boot_v6_passes_total",
	Help: "IPv6 boot passes (a script request over IPv6 without a nonce, bound to this agent's DHCPv6 answer to the machine's firmware), issued and used.", Labels: []string{"event"}}

// Samples lists the passes under the names of package metric's convention:
// boot_v6_passes_total{event} (issued, used).
func (s PassStats) Samples() []metric.Sample {
	return []metric.Sample{famPasses.Sample(s.Issued, "issued"), famPasses.Sample(s.Used, "used")}
}
