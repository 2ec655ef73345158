package tftpd_test

import (
	"testing"

	"github.com/bettercompute/siteboot/metric"
	"github.com/bettercompute/siteboot/tftpd"
)

// TestSamples: only the outcomes that happened are listed; the limits by name.
func TestSamples(t *testing.T) {
	st := tftpd.Stats{Bytes: 9, DroppedBusy: 1, DroppedSource: 2, Waiting: 4}
	st.Outcomes.OK = 3
	s := st.Samples()
	if err := metric.Check(s); err != nil {
		t.Fatal(err)
	}
	got := map[string]uint64{}
	for _, x := range s {
		got[x.Name+" "+x.Label("outcome")+x.Label("limit")] = x.Value
	}
	want := map[string]uint64{"tftp_transfers_total ok": 3, "tftp_bytes_total ": 9, "tftp_dropped_total busy": 1,
		"tftp_dropped_total per-source": 2, "tftp_evicted_total ": 0, "tftp_queued_total ": 0, "tftp_waiting ": 4}
	if len(got) != len(want) {
		t.Errorf("samples %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %d, want %d", k, got[k], v)
		}
	}
}
