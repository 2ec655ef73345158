package sitelink

import (
	"context"
	"testing"

	"github.com/bettercompute/siteboot/bmc"
	"github.com/bettercompute/siteboot/metric"
)

// TestBMCServiceSamplesNamed: the transitions' families follow package metric's naming
// convention, and every status is exported even before any machine ended.
func TestBMCServiceSamplesNamed(t *testing.T) {
	s, err := NewBMCService(BMCServiceConfig{Opener: nopOpener{}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.ended[1].Add(2)
	smp := s.transitionSamples()
	if err := metric.Check(smp); err != nil {
		t.Fatal(err)
	}
	got := map[string]uint64{}
	for _, x := range smp {
		key := x.Name
		for _, v := range x.LabelValues() {
			key += "/" + v
		}
		got[key] = x.Value
	}
	if len(got) != 7 || got["bmc_transition_machines_total/failed"] != 2 || got["bmc_transition_machines_total/done"] != 0 ||
		got["bmc_sessions_open"] != 0 {
		t.Errorf("samples %v", got)
	}
	if err := metric.Check(s.Samples()); err != nil {
		t.Error(err)
	}
}

// nopOpener opens nothing: these tests send no operation.
type nopOpener struct{}

func (nopOpener) Open(context.Context, bmc.Target) (bmc.Driver, error) {
	return nil, &bmc.OpError{Kind: bmc.ErrUnreachable, Message: "no BMC here"}
}
