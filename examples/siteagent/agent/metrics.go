package agent

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/bettercompute/siteboot/bootevents"
	"github.com/bettercompute/siteboot/connlimit"
	"github.com/bettercompute/siteboot/metric"
	"github.com/bettercompute/siteboot/secureboot"
	"github.com/bettercompute/siteboot/sitelink"
	"github.com/bettercompute/siteboot/sitetls"
)

// metricsHandler serves /metrics in Prometheus format and /healthz. The registry is the
// agent's own: a host embedding several agents gets no collisions.
func (a *Agent) metricsHandler() http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collector{a})
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.Handle("GET /debug/machines/{mac}", bootevents.MachineHandler(a.events, a.facts))
	mux.HandleFunc("/healthz", a.healthz)
	return mux
}

// health is /healthz in JSON (?format=json, or Accept: application/json).
type health struct {
	// Status is "ok", or "control plane not heard from" (answered 503).
	Status string `json:"status"`
	// Notes are what the operator should know while serving goes on: the control link's
	// certificate, the boot certificate's.
	Notes []string `json:"notes,omitempty"`
	// BootCertificate is the boot certificate in use, with HTTPS boot.
	BootCertificate *sitetls.CertReport `json:"boot_certificate,omitempty"`
}

// healthz answers 200 while the control plane was heard from within three heartbeats, else
// 503; the body is the status and a line per note, or health in JSON when asked for.
func (a *Agent) healthz(w http.ResponseWriter, r *http.Request) {
	h := health{Status: "ok", BootCertificate: a.bootCertStatus()}
	code := http.StatusOK
	if last := a.beat.Stats().Last; last.IsZero() || a.clock.Now().Sub(last) > 3*a.cfg.Control.Heartbeat {
		// Serving goes on from the last desired state, but the operator should know.
		h.Status, code = "control plane not heard from", http.StatusServiceUnavailable
	}
	for _, n := range []string{a.linkTLS.Health(), h.BootCertificate.Health("boot certificate")} {
		if n != "" {
			h.Notes = append(h.Notes, n)
		}
	}
	if r.URL.Query().Get("format") == "json" || strings.Contains(r.Header.Get("Accept"), "application/json") {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(h)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(code)
	_, _ = w.Write([]byte(strings.Join(append([]string{h.Status}, h.Notes...), "\n") + "\n"))
}

// samples are the counters of every component the agent runs, under package metric's
// names: what /metrics exports, after the namespace "siteboot_".
func (a *Agent) samples() []metric.Sample {
	s := a.srv.PartSamples() // proxy DHCP, TFTP, the boot handlers, the nonces, the cache
	if a.nonces != nil {
		sb := secureboot.Stats{}
		if a.sb != nil {
			sb = a.sb.Stats()
		}
		sb.Unavailable = a.machines.Stats().SecureBootUnavailable
		s = append(s, sb.Samples()...)
	}
	s = append(s, a.machines.Stats().Samples()...)
	s = append(s, a.issuer.Stats().Samples()...)
	s = append(s, a.fence.State().Samples()...)
	s = append(s, a.found.Stats().Samples()...)
	s = append(s, a.silent.Stats().Samples()...)
	s = append(s, a.entries.Samples()...)
	s = append(s, a.beat.Stats().Samples()...)
	s = append(s, a.linkTLS.Samples()...)
	s = append(s, a.srv.Samples()...) // the HTTPS side's plain refusals
	if a.bootTLS != nil {
		s = append(s, a.bootTLS.ServerSamples()...)
	}
	s = append(s, a.bmc.Samples()...)
	for _, l := range []struct {
		name string
		l    *connlimit.Listener
	}{{"http", a.httpLimit}, {"metrics", a.metricLimit}} {
		if l.l != nil {
			s = append(s, metric.With(metric.Label{Name: "listener", Value: l.name}, l.l.Stats().Samples())...)
		}
	}
	return s
}

// collector exports the samples, one const metric each. It describes nothing up front
// (an unchecked collector): the families are the components', listed as they are
// collected, and the registry still checks that each family is consistent.
type collector struct{ a *Agent }

func (collector) Describe(chan<- *prometheus.Desc) {}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range c.a.samples() {
		t := prometheus.CounterValue
		if s.Kind == metric.Gauge {
			t = prometheus.GaugeValue
		}
		d := prometheus.NewDesc("siteboot_"+s.Name, s.Help, s.LabelNames(), nil)
		ch <- prometheus.MustNewConstMetric(d, t, float64(s.Value), s.LabelValues()...)
	}
}

// Stats are the components' counters by name, as the status report carries them: the
// samples sitelink.ReportStats names, and a few counts /metrics does not export.
func (a *Agent) Stats() map[string]uint64 {
	m := sitelink.ReportStats(a.samples())
	st := a.srv.Stats()
	if a.tftp != nil {
		m["tftp_transfers"], m["tftp_completed"] = st.TFTP.Transfers, st.TFTP.Completed
	}
	if a.nonces != nil {
		m["boot_nonces_issued"] = st.Bind.Issued
		var sb secureboot.Stats
		if a.sb != nil {
			sb = a.sb.Stats()
		}
		m["sb_images"], m["sb_config_waits"], m["sb_nonce_fetches"] = sb.Images, sb.ConfigWaits, sb.NonceFetches
	}
	if d, ok := a.entries.Damage(); ok && d.Dropped > 0 {
		m["boot_entries_dropped"] = uint64(d.Dropped)
	}
	m["boot_entries_writes"] = a.entries.Writes()
	m["commands_queued"] = uint64(a.applier.Queued())
	return m
}
