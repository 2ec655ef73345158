package bootbind_test

import (
	"testing"

	"github.com/bettercompute/siteboot/bootbind"
	"github.com/bettercompute/siteboot/metric"
)

func TestPassSamples(t *testing.T) {
	s := bootbind.PassStats{Issued: 3, Used: 2}.Samples()
	if err := metric.Check(s); err != nil {
		t.Fatal(err)
	}
	if len(s) != 2 || s[0].Label("event") != "issued" || s[0].Value != 3 || s[1].Label("event") != "used" || s[1].Value != 2 {
		t.Errorf("samples %+v", s)
	}
}
