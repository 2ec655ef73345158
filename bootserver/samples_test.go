package bootserver_test

import (
	"testing"

	"github.com/bettercompute/siteboot/bootbind"
	"github.com/bettercompute/siteboot/bootserver"
	"github.com/bettercompute/siteboot/metric"
)

// TestBindSamples: one sample per refusal, named by bootbind; Bound is no refusal.
func TestBindSamples(t *testing.T) {
	s := bootserver.BindStats{Bound: 9, OtherAddress: 2, NoPass: 1}.Samples()
	if err := metric.Check(s); err != nil {
		t.Fatal(err)
	}
	if len(s) != len(bootbind.Refusals()) {
		t.Fatalf("%d samples, want one per refusal (%d)", len(s), len(bootbind.Refusals()))
	}
	got := map[string]uint64{}
	for _, x := range s {
		got[x.Label("reason")] = x.Value
	}
	if got[bootbind.OtherAddress.String()] != 2 || got[bootbind.NoPass.String()] != 1 || got[bootbind.NoNonce.String()] != 0 {
		t.Errorf("samples %v", got)
	}
	if _, ok := got[bootbind.Bound.String()]; ok {
		t.Error("bound listed as a refusal")
	}
}
