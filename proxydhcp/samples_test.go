package proxydhcp_test

import (
	"testing"

	"github.com/bettercompute/siteboot/metric"
	"github.com/bettercompute/siteboot/proxydhcp"
)

// TestSamples: each port's counters under their names, the resent copies only with
// DHCPv6, and the convention kept.
func TestSamples(t *testing.T) {
	st := proxydhcp.Stats{DHCP: proxydhcp.PortStats{Answered: 3, AnsweredNoUUID: 1, Silent: proxydhcp.SilentCounts{Fenced: 2}},
		DHCPv6: proxydhcp.PortStats{Answered: 5}, Resent: 7}
	v4 := st.Samples(proxydhcp.PortDHCP, proxydhcp.PortBoot)
	if err := metric.Check(v4); err != nil {
		t.Fatal(err)
	}
	got := map[string]uint64{}
	for _, s := range v4 {
		got[s.Name+" "+s.Label("port")+" "+s.Label("reason")] = s.Value
	}
	for k, want := range map[string]uint64{"proxydhcp_answered_total 67 ": 3, "proxydhcp_answered_no_uuid_total 67 ": 1, "proxydhcp_answered_no_uuid_total 4011 ": 0, "proxydhcp_silent_total 67 fenced": 2, "proxydhcp_silent_total 4011 fenced": 0} {
		if v, ok := got[k]; !ok || v != want {
			t.Errorf("%s = %d (listed %v), want %d", k, v, ok, want)
		}
	}
	if _, ok := got["proxydhcp_resent_total 4011 "]; ok {
		t.Error("resent listed without DHCPv6")
	}
	all := st.Samples()
	if n, want := len(all), 3*(2+len(proxydhcp.Reasons()))+1; n != want {
		t.Errorf("%d samples for every port, want %d", n, want)
	}
	if last := all[len(all)-1]; last.Name != "proxydhcp_resent_total" || last.Value != 7 || last.Label("port") != "4011" {
		t.Errorf("resent sample %+v", last)
	}
}
