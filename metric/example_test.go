package metric_test

import (
	"fmt"
	"strings"

	"github.com/bettercompute/siteboot/metric"
)

// Stats stands for a component's Stats struct.
type Stats struct {
	Answered [2]uint64 // by port: 67, 4011
	Waiting  uint64
}

var (
	famAnswered = metric.Family{Name: "proxydhcp_answered_total", Help: "Proxy DHCP replies sent.", Labels: []string{"port"}}
	famWaiting  = metric.Family{Name: "tftp_waiting", Help: "TFTP requests waiting for a slot now.", Kind: metric.Gauge}
)

// Samples lists the counters under the convention's names.
func (s Stats) Samples() []metric.Sample {
	return []metric.Sample{
		famAnswered.Sample(s.Answered[0], "67"), famAnswered.Sample(s.Answered[1], "4011"),
		famWaiting.Sample(s.Waiting),
	}
}

// A component lists its counters as samples; the host exports every sample in one loop
// (here, in the Prometheus text format), adding its namespace.
func Example() {
	samples := Stats{Answered: [2]uint64{3, 1}, Waiting: 2}.Samples()
	if err := metric.Check(samples); err != nil {
		fmt.Println(err)
	}
	for _, s := range samples {
		var labels []string
		for _, l := range s.Labels {
			labels = append(labels, fmt.Sprintf("%s=%q", l.Name, l.Value))
		}
		series := "siteboot_" + s.Name
		if len(labels) > 0 {
			series += "{" + strings.Join(labels, ",") + "}"
		}
		fmt.Println(series, s.Kind, s.Value)
	}
	// Output:
	// siteboot_proxydhcp_answered_total{port="67"} counter 3
	// siteboot_proxydhcp_answered_total{port="4011"} counter 1
	// siteboot_tftp_waiting gauge 2
}
