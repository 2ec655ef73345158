package agent

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/bettercompute/siteboot/bmc"
	"github.com/bettercompute/siteboot/connlimit"
	"github.com/bettercompute/siteboot/proxydhcp"
	"github.com/bettercompute/siteboot/sitelink"
	"github.com/bettercompute/siteboot/tftpd"
)

// Stats are the components' counters by name, as the status report carries them.
func (a *Agent) Stats() map[string]uint64 {
	m := map[string]uint64{}
	if a.dhcp != nil {
		st := a.dhcp.Stats()
		for _, p := range a.dhcpPorts() {
			ps := st.Port(p)
			m["proxydhcp_answered_"+p.String()] = ps.Answered
			for _, r := range proxydhcp.Reasons() {
				m["proxydhcp_silent_"+r.String()+"_"+p.String()] += ps.Silent.Of(r)
			}
		}
	}
	if a.tftp != nil {
		c := a.tftp.Stats()
		m["tftp_transfers"], m["tftp_completed"], m["tftp_bytes"] = c.Transfers, c.Completed, c.Bytes
		m["tftp_dropped_busy"], m["tftp_dropped_source"] = c.DroppedBusy, c.DroppedSource
		m["tftp_evicted"], m["tftp_queued"], m["tftp_waiting"] = c.Evicted, c.Queued, uint64(c.Waiting)
	}
	cs := a.cache.Stats()
	m["cache_served"], m["cache_grants_issued"] = cs.Served, cs.GrantsIssued
	m["cache_refused_fenced"] = cs.RefusedFenced
	m["cache_refused_grant"] = cs.RefusedGrant + cs.RefusedExpired + cs.RefusedDigest + cs.RefusedPath + cs.RefusedMissing
	bc := a.bootStats()
	m["boot_scripts"], m["boot_unknown"], m["boot_fenced"] = bc.Scripts, bc.Unknown, bc.Fenced
	for r := sitelink.MismatchArch; r < sitelink.NumMismatches; r++ {
		m["proxydhcp_silent_"+r.String()] = a.mismatches.dhcp[r].Load()
		m["boot_"+r.String()] = a.mismatches.http[r].Load()
	}
	is := a.issuer.Stats()
	m["assertions_issued"] = is.Issued
	if d, ok := a.entries.Damage(); ok {
		m["boot_entries_damaged"] = 1
		if d.Dropped > 0 {
			m["boot_entries_dropped"] = uint64(d.Dropped)
		}
	}
	m["boot_answered_silent"] = a.silent.Stats().Silent
	m["boot_entries_writes"] = a.entries.Writes()
	m["commands_queued"] = uint64(a.applier.Queued())
	if a.linkTLS.Untrusted() {
		m["control_cert_untrusted"] = 1
	}
	if a.bmc != nil && a.bmc.journalDamaged() {
		m["bmc_journal_damaged"] = 1
	}
	a.nonceStats(m)
	a.stats6(m)
	if a.httpLimit != nil {
		hs := a.httpLimit.Stats()
		m["http_refused_per_source"], m["http_refused_total"] = hs.RefusedPerSource, hs.RefusedTotal
		m["http_refused_reserve"], m["http_accepted_preferred"] = hs.RefusedReserve, hs.AcceptedPreferred
	}
	return m
}

// metricsHandler serves /metrics in Prometheus format and /healthz. The registry is the
// agent's own: a host embedding several agents gets no collisions.
func (a *Agent) metricsHandler() http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(agentCollector{a})
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /debug/machines/{mac}", a.serveMachine)
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		last := a.beat.Stats().Last
		note := a.linkTLS.Health()
		if note != "" {
			note += "\n"
		}
		if last.IsZero() || a.clock.Now().Sub(last) > 3*a.cfg.Control.Heartbeat {
			// Serving goes on from the last desired state, but the operator should know.
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte("control plane not heard from\n" + note))
			return
		}
		w.Write([]byte("ok\n" + note))
	})
	return mux
}

var (
	descDHCPAnswered   = prometheus.NewDesc("siteboot_proxydhcp_answered_total", "Proxy DHCP replies sent.", []string{"port"}, nil)
	descDHCPSilent     = prometheus.NewDesc("siteboot_proxydhcp_silent_total", "Proxy DHCP requests not answered, by reason.", []string{"port", "reason"}, nil)
	descDHCPResent     = prometheus.NewDesc("siteboot_proxydhcp_resent_total", "Second copies of DHCPv6 boot-server replies (port 4011), sent because EDK2 may miss the first.", []string{"port"}, nil)
	descTFTP           = prometheus.NewDesc("siteboot_tftp_transfers_total", "TFTP transfers by outcome.", []string{"outcome"}, nil)
	descTFTPBytes      = prometheus.NewDesc("siteboot_tftp_bytes_total", "File bytes sent over TFTP.", nil, nil)
	descTFTPDropped    = prometheus.NewDesc("siteboot_tftp_dropped_total", "TFTP requests dropped unanswered, by limit.", []string{"limit"}, nil)
	descTFTPEvicted    = prometheus.NewDesc("siteboot_tftp_evicted_total", "TFTP transfers ended before their first acknowledgement to make room for a request.", nil, nil)
	descTFTPQueued     = prometheus.NewDesc("siteboot_tftp_queued_total", "TFTP requests that waited for a slot while every one was taken.", nil, nil)
	descTFTPWaiting    = prometheus.NewDesc("siteboot_tftp_waiting", "TFTP requests waiting for a slot now.", nil, nil)
	descCacheServed    = prometheus.NewDesc("siteboot_cache_served_total", "Cache requests answered with an image.", nil, nil)
	descCacheBytes     = prometheus.NewDesc("siteboot_cache_served_bytes_total", "Body bytes served from the cache.", nil, nil)
	descCacheRefused   = prometheus.NewDesc("siteboot_cache_refused_total", "Cache requests refused, by reason.", []string{"reason"}, nil)
	descCacheGrants    = prometheus.NewDesc("siteboot_cache_grants_issued_total", "Cache grants issued.", nil, nil)
	descCachePulls     = prometheus.NewDesc("siteboot_cache_pulls_total", "Cache pulls by result.", []string{"result"}, nil)
	descBoot           = prometheus.NewDesc("siteboot_boot_answers_total", "Answers of the /boot/ handler, by kind.", []string{"answer"}, nil)
	descMismatch       = prometheus.NewDesc("siteboot_boot_mismatch_total", "Requests from a machine that does not match its boot entry (arch or UUID), not answered, by where and why.", []string{"where", "reason"}, nil)
	descAssertions     = prometheus.NewDesc("siteboot_assertions_issued_total", "Discovery assertions signed.", nil, nil)
	descActive         = prometheus.NewDesc("siteboot_lease_active", "1 while this agent is the site's active boot server.", nil, nil)
	descEpoch          = prometheus.NewDesc("siteboot_lease_epoch", "The highest boot lease epoch heard.", nil, nil)
	descDiscovered     = prometheus.NewDesc("siteboot_discovered_machines", "Unknown machines listed.", nil, nil)
	descEntries        = prometheus.NewDesc("siteboot_boot_entries", "Live boot entries.", nil, nil)
	descSyncErrors     = prometheus.NewDesc("siteboot_control_sync_errors_total", "Heartbeats the control plane did not answer.", nil, nil)
	descInsecure       = prometheus.NewDesc("siteboot_control_insecure", "1 while the control link is plain http (control.insecure), with no certificate either way.", nil, nil)
	descCertExpiry     = prometheus.NewDesc("siteboot_control_cert_not_after_seconds", "Expiry of the site certificate in use on the control link, in Unix seconds.", nil, nil)
	descCertReloads    = prometheus.NewDesc("siteboot_control_cert_reloads_total", "Site certificate, key or CA files re-read, by result.", []string{"result"}, nil)
	descConnOpen       = prometheus.NewDesc("siteboot_http_connections_open", "Connections open on the agent's HTTP listeners.", []string{"listener"}, nil)
	descConnRefused    = prometheus.NewDesc("siteboot_http_connections_refused_total", "Connections refused at a connection cap, by listener and cap.", []string{"listener", "cap"}, nil)
	descBMCOps         = prometheus.NewDesc("siteboot_bmc_operations_total", "bmc.* commands run to an end, by kind and outcome (ok, failed, unknown, not-sent).", []string{"kind", "outcome"}, nil)
	descBMCReplayed    = prometheus.NewDesc("siteboot_bmc_replayed_total", "bmc.* commands answered from the agent's journal or the control plane's claim record, nothing sent, by kind.", []string{"kind"}, nil)
	descBMCClaims      = prometheus.NewDesc("siteboot_bmc_claims_total", "Claims of destructive BMC operations asked through the link, by answer (granted, refused, reused, unanswered).", []string{"answer"}, nil)
	descEntriesDamaged = prometheus.NewDesc("siteboot_boot_entries_damaged", "1 when the boot entries file was damaged at start: set aside, the valid entries served.", nil, nil)
	descConnPreferred  = prometheus.NewDesc("siteboot_http_connections_preferred_total", "Connections accepted from a preferred source (a machine being booted), by listener.", []string{"listener"}, nil)
	descSilent         = prometheus.NewDesc("siteboot_boot_answered_silent_total", "Machines proxy DHCP answered that asked this agent for nothing within the nonce window (the site's DHCP server may be offering its own boot file or HTTP boot URL).", nil, nil)
	descCertUntrusted  = prometheus.NewDesc("siteboot_control_cert_untrusted", "1 while a new site certificate on disk is refused because it does not chain to the issuing CA (control.issuer, else control.ca); the previous one stays in use.", nil, nil)
	descBMCDamaged     = prometheus.NewDesc("siteboot_bmc_journal_damaged", "1 while the BMC journal is damaged (set aside): destructive bmc.* commands are refused until an operator clears it.", nil, nil)
	descBMCInFlight    = prometheus.NewDesc("siteboot_bmc_operations_in_flight", "bmc.* commands being run: waiting for their BMC or a slot, claiming, or sent.", nil, nil)
	descBMCDeferred    = prometheus.NewDesc("siteboot_bmc_deferred_total", "bmc.* commands not started because the agent held as many commands, running or unreported, as it may (bmc.DefaultMaxHeld); the control plane sends them again.", nil, nil)
)

type agentCollector struct{ a *Agent }

func (c agentCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descDHCPAnswered, descDHCPSilent, descDHCPResent, descPasses6, descTFTP, descTFTPBytes, descTFTPDropped, descTFTPEvicted, descTFTPQueued, descTFTPWaiting, descCacheServed, descCacheBytes, descCacheRefused, descCacheGrants, descCachePulls, descBoot, descMismatch, descAssertions, descActive, descEpoch, descDiscovered, descEntries, descSyncErrors, descUnbound, descInsecure, descCertExpiry, descCertReloads, descConnOpen, descConnRefused, descBMCOps, descBMCReplayed, descBMCClaims, descBMCInFlight, descBMCDeferred, descBMCDamaged, descCertUntrusted, descConnPreferred, descSilent, descEntriesDamaged, descSBAnswers, descSBRefused, descSBUnbound, descSBKeys, descSBOther} {
		ch <- d
	}
}

func (c agentCollector) Collect(ch chan<- prometheus.Metric) {
	a := c.a
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	gauge := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v)
	}
	if a.dhcp != nil {
		st := a.dhcp.Stats()
		for _, p := range a.dhcpPorts() {
			ps := st.Port(p)
			counter(descDHCPAnswered, float64(ps.Answered), p.String())
			for _, r := range proxydhcp.Reasons() {
				counter(descDHCPSilent, float64(ps.Silent.Of(r)), p.String(), r.String())
			}
		}
		if a.v6.dhcpConn != nil {
			counter(descDHCPResent, float64(st.Resent), proxydhcp.PortBoot.String())
		}
	}
	if a.tftp != nil {
		tc := a.tftp.Stats()
		for _, o := range tftpd.Outcomes() {
			// An outcome that never happened has no series, as before the counts moved
			// into tftpd.
			if n := tc.Outcomes.Of(o); n > 0 {
				counter(descTFTP, float64(n), string(o))
			}
		}
		counter(descTFTPBytes, float64(tc.Bytes))
		counter(descTFTPDropped, float64(tc.DroppedBusy), "busy")
		counter(descTFTPDropped, float64(tc.DroppedSource), "per-source")
		counter(descTFTPEvicted, float64(tc.Evicted))
		counter(descTFTPQueued, float64(tc.Queued))
		gauge(descTFTPWaiting, float64(tc.Waiting))
	}
	cs := a.cache.Stats()
	counter(descCacheServed, float64(cs.Served))
	counter(descCacheBytes, float64(cs.ServedBytes))
	for reason, n := range map[string]uint64{"path": cs.RefusedPath, "grant": cs.RefusedGrant, "expired": cs.RefusedExpired, "digest": cs.RefusedDigest, "missing": cs.RefusedMissing, "fenced": cs.RefusedFenced} {
		counter(descCacheRefused, float64(n), reason)
	}
	counter(descCacheGrants, float64(cs.GrantsIssued))
	counter(descCachePulls, float64(cs.PullsOK), "ok")
	counter(descCachePulls, float64(cs.PullsFailed), "failed")
	for r := sitelink.MismatchArch; r < sitelink.NumMismatches; r++ {
		counter(descMismatch, float64(a.mismatches.dhcp[r].Load()), "dhcp", r.String())
		counter(descMismatch, float64(a.mismatches.http[r].Load()), "http", r.String())
	}
	bc := a.bootStats()
	for answer, n := range map[string]uint64{
		"chain": bc.Chains, "script": bc.Scripts, "sanboot": bc.Sanboots, "local": bc.LocalBoots, "file": bc.Files,
		"unknown": bc.Unknown, "mismatch": bc.Mismatched, "unbound": bc.Unbound, "uuid-refused": bc.UUIDRefused, "ip-refused": bc.IPRefused, "fenced": bc.Fenced, "token-wait": bc.TokenWaits, "sanboot-wait": bc.SanbootWaits,
		"bad-request": bc.BadRequests, "headers-too-large": bc.HeadersTooLarge, "method-refused": bc.MethodsRefused,
		"not-found": bc.NotFound, "error": bc.Errors,
	} {
		counter(descBoot, float64(n), answer)
	}
	a.collectNonces(ch)
	a.collect6(ch)
	counter(descAssertions, float64(a.issuer.Stats().Issued))
	fs := a.fence.State()
	active := 0.0
	if fs.Active {
		active = 1
	}
	gauge(descActive, active)
	gauge(descEpoch, float64(fs.Epoch))
	gauge(descDiscovered, float64(a.found.Len()))
	gauge(descEntries, float64(len(a.entries.All())))
	counter(descSyncErrors, float64(a.beat.Stats().Errors))
	insecure := 0.0
	if a.linkTLS.Insecure {
		insecure = 1
	}
	gauge(descInsecure, insecure)
	if creds := a.linkTLS.Credentials; creds != nil {
		st := creds.Status()
		gauge(descCertExpiry, float64(st.NotAfter.Unix()))
		counter(descCertReloads, float64(st.Reloads), "ok")
		counter(descCertReloads, float64(st.Failures), "failed")
	}
	gauge(descCertUntrusted, b2f(a.linkTLS.Untrusted()))
	counter(descSilent, float64(a.silent.Stats().Silent))
	_, damaged := a.entries.Damage()
	gauge(descEntriesDamaged, b2f(damaged))
	if a.bmc != nil {
		st := a.bmc.dispatch.Stats()
		for _, k := range bmc.Kinds {
			ks := st.ForKind(k)
			for _, s := range bmc.Statuses {
				if n := ks.Status(s); n > 0 {
					counter(descBMCOps, float64(n), string(k), string(s))
				}
			}
			if ks.Replayed > 0 {
				counter(descBMCReplayed, float64(ks.Replayed), string(k))
			}
		}
		for _, answer := range []bmc.ClaimAnswer{bmc.ClaimAnswerGranted, bmc.ClaimAnswerRefused, bmc.ClaimAnswerReused, bmc.ClaimAnswerUnanswered} {
			counter(descBMCClaims, float64(st.Claims(answer)), string(answer))
		}
		gauge(descBMCDamaged, b2f(a.bmc.journalDamaged()))
		gauge(descBMCInFlight, float64(st.Running))
		counter(descBMCDeferred, float64(st.Deferred))
	}
	for name, l := range map[string]*connlimit.Listener{"http": a.httpLimit, "metrics": a.metricLimit} {
		if l == nil {
			continue
		}
		st := l.Stats()
		ch <- prometheus.MustNewConstMetric(descConnOpen, prometheus.GaugeValue, float64(st.Open), name)
		counter(descConnRefused, float64(st.RefusedPerSource), name, "per-source")
		counter(descConnRefused, float64(st.RefusedTotal), name, "total")
		counter(descConnRefused, float64(st.RefusedReserve), name, "reserve")
		counter(descConnPreferred, float64(st.AcceptedPreferred), name)
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
