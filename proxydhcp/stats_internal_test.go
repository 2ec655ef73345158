package proxydhcp

import (
	"reflect"
	"testing"
)

// Each reason has a field of its own, and every field is some reason's.
func TestSilentCountsOneFieldEach(t *testing.T) {
	fields := reflect.TypeFor[SilentCounts]().NumField()
	if got := len(Reasons()); got != fields {
		t.Fatalf("%d reasons, %d fields", got, fields)
	}
	for i, r := range Reasons() {
		var c SilentCounts
		*c.field(r) = uint64(i + 1)
		v, sum := reflect.ValueOf(c), uint64(0)
		for f := 0; f < fields; f++ {
			sum += v.Field(f).Uint()
		}
		if c.Of(r) != uint64(i+1) || sum != uint64(i+1) {
			t.Errorf("%v: Of %d, fields sum %d, want %d", r, c.Of(r), sum, i+1)
		}
	}
	if (SilentCounts{Unknown: 1}).Of(ReasonNone) != 0 || (SilentCounts{Unknown: 1}).Of(Reason(200)) != 0 {
		t.Error("ReasonNone or no reason counted")
	}
}
