package sitelink_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/bettercompute/siteboot/metric"
	"github.com/bettercompute/siteboot/sitelink"
)

// TestReportStatsNames pins each name a status report carries for the components'
// samples: the names control planes (and the e2e tests) read, which must not change when a
// family or its labels do.
func TestReportStatsNames(t *testing.T) {
	fam := func(name string, labels ...string) metric.Family { return metric.Family{Name: name, Labels: labels} }
	listener := func(s metric.Sample) metric.Sample {
		return metric.With(metric.Label{Name: "listener", Value: "http"}, []metric.Sample{s})[0]
	}
	for _, tc := range []struct {
		s    metric.Sample
		want string
	}{
		{fam("proxydhcp_answered_total", "port").Sample(1, "67"), "proxydhcp_answered_67"},
		{fam("proxydhcp_silent_total", "reason", "port").Sample(1, "unknown", "4011"), "proxydhcp_silent_unknown_4011"},
		{fam("proxydhcp_resent_total", "port").Sample(1, "4011"), "proxydhcp_resent_4011"},
		{fam("tftp_bytes_total").Sample(1), "tftp_bytes"},
		{fam("tftp_evicted_total").Sample(1), "tftp_evicted"},
		{fam("tftp_queued_total").Sample(1), "tftp_queued"},
		{fam("tftp_waiting").Sample(1), "tftp_waiting"},
		{fam("tftp_dropped_total", "limit").Sample(1, "busy"), "tftp_dropped_busy"},
		{fam("tftp_dropped_total", "limit").Sample(1, "per-client"), "tftp_dropped_client"},
		{fam("cache_served_total").Sample(1), "cache_served"},
		{fam("cache_grants_issued_total").Sample(1), "cache_grants_issued"},
		{fam("cache_refused_total", "reason").Sample(1, "fenced"), "cache_refused_fenced"},
		{fam("cache_refused_total", "reason").Sample(1, "expired"), "cache_refused_grant"},
		{fam("assertions_issued_total").Sample(1), "assertions_issued"},
		{fam("boot_answered_silent_total").Sample(1), "boot_answered_silent"},
		{fam("boot_unbound_total", "reason").Sample(1, "no-nonce"), "boot_unbound_no-nonce"},
		{fam("boot_v6_passes_total", "event").Sample(1, "issued"), "boot_v6_passes_issued"},
		{fam("secureboot_answers_total", "kind").Sample(1, "shim"), "sb_answers_shim"},
		{fam("secureboot_refused_total", "reason").Sample(1, "unavailable"), "sb_refused_unavailable"},
		{fam("secureboot_unbound_total", "reason").Sample(1, "no-key"), "sb_unbound_no-key"},
		{fam("secureboot_keys_total", "event").Sample(1, "issued"), "sb_keys_issued"},
		{fam("secureboot_keys_total", "event").Sample(1, "activated"), "sb_keys_activated"},
		{fam("secureboot_keys_total", "event").Sample(1, "dropped"), "sb_keys_dropped"},
		{fam("secureboot_fetch_other_address_total").Sample(1), "sb_fetch_other_address"},
		{fam("boot_answers_total", "answer").Sample(1, "script"), "boot_scripts"},
		{fam("boot_answers_total", "answer").Sample(1, "unknown"), "boot_unknown"},
		{fam("boot_answers_total", "answer").Sample(1, "fenced"), "boot_fenced"},
		{fam("boot_answers_total", "answer").Sample(1, "unbound"), "boot_unbound"},
		{fam("boot_answers_total", "answer").Sample(1, "uuid-refused"), "boot_uuid_refused"},
		{fam("boot_answers_total", "answer").Sample(1, "ip-refused"), "boot_ip_refused"},
		{fam("boot_answers_total", "answer").Sample(1, "loader"), ""},
		{fam("boot_mismatch_total", "where", "reason").Sample(1, "dhcp", "uuid"), "proxydhcp_silent_uuid"},
		{fam("boot_mismatch_total", "where", "reason").Sample(1, "http", "arch"), "boot_arch"},
		{listener(fam("http_connections_refused_total", "cap").Sample(1, "per-source")), "http_refused_per_source"},
		{listener(fam("http_connections_preferred_total").Sample(1)), "http_accepted_preferred"},
		{metric.With(metric.Label{Name: "listener", Value: "metrics"}, []metric.Sample{fam("http_connections_refused_total", "cap").Sample(1, "total")})[0], ""},
		{fam("boot_entries_damaged").Sample(1), "boot_entries_damaged"},
		{fam("boot_entries_damaged").Sample(0), ""},
		{fam("control_cert_untrusted").Sample(1), "control_cert_untrusted"},
		{fam("bmc_journal_damaged").Sample(1), "bmc_journal_damaged"},
		{fam("bmc_journal_damaged").Sample(0), ""},
		{fam("bmc_sessions_open").Sample(3), ""},
	} {
		if got := sitelink.ReportKey(tc.s); got != tc.want {
			t.Errorf("%s%v: %q, want %q", tc.s.Name, tc.s.LabelValues(), got, tc.want)
		}
	}
}

// TestReportStatsSums: samples with one report name are summed; those without are left
// out.
func TestReportStatsSums(t *testing.T) {
	refused := metric.Family{Name: "cache_refused_total", Labels: []string{"reason"}}
	got := sitelink.ReportStats([]metric.Sample{
		refused.Sample(2, "grant"), refused.Sample(3, "expired"), refused.Sample(7, "fenced"),
		(metric.Family{Name: "tftp_bytes_total"}).Sample(4096),
		(metric.Family{Name: "bmc_sessions_open", Kind: metric.Gauge}).Sample(1),
	})
	want := map[string]uint64{"cache_refused_grant": 5, "cache_refused_fenced": 7, "tftp_bytes": 4096}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ReportStats (-want +got):\n%s", diff)
	}
}
