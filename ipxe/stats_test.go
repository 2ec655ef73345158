package ipxe_test

import (
	"reflect"
	"testing"

	"github.com/bettercompute/siteboot/ipxe"
	"github.com/google/go-cmp/cmp"
)

// TestStatsAdd sums every field: a counter added to Stats and forgotten in Add fails here.
func TestStatsAdd(t *testing.T) {
	var s, u, want ipxe.Stats
	vs, vu, vw := reflect.ValueOf(&s).Elem(), reflect.ValueOf(&u).Elem(), reflect.ValueOf(&want).Elem()
	for i := range vs.NumField() {
		vs.Field(i).SetUint(uint64(i + 1))
		vu.Field(i).SetUint(uint64(100 * (i + 1)))
		vw.Field(i).SetUint(uint64(101 * (i + 1)))
	}
	if diff := cmp.Diff(want, s.Add(u)); diff != "" {
		t.Errorf("Add (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(s, s.Add(ipxe.Stats{})); diff != "" {
		t.Errorf("Add of zero (-want +got):\n%s", diff)
	}
}
