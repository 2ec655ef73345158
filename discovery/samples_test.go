package discovery_test

import (
	"testing"

	"github.com/bettercompute/siteboot/discovery"
	"github.com/bettercompute/siteboot/metric"
)

func TestSamples(t *testing.T) {
	s := append(discovery.Stats{Len: 4, New: 9}.Samples(), discovery.SilentStats{Silent: 2, Answered: 7}.Samples()...)
	if err := metric.Check(s); err != nil {
		t.Fatal(err)
	}
	if len(s) != 2 || s[0].Name != "discovered_machines" || s[0].Kind != metric.Gauge || s[0].Value != 4 ||
		s[1].Name != "boot_answered_silent_total" || s[1].Value != 2 {
		t.Errorf("samples %+v", s)
	}
}
