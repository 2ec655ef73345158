package sitetls_test

import (
	"testing"

	"github.com/bettercompute/siteboot/metric"
	"github.com/bettercompute/siteboot/sitetls"
)

func TestMonitorSamples(t *testing.T) {
	s := (&sitetls.Monitor{Insecure: true}).Samples()
	if err := metric.Check(s); err != nil {
		t.Fatal(err)
	}
	got := map[string]uint64{}
	for _, x := range s {
		got[x.Name] = x.Value
	}
	// Without credentials, no expiry and no reloads.
	if len(got) != 2 || got["control_insecure"] != 1 || got["control_cert_untrusted"] != 0 {
		t.Errorf("samples %v", got)
	}
}
