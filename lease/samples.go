package lease

import "github.com/bettercompute/siteboot/metric"

var (
	famActive = metric.Family{Name: "lease_active", Help: "1 while this agent is the site's active boot server.", Kind: metric.Gauge}
	famEpoch  = metric.Family{Name: "lease_epoch", Help: "The highest boot lease epoch heard.", Kind: metric.Gauge}
)

// Samples lists the fence's state under the names of package metric's convention: the
// gauges lease_active (1 while Active) and lease_epoch.
func (s FenceState) Samples() []metric.Sample {
	active := uint64(0)
	if s.Active {
		active = 1
	}
	return []metric.Sample{famActive.Sample(active), famEpoch.Sample(s.Epoch)}
}
