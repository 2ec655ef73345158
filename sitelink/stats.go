package sitelink

import (
	"strings"

	"github.com/bettercompute/siteboot/metric"
)

// ReportStats are the counters a status report carries ([StatusReport.Counters]), by the
// names the control plane has read from the start, summed from samples under package
// metric's names (the components' Samples): mostly the family's stem (its name without
// "_total") and its label values, joined by "_". A sample the report does not carry is
// left out. A host adds the few counts it reports that are no sample of its own.
func ReportStats(samples []metric.Sample) map[string]uint64 {
	m := map[string]uint64{}
	for _, s := range samples {
		if k := ReportKey(s); k != "" {
			m[k] += s.Value
		}
	}
	return m
}

// ReportKey is the status report's name for sample s ([ReportStats]), "" for a sample the
// report does not carry.
func ReportKey(s metric.Sample) string {
	stem, v := strings.TrimSuffix(s.Name, "_total"), s.LabelValues()
	first := "" // the first label's value
	if len(v) > 0 {
		first = v[0]
	}
	switch s.Name {
	case "proxydhcp_answered_total", "proxydhcp_silent_total", "proxydhcp_resent_total", "tftp_bytes_total",
		"tftp_evicted_total", "tftp_queued_total", "tftp_waiting", "cache_served_total", "cache_grants_issued_total",
		"assertions_issued_total", "boot_answered_silent_total", "boot_unbound_total", "boot_v6_passes_total":
		return strings.Join(append([]string{stem}, v...), "_")
	case "secureboot_answers_total", "secureboot_refused_total", "secureboot_unbound_total", "secureboot_keys_total",
		"secureboot_fetch_other_address_total":
		return strings.Join(append([]string{"sb" + strings.TrimPrefix(stem, "secureboot")}, v...), "_")
	case "tftp_dropped_total":
		return "tftp_dropped_" + strings.TrimPrefix(first, "per-")
	case "cache_refused_total":
		if first == "fenced" {
			return "cache_refused_fenced"
		}
		return "cache_refused_grant" // path, grant, expired, digest, missing: one sum
	case "boot_answers_total":
		return map[string]string{"script": "boot_scripts", "unknown": "boot_unknown", "fenced": "boot_fenced",
			"unbound": "boot_unbound", "uuid-refused": "boot_uuid_refused", "ip-refused": "boot_ip_refused"}[first]
	case "boot_mismatch_total":
		if len(v) < 2 {
			return ""
		}
		if first == "dhcp" {
			return "proxydhcp_silent_" + v[1]
		}
		return "boot_" + v[1]
	case "http_connections_refused_total", "http_connections_preferred_total":
		if first != "http" {
			return ""
		}
		if len(v) == 1 {
			return "http_accepted_preferred"
		}
		return "http_refused_" + strings.ReplaceAll(v[1], "-", "_")
	case "boot_entries_damaged", "control_cert_untrusted", "bmc_journal_damaged":
		if s.Value > 0 {
			return s.Name
		}
	}
	return ""
}
