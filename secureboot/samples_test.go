package secureboot_test

import (
	"testing"

	"github.com/bettercompute/siteboot/bootbind"
	"github.com/bettercompute/siteboot/metric"
	"github.com/bettercompute/siteboot/secureboot"
)

// TestSamples: the host's unavailable count beside the chain's refusals, the key refusals
// under bootbind's reason names.
func TestSamples(t *testing.T) {
	st := secureboot.Stats{AnswersPXE: 1, Unavailable: 2, RefusedIPv6: 3, OtherAddress: 4, BadQueries: 7,
		Unbound: secureboot.UnboundCounts{OtherAddress: 5}, Keys: bootbind.KeyStats{Activated: 6}}
	s := st.Samples()
	if err := metric.Check(s); err != nil {
		t.Fatal(err)
	}
	got := map[string]uint64{}
	for _, x := range s {
		got[x.Name+" "+x.Label("kind")+x.Label("reason")+x.Label("event")] = x.Value
	}
	for k, v := range map[string]uint64{"secureboot_answers_total pxe": 1, "secureboot_refused_total unavailable": 2,
		"secureboot_refused_total ipv6": 3, "secureboot_fetch_other_address_total ": 4, "secureboot_bad_queries_total ": 7,
		"secureboot_unbound_total " + bootbind.OtherAddress.String(): 5, "secureboot_keys_total activated": 6, "secureboot_refused_total arch": 0} {
		if x, ok := got[k]; !ok || x != v {
			t.Errorf("%s = %d (listed %v), want %d", k, x, ok, v)
		}
	}
}
