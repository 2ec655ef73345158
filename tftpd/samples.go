package tftpd

import "github.com/bettercompute/siteboot/metric"

var (
	famTransfers = metric.Family{Name: "tftp_transfers_total", Help: "TFTP transfers by outcome.", Labels: []string{"outcome"}}
	famBytes     = metric.Family{Name: "tftp_bytes_total", Help: "File bytes sent over TFTP."}
	famDropped   = metric.Family{Name: "tftp_dropped_total", Help: "TFTP requests dropped unanswered, by limit.", Labels: []string{"limit"}}
	famEvicted   = metric.Family{Name: "tftp_evicted_total", Help: "TFTP transfers ended before their first acknowledgement to make room for a request."}
	famQueued    = metric.Family{Name: "tftp_queued_total", Help: "TFTP requests that waited for a slot while every one was taken."}
	famWaiting   = metric.Family{Name: "tftp_waiting", Help: "TFTP requests waiting for a slot now.", Kind: metric.Gauge}
)

// Samples lists the counters under the names of package metric's convention:
// tftp_transfers_total{outcome} (only the outcomes that happened), tftp_bytes_total,
// tftp_dropped_total{limit} (busy, per-source), tftp_evicted_total, tftp_queued_total and
// the gauge tftp_waiting.
func (s Stats) Samples() []metric.Sample {
	var out []metric.Sample
	for _, o := range Outcomes() {
		if n := s.Outcomes.Of(o); n > 0 {
			out = append(out, famTransfers.Sample(n, string(o)))
		}
	}
	return append(out, famBytes.Sample(s.Bytes),
		famDropped.Sample(s.DroppedBusy, "busy"), famDropped.Sample(s.DroppedSource, "per-source"),
		famEvicted.Sample(s.Evicted), famQueued.Sample(s.Queued), famWaiting.Sample(s.Waiting))
}
