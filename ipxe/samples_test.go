package ipxe_test

import (
	"testing"

	"github.com/bettercompute/siteboot/ipxe"
	"github.com/bettercompute/siteboot/metric"
)

// TestSamples: every answer kind once, with its count.
func TestSamples(t *testing.T) {
	s := ipxe.Stats{Scripts: 2, Unbound: 3, UUIDRefused: 4, Errors: 5}.Samples()
	if err := metric.Check(s); err != nil {
		t.Fatal(err)
	}
	got := map[string]uint64{}
	for _, x := range s {
		got[x.Label("answer")] = x.Value
	}
	if len(got) != 18 || got["script"] != 2 || got["unbound"] != 3 || got["uuid-refused"] != 4 || got["error"] != 5 || got["chain"] != 0 {
		t.Errorf("answers %v", got)
	}
}
