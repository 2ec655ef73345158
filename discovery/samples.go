package discovery

import "github.com/bettercompute/siteboot/metric"

var (
	famListed = metric.Family{Name: "discovered_machines", Help: "Unknown machines listed.", Kind: metric.Gauge}
	famSilent = metric.Family{Name: "boot_answered_silent_total",
		Help: "Machines proxy DHCP answered that asked this agent for nothing within the nonce window (the site's DHCP server may be offering its own boot file or HTTP boot URL)."}
)

// Samples lists the list's size under the names of package metric's convention: the
// gauge discovered_machines.
func (s Stats) Samples() []metric.Sample { return []metric.Sample{famListed.Sample(s.Len)} }

// Samples lists the silent machines under the names of package metric's convention:
// boot_answered_silent_total.
func (s SilentStats) Samples() []metric.Sample { return []metric.Sample{famSilent.Sample(s.Silent)} }
