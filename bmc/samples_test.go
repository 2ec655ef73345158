package bmc_test

import (
	"testing"

	"github.com/bettercompute/siteboot/bmc"
	"github.com/bettercompute/siteboot/metric"
)

// TestSamples: only the operations that happened are listed; every claim answer is.
func TestSamples(t *testing.T) {
	st := bmc.DispatchStats{Power: bmc.KindStats{OK: 2, Failed: 1, Replayed: 1}, ClaimsRefused: 3, Running: 4, Deferred: 5}
	s := st.Samples()
	if err := metric.Check(s); err != nil {
		t.Fatal(err)
	}
	got := map[string]uint64{}
	for _, x := range s {
		got[x.Name+" "+x.Label("kind")+" "+x.Label("outcome")+x.Label("answer")] = x.Value
	}
	want := map[string]uint64{
		"bmc_operations_total " + string(bmc.KindPower) + " " + string(bmc.StatusOK):     2,
		"bmc_operations_total " + string(bmc.KindPower) + " " + string(bmc.StatusFailed): 1,
		"bmc_replayed_total " + string(bmc.KindPower) + " ":                              1,
		"bmc_claims_total  granted": 0, "bmc_claims_total  refused": 3, "bmc_claims_total  reused": 0, "bmc_claims_total  unanswered": 0,
		"bmc_operations_in_flight  ": 4, "bmc_deferred_total  ": 5,
	}
	if len(got) != len(want) {
		t.Errorf("samples %v, want %v", got, want)
	}
	for k, v := range want {
		if x, ok := got[k]; !ok || x != v {
			t.Errorf("%q = %d (listed %v), want %d", k, x, ok, v)
		}
	}
}
