package connlimit_test

import (
	"testing"

	"github.com/bettercompute/siteboot/connlimit"
	"github.com/bettercompute/siteboot/metric"
)

// TestSamples: the caps by name; a host's listener label goes first.
func TestSamples(t *testing.T) {
	s := metric.With(metric.Label{Name: "listener", Value: "http"},
		connlimit.Stats{Open: 1, RefusedPerSource: 2, RefusedTotal: 3, RefusedReserve: 4, AcceptedPreferred: 5}.Samples())
	if err := metric.Check(s); err != nil {
		t.Fatal(err)
	}
	got := map[string]uint64{}
	for _, x := range s {
		if x.Label("listener") != "http" {
			t.Errorf("%s without the listener label", x.Name)
		}
		got[x.Name+" "+x.Label("cap")] = x.Value
	}
	want := map[string]uint64{"http_connections_open ": 1, "http_connections_refused_total per-source": 2,
		"http_connections_refused_total total": 3, "http_connections_refused_total reserve": 4, "http_connections_preferred_total ": 5}
	if len(got) != len(want) {
		t.Errorf("samples %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %d, want %d", k, got[k], v)
		}
	}
}
