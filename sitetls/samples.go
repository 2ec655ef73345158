package sitetls

import "github.com/bettercompute/siteboot/metric"

var (
	famInsecure  = metric.Family{Name: "control_insecure", Help: "1 while the control link is plain http (control.insecure), with no certificate either way.", Kind: metric.Gauge}
	famNotAfter  = metric.Family{Name: "control_cert_not_after_seconds", Help: "Expiry of the site certificate in use on the control link, in Unix seconds.", Kind: metric.Gauge}
	famReloads   = metric.Family{Name: "control_cert_reloads_total", Help: "Site certificate, key or CA files re-read, by result.", Labels: []string{"result"}}
	famUntrusted = metric.Family{Name: "control_cert_untrusted", Help: "1 while a new site certificate on disk is refused because it does not chain to the issuing CA (control.issuer, else control.ca); the previous one stays in use.", Kind: metric.Gauge}
)

// Samples lists the link's security under the names of package metric's convention: the
// gauges control_insecure and control_cert_untrusted, and with Credentials the gauge
// control_cert_not_after_seconds and control_cert_reloads_total{result} (ok, failed).
func (m *Monitor) Samples() []metric.Sample {
	out := []metric.Sample{famInsecure.Sample(b2u(m.Insecure)), famUntrusted.Sample(b2u(m.Untrusted()))}
	if m.Credentials != nil {
		st := m.Credentials.Status()
		out = append(out, famNotAfter.Sample(uint64(max(st.NotAfter.Unix(), 0))),
			famReloads.Sample(st.Reloads, "ok"), famReloads.Sample(st.Failures, "failed"))
	}
	return out
}

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}
