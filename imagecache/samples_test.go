package imagecache_test

import (
	"testing"

	"github.com/bettercompute/siteboot/imagecache"
	"github.com/bettercompute/siteboot/metric"
)

// TestSamples: each refusal under its reason, each pull under its result.
func TestSamples(t *testing.T) {
	st := imagecache.Stats{Served: 1, ServedBytes: 2, RefusedPath: 3, RefusedGrant: 4, RefusedExpired: 5, RefusedDigest: 6,
		RefusedMissing: 7, RefusedFenced: 8, GrantsIssued: 9, PullsOK: 10, PullsFailed: 11}
	s := st.Samples()
	if err := metric.Check(s); err != nil {
		t.Fatal(err)
	}
	got := map[string]uint64{}
	for _, x := range s {
		got[x.Name+" "+x.Label("reason")+x.Label("result")] = x.Value
	}
	want := map[string]uint64{"cache_served_total ": 1, "cache_served_bytes_total ": 2, "cache_refused_total path": 3,
		"cache_refused_total grant": 4, "cache_refused_total expired": 5, "cache_refused_total digest": 6,
		"cache_refused_total missing": 7, "cache_refused_total fenced": 8, "cache_grants_issued_total ": 9,
		"cache_pulls_total ok": 10, "cache_pulls_total failed": 11}
	if len(got) != len(want) {
		t.Errorf("samples %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %d, want %d", k, got[k], v)
		}
	}
}
