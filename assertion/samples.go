package assertion

import "github.com/bettercompute/siteboot/metric"

var famIssued = metric.Family{Name: "assertions_issued_total", Help: "Discovery assertions signed."}

// Samples lists the Issuer's counters under the names of package metric's convention:
// assertions_issued_total.
func (s IssuerStats) Samples() []metric.Sample {
	return []metric.Sample{famIssued.Sample(s.Issued)}
}
