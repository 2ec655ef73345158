package agent

import (
	"testing"

	"github.com/bettercompute/siteboot/metric"
)

// TestTransitionSamplesNamed: the transitions' families follow package metric's naming
// convention, and every status is exported even before any machine ended.
func TestTransitionSamplesNamed(t *testing.T) {
	p := &transitionPart{}
	p.ended[1].Add(2)
	s := p.samples()
	if err := metric.Check(s); err != nil {
		t.Fatal(err)
	}
	got := map[string]uint64{}
	for _, x := range s {
		key := x.Name
		for _, v := range x.LabelValues() {
			key += "/" + v
		}
		got[key] = x.Value
	}
	if len(got) != 6 || got["bmc_transition_machines_total/failed"] != 2 || got["bmc_transition_machines_total/done"] != 0 {
		t.Errorf("samples %v", got)
	}
}
