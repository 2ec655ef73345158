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

func TestSiteParams(t *testing.T) {
	got := ipxe.SiteParams(map[string]string{"join": "k", "gateway": "192.0.2.1"})
	want := []ipxe.Param{{Name: "bc.gateway", Value: "192.0.2.1"}, {Name: "bc.join", Value: "k"}}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("SiteParams = %v, want %v", got, want)
	}
	if len(ipxe.SiteParams(nil)) != 0 {
		t.Error("SiteParams(nil) not empty")
	}
}
