package lease_test

import (
	"testing"

	"github.com/bettercompute/siteboot/lease"
	"github.com/bettercompute/siteboot/metric"
)

func TestSamples(t *testing.T) {
	for _, st := range []lease.FenceState{{Active: true, Epoch: 3}, {Epoch: 4}} {
		s := st.Samples()
		if err := metric.Check(s); err != nil {
			t.Fatal(err)
		}
		want := uint64(0)
		if st.Active {
			want = 1
		}
		if s[0].Name != "lease_active" || s[0].Value != want || s[1].Name != "lease_epoch" || s[1].Value != st.Epoch {
			t.Errorf("%+v: samples %+v", st, s)
		}
	}
}
