package assertion_test

import (
	"testing"

	"github.com/bettercompute/siteboot/assertion"
	"github.com/bettercompute/siteboot/metric"
)

func TestSamples(t *testing.T) {
	s := assertion.IssuerStats{Issued: 3, Failed: 1}.Samples()
	if err := metric.Check(s); err != nil {
		t.Fatal(err)
	}
	if len(s) != 1 || s[0].Name != "assertions_issued_total" || s[0].Value != 3 {
		t.Errorf("samples %+v", s)
	}
}
