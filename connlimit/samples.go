package connlimit

import "github.com/bettercompute/siteboot/metric"

var (
	famOpen      = metric.Family{Name: "http_connections_open", Help: "Connections open on the agent's HTTP listeners.", Kind: metric.Gauge}
	famRefused   = metric.Family{Name: "http_connections_refused_total", Help: "Connections refused at a connection cap, by listener and cap.", Labels: []string{"cap"}}
	famPreferred = metric.Family{Name: "http_connections_preferred_total", Help: "Connections accepted from a preferred source (a machine being booted), by listener."}
)

// Samples lists the listener's counters under the names of package metric's convention:
// the gauge http_connections_open, http_connections_refused_total{cap} (per-source,
// total, reserve) and http_connections_preferred_total. A host with several listeners
// names each with metric.With (label "listener").
func (s Stats) Samples() []metric.Sample {
	return []metric.Sample{
		famOpen.Sample(s.Open),
		famRefused.Sample(s.RefusedPerSource, "per-source"), famRefused.Sample(s.RefusedTotal, "total"),
		famRefused.Sample(s.RefusedReserve, "reserve"), famPreferred.Sample(s.AcceptedPreferred),
	}
}
